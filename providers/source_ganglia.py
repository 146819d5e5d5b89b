"""Source ``ganglia``: every HOST a gmond or gmetad reports, as a snapshot.

Sites already run Ganglia on every node; reading the XML its daemons serve on
their TCP port (gmond 8649, gmetad 8651) gives glueinfo thousands of hosts
with nothing new installed on them.  The port sends the whole document and
closes the connection; the document is read with a deadline and a byte cap.

Ganglia's XML starts with an internal DTD.  It is cut off before parsing and
the rest goes through glueinfo.xmlsafe like every other XML we read: nothing
in the DTD is used or expanded, and a document still holding a DTD or entity
declaration after the cut is refused.

Mapping (README "Many hosts"): each HOST becomes a snapshot with source
``ganglia``; ``collected_at`` is when the host was last heard from (the time
the document was read minus the HOST's TN, on the head node's clock, so a
gmetad with a skewed clock does not make hosts look fresh or stale).  Facts
Ganglia cannot tell (sockets, cores, CPU model, caches, adapters, mount
points, the distribution) stay None; the merge in glueinfo.gather fills them
from an agent's or the local probe's snapshot of the same host.
"""

from __future__ import annotations

import math
import re
import socket
from typing import Any, Optional

from glueinfo.hostrange import HostRangeError, Target, parse_target
from glueinfo.model import CpuInfo, HostSnapshot, LoadInfo, MemoryInfo, OsInfo
from glueinfo.sources import Source, SourceContext, SourceFailure, SourceReport

DEFAULT_PORT = 8649
SOURCE_NAME = "ganglia"

# Size factors to MB for the UNITS gmond writes on memory and disk metrics.
_TO_MB = {"B": 1 / 2**20, "BYTES": 1 / 2**20, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0, "TB": 1024.0**2}

_NUMERIC_TYPES = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "float", "double", "timestamp"}

# The metrics read; everything else (bytes_in, cpu_user, ...) is skipped unread.
_WANTED = {
    "cpu_num", "cpu_speed", "machine_type", "mem_total", "mem_free", "mem_buffers", "mem_cached",
    "swap_total", "swap_free", "load_one", "load_five", "load_fifteen", "proc_run", "proc_total",
    "cpu_idle", "cpu_wio", "os_name", "os_release", "boottime", "disk_total", "disk_free",
}

_DOCTYPE = re.compile(rb"<!DOCTYPE\b")


class GangliaError(ValueError):
    """A Ganglia document or HOST record we cannot read; one line."""


def without_doctype(data: bytes) -> bytes:
    """Cut Ganglia's leading ``<!DOCTYPE GANGLIA_XML [...]>`` out of the document.

    Only a DOCTYPE before the root element is cut, up to the first ``]>``
    (Ganglia's internal subset holds no ``]``).  Anything a hostile document
    hides after that is still seen, and refused, by glueinfo.xmlsafe.
    """
    match = _DOCTYPE.search(data, 0, 4096)
    if match is None or b"<GANGLIA_XML" in data[: match.start()]:
        return data
    start = match.start()
    bracket = data.find(b"[", start)
    close = data.find(b">", start)
    if bracket != -1 and bracket < close:
        end = data.find(b"]", bracket)
        close = data.find(b">", end) if end != -1 else -1
    if close == -1:
        raise GangliaError("unterminated DOCTYPE")
    return data[:start] + data[close + 1:]


def without_extra_data(data: bytes) -> bytes:
    """Cut every ``<EXTRA_DATA>...</EXTRA_DATA>`` block (gmond's GROUP/DESC/TITLE
    metadata, unused here) out before parsing: it is over half of the bytes and
    three quarters of the elements of a gmetad document, so this halves the
    parse.  ``<`` cannot occur raw inside attribute values, so the cut only
    ever meets markup; whatever remains is parsed by glueinfo.xmlsafe as usual."""
    pieces = data.split(b"<EXTRA_DATA>")
    if len(pieces) == 1:
        return data
    kept = [pieces[0]]
    for piece in pieces[1:]:
        end = piece.find(b"</EXTRA_DATA>")
        if end == -1:
            raise GangliaError("an EXTRA_DATA element is not closed")
        kept.append(piece[end + len(b"</EXTRA_DATA>"):])
    return b"".join(kept)


_LATIN1_DECLARATION = re.compile(rb"""^(<\?xml[^>]*encoding=["'])(ISO-8859-1|iso-8859-1|latin-?1)(["'])""")


