"""Pulling targets over HTTP and holding each to its own host: what the pulling sources share.

The ``agents`` source (Node XML from ``glueinfo serve``) and the ``node_exporter``
source (``/metrics``) list their targets alike (names, ranges, ``ADDRESS=NAME``,
a file; :func:`listed_targets`), pull them alike (:func:`pull_all`: at most
``pool_size`` in flight, ``timeout`` seconds each from the moment its pull
starts, a refused or reset connection or a 5xx answer retried after
``retry_backoff`` seconds, doubling, up to ``retries`` times while that budget
lasts, a body capped at ``max_body``, everything stopped at the gather
deadline), and hold each answer to the host its target stands for alike
(:func:`bind_targets`, glueinfo.gather.identity): the target's name, the name
written beside its address, else the address's reverse DNS name; an address
nothing names is pinned to the first host it reports, and the pin is
forgotten after ``drop_after`` without an answer.  :func:`pull_and_pin` is
that whole round; each source gives it only how to read one answer.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Optional, Union

from glueinfo import __version__
from glueinfo.core.errors import UpstreamError
from glueinfo.core.hostrange import HostRangeError, Target, expand_named_list, parse_target, read_named_host_file
from glueinfo.core.model import HostSnapshot
from glueinfo.gather.identity import PINS, Claims, host_key, parse_aliases
from glueinfo.gather.registry import SourceContext, SourceFailure, SourceReport

AGENT_KEYS = ("agents", "agents_file", "agent_port")
_MAX_HEADER_LINES = 100
_LINE_LIMIT = 16384



class PullError(UpstreamError):
    """A pull that failed for good (no retry): bad status, too big, bad framing."""


class RetryableError(UpstreamError):
    """A pull that may succeed if tried again (5xx, connection reset mid-answer)."""


@dataclass
class PullSettings:
    path: str = "/node.xml"
    timeout_s: float = 5.0
    retries: int = 2
    backoff_s: float = 0.1
    max_body: int = 4 * 2**20
    pool_size: int = 64

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> PullSettings:
        return cls(path=section["agent_path"], timeout_s=section["timeout"], retries=section["retries"],
                   backoff_s=section["retry_backoff"], max_body=section["max_body"], pool_size=section["pool_size"])


@dataclass
class PullOutcome:
    target: Target
    body: Optional[bytes] = None
    error: Optional[str] = None
    attempts: int = 0
    received_at: float = 0.0


def listed_targets(section: dict[str, Any], keys: tuple[str, str, str] = AGENT_KEYS) -> list[Target]:
    """Every target the config lists, expanded, in order, without repeats (the first listing of
    an address and port wins); HostRangeError if a pattern is bad.  ``keys`` name the list, file
    and default port keys of ``[sources]`` (``agents``, ``agents_file``, ``agent_port`` for the
    agents; the node_exporter source lists its targets alike under its own keys)."""
    list_key, file_key, port_key = keys
    specs: dict[str, Optional[str]] = {}
    try:
        for spec, name in expand_named_list(section[list_key]):
            specs.setdefault(spec, name)
    except HostRangeError as exc:
        raise HostRangeError(f"[sources] {list_key}: {exc}") from None
    if section[file_key]:
        for spec, name in read_named_host_file(section[file_key]):
            specs.setdefault(spec, name)
    targets: dict[tuple[str, int], Target] = {}
    for spec, name in specs.items():
        where = parse_target(spec, section[port_key])
        targets.setdefault((where.host, where.port), Target(where.host, where.port, name))
    return list(targets.values())


# -- HTTP ---------------------------------------------------------------------------


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise RetryableError("connection closed before an answer") from None
        raise PullError("answer cut off in the headers") from None
    except asyncio.LimitOverrunError:
        raise PullError(f"header line longer than {_LINE_LIMIT} bytes") from None


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str], max_body: int) -> bytes:
    too_big = f"body over the limit of {max_body} bytes ([sources] max_body)"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        size = 0
        while True:
            line = (await _read_line(reader)).split(b";", 1)[0].strip()
            try:
                length = int(line, 16)
            except ValueError:
                raise PullError("bad chunked framing") from None
            if length == 0:
                return b"".join(chunks)
            size += length
            if size > max_body:
                raise PullError(too_big)
            try:
                chunks.append(await reader.readexactly(length))
                await reader.readexactly(2)
            except asyncio.IncompleteReadError:
                raise PullError("answer cut off in the body") from None
    if "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise PullError(f"bad Content-Length {headers['content-length'][:40]!r}") from None
        if length > max_body:
            raise PullError(f"body of {length} bytes is over the limit of {max_body} bytes ([sources] max_body)")
        try:
            return await reader.readexactly(length)
        except asyncio.IncompleteReadError as exc:
            raise PullError(f"answer cut off after {len(exc.partial)} of {length} body bytes") from None
    body = await reader.read(max_body + 1)  # no length given: read to the end, one byte past the cap
    while True:
        if len(body) > max_body:
            raise PullError(too_big)
        more = await reader.read(max_body + 1 - len(body))
        if not more:
            return body
        body += more


async def fetch(target: Target, path: str, max_body: int) -> bytes:
    """One HTTP GET; the caller bounds its time.  Raises PullError, RetryableError or OSError."""
    reader, writer = await asyncio.open_connection(target.host, target.port, limit=_LINE_LIMIT)
    try:
        host = f"[{target.host}]" if ":" in target.host else target.host
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{target.port}\r\nUser-Agent: glueinfo/{__version__}\r\n"
                     "Accept: application/xml\r\nConnection: close\r\n\r\n".encode("ascii"))
        await writer.drain()
        status_line = (await _read_line(reader)).decode("latin-1").strip()
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise PullError(f"not an HTTP answer: {status_line[:60]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for _ in range(_MAX_HEADER_LINES):
            line = await _read_line(reader)
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        else:
            raise PullError(f"more than {_MAX_HEADER_LINES} header lines")
        if status >= 500:
            raise RetryableError(f"HTTP {status} {parts[2] if len(parts) > 2 else ''}".strip())
        if status != 200:
            raise PullError(f"HTTP {status} {parts[2] if len(parts) > 2 else ''}".strip())
        return await _read_body(reader, headers, max_body)
    finally:
        writer.transport.abort()  # never wait on a peer that stopped reading


def _describe(exc: Exception, target: Target) -> str:
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {target.host}: {exc.strerror or exc}"
    if isinstance(exc, OSError) and exc.errno and exc.errno > 0:
        return os.strerror(exc.errno)  # "Connection refused", not asyncio's "Connect call failed (...)"
    return str(exc) or type(exc).__name__


async def _pull(target: Target, settings: PullSettings, pool: asyncio.Semaphore, clock: Any) -> PullOutcome:
    outcome = PullOutcome(target)
    async with pool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.timeout_s  # the budget starts when the pull does, not in the queue
        delay = settings.backoff_s
        while True:
            outcome.attempts += 1
            left = deadline - loop.time()
            try:
                outcome.body = await asyncio.wait_for(fetch(target, settings.path, settings.max_body), max(0.001, left))
                outcome.received_at = clock()
                outcome.error = None  # an earlier attempt's failure no longer matters
                return outcome
            except TimeoutError:
                outcome.error = f"no complete answer within {settings.timeout_s:g} s ([sources] timeout)"
                return outcome
            except PullError as exc:
                outcome.error = str(exc)
                return outcome
            except (RetryableError, OSError) as exc:
                outcome.error = _describe(exc, target)
            if outcome.attempts > settings.retries or loop.time() + delay >= deadline:
                if outcome.attempts > 1:
                    outcome.error += f" (after {outcome.attempts} attempts)"
                return outcome
            await asyncio.sleep(delay)
            delay *= 2


async def _pull_all(targets: list[Target], settings: PullSettings, budget_s: float, clock: Any) -> list[PullOutcome]:
    pool = asyncio.Semaphore(settings.pool_size)
    tasks = [asyncio.ensure_future(_pull(t, settings, pool, clock)) for t in targets]
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=max(0.0, budget_s))
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    outcomes = []
    for target, task in zip(targets, tasks, strict=True):
        if task in done and not task.cancelled() and task.exception() is None:
            outcomes.append(task.result())
        elif task in done and not task.cancelled():
            error = task.exception()
            outcomes.append(PullOutcome(target, error=f"{type(error).__name__}: {error}"))
        else:
            outcomes.append(PullOutcome(target, error="not finished when the gather's time was up ([sources] gather_timeout)"))
    return outcomes


def pull_all(targets: list[Target], settings: PullSettings, budget_s: float, clock: Any = time.time) -> list[PullOutcome]:
    """Pull every target concurrently (own event loop; safe from any thread without one)."""
    return asyncio.run(_pull_all(targets, settings, budget_s, clock))


# -- identity -----------------------------------------------------------------------

# Names a resolver gives loopback and unconfigured addresses: never a worker's identity.
_NOT_AN_IDENTITY = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "localhost6",
                    "localhost6.localdomain6"}
_RDNS_TTL_S = 3600.0
_RDNS_THREADS = 16


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _reverse_name(address: str) -> Optional[str]:
    """The address's reverse DNS name, or None (no answer, loopback, or a localhost name)."""
    if ipaddress.ip_address(address).is_loopback:
        return None  # this machine: the resolver's answer (localhost) says nothing about which agent
    try:
        name = socket.gethostbyaddr(address)[0]
    except (OSError, UnicodeError):
        return None
    return None if name.lower().rstrip(".") in _NOT_AN_IDENTITY else name


