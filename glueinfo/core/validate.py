"""The model boundary: what every host snapshot passes before glueinfo believes it.

Every way a snapshot enters (this host's probe or a recorded tree, ``[node]
site_snapshots`` and ``--snapshots`` files, agents, the spool, Ganglia,
state files, plugins) goes through :func:`validate_snapshot`, so one rule
holds everywhere:

- **A bad snapshot is refused**, with one line naming it: its host name is
  not a DNS name (labels of letters, digits, ``-`` and ``_``, each at most
  63 characters, 253 in all; or an IP address), or its collection time is
  not a finite, non-negative time.
- **A bad field is dropped** (it becomes unknown, as if the source had not
  said it), with one line naming host and field: a number that is NaN,
  infinite, negative or beyond physical belief (1e9 CPUs, 1e23 kB of RAM, a
  load of 1e308), a text holding control characters (NUL, ESC, a newline in
  a CPU model), a list longer than 10,000 items, and
  facts that contradict each other (more memory or disk available than
  there is, more cores than hardware threads, a boot time in the future:
  the dependent figure is dropped).  An item of a list (an adapter, a file
  system) whose own name is bad is dropped whole.
- **Every text has a maximum length** (:data:`TEXT_BOUNDS`; the table in
  docs/admin-guide.md, "Text lengths", is the same): names as DNS allows them
  (253), tokens such as an instruction set or a kernel release 64, descriptive
  texts (a CPU model, an OS name) 256, paths 4,096, anything else 4,096.  A
  longer descriptive text is **cut** (its first characters, ending in
  ``...``); a longer name or token is **dropped** as a bad field is, since a
  cut one would name something else; a host name or source name that is too
  long refuses the snapshot.  All of one snapshot's texts over their bound
  are named in **one** line (field, length, bound, what was done).
- A Node published by other software keeps its parts as given
  (``snapshot.published``): a part or figure of it that could not have been
  read from a Node is dropped, with one line: an element the SSS Node spec
  does not define, a figure that is not a finite, non-negative decimal
  number (a whole one for Processors), a consumptionRate that is not one, a
  wallDuration that is neither seconds nor an ISO 8601 duration, more than
  10,000 parts; its texts and attributes have their bounds too (an Opsys or
  Description is cut, any other part or figure over its bound is dropped).
  Its texts may hold line breaks (a Description): the Node XML writer makes
  any text safe.
- The rest of the snapshot, and the rest of the site, is always kept.

Host names that are valid but too long to name an LDAP entry are not a
problem here: the GLUE renderer names such entries by the documented
prefix-plus-hash rule (glueinfo.glue.render13.naming_value).

Validation never raises and never changes the snapshot it is given: a
snapshot with problems is copied and the copy cleaned.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import ipaddress
import math
import re
from dataclasses import field
from typing import Any, Optional

from glueinfo.core.model import (
    Accelerator,
    CollectorResult,
    CpuInfo,
    FileSystem,
    HostSnapshot,
    NetworkAdapter,
    OsInfo,
    PublishedAmount,
    PublishedNode,
    PublishedPart,
    StaticFacts,
)
from glueinfo.core.records import dataclass
from glueinfo.core.text import ELLIPSIS

# Largest believable value per field name; anything above is an absurd report, not a host.
_LIMITS: dict[str, float] = {
    "logical_cpus": 1 << 20, "physical_cores": 1 << 20, "sockets": 1 << 16,
    "clock_mhz": 100_000, "cache_l1_kb": 1 << 24, "cache_l1i_kb": 1 << 24, "cache_l1d_kb": 1 << 24,
    "cache_l2_kb": 1 << 24, "cache_l3_kb": 1 << 24,
    "ram_mb": 1 << 32, "ram_available_mb": 1 << 32, "swap_mb": 1 << 32, "swap_free_mb": 1 << 32,
    "virtual_mb": 1 << 33, "virtual_available_mb": 1 << 33,
    "load1": 1e7, "load5": 1e7, "load15": 1e7, "runnable_tasks": 1e8, "total_tasks": 1e9,
    "cpu_utilisation_percent": 100.5, "utilisation_interval_s": 86400.0 * 365,
    "mtu": 1 << 20, "speed_mbps": 10_000_000, "size_mb": 1 << 44, "available_mb": 1 << 44,
    "si00": 1e9, "sf00": 1e9, "duration_s": 86400.0,
}
# Any other number (times, plugin facts): beyond this it is garbage whatever it means.
_DEFAULT_LIMIT = 1e15
_MAX_ITEMS = 10_000
_CLOCK_SLACK_S = 300.0  # boot times this far in the future are a wrong clock, not a report
# C0 and C1 controls, DEL, lone surrogates and the two non-characters XML 1.0 refuses.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_LABEL = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
_DNS_NAME = re.compile(r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?")


CUT = "cut"
DROPPED = "dropped"
REFUSED = "refused"


@dataclass(frozen=True)
class TextBound:
    """How many characters (Unicode code points) one text may have, and what becomes of a longer
    one: ``cut`` (its first ``maximum - 3`` characters and ``...``, so a reader sees the cut),
    ``dropped`` (unknown, as any bad field; an item that cannot be without it, such as an adapter
    without its name, goes with it) or ``refused`` (the whole snapshot)."""

    maximum: int
    longer: str = DROPPED


_DNS_NAME_BOUND = TextBound(253)  # RFC 1035 as resolvers read it; a cut name is another host's
_TOKEN = TextBound(64)  # one word a machine reports: struct utsname's fields hold 64 characters
_DESCRIPTION = TextBound(256, CUT)  # free text for people: the start is what they read
_TAG = TextBound(256)  # a name an admin or a plugin gives (a feature, a runtime environment, a key)
_PATH = TextBound(4096)  # PATH_MAX
OTHER_TEXT = TextBound(4096)  # any text no row names: a plugin's facts, an opaque Extension value

# Every text fact of the model, by (class, field); for a list or dict field, the bound of each
# item (and of a dict's values).  docs/admin-guide.md "Text lengths" is this table for admins.
TEXT_BOUNDS: dict[tuple[type, str], TextBound] = {
    (HostSnapshot, "hostname"): TextBound(253, REFUSED),
    (HostSnapshot, "source"): TextBound(64, REFUSED),
    (HostSnapshot, "host_root"): _PATH,
    (CpuInfo, "vendor"): _TOKEN,
    (CpuInfo, "model_name"): _DESCRIPTION,
    (CpuInfo, "version"): _DESCRIPTION,
    (CpuInfo, "instruction_set"): _TOKEN,
    (CpuInfo, "features"): _TOKEN,
    (OsInfo, "name"): _DESCRIPTION,
    (OsInfo, "release"): _TOKEN,
    (OsInfo, "version"): _TOKEN,
    (OsInfo, "pretty_name"): _DESCRIPTION,
    (OsInfo, "kernel_release"): _TOKEN,
    (OsInfo, "kernel_version"): _DESCRIPTION,
    (OsInfo, "platform_type"): _TOKEN,
    (NetworkAdapter, "name"): _TOKEN,
    (NetworkAdapter, "ipv4"): _TOKEN,
    (NetworkAdapter, "ipv6"): _TOKEN,
    (NetworkAdapter, "mac"): _TOKEN,
    (FileSystem, "mount_point"): _PATH,
    (FileSystem, "device"): _PATH,
    (FileSystem, "fs_type"): _TOKEN,
    (FileSystem, "server"): _DNS_NAME_BOUND,
    (Accelerator, "type"): _TOKEN,
    (Accelerator, "vendor"): _TOKEN,
    (Accelerator, "model"): _DESCRIPTION,
    (Accelerator, "compute_capability"): _TOKEN,
    (Accelerator, "driver_version"): _TOKEN,
    (Accelerator, "runtime_version"): _TOKEN,
    (Accelerator, "partition"): _TOKEN,
    (Accelerator, "pci_ids"): _TOKEN,
    (Accelerator, "source"): _TAG,
    (StaticFacts, "runtime_environment"): _TAG,
    (StaticFacts, "features"): _TAG,
    (StaticFacts, "extensions"): OTHER_TEXT,
    (CollectorResult, "name"): _TAG,
    (CollectorResult, "error"): TextBound(1024, CUT),
    (CollectorResult, "source"): _TAG,
    (PublishedNode, "name"): _DNS_NAME_BOUND,
    (PublishedNode, "state"): _TOKEN,
    (PublishedNode, "features"): _TAG,
    (PublishedAmount, "text"): _TOKEN,
    (PublishedAmount, "units"): _TAG,
    (PublishedAmount, "metric"): _TAG,
    (PublishedAmount, "wall_duration"): _TAG,
    (PublishedAmount, "consumption_rate"): _TAG,
    (PublishedAmount, "name"): _TAG,
    (PublishedAmount, "type"): _TAG,
    (PublishedPart, "name"): _TAG,
    (PublishedPart, "type"): _TAG,
    (PublishedPart, "aggregation"): _TAG,
    (PublishedPart, "delimiter"): _TAG,
    (PublishedPart, "count"): _TAG,
}
KEY_BOUND = _TAG  # a dict's keys: a static extension's or a plugin fact's name
# A published part's text, by its element: what people read is cut, the rest is dropped with the part.
PART_TEXT_BOUNDS: dict[str, TextBound] = {
    "Opsys": _DESCRIPTION, "Description": _DESCRIPTION, "Arch": _TOKEN,
    "Feature": TextBound(65536),  # the spec's comma-delimited features, each a _TAG
    "Extension": OTHER_TEXT,
}
_SHOWN_LONG = 8  # texts over their bound named in a snapshot's one line; the rest counted


def cut(text: str, maximum: int) -> str:
    """``text`` in at most ``maximum`` characters: unchanged when it fits, else its start and ``...``."""
    if len(text) <= maximum:
        return text
    return text[:maximum - len(ELLIPSIS)] + ELLIPSIS


@dataclass
class Validated:
    """The outcome for one snapshot: the snapshot to keep (None: refused), why it was
    refused, and one line per field dropped (``host NAME: field why: dropped``), and one line
    more naming every text over its bound (``host NAME: field is N characters long (at most
    M): cut; ...``)."""

    snapshot: Optional[HostSnapshot]
    refused: Optional[str] = None
    dropped: list[str] = field(default_factory=list)


def host_name_problem(name: Any) -> Optional[str]:
    """Why ``name`` is not a host name (one line), or None: DNS rules, or an IP address."""
    if not isinstance(name, str) or not name:
        return "the host name is empty"
    if len(name) <= 254 and _DNS_NAME.fullmatch(name) and len(name.rstrip(".")) <= 253:
        return None  # the usual case, decided by the rules below in one match (the dot makes it linear)
    shown = repr(name[:80]) + ("..." if len(name) > 80 else "")
    if _CONTROL.search(name):
        return f"host name {shown} holds control characters"
    try:
        ipaddress.ip_address(name)
        return None
    except ValueError:
        pass
    bare = name[:-1] if name.endswith(".") else name
    if len(bare) > 253:
        return f"host name {shown} is {len(bare)} characters long (a DNS name has at most 253)"
    for label in bare.split("."):
        if len(label) > 63:
            return f"host name {shown} has a label of {len(label)} characters (at most 63)"
        if not _LABEL.match(label):
            return f"host name {shown} is not a DNS name (letters, digits, '-' and '_' in dot-separated labels)"
    return None


def _scalar_problem(name: str, value: Any) -> Optional[str]:
    """Why a number (or any non-text scalar) cannot be believed, or None; texts go to _Walk.text."""
    kind = value.__class__
    if kind is int or kind is float:
        if kind is float and not math.isfinite(value):
            return f"is {value}"
        if value < 0:
            return f"is negative ({value})"
        if value > _LIMITS.get(name, _DEFAULT_LIMIT):
            return f"= {value:.6g} is beyond belief"
    return None


@functools.cache
def _fields(kind: type) -> tuple[tuple[str, bool, TextBound], ...]:
    """A model class's fields as (name, may be unknown, bound of its texts): the walk asks for them
    20,000 times a cycle at 10,000 hosts."""
    return tuple((f.name, f.default is None, TEXT_BOUNDS.get((kind, f.name), OTHER_TEXT)) for f in dataclasses.fields(kind))


@functools.cache
def _is_model(kind: type) -> bool:
    return dataclasses.is_dataclass(kind)


class _Walk:
    """One pass over a snapshot's facts: finds problems, and with ``fix`` removes them in place."""

    def __init__(self, fix: bool) -> None:
        self.fix = fix
        self.problems: list[str] = []
        self.long: list[str] = []  # texts over their bound, each ``path is N characters long (at most M): cut``

    def found(self, path: str, why: str) -> None:
        self.problems.append(f"{path} {why}")

    def text(self, value: str, bound: TextBound, path: str, controls: bool = True) -> Optional[str]:
        """``value`` as it may be kept: itself, cut to its bound, or None (to be dropped), the
        problem recorded.  ``controls``: whether control characters make it bad (not in a
        published Node's texts, which may hold line breaks)."""
        if controls and _CONTROL.search(value):
            self.found(path, "holds control characters")
            return None
        if len(value) <= bound.maximum:
            return value
        self.long.append(f"{path} is {len(value)} characters long (at most {bound.maximum}): {bound.longer}")
        return cut(value, bound.maximum) if bound.longer == CUT else None

    def dataclass(self, obj: Any, path: str) -> bool:
        """Check a model dataclass; False when a field that cannot be unknown is bad (drop the whole item)."""
        keep = True
        for name, optional, bound in _fields(obj.__class__):
            value = getattr(obj, name)
            if value is None or value.__class__ is bool:
                continue
            kind = value.__class__
            if kind is str:  # most texts fit and are clean: no path built unless not
                if len(value) <= bound.maximum and _CONTROL.search(value) is None:
                    continue
                kept = self.text(value, bound, f"{path}{name}")
                if kept is not None:
                    if self.fix:
                        setattr(obj, name, kept)
                elif optional:
                    if self.fix:
                        setattr(obj, name, None)
                else:  # a name the item cannot be without
                    keep = False
                continue
            if kind is int or kind is float:  # most other facts: no path built unless bad
                why = _scalar_problem(name, value)
                if why is None:
                    continue
                self.found(f"{path}{name}", why)
                if optional:
                    if self.fix:
                        setattr(obj, name, None)
                else:  # a flag the item cannot be without
                    keep = False
                continue
            where = f"{path}{name}"
            if isinstance(value, (list, dict)):
                self.container(obj, name, value, where, bound)
                continue
            if _is_model(kind):
                if not self.dataclass(value, where + "."):
                    self.found(where, "(the whole item)")
                    if self.fix:
                        setattr(obj, name, None)
                continue
            why = _scalar_problem(name, value)
            if why is None:
                continue
            self.found(where, why)
            if optional:
                if self.fix:
                    setattr(obj, name, None)
            else:
                keep = False
        return keep

    def container(self, owner: Any, name: str, value: Any, path: str, bound: TextBound = OTHER_TEXT) -> None:
        """A list or dict field; ``bound``: of each text item (a dict's values; its keys: KEY_BOUND)."""
        if len(value) > _MAX_ITEMS:
            self.found(path, f"has {len(value)} items")
            if self.fix:
                setattr(owner, name, value.__class__())
            return
        if isinstance(value, dict):
            bad = []
            for key, item in value.items():
                where = f"{path}[{str(key)[:40]!r}]"
                # every item is looked at (each bad one named), its key only when the item is good
                if not self.plain(item, where, bound) or not self.plain(key, f"{where} (a name)", KEY_BOUND):
                    bad.append(key)
            if self.fix:
                for key in bad:
                    del value[key]
            return
        keep = []
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            if _is_model(item.__class__):
                ok = self.dataclass(item, where + ".")
                if not ok:
                    self.found(where, "(the whole item)")
            else:
                ok = self.plain(item, where, bound)
            if ok:
                keep.append(item)
        if self.fix and len(keep) != len(value):
            value[:] = keep

    def plain(self, value: Any, path: str, bound: TextBound = OTHER_TEXT) -> bool:
        """A plain value (plugin facts, feature names): False when it must be dropped (a text over
        its bound is dropped, never cut: a list item or a plugin's value cut would be another one)."""
        if value is None or value.__class__ is bool:
            return True
        if isinstance(value, (list, dict)):
            if len(value) > _MAX_ITEMS:
                self.found(path, f"has {len(value)} items")
                return False
            if isinstance(value, dict):  # a plugin's nested facts: their names are bounded too
                return all([self.plain(item, path, bound) and self.plain(key, f"{path} (a name)", KEY_BOUND)
                            for key, item in value.items()])
            return all([self.plain(item, path, bound) for item in value])  # a list: report every bad item
        if isinstance(value, str):
            if len(value) <= bound.maximum and _CONTROL.search(value) is None:
                return True
            return self.text(value, TextBound(bound.maximum), path) is not None
        why = _scalar_problem("", value)
        if why is not None:
            self.found(path, why)
            return False
        return True


