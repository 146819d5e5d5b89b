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
  a CPU model) or longer than 64 KiB, a list longer than 10,000 items, and
  facts that contradict each other (more memory or disk available than
  there is, more cores than hardware threads, a boot time in the future:
  the dependent figure is dropped).  An item of a list (an adapter, a file
  system) whose own name is bad is dropped whole.
- A Node published by other software keeps its parts as given
  (``snapshot.published``): a part or figure of it that could not have been
  read from a Node is dropped, with one line: an element the SSS Node spec
  does not define, a figure that is not a finite, non-negative decimal
  number (a whole one for Processors), a consumptionRate that is not one, a
  wallDuration that is neither seconds nor an ISO 8601 duration, a text
  longer than 64 KiB, more than 10,000 parts.  Its texts may hold line
  breaks (a Description): the Node XML writer makes any text safe.
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
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.model import HostSnapshot

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
_MAX_TEXT = 65536
_MAX_ITEMS = 10_000
_CLOCK_SLACK_S = 300.0  # boot times this far in the future are a wrong clock, not a report
# C0 and C1 controls, DEL, lone surrogates and the two non-characters XML 1.0 refuses.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_LABEL = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
_DNS_NAME = re.compile(r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?")


@dataclass
class Validated:
    """The outcome for one snapshot: the snapshot to keep (None: refused), why it was
    refused, and one line per field dropped (``host: field: why``)."""

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
    kind = value.__class__
    if kind is int or kind is float:
        if kind is float and not math.isfinite(value):
            return f"is {value}"
        if value < 0:
            return f"is negative ({value})"
        if value > _LIMITS.get(name, _DEFAULT_LIMIT):
            return f"= {value:.6g} is beyond belief"
    elif kind is str:
        if len(value) > _MAX_TEXT:
            return f"is {len(value)} characters long"
        if _CONTROL.search(value):
            return "holds control characters"
    return None


@functools.cache
def _fields(kind: type) -> tuple[tuple[str, bool], ...]:
    """A model class's fields as (name, may be unknown): the walk asks for them 20,000 times a cycle at 10,000 hosts."""
    return tuple((f.name, f.default is None) for f in dataclasses.fields(kind))


@functools.cache
def _is_model(kind: type) -> bool:
    return dataclasses.is_dataclass(kind)


class _Walk:
    """One pass over a snapshot's facts: finds problems, and with ``fix`` removes them in place."""

    def __init__(self, fix: bool) -> None:
        self.fix = fix
        self.problems: list[str] = []

    def found(self, path: str, why: str) -> None:
        self.problems.append(f"{path} {why}")

    def dataclass(self, obj: Any, path: str) -> bool:
        """Check a model dataclass; False when a field that cannot be unknown is bad (drop the whole item)."""
        keep = True
        for name, optional in _fields(obj.__class__):
            value = getattr(obj, name)
            if value is None or value.__class__ is bool:
                continue
            kind = value.__class__
            if kind is int or kind is float or kind is str:  # most facts: no path built unless bad
                why = _scalar_problem(name, value)
                if why is None:
                    continue
                self.found(f"{path}{name}", why)
                if optional:
                    if self.fix:
                        setattr(obj, name, None)
                else:  # a name or a flag the item cannot be without
                    keep = False
                continue
            where = f"{path}{name}"
            if isinstance(value, (list, dict)):
                self.container(obj, name, value, where)
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

    def container(self, owner: Any, name: str, value: Any, path: str) -> None:
        if len(value) > _MAX_ITEMS:
            self.found(path, f"has {len(value)} items")
            if self.fix:
                setattr(owner, name, value.__class__())
            return
        if isinstance(value, dict):
            bad = [key for key, item in value.items() if not self.plain(item, f"{path}[{str(key)[:40]!r}]")
                   or _scalar_problem("", key) is not None]
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
                ok = self.plain(item, where)
            if ok:
                keep.append(item)
        if self.fix and len(keep) != len(value):
            value[:] = keep

    def plain(self, value: Any, path: str) -> bool:
        """A plain value (plugin facts, feature names): False when it must be dropped."""
        if value is None or value.__class__ is bool:
            return True
        if isinstance(value, (list, dict)):
            if len(value) > _MAX_ITEMS:
                self.found(path, f"has {len(value)} items")
                return False
            items = value.values() if isinstance(value, dict) else value
            return all([self.plain(item, path) for item in items])  # a list: report every bad item
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


_FACTS = ("cpu", "memory", "load", "network", "filesystems", "os", "static", "extra", "collectors")

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
    if why is None:
        texts = (amount.units, amount.metric, amount.wall_duration, amount.consumption_rate, amount.name, amount.type)
        if any(text is not None and len(text) > _MAX_TEXT for text in texts):
            why = "has an attribute longer than 64 KiB"
    return why


def _published_problems(snapshot: HostSnapshot, fix: bool) -> list[str]:
    """The parts of ``snapshot.published`` no Node could have given (see the module docstring)."""
    published = snapshot.published
    if published is None:
        return []
    problems: list[str] = []
    if len(published.parts) > _MAX_ITEMS:
        problems.append(f"published.parts has {len(published.parts)} items")
        if fix:
            published.parts = []
    for text, what in ((published.name, "name"), (published.state, "state")):
        if text is not None and len(text) > _MAX_TEXT:
            problems.append(f"published.{what} is {len(text)} characters long")
            if fix:
                setattr(published, what, None)
    keep = []
    for index, part in enumerate(published.parts):
        where = f"published.parts[{index}] ({str(part.tag)[:40]})"
        why = None
        if part.tag not in _PART_TAGS:
            why = "is not an element of the SSS Node spec"
        elif len(part.text) > _MAX_TEXT:
            why = f"has a text of {len(part.text)} characters"
        elif part.tag not in _CATEGORY_TAGS and part.amounts:
            why = "holds amounts"
        elif len(part.amounts) > _MAX_ITEMS:
            why = f"has {len(part.amounts)} amounts"
        if why is not None:
            problems.append(f"{where} {why}")
            continue
        amounts = []
        for number, amount in enumerate(part.amounts):
            trouble = _amount_problem(amount)
            if trouble is None:
                amounts.append(amount)
            else:
                problems.append(f"{where}.amounts[{number}] ({str(amount.tag)[:40]}) {trouble}")
        if fix and len(amounts) != len(part.amounts):
            part.amounts = amounts
        keep.append(part)
    if fix and len(keep) != len(published.parts):
        published.parts = keep
    return problems


def _problems(snapshot: HostSnapshot, now: float, fix: bool) -> list[str]:
    walk = _Walk(fix)
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
    return walk.problems + _contradictions(snapshot, now, fix) + _published_problems(snapshot, fix)


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
    if not _problems(snapshot, now, fix=False):
        return Validated(snapshot)
    cleaned = copy.deepcopy(snapshot)
    dropped = [f"host {snapshot.hostname}: {p}: dropped" for p in _problems(cleaned, now, fix=True)]
    return Validated(cleaned, dropped=dropped)