def reverse_names(addresses: list[str], cache: dict[str, tuple[Optional[str], float]], now: float, budget_s: float,
                  resolve: Callable[[str], Optional[str]] = _reverse_name) -> dict[str, Optional[str]]:
    """Reverse DNS names of addresses, cached for an hour, looked up on a few threads within
    ``budget_s`` (a slow resolver leaves the rest unknown for this gather, never holds it up)."""
    wanted = [a for a in addresses if a not in cache or now - cache[a][1] > _RDNS_TTL_S]
    if wanted and budget_s > 0:
        pool = ThreadPoolExecutor(max_workers=_RDNS_THREADS, thread_name_prefix="rdns")
        futures = {pool.submit(resolve, address): address for address in wanted}
        done, _ = wait(futures, timeout=budget_s)
        pool.shutdown(wait=False, cancel_futures=True)
        for future in done:
            if future.exception() is None:
                cache[futures[future]] = (future.result(), now)
    return {a: cache[a][0] if a in cache else None for a in addresses}


def identities(targets: list[Target], rdns: dict[str, Optional[str]]) -> dict[str, Optional[str]]:
    """target -> the host it stands for: its name, the name written beside its address, else
    the address's reverse DNS name; None when nothing says (the first Id it reports is pinned)."""
    result: dict[str, Optional[str]] = {}
    for target in targets:
        if target.name:
            result[str(target)] = target.name
        elif not _is_address(target.host):
            result[str(target)] = target.host
        else:
            result[str(target)] = rdns.get(target.host)
    return result


