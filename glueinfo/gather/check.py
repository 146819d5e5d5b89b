"""Whether a host snapshot can be believed: the sanity check every snapshot passes before it is kept.

A snapshot from any source (an agent, the spool, Ganglia, a state file, this
host's own probe) is refused, with one line saying why, when its host name
is not a host name, a number is negative, NaN, infinite or beyond belief
(1e9 CPUs), a text or list is absurdly long, or facts contradict each other
(more available than total).  Refusing never raises.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Optional

from glueinfo.core.model import HostSnapshot

_HOSTNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,252}$|^[0-9A-Fa-f:.]{2,45}$")

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
    "si00": 1e9, "sf00": 1e9,
}
_MAX_TEXT = 65536
_MAX_ITEMS = 10_000
_CLOCK_SLACK_S = 300.0  # boot times this far in the future are a wrong clock, not a report


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _walk(obj: Any, path: str, problems: list[str]) -> None:
    """Check every number, text and list of a model dataclass, recursively (kept lean: it runs for every host)."""
    for name in _field_names(type(obj)):
        value = getattr(obj, name)
        kind = value.__class__
        if value is None or kind is bool:
            continue
        if kind is int or kind is float:
            if kind is float and not math.isfinite(value):
                problems.append(f"{path}{name} is {value}")
            elif value < 0:
                problems.append(f"{path}{name} is negative ({value})")
            elif value > _LIMITS.get(name, math.inf):
                problems.append(f"{path}{name} = {value} is beyond belief")
        elif kind is str:
            if len(value) > _MAX_TEXT:
                problems.append(f"{path}{name} is {len(value)} characters long")
        elif kind is list or kind is dict:
            if len(value) > _MAX_ITEMS:
                problems.append(f"{path}{name} has {len(value)} items")
            elif kind is list:
                for index, item in enumerate(value):
                    if item.__class__ is str:
                        if len(item) > _MAX_TEXT:
                            problems.append(f"{path}{name}[{index}] is {len(item)} characters long")
                    elif dataclasses.is_dataclass(item):
                        _walk(item, f"{path}{name}[{index}].", problems)
        elif dataclasses.is_dataclass(value):
            _walk(value, f"{path}{name}.", problems)
        if len(problems) >= 3:
            return


def check_snapshot(snapshot: HostSnapshot, now: float) -> Optional[str]:
    """Why this snapshot cannot be believed (one line), or None when it can."""
    if not snapshot.hostname or not _HOSTNAME.match(snapshot.hostname):
        return f"host name {snapshot.hostname[:80]!r} is not a host name"
    problems: list[str] = []
    _walk(snapshot, "", problems)
    if not problems:
        cpu, memory = snapshot.cpu, snapshot.memory
        if cpu and cpu.logical_cpus is not None and cpu.logical_cpus == 0:
            problems.append("cpu.logical_cpus is 0")
        if cpu and None not in (cpu.logical_cpus, cpu.physical_cores) and cpu.physical_cores > cpu.logical_cpus:  # type: ignore[operator]
            problems.append(f"cpu.physical_cores {cpu.physical_cores} > logical_cpus {cpu.logical_cpus}")
        if memory and None not in (memory.ram_mb, memory.ram_available_mb) and memory.ram_available_mb > memory.ram_mb:  # type: ignore[operator]
            problems.append(f"memory.ram_available_mb {memory.ram_available_mb} > ram_mb {memory.ram_mb}")
        if memory and None not in (memory.swap_mb, memory.swap_free_mb) and memory.swap_free_mb > memory.swap_mb:  # type: ignore[operator]
            problems.append(f"memory.swap_free_mb {memory.swap_free_mb} > swap_mb {memory.swap_mb}")
        for fs in snapshot.filesystems or ():
            if None not in (fs.size_mb, fs.available_mb) and fs.available_mb > fs.size_mb:  # type: ignore[operator]
                problems.append(f"filesystem {fs.mount_point[:80]!r} has more available ({fs.available_mb}) than size ({fs.size_mb})")
                break
        if snapshot.os and snapshot.os.boot_time and snapshot.os.boot_time > now + _CLOCK_SLACK_S:
            problems.append("os.boot_time is in the future")
    if not math.isfinite(snapshot.collected_at) or snapshot.collected_at < 0:
        problems.append(f"collected_at is {snapshot.collected_at}")
    return "; ".join(problems[:3]) if problems else None
