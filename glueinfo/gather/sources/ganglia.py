"""Source ``ganglia``: every HOST a gmond or gmetad reports, as a snapshot.

Sites already run Ganglia on every node; reading the XML its daemons serve on
their TCP port (gmond 8649, gmetad 8651) gives glueinfo thousands of hosts
with nothing new installed on them.  The port sends the whole document and
closes the connection; the document is read with a deadline and a byte cap.

Ganglia's XML starts with an internal DTD.  It is cut off before parsing and
the rest goes through glueinfo.core.xmlsafe like every other XML we read: nothing
in the DTD is used or expanded, and a document still holding a DTD or entity
declaration after the cut is refused.

A gmetad document for 10,000 hosts is ~90 MB, nine tenths of it metrics and
metadata glueinfo does not read; libxml2 building that tree (and Python
walking 330,000 METRIC elements) took seconds.  So documents written the way
gmond and gmetad write them are first reduced at the byte level
(:func:`packed_document`): the GRID/CLUSTER/HOSTS tags are kept verbatim and
each HOST becomes one empty element carrying its own attributes and two
more listing the metrics glueinfo maps (``names="cpu_num mem_total=KB ..."
values="16 131915940 ..."``); all other bytes are dropped unread.  That ~5 MB
document goes through glueinfo.core.xmlsafe like any other, so every byte kept is
checked by libxml2 and nothing can refer to an entity.  Whatever does not
have the expected shape (comments, CDATA, processing instructions, entity or
character references, non-ASCII bytes, a mapped METRIC whose attributes are
in another order or quoting, or whose TYPE is not numeric, ...) makes the
reduction give up and the whole document takes the general path above, so
the result is the same either way; README "Ganglia" says what the reduction
does not check in the bytes it drops.

A HOST of a gmond running the NVIDIA GPU module of gmond_python_modules has its GPUs read from
its ``gpu_num``, ``gpu_driver`` and ``gpuN_type``/``gpuN_mem_total``/``gpuN_max_graphics_*``
metrics (:func:`host_accelerators`); such a document takes the general path.

Mapping (README "Many hosts"): each HOST becomes a snapshot with source
``ganglia``; ``collected_at`` is when the host was last heard from (the time
the document was read minus the HOST's TN, on the head node's clock, so a
gmetad with a skewed clock does not make hosts look fresh or stale).  Facts
Ganglia cannot tell (sockets, cores, CPU model, caches, adapters, mount
points, the distribution) stay None; the merge in glueinfo.gather.gatherer fills them
from an agent's or the local probe's snapshot of the same host.
"""

from __future__ import annotations

import math
import operator
import re
import socket
from typing import Any, Optional

from glueinfo.core.errors import InputError
from glueinfo.core.gc_pause import collector_paused
from glueinfo.core.hostrange import HostRangeError, Target, parse_target
from glueinfo.core.model import Accelerator, CpuInfo, HostSnapshot, LoadInfo, MemoryInfo, OsInfo
from glueinfo.gather.registry import Source, SourceContext, SourceFailure, SourceReport
from glueinfo.host.accelerators import Device, group

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

_SIZE_METRICS = frozenset({"mem_total", "mem_free", "mem_buffers", "mem_cached", "swap_total", "swap_free", "disk_total", "disk_free"})
_TEXT_METRICS = frozenset({"machine_type", "os_name", "os_release"})
_NUMBER_METRICS = frozenset(_WANTED - _SIZE_METRICS - _TEXT_METRICS)


class GangliaError(InputError, ValueError):
    """A Ganglia document or HOST record we cannot read; one line."""


def _doctype_span(data: bytes) -> Optional[tuple[int, int]]:
    """Where Ganglia's leading ``<!DOCTYPE GANGLIA_XML [...]>`` starts and ends, or None.

    Only a DOCTYPE before the root element counts, and it ends at the first
    ``]>`` (Ganglia's internal subset holds no ``]``).  Its content is never
    looked at.  Anything a hostile document hides after that is still seen,
    and refused, by glueinfo.core.xmlsafe.
    """
    match = _DOCTYPE.search(data, 0, 4096)
    if match is None or b"<GANGLIA_XML" in data[: match.start()]:
        return None
    start = match.start()
    bracket = data.find(b"[", start)
    close = data.find(b">", start)
    if bracket != -1 and bracket < close:
        end = data.find(b"]", bracket)
        close = data.find(b">", end) if end != -1 else -1
    if close == -1:
        raise GangliaError("unterminated DOCTYPE")
    return start, close + 1