def _contradictions(snapshot: HostSnapshot, now: float, fix: bool) -> list[str]:
    """Facts that contradict each other; with ``fix`` the dependent figure is dropped."""
    problems = []
    cpu, memory, load = snapshot.cpu, snapshot.memory, snapshot.load
    if cpu is not None:
        if cpu.logical_cpus == 0:
            problems.append("cpu.logical_cpus is 0")
            if fix:
                cpu.logical_cpus = None
        if cpu.logical_cpus is not None and cpu.physical_cores is not None and cpu.physical_cores > cpu.logical_cpus:
            problems.append(f"cpu.physical_cores {cpu.physical_cores} > logical_cpus {cpu.logical_cpus}")
            if fix:
                cpu.physical_cores = None
    if memory is not None:
        for total, free in (("ram_mb", "ram_available_mb"), ("swap_mb", "swap_free_mb"),
                            ("virtual_mb", "virtual_available_mb")):
            whole, part = getattr(memory, total), getattr(memory, free)
            if whole is not None and part is not None and part > whole:
                problems.append(f"memory.{free} {part} > {total} {whole}")
                if fix:
                    setattr(memory, free, None)
    if load is not None and None not in (load.runnable_tasks, load.total_tasks) \
            and load.runnable_tasks > load.total_tasks:  # type: ignore[operator]
        problems.append(f"load.runnable_tasks {load.runnable_tasks} > total_tasks {load.total_tasks}")
        if fix:
            load.runnable_tasks = None
    for index, fs in enumerate(snapshot.filesystems or ()):
        if fs.size_mb is not None and fs.available_mb is not None and fs.available_mb > fs.size_mb:
            problems.append(f"filesystems[{index}] ({fs.mount_point[:80]!r}).available_mb {fs.available_mb} "
                            f"> size_mb {fs.size_mb}")
            if fix:
                fs.available_mb = None
    if snapshot.os is not None and snapshot.os.boot_time is not None and snapshot.os.boot_time > now + _CLOCK_SLACK_S:
        problems.append("os.boot_time is in the future")
        if fix:
            snapshot.os.boot_time = None
    return problems


