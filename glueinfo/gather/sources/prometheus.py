"""Source ``prometheus``: every node_exporter target a Prometheus server scrapes, as a snapshot.

``[sources] prometheus_url`` names the server (``http://`` or ``https://``, a
path prefix kept: ``https://mon.example.org/prometheus``).  glueinfo asks its
HTTP API for instant queries (``GET /api/v1/query``), one per metric family
for all targets at once, never one per host (QUERIES below; each family's
series carry ``prometheus_selector``, e.g. ``job="node"``).  The per-CPU
families are counted on the server (``count by (job, instance)``) and series
that say nothing are filtered there, so a 10,000-host site's answers stay a
few MB each; each answer is read into the targets' facts series by series as
it arrives (:func:`read_answer`) and dropped, so no decoded answer is held.  The queries run concurrently,
each within ``[sources] timeout`` (also sent as the API's ``timeout``) and all
within the gather's deadline; an answer may not exceed ``prometheus_max_body``
bytes.  Authentication: ``prometheus_token_file`` (a bearer token, first
line) or ``prometheus_user`` with ``prometheus_password_file`` (basic auth);
TLS is verified against the system's CAs or ``prometheus_ca_file``.

Targets are told apart by their ``job`` and ``instance`` labels (Prometheus
gives every target both).  A target's snapshot is built by
glueinfo.gather.sources._node_metrics, the mapping the ``node_exporter`` source uses;
its accelerators, when a GPU exporter (NVIDIA's DCGM exporter, AMD's Device Metrics
Exporter) runs on the same host, by glueinfo.gather.sources._accelerator_metrics.

Freshness: an instant query's value carries the *evaluation* time, not the
sample's, so the snapshot's time is ``timestamp(up)``, the target's last
scrape, moved onto this host's clock by the age Prometheus itself reports
(evaluation time minus scrape time): a server with a skewed clock makes no
host look fresh or stale.  A target whose ``up`` is 0 is not reported (one
warning, when its job has node_exporter targets or it had node series before): its host keeps its last good
snapshot until ``[node] stale_after`` and ``[sources] drop_after``, like a
dead agent.  A target Prometheus no longer scrapes has no series at all
(Prometheus marks them stale at once) and is simply not reported.

Host identity (``prometheus_identity``): ``nodename`` (default) is
``node_uname_info``'s nodename; ``instance`` is the ``instance`` label with
its port cut off (``wn001.example.org:9100`` -> ``wn001.example.org``,
``[2001:db8::1]:9100`` -> ``2001:db8::1``); ``label:NAME`` is the target's
label NAME (read from its ``up`` series).  A target without the chosen name
(no ``node_uname_info``: the uname collector off; no such label) is named by
its instance, port cut off.  Two targets giving the same name are both
refused (one warning each): Prometheus cannot say which is the host, and
exporters sharing one kernel all report its nodename.

Failure: a server that is down, slow, answers an error status or anything
but the API's JSON success document fails the whole source for this gather
with one warning naming the server and what went wrong, and reports no host:
every host keeps its last good snapshot.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from json.scanner import make_scanner
from typing import Any, Optional

from glueinfo import __version__
from glueinfo.core.errors import UpstreamError
from glueinfo.gather.identity import host_key
from glueinfo.gather.registry import Source, SourceContext, SourceFailure, SourceReport
from glueinfo.gather.sources._accelerator_metrics import QUERIES as ACCELERATOR_QUERIES
from glueinfo.gather.sources._accelerator_metrics import AcceleratorSeries
from glueinfo.gather.sources._node_metrics import FILESYSTEM, LOAD, MEMORY, NETWORK, NodeFacts, instance_host

SOURCE_NAME = "prometheus"
_READ_CHUNK = 1 << 16

TargetKey = tuple[str, str]  # (job, instance)


class PrometheusError(UpstreamError):
    """A query that failed: the server unreachable, slow, an error status, not the API's JSON."""


