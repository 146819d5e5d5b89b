"""Figures a Node derives from a host's facts: the processors in use, the counted disk, a description."""

from __future__ import annotations

import math
from typing import Optional

from glueinfo.core.model import FileSystem, HostSnapshot
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_settings import NodeSettings


def processor_use(snapshot: HostSnapshot) -> Optional[tuple[float, float]]:
    """(busy processors, seconds averaged over), or None when unknown.

    The measured CPU utilisation when the snapshot has one, else the 1-minute
    load average (runnable tasks, each wanting a processor).
    """
    cpus = snapshot.cpu.logical_cpus if snapshot.cpu else None
    load = snapshot.load
    if not cpus or cpus <= 0 or load is None:
        return None
    if load.cpu_utilisation_percent is not None and load.utilisation_interval_s:
        if math.isfinite(load.cpu_utilisation_percent) and load.cpu_utilisation_percent >= 0:
            return load.cpu_utilisation_percent / 100.0 * cpus, float(load.utilisation_interval_s)
    if load.load1 is not None and math.isfinite(load.load1) and load.load1 >= 0:
        return float(load.load1), 60.0
    return None


def counted_filesystems(snapshot: HostSnapshot, settings: NodeSettings) -> list[FileSystem]:
    """Filesystems whose space counts as the node's Disk: local, writable, real, each device once."""
    chosen: list[FileSystem] = []
    devices: set[str] = set()
    for fs in snapshot.filesystems or ():
        if settings.disk_mounts:
            if fs.mount_point not in settings.disk_mounts:
                continue
        elif fs.remote or fs.read_only or fs.fs_type in sss_node.PSEUDO_FILESYSTEMS:
            continue
        if fs.device and fs.device.startswith("/"):
            if fs.device in devices:  # the same device mounted twice (bind mounts)
                continue
            devices.add(fs.device)
        chosen.append(fs)
    return chosen


def disk_figures(snapshot: HostSnapshot, settings: NodeSettings) -> tuple[Optional[int], Optional[int]]:
    """(size, available) in MB over the counted filesystems; None where any one is unknown."""
    chosen = counted_filesystems(snapshot, settings)
    if not chosen:
        return None, None
    sizes = [fs.size_mb for fs in chosen if fs.size_mb is not None]
    available = [fs.available_mb for fs in chosen if fs.available_mb is not None]
    return (sum(sizes) if len(sizes) == len(chosen) else None,
            sum(available) if len(available) == len(chosen) else None)


def describe(snapshot: HostSnapshot) -> Optional[str]:
    """A one-line description from known facts only."""
    parts = []
    os = snapshot.os
    if os and (os.pretty_name or os.name):
        parts.append(os.pretty_name or " ".join(p for p in (os.name, os.release) if p))
    cpu = snapshot.cpu
    if cpu and cpu.model_name:
        parts.append(f"{cpu.sockets} x {cpu.model_name}" if cpu.sockets else cpu.model_name)
    if cpu and cpu.logical_cpus:
        parts.append(f"{cpu.logical_cpus} logical CPUs")
    return "; ".join(parts) or None