_FACTS = ("cpu", "memory", "load", "network", "filesystems", "accelerators", "os", "static", "extra", "collectors")

# A published Node's parts (glueinfo.sss.node_reader): what can be read from a Node.
_PART_TAGS = frozenset({"Id", "Name", "State", "Opsys", "Arch", "Description", "Feature", "Configured", "Available",
                        "Utilized", "Extension"})
_CATEGORY_TAGS = frozenset({"Configured", "Available", "Utilized"})
_AMOUNT_TAGS = frozenset({"Processors", "Memory", "Disk", "Swap", "Network", "Resource"})
_DECIMAL = re.compile(r"^\s*[+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")
_WALL = re.compile(r"^(?:\d+(?:\.\d+)?|P(?!$)(?:\d+Y)?(?:\d+M)?(?:\d+D)?(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?)$")


def _decimal_problem(text: Any, whole: bool = False) -> Optional[str]:
    """Why ``text`` is not a finite, non-negative decimal number (``whole``: without a fraction)."""
    if not isinstance(text, str) or not _DECIMAL.match(text):
        return f"{str(text)[:40]!r} is not a number"
    value = float(text)
    if not math.isfinite(value) or value > 3.4e38:
        return f"{text.strip()[:40]!r} is not a finite number"
    if whole and value != int(value):
        return f"{text.strip()[:40]!r} is not a whole number"
    return None