def without_doctype(data: bytes) -> bytes:
    """Cut Ganglia's leading ``<!DOCTYPE GANGLIA_XML [...]>`` out of the document (see :func:`_doctype_span`)."""
    span = _doctype_span(data)
    return data if span is None else data[: span[0]] + data[span[1]:]


def without_extra_data(data: bytes) -> bytes:
    """Cut every ``<EXTRA_DATA>...</EXTRA_DATA>`` block (gmond's GROUP/DESC/TITLE
    metadata, unused here) out before parsing: it is over half of the bytes and
    three quarters of the elements of a gmetad document, so this halves the
    parse.  ``<`` cannot occur raw inside attribute values, so the cut only
    ever meets markup; whatever remains is parsed by glueinfo.core.xmlsafe as usual."""
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


# -- the byte-level reduction of documents as gmond and gmetad write them ---------------------------
#
# The patterns below accept the shape gmond 3.x and gmetad write: double-quoted
# attributes, each METRIC starting NAME="..." VAL="..." TYPE="..." UNITS="..."
# one space apart.  Anything else makes packed_document() return None and the
# document takes the general path.  Values kept hold no markup, no reference
# and no control character, so the packed document holds no '&' at all.

_WS = rb"[ \t\r\n]"
_VALUE = rb'[^"<&\x00-\x08\x0b\x0c\x0e-\x1f]*+'
# A mapped metric's VAL: as _VALUE, not empty and without white space (the packed form is space-separated).
_TOKEN = rb'[^"<&\x00-\x20]++'
# Attributes of the tags kept verbatim: upper-case names as Ganglia writes them (so no xmlns).
_ATTRIBUTES = rb"(?:" + _WS + rb"++[A-Z_][A-Z0-9_]*+" + _WS + rb"*+=" + _WS + rb'*+"' + _VALUE + rb'")*+'


def _names(names: Any) -> bytes:
    return b"|".join(re.escape(name.encode("ascii")) for name in sorted(names))


_NUMERIC_TYPE = rb'"(?:' + _names(_NUMERIC_TYPES) + rb')"'

# Markup allowed between HOSTs: the GANGLIA_XML, GRID and CLUSTER tags, kept verbatim.
_BETWEEN_HOSTS = (rb"(?:" + _WS + rb"*+(?:<(?:GANGLIA_XML|GRID|CLUSTER)" + _ATTRIBUTES + _WS + rb"*+>|</(?:GANGLIA_XML|GRID|CLUSTER)"
                  + _WS + rb"*+>))*+" + _WS + rb"*+")
# What may follow a HOST: such markup, then the next HOST or gmetad's HOSTS summary start tag
# (group 1: the tag up to its attributes' end, 2: "S" for HOSTS, 3: "/" when it is empty) or the end.
_NEXT_HOST = re.compile(_BETWEEN_HOSTS + rb"(?:(<HOST(S?)" + _ATTRIBUTES + rb")" + _WS + rb"*+(/?)>|\Z)")
_HOST_END = re.compile(rb"</HOST" + _WS + rb"*+>")
# One METRIC start tag inside a HOST.  For a mapped metric, group 1 is its NAME (5 and 6 add
# "=UNITS" for a size: memory and disk figures) and group 4 its VAL; 2 and 3 are empty markers of a
# plain number (whose TYPE must be numeric) and of a size (numeric TYPE, UNITS of letters only).  A
# METRIC of another name is skipped without a match.  Anything else (a mapped metric in another
# form, with an empty VAL or white space in it; a METRIC whose NAME is not first) matches with an
# empty group 1 and takes the rest of the HOST: the document is not in the form this reduction reads.
_METRIC = re.compile(
    rb'<METRIC(?: NAME="(' + _names(_TEXT_METRICS) + rb"|(?:" + _names(_NUMBER_METRICS) + rb")()|(?:" + _names(_SIZE_METRICS)
    + rb')())" VAL="(' + _TOKEN + rb')"(?(2)(?= TYPE=' + _NUMERIC_TYPE + rb')|(?(3) TYPE=' + _NUMERIC_TYPE
    + rb' UNITS(=)"([A-Za-z]*+)"))'
    + rb'|(?! NAME="(?!(?:' + _names(_WANTED) + rb')"))(?s:.*))')
