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


def _mb(metrics: dict[str, tuple[Optional[str], Optional[str], Optional[str]]], name: str) -> Optional[int]:
    entry = metrics.get(name)
    if entry is None:
        return None
    raw, kind, units = entry
    value = _number(name, raw, kind)
    factor = _TO_MB.get((units or "").strip().upper())
    if value is None or factor is None:  # a unit we do not know: unknown, not guessed
        return None
    return math.floor(value * factor)  # rounded down, as the collectors do


def host_snapshot(host: Any, fetched_at: float, cluster: Optional[str] = None) -> HostSnapshot:
    """One ``<HOST>`` element -> HostSnapshot (source ``ganglia``); GangliaError if unreadable."""
    name = (host.get("NAME") or "").strip()
    if not name:
        raise GangliaError("HOST without a NAME")
    metrics: dict[str, tuple[Optional[str], Optional[str], Optional[str]]] = {}
    for metric in host:
        if metric.tag == "METRIC":
            metric_name = metric.get("NAME")
            if metric_name in _WANTED:
                metrics[metric_name] = (metric.get("VAL"), metric.get("TYPE"), metric.get("UNITS"))

    def num(key: str) -> Optional[float]:
        entry = metrics.get(key)
        return None if entry is None else _number(key, entry[0], entry[1])

    def text(key: str) -> Optional[str]:
        entry = metrics.get(key)
        return entry[0].strip() or None if entry is not None and entry[0] is not None else None

    def integer(key: str) -> Optional[int]:
        value = num(key)
        return None if value is None else int(round(value))

    tn = host.get("TN")
    reported = host.get("REPORTED")
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

    machine = text("machine_type")
    cpu = CpuInfo(logical_cpus=integer("cpu_num"), clock_mhz=integer("cpu_speed"), instruction_set=machine)

    ram, swap, swap_free = _mb(metrics, "mem_total"), _mb(metrics, "swap_total"), _mb(metrics, "swap_free")
    free, buffers, cached = _mb(metrics, "mem_free"), _mb(metrics, "mem_buffers"), _mb(metrics, "mem_cached")
    # Ganglia's mem_free is MemFree; with buffers and page cache it is the
    # classic "free -/+ buffers/cache" figure of available memory.
    available = free + buffers + cached if None not in (free, buffers, cached) else free
    memory = MemoryInfo(
        ram_mb=ram, ram_available_mb=available, swap_mb=swap, swap_free_mb=swap_free,
        virtual_mb=ram + swap if ram is not None and swap is not None else None,
        virtual_available_mb=available + swap_free if available is not None and swap_free is not None else None,
    )

    idle, wio = num("cpu_idle"), num("cpu_wio")
    load = LoadInfo(
        load1=num("load_one"), load5=num("load_five"), load15=num("load_fifteen"),
        runnable_tasks=integer("proc_run"), total_tasks=integer("proc_total"),
        # Busy share as psutil counts it (idle and iowait are not busy); gmond
        # does not say over how long, so the interval stays unknown.
        cpu_utilisation_percent=round(100.0 - idle - wio, 1) if idle is not None and wio is not None else None,
    )
    boot = num("boottime")
    opsys = OsInfo(kernel_release=text("os_release"), platform_type=machine, boot_time=boot)

    facts: dict[str, Any] = {}
    for key, value in (("cluster", cluster), ("ip", host.get("IP")), ("location", host.get("LOCATION")),
                       ("tags", host.get("TAGS")), ("os_name", text("os_name")),
                       ("disk_total_mb", _mb(metrics, "disk_total")), ("disk_free_mb", _mb(metrics, "disk_free"))):
        if value not in (None, "", "unspecified"):
            facts[key] = value
    gmond_started = host.get("GMOND_STARTED")
    if gmond_started and gmond_started.isdigit():
        facts["gmond_started"] = int(gmond_started)

    return HostSnapshot(
        hostname=name, collected_at=collected_at, source=SOURCE_NAME,
        cpu=cpu if any(v is not None for v in (cpu.logical_cpus, cpu.clock_mhz, cpu.instruction_set)) else None,
        memory=memory if any(v is not None for v in vars(memory).values()) else None,
        load=load if any(v is not None for v in vars(load).values()) else None,
        os=opsys if any(v is not None for v in vars(opsys).values()) else None,
        extra={SOURCE_NAME: facts} if facts else {},
    )


def parse_ganglia(data: bytes, fetched_at: float, max_bytes: int, what: str = "Ganglia XML") -> SourceReport:
    """A whole gmond/gmetad document -> one snapshot per HOST; bad HOSTs become failures."""
    from glueinfo.xmlsafe import XMLInputError, parse_xml

    try:
        root = parse_xml(without_extra_data(without_doctype(data)), max_bytes=max_bytes, what=what)
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