def _amount_problem(amount: Any) -> Optional[str]:
    if amount.tag not in _AMOUNT_TAGS:
        return f"{str(amount.tag)[:40]!r} is not an element of the SSS Node spec"
    why = _decimal_problem(amount.text, whole=amount.tag == "Processors")
    if why is None:
        why = _scalar_problem("value", amount.value)
    if why is None and amount.consumption_rate is not None:
        why = _decimal_problem(amount.consumption_rate)
    if why is None and amount.wall_duration is not None and not _WALL.match(str(amount.wall_duration)):
        why = f"wallDuration {str(amount.wall_duration)[:40]!r} is neither seconds nor an ISO 8601 duration"
    return why


def _attributes_fit(obj: Any, where: str, walk: _Walk, skip: str = "") -> bool:
    """Whether every text of a published part or amount but ``skip`` is within its bound; each one
    over it is named in ``walk.long`` (the part or amount is dropped: a cut attribute would be another)."""
    fits = True
    for name, _, bound in _fields(obj.__class__):
        value = getattr(obj, name)
        if name != skip and value.__class__ is str and len(value) > bound.maximum:
            walk.long.append(f"{where}.{name} is {len(value)} characters long (at most {bound.maximum}): {DROPPED}")
            fits = False
    return fits


def _published_problems(snapshot: HostSnapshot, walk: _Walk) -> list[str]:
    """The parts of ``snapshot.published`` no Node could have given (see the module docstring);
    texts over their bound go to ``walk.long`` (cut, or dropped with their part)."""
    published = snapshot.published
    if published is None:
        return []
    fix = walk.fix
    problems: list[str] = []
    if len(published.parts) > _MAX_ITEMS:
        problems.append(f"published.parts has {len(published.parts)} items")
        if fix:
            published.parts = []
    for text, what in ((published.name, "name"), (published.state, "state")):
        if text is not None and walk.text(text, TEXT_BOUNDS[(PublishedNode, what)], f"published.{what}",
                                          controls=False) is None and fix:
            setattr(published, what, None)
    if published.features:
        walk.container(published, "features", published.features, "published.features",
                       TEXT_BOUNDS[(PublishedNode, "features")])
    keep = []
    for index, part in enumerate(published.parts):
        where = f"published.parts[{index}] ({str(part.tag)[:40]})"
        why = None
        if part.tag not in _PART_TAGS:
            why = "is not an element of the SSS Node spec"
        elif part.tag not in _CATEGORY_TAGS and part.amounts:
            why = "holds amounts"
        elif len(part.amounts) > _MAX_ITEMS:
            why = f"has {len(part.amounts)} amounts"
        if why is not None:
            problems.append(f"{where} {why}")
            continue
        if not _attributes_fit(part, where, walk, skip="text"):
            continue
        text = walk.text(part.text, PART_TEXT_BOUNDS.get(part.tag, OTHER_TEXT), f"{where}.text", controls=False)
        if text is None:
            continue
        if fix and text is not part.text:
            part.text = text
        amounts = []
        for number, amount in enumerate(part.amounts):
            at = f"{where}.amounts[{number}] ({str(amount.tag)[:40]})"
            if amount.tag in _AMOUNT_TAGS and not _attributes_fit(amount, at, walk):
                continue
            trouble = _amount_problem(amount)
            if trouble is None:
                amounts.append(amount)
            else:
                problems.append(f"{at} {trouble}")
        if fix and len(amounts) != len(part.amounts):
            part.amounts = amounts
        keep.append(part)
    if fix and len(keep) != len(published.parts):
        published.parts = keep
    return problems