_NAME_AND_UNITS, _VALUE_OF = operator.itemgetter(0, 4, 5), operator.itemgetter(3)
_PROLOG = re.compile(rb"(?:<\?xml" + _WS + rb"[^<>]*?\?>)?" + _WS + rb"*+")


def packed_document(data: bytes) -> Optional[bytes]:
    """The document reduced to what glueinfo maps, or None when it is not in the form gmond and gmetad write.

    Each ``<HOST ...>...</HOST>`` becomes ``<HOST ... names="cpu_num mem_total=KB" values="16 131915940"/>``:
    the HOST's own attributes verbatim, then the mapped METRICs' NAMEs (a size's with its UNITS)
    and VALs, in document order.  GANGLIA_XML, GRID, CLUSTER and HOSTS tags are kept
    verbatim; unmapped METRICs and all EXTRA_DATA are dropped unread.  The result still has to be
    parsed, by glueinfo.core.xmlsafe, which checks everything kept.
    """
    if not data.isascii():
        return None  # no encoding questions: the ASCII bytes read the same in every encoding gmond declares
    span = _doctype_span(data)
    prolog_end = 0 if span is None else span[0]
    prolog = _PROLOG.fullmatch(data, 0, prolog_end) if span is not None else _PROLOG.match(data)
    if prolog is None:
        return None
    body = span[1] if span is not None else prolog.end()
    # Comments, CDATA, processing instructions and references are legal XML this reduction does not
    # follow; the cheap single-byte look comes first because Ganglia documents seldom hold a '!' or '?'.
    if data.find(b"&", body) != -1:
        return None
    if data.find(b"!", body) != -1 and data.find(b"<!", body) != -1:
        return None
    if data.find(b"?", body) != -1 and data.find(b"<?", body) != -1:
        return None

    out = [data[: prolog.end()]]
    find, rfind, size = data.find, data.rfind, len(data)
    metric_findall, next_host, host_end = _METRIC.findall, _NEXT_HOST.match, _HOST_END.match
    pos = body
    while True:
        tag = next_host(data, pos)
        if tag is None:
            return None
        if tag.group(1) is None:  # the end of the document
            out.append(data[pos:])
            return b"".join(out)
        start, tag_end = tag.start(1), tag.end()
        out.append(data[pos:start])
        if tag.group(3):  # <HOST .../> or <HOSTS .../>: nothing inside, kept as written
            out.append(data[start:tag_end])
            pos = tag_end
            continue
        if tag.group(2):  # a HOSTS summary is always empty
            return None
        # The HOST ends at the last </HOST before the next HOST starts: one scan finds both, and a
        # HOST inside a HOST (which the general path would read) leaves none, so this gives up.
        following = find(b"<HOST", tag_end)
        close = rfind(b"</HOST", tag_end, size if following == -1 else following)
        end = host_end(data, close) if close != -1 else None
        if end is None:
            return None
        metrics = metric_findall(data, tag_end, close)
        if metrics and not metrics[-1][0]:
            return None
        out.append(tag.group(1))
        out.append(b' names="')
        out.append(b" ".join(map(b"".join, map(_NAME_AND_UNITS, metrics))))
        out.append(b'" values="')
        out.append(b" ".join(map(_VALUE_OF, metrics)))
        out.append(b'"/>')
        pos = end.end()


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


def _size_mb(name: str, raw: Optional[str], kind: Optional[str], units: Optional[str]) -> Optional[int]:
    """A memory or disk size in MB, rounded down as the collectors do; None in a unit glueinfo does not know."""
    value = _number(name, raw, kind)
    if value is None:
        return None
    factor = _TO_MB.get((units or "").strip().upper())
    if factor is None:
        return None
    size = value * factor
    if not math.isfinite(size):  # e.g. 1e305 TB: finite as written, infinite in MB
        raise GangliaError(f"metric {name} is {raw!r} {units}, too large to be a size")
    return math.floor(size)