def _ascii_as_utf8(data: bytes) -> bytes:
    """gmond declares ISO-8859-1; a document that is all ASCII reads the same as
    UTF-8, which libxml2 parses without a conversion pass (about 10% faster)."""
    if data.isascii():
        return _LATIN1_DECLARATION.sub(rb"\1UTF-8\3", data[:200], count=1) + data[200:]
    return data


def _number(name: str, raw: Optional[str], kind: Optional[str]) -> Optional[float]:
    if raw is None or (kind is not None and kind not in _NUMERIC_TYPES):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise GangliaError(f"metric {name} has a non-numeric value {raw[:40]!r}") from None
    if not math.isfinite(value):
        raise GangliaError(f"metric {name} is {raw!r}")
    return value


_SIZE_METRICS = frozenset({"mem_total", "mem_free", "mem_buffers", "mem_cached", "swap_total", "swap_free", "disk_total", "disk_free"})
_TEXT_METRICS = frozenset({"machine_type", "os_name", "os_release"})


def _metric_values(host: Any) -> dict[str, Any]:
    """The wanted METRICs of one HOST: text stripped, numbers as floats, sizes in MB (rounded down,
    as the collectors do; None in a unit glueinfo does not know: unknown, not guessed)."""
    values: dict[str, Any] = {}
    for metric in host.iterchildren("METRIC"):
        get = metric.get
        name = get("NAME")
        if name not in _WANTED:
            continue
        raw = get("VAL")
        if name in _TEXT_METRICS:
            values[name] = (raw.strip() or None) if raw else None
            continue
        value = _number(name, raw, get("TYPE"))
        if value is not None and name in _SIZE_METRICS:
            factor = _TO_MB.get((get("UNITS") or "").strip().upper())
            value = None if factor is None else math.floor(value * factor)
        values[name] = value
    return values


def _int(value: Optional[float]) -> Optional[int]:
    return None if value is None else int(round(value))


def _sum(*values: Optional[int]) -> Optional[int]:
    return None if None in values else sum(values)  # type: ignore[arg-type]


def host_snapshot(host: Any, fetched_at: float, cluster: Optional[str] = None) -> HostSnapshot:
    """One ``<HOST>`` element -> HostSnapshot (source ``ganglia``); GangliaError if unreadable."""
    name = (host.get("NAME") or "").strip()
    if not name:
        raise GangliaError("HOST without a NAME")
    tn, reported = host.get("TN"), host.get("REPORTED")
    try:
        if tn is not None:
            collected_at = fetched_at - float(tn)
        elif reported is not None:
            collected_at = float(reported)
        else:
            raise GangliaError("HOST has neither TN nor REPORTED: no way to know how old it is")
    except ValueError:
        raise GangliaError(f"HOST TN/REPORTED is not a number ({tn!r}/{reported!r})") from None
    if not math.isfinite(collected_at):
        raise GangliaError(f"HOST TN/REPORTED is not a number ({tn!r}/{reported!r})")

    v = _metric_values(host).get
    snapshot = HostSnapshot(hostname=name, collected_at=collected_at, source=SOURCE_NAME)
    machine = v("machine_type")
    if v("cpu_num") is not None or v("cpu_speed") is not None or machine is not None:
        snapshot.cpu = CpuInfo(logical_cpus=_int(v("cpu_num")), clock_mhz=_int(v("cpu_speed")), instruction_set=machine)

    ram, swap, swap_free, free = v("mem_total"), v("swap_total"), v("swap_free"), v("mem_free")
    # Ganglia's mem_free is MemFree; with buffers and page cache it is the
    # classic "free -/+ buffers/cache" figure of available memory.
    available = _sum(free, v("mem_buffers"), v("mem_cached"))
    available = free if available is None else available
    if ram is not None or swap is not None or swap_free is not None or available is not None:
        snapshot.memory = MemoryInfo(ram_mb=ram, ram_available_mb=available, swap_mb=swap, swap_free_mb=swap_free,
                                     virtual_mb=_sum(ram, swap), virtual_available_mb=_sum(available, swap_free))

    idle, wio = v("cpu_idle"), v("cpu_wio")
    load = LoadInfo(
        load1=v("load_one"), load5=v("load_five"), load15=v("load_fifteen"),
        runnable_tasks=_int(v("proc_run")), total_tasks=_int(v("proc_total")),
        # Busy share as psutil counts it (idle and iowait are not busy); gmond
        # does not say over how long, so the interval stays unknown.
        cpu_utilisation_percent=round(100.0 - idle - wio, 1) if idle is not None and wio is not None else None,
    )
    if any(x is not None for x in (load.load1, load.load5, load.load15, load.runnable_tasks, load.total_tasks,
                                   load.cpu_utilisation_percent)):
        snapshot.load = load
    if v("os_release") is not None or machine is not None or v("boottime") is not None:
        snapshot.os = OsInfo(kernel_release=v("os_release"), platform_type=machine, boot_time=v("boottime"))

    facts: dict[str, Any] = {}
    for key, value in (("cluster", cluster), ("ip", host.get("IP")), ("location", host.get("LOCATION")),
                       ("tags", host.get("TAGS")), ("os_name", v("os_name")),
                       ("disk_total_mb", v("disk_total")), ("disk_free_mb", v("disk_free"))):
        if value not in (None, "", "unspecified"):
            facts[key] = value
    gmond_started = host.get("GMOND_STARTED")
    if gmond_started and gmond_started.isdigit():
        facts["gmond_started"] = int(gmond_started)
    if facts:
        snapshot.extra[SOURCE_NAME] = facts
    return snapshot