def _problems(snapshot: HostSnapshot, now: float, fix: bool) -> tuple[list[str], list[str]]:
    """(the problems of ``snapshot``'s fields, its texts over their bound); with ``fix`` both are
    removed from it in place."""
    walk = _Walk(fix)
    root = snapshot.host_root
    if root is not None and walk.text(root, TEXT_BOUNDS[(HostSnapshot, "host_root")], "host_root") is None and fix:
        snapshot.host_root = None
    for name in _FACTS:
        value = getattr(snapshot, name)
        if value is None:
            continue
        if isinstance(value, (list, dict)):
            walk.container(snapshot, name, value, name)
        elif _is_model(value.__class__) and not walk.dataclass(value, name + "."):
            walk.found(name, "(the whole item)")
            if fix:
                setattr(snapshot, name, None)
    problems = walk.problems + _contradictions(snapshot, now, fix)
    problems += _published_problems(snapshot, walk)
    return problems, walk.long


def _long_line(hostname: str, long: list[str]) -> str:
    """One line naming every text of a snapshot over its bound (the first few; the rest counted)."""
    shown = "; ".join(long[:_SHOWN_LONG])
    more = len(long) - _SHOWN_LONG
    return f"host {hostname}: {shown}" + (f"; and {more} more texts over their bound" if more > 0 else "")