# Every mapped metric in one fixed order (text, plain numbers, sizes): the values tuple both paths build.
_ORDER = (*sorted(_TEXT_METRICS), *sorted(_NUMBER_METRICS), *sorted(_SIZE_METRICS))
_FIRST_NUMBER, _FIRST_SIZE = len(_TEXT_METRICS), len(_TEXT_METRICS) + len(_NUMBER_METRICS)
# What a packed HOST is read for: its own attributes and the packed metrics, in one call.
_PACKED_ATTRIBUTES = ("NAME", "TN", "REPORTED", "IP", "LOCATION", "TAGS", "GMOND_STARTED", "names", "values")


def _metric_values(host: Any) -> tuple[Any, ...]:
    """The wanted METRICs of one HOST, in _ORDER: text stripped, numbers as floats, sizes in MB
    (rounded down, as the collectors do; None in a unit glueinfo does not know: unknown, not guessed)."""
    values: dict[str, Any] = {}
    for metric in host.iterchildren("METRIC"):
        get = metric.get
        name = get("NAME")
        if name not in _WANTED:
            continue
        raw = get("VAL")
        if name in _TEXT_METRICS:
            values[name] = (raw.strip() or None) if raw else None
        elif name in _SIZE_METRICS:
            values[name] = _size_mb(name, raw, get("TYPE"), get("UNITS"))
        else:
            values[name] = _number(name, raw, get("TYPE"))
    return tuple(map(values.get, _ORDER))


def _metrics_one_by_one(keys: list[str], words: list[str]) -> tuple[Any, ...]:
    """The values of a packed HOST's metrics (``names`` split, ``values`` split), in _ORDER, read metric
    by metric in document order as the general path reads them: the last of a NAME given twice
    counts, and the first bad value is the one reported."""
    values: dict[str, Any] = {}
    for key, value in zip(keys, words, strict=True):
        metric, _, units = key.partition("=")
        if metric in _TEXT_METRICS:
            values[metric] = value
        elif metric in _NUMBER_METRICS:
            values[metric] = _number(metric, value, None)
        else:
            values[metric] = _size_mb(metric, value, None, units)
    return tuple(map(values.get, _ORDER))


def _collected_at(tn: Optional[str], reported: Optional[str], fetched_at: float) -> float:
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
    return collected_at


def host_snapshot(host: Any, fetched_at: float, cluster: Optional[str] = None) -> HostSnapshot:
    """One ``<HOST>`` element -> HostSnapshot (source ``ganglia``); GangliaError if unreadable."""
    get = host.get
    name = (get("NAME") or "").strip()
    if not name:
        raise GangliaError("HOST without a NAME")
    collected_at = _collected_at(get("TN"), get("REPORTED"), fetched_at)
    snapshot = _snapshot(name, collected_at, _metric_values(host), cluster,
                         (get("IP"), get("LOCATION"), get("TAGS")), get("GMOND_STARTED"))
    if host.find(_GPU_NUM_PATH) is not None:
        snapshot.accelerators = host_accelerators(host)
    return snapshot


# -- GPUs: the NVIDIA module of ganglia/gmond_python_modules (gpu/nvidia/python_modules/nvidia.py) ----------
# Its metrics, as its descriptors declare them: gpu_num (uint, GPUs), gpu_driver (string), and per GPU
# gpuN_type (string, NVML's name), gpuN_mem_total (uint, MB), gpuN_max_graphics_speed (MHz; renamed
# gpuN_max_graphics_clock in the module's 2014 version).  A document with gpu_num is read by the general
# path: the packed one keeps no text with spaces in it, as the GPU names have.
_GPU_MARK = b'NAME="gpu_num"'
_GPU_NUM_PATH = 'METRIC[@NAME="gpu_num"]'
MAX_GPUS = 256  # GPUs one HOST may say it has (more: a broken module, read as unknown)