def parse_ganglia(data: bytes, fetched_at: float, max_bytes: int, what: str = "Ganglia XML") -> SourceReport:
    """A whole gmond/gmetad document -> one snapshot per HOST; bad HOSTs become failures."""
    from glueinfo.xmlsafe import XMLInputError, parse_xml

    try:
        root = parse_xml(_ascii_as_utf8(without_extra_data(without_doctype(data))), max_bytes=max_bytes, what=what)
    except (XMLInputError, GangliaError) as exc:
        raise GangliaError(str(exc)) from None
    if root.tag != "GANGLIA_XML":
        raise GangliaError(f"{what}: root element is <{root.tag}>, not <GANGLIA_XML>")
    report = SourceReport()
    # gmond: GANGLIA_XML/CLUSTER/HOST; gmetad: GANGLIA_XML/GRID/(GRID/)*CLUSTER/HOST.
    for host in root.iter("HOST"):
        parent = host.getparent()
        cluster = parent.get("NAME") if parent is not None and parent.tag == "CLUSTER" else None
        try:
            report.snapshots.append(host_snapshot(host, fetched_at, cluster))
        except GangliaError as exc:
            name = host.get("NAME") or "?"
            report.failures.append(SourceFailure(target=what, host=name, error=str(exc)))
    return report


def read_port(target: Target, timeout_s: float, max_bytes: int) -> bytes:
    """Everything the gmond/gmetad XML port sends, within ``timeout_s`` and ``max_bytes``."""
    import time

    deadline = time.monotonic() + timeout_s
    chunks, size = [], 0
    with socket.create_connection((target.host, target.port), timeout=timeout_s) as sock:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete document within {timeout_s:g} s")
            sock.settimeout(left)
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise GangliaError(f"document over the limit of {max_bytes} bytes ([sources] ganglia_max_body)")
            chunks.append(chunk)
    return b"".join(chunks)


def gather(ctx: SourceContext) -> SourceReport:
    section = ctx.config.section("sources")
    report = SourceReport()
    for spec in section["ganglia"]:
        try:
            target = parse_target(spec, DEFAULT_PORT)
        except HostRangeError as exc:
            report.failures.append(SourceFailure(target=spec, error=str(exc)))
            continue
        timeout = max(0.01, min(section["timeout"], ctx.remaining()))
        try:
            data = read_port(target, timeout, section["ganglia_max_body"])
            fetched_at = ctx.clock()
            found = parse_ganglia(data, fetched_at, section["ganglia_max_body"], what=f"Ganglia XML from {target}")
        except (OSError, GangliaError) as exc:
            error = str(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError):
                error = f"timed out after {timeout:g} s"
            elif isinstance(exc, OSError) and not isinstance(exc, GangliaError):
                error = f"cannot read: {exc.strerror or exc}"
            report.failures.append(SourceFailure(target=str(target), error=error))
            continue
        report.snapshots.extend(found.snapshots)
        report.failures.extend(found.failures)
    return report


SOURCE = Source(SOURCE_NAME, gather, "hosts from a Ganglia gmond/gmetad XML port ([sources] ganglia)")