def queries(selector: str) -> dict[str, str]:
    """Query name -> PromQL, the selector's matchers added to every series selector.

    ``up``/``seen``: which targets are scraped and when last; ``cpus``, ``cores``,
    ``sockets``, ``cpu_models``: the per-CPU families counted per target; then one
    query per family the mapping reads, with only the labels it reads."""
    def series(name: str, *matchers: str) -> str:
        inner = ",".join(m for m in (*matchers, selector.strip().strip("{}").strip()) if m)
        return f"{name}{{{inner}}}" if inner else name

    idle = series("node_cpu_seconds_total", 'mode="idle"')
    placed = series("node_cpu_info", 'package!=""')
    cored = series("node_cpu_info", 'package!=""', 'core!=""')
    found = {
        "up": series("up"),
        "seen": f"timestamp({series('up')})",
        "cpus": f"count by (job, instance) ({idle})",
        "cores": f"count by (job, instance) (count by (job, instance, package, core) ({cored}))",
        "sockets": f"count by (job, instance) (count by (job, instance, package) ({placed}))",
        "cpu_models": f"count by (job, instance, model_name, vendor) ({series('node_cpu_info')})",
    }
    # Only the labels the mapping reads come back (``max by``): a 10,000-host answer stays small.
    for name in (*MEMORY, *LOAD):
        found[name] = f"max by (job, instance) ({series(name)})"
    # Series the mapping would read as "nothing to say" are not sent, which halves the biggest
    # answers: ``readonly``/``device_error`` 0 (only 1 is read; a mount with sizes is listed by
    # them), ``speed_bytes`` 0 or below (unknown), ``up`` of a device that has ``flags`` (read
    # only when flags are missing).
    by_mount = "max by (job, instance, device, fstype, mountpoint)"
    for name in FILESYSTEM:
        flag = name in ("node_filesystem_readonly", "node_filesystem_device_error")
        found[name] = f"{by_mount} ({series(name)})" + (" == 1" if flag else "")
    for name in NETWORK:
        found[name] = f"max by (job, instance, device) ({series(name)})"
    found["node_network_speed_bytes"] += " > 0"
    found["node_network_up"] += f" unless on (job, instance, device) {series('node_network_flags')}"
    for name, labels in (("node_network_info", "device, address, operstate"),
                         ("node_os_info", "name, version_id, version_codename, version, pretty_name"),
                         ("node_uname_info", "nodename, machine, release, version")):
        found[name] = f"max by (job, instance, {labels}) ({series(name)})"
    return found


@dataclass
class Server:
    """How to reach the Prometheus API: parsed from the config once per gather."""

    url: str
    scheme: str
    host: str
    port: int
    base_path: str
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: Optional[ssl.SSLContext] = None
    max_body: int = 256 * 2**20
    timeout_s: float = 5.0