def host_accelerators(host: Any) -> Optional[list[Accelerator]]:
    """A HOST's GPUs from the NVIDIA module's metrics; None when it does not report them (no
    ``gpu_num``, or not a whole number within MAX_GPUS), ``[]`` when it reports none."""
    metrics: dict[str, Any] = {}
    for metric in host.iterchildren("METRIC"):
        name = metric.get("NAME") or ""
        if name.startswith("gpu"):
            metrics[name] = metric
    count = _gpu_value(metrics, "gpu_num")
    if count is None or not count.isdigit() or int(count) > MAX_GPUS:
        return None
    driver = _gpu_value(metrics, "gpu_driver")
    devices = []
    for index in range(int(count)):
        memory = _gpu_value(metrics, f"gpu{index}_mem_total")
        clock = _gpu_value(metrics, f"gpu{index}_max_graphics_clock") or _gpu_value(metrics, f"gpu{index}_max_graphics_speed")
        devices.append(Device(address=None, vendor="NVIDIA", model=_gpu_value(metrics, f"gpu{index}_type"),
                              memory_mb=int(memory) if memory and memory.isdigit() and int(memory) > 0 else None,
                              clock_speed_mhz=int(clock) if clock and clock.isdigit() and int(clock) > 0 else None,
                              driver_version=driver, source=SOURCE_NAME))
    return group(devices)


def _gpu_value(metrics: dict[str, Any], name: str) -> Optional[str]:
    metric = metrics.get(name)
    value = (metric.get("VAL") or "").strip() if metric is not None else ""
    return value if value and value.isprintable() else None


class _PackedReader:
    """Reads the HOSTs of one packed document into snapshots, as :func:`host_snapshot` reads HOSTs.

    gmonds of one configuration list their metrics in the same order, so consecutive HOSTs have the
    same ``names``: where each mapped metric sits in ``values`` and the sizes' unit factors are
    worked out once per ``names``, and the values of a HOST with each mapped metric once, all of
    them finite numbers where numbers are expected, are converted in bulk.  Any other HOST is read
    metric by metric (:func:`_metrics_one_by_one`)."""

    def __init__(self) -> None:
        self.names: Optional[str] = None
        self.positions: Optional[list[int]] = None  # for each metric of _ORDER, its index in values
        self.factors: list[Optional[float]] = []  # for each size of _ORDER, MB per unit

    def __call__(self, host: Any, fetched_at: float, cluster: Optional[str] = None) -> HostSnapshot:
        name, tn, reported, ip, location, tags, gmond_started, names, values = map(host.get, _PACKED_ATTRIBUTES)
        name = (name or "").strip()
        if not name:
            raise GangliaError("HOST without a NAME")
        collected_at = _collected_at(tn, reported, fetched_at)
        names, words = names or "", (values or "").split()
        if names != self.names:
            self._learn(names)
        metrics = self._convert(words, self.positions) if self.positions is not None else None
        if metrics is None:
            metrics = _metrics_one_by_one(names.split(), words)
        return _snapshot(name, collected_at, metrics, cluster, (ip, location, tags), gmond_started)

    def _learn(self, names: str) -> None:
        self.names = names
        keys = names.split()
        index = {key.partition("=")[0]: position for position, key in enumerate(keys)}
        if len(index) != len(keys) or index.keys() != _WANTED:
            self.positions = None
            return
        self.positions = [index[metric] for metric in _ORDER]
        self.factors = [_TO_MB.get(keys[index[metric]].partition("=")[2].upper()) for metric in _ORDER[_FIRST_SIZE:]]

    def _convert(self, words: list[str], positions: list[int]) -> Optional[tuple[Any, ...]]:
        raw = list(map(words.__getitem__, positions))
        try:
            numbers = list(map(float, raw[_FIRST_NUMBER:_FIRST_SIZE]))
            sizes = list(map(float, raw[_FIRST_SIZE:]))
        except ValueError:
            return None
        if not math.isfinite(sum(numbers) + sum(sizes)):
            return None
        scaled = [None if factor is None else size * factor for size, factor in zip(sizes, self.factors, strict=True)]
        if not math.isfinite(sum(v for v in scaled if v is not None)):
            return None  # a size that overflows in MB: the general path names it
        sizes_mb = [None if v is None else math.floor(v) for v in scaled]
        return (*raw[:_FIRST_NUMBER], *numbers, *sizes_mb)


_NOT_A_FACT = (None, "", "unspecified")