def listed_hosts(keys: tuple[str, str, str]) -> Callable[[Any], frozenset[str]]:
    """For a Source's ``listed_hosts``: config -> the host keys the targets under ``keys`` are
    listed by (a name, or the name written beside an address; reverse DNS is not asked).
    HostRangeError/ValueError for a bad list."""
    def listed(config: Any) -> frozenset[str]:
        targets = listed_targets(config.section("sources"), keys)
        return frozenset(host_key(name) for name in identities(targets, {}).values() if name)
    return listed


def bind_targets(ctx: SourceContext, targets: list[Target],
                 drop_after: float) -> tuple[dict[str, Optional[str]], dict[str, tuple[str, float]], Claims]:
    """What a pulling source needs to hold each target to its own host (glueinfo.gather.identity):
    each target's identity (its name, the name beside its address, else reverse DNS), the pins of
    targets nothing names (target -> (host key, last answer time), in the source's memory, forgotten
    after ``drop_after``), and the Claims index of every other target's and source's hosts."""
    pins: dict[str, tuple[str, float]] = ctx.memory.setdefault(PINS, {})
    now = ctx.clock()
    for target_name in [t for t, (_, seen) in pins.items() if now - seen > drop_after]:
        del pins[target_name]
    unnamed = sorted({t.host for t in targets if not t.name and _is_address(t.host)})
    rdns = reverse_names(unnamed, ctx.memory.setdefault("rdns", {}), now, min(2.0, ctx.remaining() / 4))
    identity_of = identities(targets, rdns)
    owners = {host_key(identity): target for target, identity in identity_of.items() if identity}
    for target_name, (key, _) in pins.items():
        owners.setdefault(key, target_name)
    return identity_of, pins, Claims(owners, ctx.known_hosts())


