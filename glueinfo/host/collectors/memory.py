"""memory: RAM and swap, size and what is left, in MB (2**20 bytes, rounded down)."""

from __future__ import annotations

from typing import Optional

from glueinfo.core.model import MemoryInfo
from glueinfo.host.collect import CollectContext, Collector
from glueinfo.host.linux import LinuxHost

MB = 1 << 20


def _mb(value: Optional[int]) -> Optional[int]:
    return None if value is None else value // MB


def _sum(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return None if a is None or b is None else a + b


def collect(ctx: CollectContext) -> MemoryInfo:
    mem = LinuxHost(ctx.host_root).memory()
    ram, available, swap, swap_free = _mb(mem.total), _mb(mem.available), _mb(mem.swap_total), _mb(mem.swap_free)
    return MemoryInfo(ram_mb=ram, ram_available_mb=available, swap_mb=swap, swap_free_mb=swap_free,
                      virtual_mb=_sum(ram, swap), virtual_available_mb=_sum(available, swap_free))


COLLECTOR = Collector(name="memory", collect=collect, default_enabled=True, field="memory",
                      description="RAM and swap size and free space (MB), virtual = RAM + swap")