def _snapshot(name: str, collected_at: float, values: tuple[Any, ...], cluster: Optional[str],
              where: tuple[Optional[str], Optional[str], Optional[str]], gmond_started: Optional[str]) -> HostSnapshot:
    (machine, os_name, release, boot, idle, cpu_num, cpu_speed, wio, load15, load5, load1, running, total,
     disk_free, disk_total, buffers, cached, free, ram, swap_free, swap) = values
    cpu = memory = load = system = None
    if cpu_num is not None or cpu_speed is not None or machine is not None:
        cpu = CpuInfo(logical_cpus=None if cpu_num is None else int(round(cpu_num)),
                      clock_mhz=None if cpu_speed is None else int(round(cpu_speed)), instruction_set=machine)

    # Ganglia's mem_free is MemFree; with buffers and page cache it is the
    # classic "free -/+ buffers/cache" figure of available memory.
    available = free if free is None or buffers is None or cached is None else free + buffers + cached
    if ram is not None or swap is not None or swap_free is not None or available is not None:
        memory = MemoryInfo(ram_mb=ram, ram_available_mb=available, swap_mb=swap, swap_free_mb=swap_free,
                            virtual_mb=None if ram is None or swap is None else ram + swap,
                            virtual_available_mb=None if available is None or swap_free is None else available + swap_free)

    if running is not None:
        running = int(round(running))
    if total is not None:
        total = int(round(total))
    # Busy share as psutil counts it (idle and iowait are not busy); gmond
    # does not say over how long, so the interval stays unknown.
    busy = None if idle is None or wio is None else round(100.0 - idle - wio, 1)
    if (load1 is not None or load5 is not None or load15 is not None or running is not None or total is not None
            or busy is not None):
        load = LoadInfo(load1=load1, load5=load5, load15=load15, runnable_tasks=running, total_tasks=total,
                        cpu_utilisation_percent=busy)
    if release is not None or machine is not None or boot is not None:
        system = OsInfo(kernel_release=release, platform_type=machine, boot_time=boot)

    facts: dict[str, Any] = {}
    ip, location, tags = where
    if cluster not in _NOT_A_FACT:
        facts["cluster"] = cluster
    if ip not in _NOT_A_FACT:
        facts["ip"] = ip
    if location not in _NOT_A_FACT:
        facts["location"] = location
    if tags not in _NOT_A_FACT:
        facts["tags"] = tags
    if os_name not in _NOT_A_FACT:
        facts["os_name"] = os_name
    if disk_total is not None:
        facts["disk_total_mb"] = disk_total
    if disk_free is not None:
        facts["disk_free_mb"] = disk_free
    if gmond_started and gmond_started.isdigit():
        facts["gmond_started"] = int(gmond_started)
    return HostSnapshot(hostname=name, collected_at=collected_at, source=SOURCE_NAME, cpu=cpu, memory=memory, load=load,
                        os=system, extra={SOURCE_NAME: facts} if facts else {})


def parse_ganglia(data: bytes, fetched_at: float, max_bytes: int, what: str = "Ganglia XML") -> SourceReport:
    """A whole gmond/gmetad document -> one snapshot per HOST; bad HOSTs become failures.

    A document in the form gmond and gmetad write is read through its
    :func:`packed_document`; any other, and any whose packed form does not
    parse, by the general path, which also words every error.
    """
    # ~25 containers per HOST, none in a reference cycle: at 10,000 HOSTs the collector would run
    # hundreds of times over them for nothing (a tenth of the parse).
    with collector_paused():
        report = None if _GPU_MARK in data else parse_packed(data, fetched_at, max_bytes, what)
        return report if report is not None else parse_general(data, fetched_at, max_bytes, what)



def parse_packed(data: bytes, fetched_at: float, max_bytes: int, what: str = "Ganglia XML") -> Optional[SourceReport]:
    """:func:`parse_ganglia` through :func:`packed_document`; None when that does not apply."""
    from glueinfo.core.xmlsafe import XMLInputError, parse_xml

    if len(data) > max_bytes:
        return None
    try:
        packed = packed_document(data)
        if packed is None:
            return None
        root = parse_xml(_ascii_as_utf8(packed), max_bytes=max_bytes, what=what)
    except (GangliaError, XMLInputError):
        return None
    if root.tag != "GANGLIA_XML":
        return None
    return _report(root, _PackedReader(), fetched_at, what)