def _first_line(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            line = handle.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PrometheusError(f"[sources] {what} {path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if not line:
        raise PrometheusError(f"[sources] {what} {path}: empty")
    return line


def server_from(section: dict[str, Any]) -> Server:
    """The server of ``[sources] prometheus_url`` and its credentials; PrometheusError naming the key."""
    url = section["prometheus_url"].strip()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PrometheusError(f"[sources] prometheus_url: {url[:80]!r} is not an http:// or https:// URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise PrometheusError(f"[sources] prometheus_url: {url[:80]!r} has a bad port") from None
    headers = {"User-Agent": f"glueinfo/{__version__}", "Accept": "application/json"}
    if section["prometheus_token_file"]:
        headers["Authorization"] = "Bearer " + _first_line(section["prometheus_token_file"], "prometheus_token_file")
    elif section["prometheus_user"]:
        password = _first_line(section["prometheus_password_file"], "prometheus_password_file") \
            if section["prometheus_password_file"] else ""
        token = base64.b64encode(f"{section['prometheus_user']}:{password}".encode()).decode("ascii")
        headers["Authorization"] = "Basic " + token
    context = None
    if parts.scheme == "https":
        try:
            context = ssl.create_default_context(cafile=section["prometheus_ca_file"] or None)
        except (OSError, ssl.SSLError) as exc:
            raise PrometheusError(f"[sources] prometheus_ca_file {section['prometheus_ca_file']}: cannot load: {exc}") from None
    return Server(url=url, scheme=parts.scheme, host=parts.hostname, port=port, base_path=parts.path.rstrip("/"),
                  headers=headers, ssl_context=context, max_body=section["prometheus_max_body"],
                  timeout_s=section["timeout"])


def query(server: Server, promql: str, deadline: float, clock: Callable[[], float] = time.monotonic) -> list[dict[str, Any]]:
    """One instant query's result vector; PrometheusError (one line) for anything else.
    ``deadline`` is a ``clock()`` time: no read waits past it."""
    return _vector(*fetch(server, promql, deadline, clock))


def fetch(server: Server, promql: str, deadline: float,
          clock: Callable[[], float] = time.monotonic) -> tuple[bytearray, int]:
    """One instant query's raw answer: (body, HTTP status), not yet decoded (:func:`_vector` does
    that); PrometheusError (one line) when the server cannot be reached, is too slow or the body
    is over ``max_body``.  ``deadline`` is a ``clock()`` time: no read waits past it."""
    def left() -> float:
        remaining = deadline - clock()
        if remaining <= 0:
            raise PrometheusError(f"no complete answer within {server.timeout_s:g} s ([sources] timeout)")
        return remaining

    params = urllib.parse.urlencode({"query": promql, "timeout": f"{server.timeout_s:g}s"})
    path = f"{server.base_path}/api/v1/query?{params}"
    if server.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(server.host, server.port, timeout=left(),
                                                                        context=server.ssl_context)
    else:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=left())
    try:
        conn.request("GET", path, headers=server.headers)
        response = conn.getresponse()
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > server.max_body:
            raise PrometheusError(f"answer of {length} bytes is over the limit of {server.max_body} bytes "
                                  "([sources] prometheus_max_body)")
        body = bytearray()  # grown in place: no second copy of a many-MB answer for a join
        while True:
            if conn.sock is not None:
                conn.sock.settimeout(left())
            chunk = response.read1(_READ_CHUNK) if hasattr(response, "read1") else response.read(_READ_CHUNK)
            if not chunk:
                break
            body += chunk
            if len(body) > server.max_body:
                raise PrometheusError(f"answer over the limit of {server.max_body} bytes ([sources] prometheus_max_body)")
        status = response.status
    except TimeoutError:
        raise PrometheusError(f"no complete answer within {server.timeout_s:g} s ([sources] timeout)") from None
    except ssl.SSLError as exc:
        raise PrometheusError(f"TLS: {exc.reason or exc}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise PrometheusError(getattr(exc, "strerror", None) or str(exc) or type(exc).__name__) from None
    finally:
        conn.close()
    return body, status


def _vector(body: bytes | bytearray, status: int) -> list[Any]:
    """The answer's result vector; PrometheusError (one line) when it is not the API's JSON
    success document with an instant vector (:func:`read_answer`)."""
    result: list[Any] = []
    read_answer(body, status, result.append)
    return result


_WHITESPACE = re.compile(r"[ \t\n\r]*")  # JSON's insignificant whitespace (RFC 8259), as the json module has it


def _skip(text: str, index: int) -> int:
    """The index of the first character at or after ``index`` that is not JSON whitespace."""
    found = _WHITESPACE.match(text, index)
    return found.end() if found else index


_SPACE = frozenset(" \t\n\r")
_Scanner = Callable[[str, int], tuple[Any, int]]


class _NotJson(ValueError):
    """The body is not one JSON value."""


def read_answer(body: bytes | bytearray, status: int, each: Callable[[Any], None]) -> None:
    """Hand ``each`` the elements of an API answer's ``data.result``, one at a time, as they are decoded.

    Why not ``json.loads``: a 10,000-host answer decodes to ~150,000 dicts and lists at once,
    which costs tens of MB and has the cyclic garbage collector walk them over and over while
    they are alive (10,000 hosts' 26 answers, measured: ``json.loads`` 0.95 s, 0.52 s of it
    without the collector; walked here 0.73 s, and the gather's peak ~730 -> ~250 MB with the
    answers folded as they come).  Here the envelope is walked over
    with the json module's own scanner, each ``result`` element is decoded by that scanner on
    its own, and is garbage once ``each`` lets go of it.  Strings, numbers and elements are
    decoded by the json module exactly as ``json.loads`` decodes them; only the punctuation of
    the two enclosing objects and the array is walked here, by JSON's grammar.

    The whole body is checked: when it is not one JSON value (UTF-8, whitespace around it), its
    ``status`` is not ``success`` or its data not an instant vector, PrometheusError (one line,
    as ``json.loads`` and those checks would give) is raised once the walk gets there, which
    may be after elements were handed out: a caller folding them must drop what it folded when
    this raises.  A repeated ``data`` or ``result`` key is refused (in a JSON object the last
    one would win, which a walk cannot know in time).  ``each`` must not raise."""
    document: dict[str, Any] = {}
    data: dict[str, Any] = {}
    try:
        text = body.decode("utf-8-sig", "surrogatepass")  # what json.loads(bytes) reads from a server
        # typeshed types the context as the scanner class; the json module hands it a JSONDecoder, as here
        scan: _Scanner = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]

        def data_member(key: str, index: int) -> int:
            if key == "result":
                if key in data:
                    raise _NotJson("result twice")
                if text[index:index + 1] == "[":
                    data[key] = each  # marks a streamed array
                    return _array(text, index, scan, each)
            data[key], index = scan(text, index)
            return index

        def member(key: str, index: int) -> int:
            if key == "data":
                if key in document:
                    raise _NotJson("data twice")
                if text[index:index + 1] == "{":
                    document[key] = data
                    return _object(text, index, scan, data_member)
            document[key], index = scan(text, index)
            return index

        index = _skip(text, 0)
        if text[index:index + 1] != "{":
            raise _NotJson("not an object")
        if _skip(text, _object(text, index, scan, member)) != len(text):
            raise _NotJson("extra data")
    except (UnicodeDecodeError, ValueError, StopIteration, RecursionError):  # ValueError: JSONDecodeError, _NotJson
        shown = bytes(body[:60]).decode("utf-8", "replace").strip()
        raise PrometheusError(f"HTTP {status}, not the API's JSON: {shown!r}" if status != 200 else
                              f"not the API's JSON: {shown!r}") from None
    if document.get("status") != "success":
        error = str(document.get("error") or document.get("status"))[:120]
        raise PrometheusError(f"HTTP {status}: {document.get('errorType', 'error')}: {error}")
    if document.get("data") is not data or data.get("resultType") != "vector" or data.get("result") is not each:
        raise PrometheusError("answer is not an instant vector")


def _object(text: str, index: int, scan: _Scanner, member: Callable[[str, int], int]) -> int:
    """Walk the JSON object opening at ``text[index]``: ``member(key, index of its value)`` reads
    each value and returns the index after it; returns the index after the object."""
    index = _skip(text, index + 1)
    if text[index:index + 1] == "}":
        return index + 1
    while True:
        if text[index:index + 1] != '"':
            raise _NotJson("key expected")
        key, index = scan(text, index)
        index = _skip(text, index)
        if text[index:index + 1] != ":":
            raise _NotJson("':' expected")
        index = _skip(text, member(key, _skip(text, index + 1)))
        if text[index:index + 1] == "}":
            return index + 1
        if text[index:index + 1] != ",":
            raise _NotJson("',' or '}' expected")
        index = _skip(text, index + 1)


def _array(text: str, index: int, scan: _Scanner, each: Callable[[Any], None]) -> int:
    """Decode the JSON array opening at ``text[index]`` one element at a time into ``each``;
    returns the index after the array."""
    index = _skip(text, index + 1)
    if text[index:index + 1] == "]":
        return index + 1
    while True:
        element, index = scan(text, index)
        each(element)
        del element
        # Prometheus writes no whitespace between elements: look for it before skipping it.
        after = text[index:index + 1]
        if after in _SPACE:
            index = _skip(text, index)
            after = text[index:index + 1]
        if after == "]":
            return index + 1
        if after != ",":
            raise _NotJson("',' or ']' expected")
        index += 1
        if text[index:index + 1] in _SPACE:
            index = _skip(text, index)


def run_queries(server: Server, wanted: dict[str, str], budget_s: float, parallel: int = 8,
                fold: Optional[Callable[[str], Callable[[Any], None]]] = None) -> dict[str, list[Any]]:
    """Every query of ``wanted``, ``parallel`` at a time on daemon threads (a hung server never
    holds up the process's exit), all within ``budget_s``; PrometheusError for the first to fail.

    Without ``fold``, returns every query's vector by name.  With ``fold``, nothing is kept:
    each answer, as it arrives, is decoded one sample at a time into ``fold(name)`` (a
    function of one sample, which must not raise), one answer at a time (under one lock, on
    the thread that fetched it), and an empty dict is returned.  At most one answer is being
    decoded at once and no decoded answer is held: holding the 26 answers of 10,000 hosts cost
    ~700 MB (measured).  When this raises, what was folded is incomplete and must be dropped;
    answers still arriving after a failure are not folded."""
    deadline = time.monotonic() + max(0.0, min(budget_s, server.timeout_s))
    names = list(wanted)
    results: dict[str, list[Any]] = {}
    done: set[str] = set()
    errors: list[str] = []
    lock = threading.Lock()  # the queue of names, the results and errors
    decoding = threading.Lock()  # one answer decoded (and folded) at a time

    def worker() -> None:
        while True:
            with lock:
                if not names or errors:
                    return
                name = names.pop(0)
            try:
                body, status = fetch(server, wanted[name], deadline)
                with decoding:
                    if errors:
                        return
                    vector: list[Any] = []
                    read_answer(body, status, vector.append if fold is None else fold(name))
                    del body
            except PrometheusError as exc:
                with lock:
                    errors.append(f"{name}: {exc}" if name in ("up", "seen") else str(exc))
                return
            with lock:
                done.add(name)
                if fold is None:
                    results[name] = vector

    threads = [threading.Thread(target=worker, name="prometheus-query", daemon=True) for _ in range(min(parallel, len(names)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + 0.05)
    with lock:
        if errors:
            raise PrometheusError(errors[0])
        if len(done) < len(wanted):
            errors.append("late")  # answers still arriving are not folded into what the caller now reads
            raise PrometheusError(f"no complete answer within {max(0.0, min(budget_s, server.timeout_s)):g} s "
                                  "([sources] timeout)")
    return results


_COUNTS = {"cpus": "cpus", "cores": "cores", "sockets": "sockets"}


@dataclass
class Answers:
    """The queries' answers folded per target as they arrive (:meth:`fold`), so no answer is kept.

    ``up``: the target's ``up`` value and labels; ``ages``: evaluation time minus last scrape
    (``seen``); ``facts``: every other family, fed to the target's NodeFacts.  A sample whose
    labels are not an object with a string ``instance``, or whose value is not two finite
    numbers, is skipped, as is anything in a vector that is not a sample object."""

    up: dict[TargetKey, tuple[float, dict[str, str]]] = field(default_factory=dict)
    ages: dict[TargetKey, float] = field(default_factory=dict)
    facts: dict[TargetKey, NodeFacts] = field(default_factory=dict)
    accelerators: AcceleratorSeries = field(default_factory=AcceleratorSeries)  # GPU exporters' series

    def fold(self, name: str, vector: Iterable[Any]) -> None:
        """Every sample of one query's vector, ``name`` being its key in :func:`queries`."""
        one = self.sink(name)
        for sample in vector:
            one(sample)

    def sink(self, name: str) -> Callable[[Any], None]:
        """What folds one sample of query ``name`` in (for :func:`read_answer`); never raises."""
        if name in ACCELERATOR_QUERIES:
            return self.accelerators.sink(name)
        isfinite = math.isfinite
        facts, up, ages = self.facts, self.up, self.ages
        count = _COUNTS.get(name)
        put = NodeFacts.sink("node_cpu_info" if name == "cpu_models" else name)

        def target(sample: Any) -> Optional[tuple[TargetKey, dict[str, Any], float, float]]:
            try:
                labels = sample["metric"]
                at, raw = sample["value"]
                value, when = float(raw), float(at)
            except (KeyError, TypeError, ValueError, IndexError):
                return None
            if not (isfinite(value) and isfinite(when)) or not isinstance(labels, dict):
                return None
            instance = labels.get("instance", "")
            if not isinstance(instance, str):
                return None
            return (str(labels.get("job", "")), instance), labels, value, when

        def one(sample: Any) -> None:
            found = target(sample)
            if found is None:
                return
            key, labels, value, when = found
            if name == "up":
                up[key] = (value, labels)
            elif name == "seen":
                ages[key] = max(0.0, when - value)  # evaluation time - scrape time
            else:
                facts_of = facts.get(key)
                if facts_of is None:
                    facts_of = facts[key] = NodeFacts()
                if count is not None:
                    facts_of.set_counts(**{count: value})
                elif put is not None:
                    put(facts_of, labels, value)

        if put is None or count is not None or name in ("up", "seen"):
            return one
        known: Callable[[NodeFacts, dict[str, Any], float], None] = put

        def family(sample: Any) -> None:
            # The ~300,000 samples of 10,000 hosts' families: no helper call, checks as target()'s.
            try:
                labels = sample["metric"]
                at, raw = sample["value"]
                value, when = float(raw), float(at)
            except (KeyError, TypeError, ValueError, IndexError):
                return
            if not (isfinite(value) and isfinite(when)) or not isinstance(labels, dict):
                return
            instance = labels.get("instance", "")
            if not isinstance(instance, str):
                return
            key = (str(labels.get("job", "")), instance)
            facts_of = facts.get(key)
            if facts_of is None:
                facts_of = facts[key] = NodeFacts()
            known(facts_of, labels, value)

        return family

    def target_facts(self) -> dict[TargetKey, NodeFacts]:
        """The targets with any family the mapping reads."""
        return {key: target for key, target in self.facts.items() if not target.empty}


def target_facts(results: dict[str, list[Any]]) -> dict[TargetKey, NodeFacts]:
    """Every target's facts from the answers (targets with none of the families read left out)."""
    answers = Answers()
    for name, vector in results.items():
        if name not in ("up", "seen"):
            answers.fold(name, vector)
    return answers.target_facts()


def gather(ctx: SourceContext) -> SourceReport:
    section = ctx.config.section("sources")
    report = SourceReport()
    url = section["prometheus_url"].strip()
    identity = section["prometheus_identity"].strip()
    if identity not in ("nodename", "instance") and not (identity.startswith("label:") and identity[6:].strip()):
        report.failures.append(SourceFailure(target="[sources] prometheus_identity",
                                             error=f"{identity[:40]!r} is not nodename, instance or label:NAME"))
        return report
    answers = Answers()
    try:
        server = server_from(section)
        run_queries(server, {**queries(section["prometheus_selector"]), **ACCELERATOR_QUERIES}, ctx.remaining(),
                    fold=answers.sink)
    except PrometheusError as exc:
        report.failures.append(SourceFailure(target=url or "[sources] prometheus_url", error=str(exc)))
        return report
    received = ctx.clock()
    up, ages, facts, gpus = answers.up, answers.ages, answers.target_facts(), answers.accelerators
    del answers

    # A down target has no node series left: warn for those of a job that has node_exporter
    # targets, or that this process saw with node series, not for every other job's dead target.
    known: set[TargetKey] = ctx.memory.setdefault("node_targets", set())
    known.update(facts)
    node_jobs = {job for job, _ in facts}
    for key in sorted(k for k, (value, _) in up.items() if value != 1 and (k in known or k[0] in node_jobs)):
        report.failures.append(SourceFailure(target=key[1], error=f"target down in Prometheus (up = 0, job {key[0]!r})"))

    names: dict[TargetKey, str] = {}
    for key, target in facts.items():
        if key not in up or up[key][0] != 1 or key not in ages:
            continue  # down, or gone between two queries: its last good snapshot stands
        names[key] = _name(identity, key, up[key][1], target) or ""
    by_name: dict[str, list[TargetKey]] = {}
    for key, name in names.items():
        by_name.setdefault(host_key(name), []).append(key)
    accelerators = gpus.assign({key: name for key, name in names.items() if name})
    del gpus
    for key in sorted(names):
        name = names[key]
        if not name:
            report.failures.append(SourceFailure(target=key[1], error="no host name: no instance label"))
            continue
        others = [k[1] for k in by_name[host_key(name)] if k != key]
        if others:
            report.failures.append(SourceFailure(
                target=key[1], host=name[:80],
                error=f"host name {name[:80]!r} also given by {', '.join(sorted(others)[:3])}: refused "
                      "(set [sources] prometheus_identity to instance or label:NAME)"))
            continue
        # Popped: each target's facts are freed as its snapshot is made (10,000 of each otherwise).
        snapshot = facts.pop(key).snapshot(name, received - ages[key])
        snapshot.accelerators = accelerators.get(key)
        report.snapshots.append(snapshot)
    return report


def _name(identity: str, key: TargetKey, labels: dict[str, str], facts: NodeFacts) -> Optional[str]:
    """The target's host name by the identity rule (module docstring), None when it has none."""
    chosen: Optional[str] = None
    if identity == "nodename":
        chosen = facts.nodename
    elif identity.startswith("label:"):
        value = labels.get(identity[6:].strip())
        chosen = value if isinstance(value, str) and value.strip() else None
    if chosen is None and key[1]:
        chosen = instance_host(key[1])
    return chosen.strip() if chosen else None


SOURCE = Source(SOURCE_NAME, gather, "node_exporter series from a Prometheus server ([sources] prometheus_url)")