def _source_problem(snapshot: HostSnapshot) -> Optional[str]:
    source = snapshot.source
    bound = TEXT_BOUNDS[(HostSnapshot, "source")]
    if source.__class__ is not str:
        return f"host {snapshot.hostname}: source {source!r} is not a name"
    if len(source) > bound.maximum:
        return f"host {snapshot.hostname}: source name is {len(source)} characters long (at most {bound.maximum})"
    if _CONTROL.search(source):
        return f"host {snapshot.hostname}: source name {source[:40]!r} holds control characters"
    return None


def validate_snapshot(snapshot: Any, now: float) -> Validated:
    """Check one snapshot by the rules in this module's docstring (never raises)."""
    if not isinstance(snapshot, HostSnapshot):
        return Validated(None, refused=f"not a host snapshot ({type(snapshot).__name__})")
    problem = host_name_problem(snapshot.hostname)
    if problem is not None:
        return Validated(None, refused=problem)
    at = snapshot.collected_at
    if at.__class__ not in (int, float) or not math.isfinite(at) or at < 0 or at > _DEFAULT_LIMIT:
        return Validated(None, refused=f"host {snapshot.hostname}: collection time {at!r} is not a time")
    problem = _source_problem(snapshot)
    if problem is not None:
        return Validated(None, refused=problem)
    problems, long = _problems(snapshot, now, fix=False)
    if not problems and not long:
        return Validated(snapshot)
    cleaned = copy.deepcopy(snapshot)
    problems, long = _problems(cleaned, now, fix=True)
    dropped = [f"host {snapshot.hostname}: {p}: dropped" for p in problems]
    if long:
        dropped.insert(0, _long_line(snapshot.hostname, long))
    return Validated(cleaned, dropped=dropped)