def parse_general(data: bytes, fetched_at: float, max_bytes: int, what: str = "Ganglia XML") -> SourceReport:
    """:func:`parse_ganglia` by parsing the whole document (less EXTRA_DATA): any form, every error worded."""
    from glueinfo.core.xmlsafe import XMLInputError, parse_xml

    try:
        root = parse_xml(_ascii_as_utf8(without_extra_data(without_doctype(data))), max_bytes=max_bytes, what=what)
    except (XMLInputError, GangliaError) as exc:
        raise GangliaError(str(exc)) from None
    if root.tag != "GANGLIA_XML":
        raise GangliaError(f"{what}: root element is <{root.tag}>, not <GANGLIA_XML>")
    return _report(root, host_snapshot, fetched_at, what)


def _report(root: Any, read_host: Any, fetched_at: float, what: str) -> SourceReport:
    report = SourceReport()
    snapshots, failures = report.snapshots, report.failures
    cluster_of, cluster = None, None
    # gmond: GANGLIA_XML/CLUSTER/HOST; gmetad: GANGLIA_XML/GRID/(GRID/)*CLUSTER/HOST.
    for host in root.iter("HOST"):
        parent = host.getparent()
        if parent is not cluster_of:
            cluster_of = parent
            cluster = parent.get("NAME") if parent is not None and parent.tag == "CLUSTER" else None
        try:
            snapshots.append(read_host(host, fetched_at, cluster))
        except GangliaError as exc:
            name = host.get("NAME") or "?"
            failures.append(SourceFailure(target=what, host=name, error=str(exc)))
    return report


def read_port(target: Target, timeout_s: float, max_bytes: int) -> bytes:
    """Everything the gmond/gmetad XML port sends, within ``timeout_s`` and ``max_bytes``.

    Received straight into one growing buffer, so a 90 MB document is held
    once, not once in pieces and again joined."""
    import io
    import time

    deadline = time.monotonic() + timeout_s
    buffer, size = io.BytesIO(), 0
    chunk = memoryview(bytearray(1 << 20))
    with socket.create_connection((target.host, target.port), timeout=timeout_s) as sock:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete document within {timeout_s:g} s")
            sock.settimeout(left)
            received = sock.recv_into(chunk)
            if not received:
                break
            size += received
            if size > max_bytes:
                raise GangliaError(f"document over the limit of {max_bytes} bytes ([sources] ganglia_max_body)")
            buffer.write(chunk[:received])
    return buffer.getvalue()


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
    report.snapshots = bind_addresses(report, ctx.memory.setdefault("addresses", {}), ctx.clock(),
                                      float(section["drop_after"]))
    return report


def bind_addresses(report: SourceReport, pins: dict[str, tuple[str, float]], now: float,
                   drop_after: float) -> list[HostSnapshot]:
    """A Ganglia HOST's identity is its NAME and its IP: a NAME is bound to the IP it first came
    with until that IP has not reported it for ``drop_after`` seconds, so another machine's gmond
    (or a spoofed packet) using the NAME from another address is refused, named with both IPs,
    and the host's data is untouched.  HOSTs without an IP are kept as they are."""
    from glueinfo.gather.identity import host_key

    for key in [k for k, (_, seen) in pins.items() if now - seen > drop_after]:
        del pins[key]
    kept = []
    this_round: dict[str, str] = {}
    for snapshot in report.snapshots:
        ip = snapshot.extra.get(SOURCE_NAME, {}).get("ip")
        if not isinstance(ip, str):
            kept.append(snapshot)
            continue
        key = host_key(snapshot.hostname)
        bound = this_round.get(key) or (pins[key][0] if key in pins else None)
        if bound is not None and bound != ip:
            report.failures.append(SourceFailure(
                target=f"HOST {snapshot.hostname[:80]!r} from {ip}", host=snapshot.hostname[:80],
                error=f"the name is bound to the HOST at {bound}: refused"))
            continue
        this_round[key] = ip
        pins[key] = (ip, now)
        kept.append(snapshot)
    return kept


SOURCE = Source(SOURCE_NAME, gather, "hosts from a Ganglia gmond/gmetad XML port ([sources] ganglia)")