# -- one round: pull every target, read each answer, pin what nothing names ---------------------


@dataclass
class Answer:
    """One target's answer and what is known of the host it stands for, for a source to read."""

    target: str  # as listed, host:port
    body: bytes
    received_at: float
    identity: Optional[str]  # what names the target (its name, the name beside its address, reverse DNS)
    expected: Optional[str]  # the identity, else the host pinned to the target
    pinned: bool  # the target is pinned to ``expected`` by an earlier answer
    claims: Claims  # every other target's and source's hosts
    aliases: dict[str, frozenset[str]]  # [sources] aliases
    _identity_of: dict[str, Optional[str]]
    _pins: dict[str, tuple[str, float]]

    def host_of(self, target: str) -> str:
        """The host another target stands for (its identity, else its pin): for a refusal's message."""
        return self._identity_of.get(target) or self._pins[target][0]


@dataclass(frozen=True)
class Refused:
    """An answer a source does not publish: ``error`` (one line) is reported for its target, under
    ``host`` (None: the host the target was expected to be)."""

    error: str
    host: Optional[str] = None
    claim: bool = False  # refused for claiming a host that is not the target's


Reader = Callable[[Answer], Union[HostSnapshot, Refused]]


def pull_and_pin(ctx: SourceContext, keys: tuple[str, str, str], read: Reader, path: Optional[str] = None) -> SourceReport:
    """One round of a pulling source: the targets ``[sources]`` lists under ``keys``
    (:func:`listed_targets`), pulled (``path``, default ``[sources] agent_path``; :func:`pull_all`),
    each answer read by ``read`` into a snapshot of its host or a :class:`Refused`.

    A target whose pull failed or whose answer is refused is a failure of the report, named by
    the target and the host it was expected to be (its host keeps its last good snapshot).  A
    snapshot from a target nothing names pins the target to the snapshot's host name, so no other
    target can take that host; a new pin is listed in the report's ``unbound`` for the gatherer to
    check against every other source (glueinfo.gather.identity.unbound_refusals).  A bad target
    list or ``[sources] aliases`` is the one failure."""
    section = ctx.config.section("sources")
    report = SourceReport()
    try:
        targets = listed_targets(section, keys)
        aliases = parse_aliases(section["aliases"])
    except (HostRangeError, ValueError) as exc:  # the message names the key already ("[sources] agents: ...")
        report.failures.append(SourceFailure(target=f"[sources] {keys[0]}", error=str(exc).removeprefix(f"[sources] {keys[0]}: ")))
        return report
    settings = PullSettings.from_section(section)
    if path is not None:
        settings.path = path
    identity_of, pins, claims = bind_targets(ctx, targets, float(section["drop_after"]))

    for outcome in pull_all(targets, settings, ctx.remaining(), ctx.clock):
        name = str(outcome.target)
        identity = identity_of[name]
        pinned = pins.get(name)
        expected = identity or (pinned[0] if pinned else None)
        if outcome.error is not None:
            report.failures.append(SourceFailure(target=name, host=expected, error=outcome.error))
            continue
        read_as = read(Answer(name, outcome.body or b"", outcome.received_at, identity, expected, pinned is not None,
                              claims, aliases, identity_of, pins))
        if isinstance(read_as, Refused):
            host = read_as.host if read_as.host is not None else expected
            report.failures.append(SourceFailure(target=name, host=host, error=read_as.error, claim=read_as.claim))
            continue
        if identity is None:  # an address nothing names: the first host it reports is pinned to it
            pins[name] = (host_key(read_as.hostname), outcome.received_at)
            claims.claim(read_as.hostname, name)
            if pinned is None:  # a new pin: checked by the gatherer once every source has reported
                report.unbound[host_key(read_as.hostname)] = name
        report.snapshots.append(read_as)
    return report
