"""node_exporter metric families -> one host snapshot: the mapping the ``prometheus`` and
``node_exporter`` sources share.

A source feeds a :class:`NodeFacts` the samples of one target, one at a time
(:meth:`NodeFacts.add`: family name, labels, value) and asks it for the
snapshot (:meth:`NodeFacts.snapshot`).  The ``node_exporter`` source feeds it
every sample of a ``/metrics`` page; the ``prometheus`` source feeds it the
series of its instant queries, with the per-CPU families counted on the server
(:meth:`NodeFacts.set_counts`), so 10,000 hosts of 64 threads never travel as
640,000 series.

Mapping (docs/admin-guide.md, "Prometheus and node_exporter"):

- CPUs: one ``node_cpu_seconds_total{mode="idle"}`` series per logical CPU;
  ``node_cpu_info`` (the cpu collector's ``--collector.cpu.info``): distinct
  ``package`` labels are sockets, distinct (package, core) pairs cores, the
  most common ``model_name``/``vendor`` the model and vendor; the architecture
  is ``node_uname_info``'s machine.
- Memory: ``node_memory_{MemTotal,MemAvailable,SwapTotal,SwapFree}_bytes`` in
  MB rounded down, as the memory collector does; virtual = RAM + swap.
- Load: ``node_load1/5/15``; running tasks ``node_procs_running``.
- Filesystems: ``node_filesystem_{size,avail}_bytes``, ``readonly`` and
  ``device_error`` by (device, fstype, mountpoint); pseudo types left out and
  remote types marked with their server exactly as glueinfo.host.collectors.filesystems
  does; a mount whose statfs failed (``device_error`` 1) is listed without sizes.
- Network: ``node_network_info`` (MAC, operstate), ``mtu_bytes``,
  ``speed_bytes`` (-> Mb/s; 0 is unknown), ``flags`` (up = IFF_UP and operstate
  up or unknown, loopback = IFF_LOOPBACK, as glueinfo.host.linux reads them),
  ``up`` only when flags are missing.
- OS: ``node_os_info`` (name, version_id, codename, pretty name), kernel
  release, version and machine from ``node_uname_info``, boot time from
  ``node_boot_time_seconds``.

What node_exporter does not tell stays None, never guessed: caches, clock,
CPU version and features, addresses and the primary adapter, total tasks,
CPU utilisation, and every fact of a family the target did not export.
A value that is not a finite number is ignored (it never reaches the model).
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Optional

from glueinfo.core.model import CpuInfo, FileSystem, HostSnapshot, LoadInfo, MemoryInfo, NetworkAdapter, OsInfo
from glueinfo.host.collectors.filesystems import is_pseudo, is_remote, remote_server
from glueinfo.host.linux import Mount

MB = 1 << 20
IFF_UP = 0x1
IFF_LOOPBACK = 0x8

# The node_exporter collectors whose families the mapping reads (node_exporter's collect[] names).
COLLECTORS = ("cpu", "meminfo", "loadavg", "stat", "filesystem", "netclass", "os", "uname")

MEMORY = {"node_memory_MemTotal_bytes": "total", "node_memory_MemAvailable_bytes": "available",
          "node_memory_SwapTotal_bytes": "swap_total", "node_memory_SwapFree_bytes": "swap_free"}
LOAD = {"node_load1": "load1", "node_load5": "load5", "node_load15": "load15", "node_procs_running": "running",
        "node_boot_time_seconds": "boot_time"}
FILESYSTEM = {"node_filesystem_size_bytes": "size", "node_filesystem_avail_bytes": "avail",
              "node_filesystem_readonly": "readonly", "node_filesystem_device_error": "error"}
NETWORK = {"node_network_mtu_bytes": "mtu", "node_network_speed_bytes": "speed", "node_network_up": "up",
           "node_network_flags": "flags"}
LABELLED = ("node_cpu_seconds_total", "node_cpu_info", "node_network_info", "node_os_info", "node_uname_info")

# Every family the mapping reads (a /metrics page's other families are skipped unparsed where possible).
FAMILIES = frozenset((*MEMORY, *LOAD, *FILESYSTEM, *NETWORK, *LABELLED))

_CODENAME = re.compile(r"\(([^)]+)\)")


def _finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


@dataclass(slots=True)
class NodeFacts:
    """What one target's node_exporter series say, before they become a snapshot.

    Sets and counts are plain dicts of strings (a set of keys; name -> count): a source holds
    10,000 of these at once, and such dicts, unlike sets and Counters, are no work for the
    cyclic garbage collector."""

    idle_cpus: int = 0  # node_cpu_seconds_total{mode="idle"} series seen
    counted_cpus: Optional[int] = None  # the count a Prometheus query gave instead
    cores: Optional[int] = None
    sockets: Optional[int] = None
    packages: dict[str, None] = field(default_factory=dict)
    core_pairs: dict[tuple[str, str], None] = field(default_factory=dict)
    models: dict[str, int] = field(default_factory=dict)
    vendors: dict[str, int] = field(default_factory=dict)
    scalars: dict[str, float] = field(default_factory=dict)  # MEMORY and LOAD values, by their short name
    filesystems: dict[tuple[str, str, str], dict[str, float]] = field(default_factory=dict)
    networks: dict[str, dict[str, float]] = field(default_factory=dict)
    network_info: dict[str, Mapping[str, str]] = field(default_factory=dict)
    os_labels: Optional[Mapping[str, str]] = None
    uname_labels: Optional[Mapping[str, str]] = None

    def add(self, name: str, labels: Mapping[str, str], value: float) -> None:
        """One sample of family ``name``; families the mapping does not read are ignored."""
        put = _SINKS.get(name)
        if put is not None and _finite(value):
            put(self, labels, float(value))

    def _add_idle(self, labels: Mapping[str, str], value: float) -> None:
        if labels.get("mode") == "idle":
            self.idle_cpus += 1

    def _add_cpu_info(self, labels: Mapping[str, str], value: float) -> None:
        weight = max(1, int(value))  # a Prometheus count of CPUs with these labels, else one CPU
        package = labels.get("package")
        if package:
            self.packages[package] = None
            core = labels.get("core")
            if core:
                self.core_pairs[(package, core)] = None
        model, vendor = labels.get("model_name"), labels.get("vendor")
        if model:
            self.models[model] = self.models.get(model, 0) + weight
        if vendor:
            self.vendors[vendor] = self.vendors.get(vendor, 0) + weight

    def _add_network_info(self, labels: Mapping[str, str], value: float) -> None:
        if labels.get("device"):
            self.network_info[labels["device"]] = labels

    def _add_os(self, labels: Mapping[str, str], value: float) -> None:
        self.os_labels = labels

    def _add_uname(self, labels: Mapping[str, str], value: float) -> None:
        self.uname_labels = labels

    @staticmethod
    def sink(name: str) -> Optional[Callable[[NodeFacts, Mapping[str, str], float], None]]:
        """What :meth:`add` does with a sample of family ``name``, as ``put(facts, labels, value)``
        taking a finite float (the caller checks); None for a family the mapping does not read.
        For a source feeding many samples of one family: the family is looked up once."""
        return _SINKS.get(name)

    def set_counts(self, cpus: Optional[float] = None, cores: Optional[float] = None,
                   sockets: Optional[float] = None) -> None:
        """Counts a Prometheus server made (``count by``) instead of the per-CPU series."""
        if cpus is not None and _finite(cpus):
            self.counted_cpus = int(cpus)
        if cores is not None and _finite(cores):
            self.cores = int(cores)
        if sockets is not None and _finite(sockets):
            self.sockets = int(sockets)

    @property
    def nodename(self) -> Optional[str]:
        """``node_uname_info``'s nodename: the kernel's host name where node_exporter runs."""
        name = (self.uname_labels or {}).get("nodename")
        return name or None

    @property
    def empty(self) -> bool:
        """No family the mapping reads was seen."""
        return not (self.idle_cpus or self.counted_cpus or self.models or self.scalars or self.filesystems
                    or self.networks or self.network_info or self.os_labels or self.uname_labels)

    # -- the snapshot ---------------------------------------------------------------

    def snapshot(self, hostname: str, collected_at: float) -> HostSnapshot:
        """The host's snapshot; a part none of whose families was seen stays None."""
        return HostSnapshot(hostname=hostname, collected_at=collected_at, cpu=self._cpu(), memory=self._memory(),
                            load=self._load(), network=self._network(), filesystems=self._filesystems(), os=self._os())

    def _mb(self, name: str) -> Optional[int]:
        value = self.scalars.get(name)
        return None if value is None or value < 0 else int(value) // MB

    def _cpu(self) -> Optional[CpuInfo]:
        logical = self.counted_cpus if self.counted_cpus is not None else (self.idle_cpus or None)
        cores = self.cores if self.cores is not None else (len(self.core_pairs) or None)
        sockets = self.sockets if self.sockets is not None else (len(self.packages) or None)
        model = _most_common(self.models)
        vendor = _most_common(self.vendors)
        machine = (self.uname_labels or {}).get("machine") or None
        if logical is None and cores is None and sockets is None and model is None and vendor is None:
            return None
        return CpuInfo(logical_cpus=logical or None, physical_cores=cores or None, sockets=sockets or None,
                       vendor=vendor, model_name=model, instruction_set=machine)

    def _memory(self) -> Optional[MemoryInfo]:
        if not any(name in self.scalars for name in MEMORY.values()):
            return None
        ram, available, swap, swap_free = self._mb("total"), self._mb("available"), self._mb("swap_total"), self._mb("swap_free")
        return MemoryInfo(ram_mb=ram, ram_available_mb=available, swap_mb=swap, swap_free_mb=swap_free,
                          virtual_mb=None if ram is None or swap is None else ram + swap,
                          virtual_available_mb=None if available is None or swap_free is None else available + swap_free)

    def _load(self) -> Optional[LoadInfo]:
        values = self.scalars
        if not any(name in values for name in ("load1", "load5", "load15", "running")):
            return None
        running = values.get("running")
        return LoadInfo(load1=values.get("load1"), load5=values.get("load5"), load15=values.get("load15"),
                        runnable_tasks=int(running) if running is not None and running >= 0 else None)

    def _network(self) -> Optional[list[NetworkAdapter]]:
        devices = sorted(set(self.networks) | set(self.network_info))
        if not devices:
            return None
        adapters = []
        for device in devices:
            values = self.networks.get(device, {})
            info = self.network_info.get(device, {})
            operstate = info.get("operstate")
            flags = values.get("flags")
            if flags is not None:
                is_up: Optional[bool] = bool(int(flags) & IFF_UP) and operstate in ("up", "unknown", None)
                loopback = bool(int(flags) & IFF_LOOPBACK)
            else:
                is_up = None if "up" not in values else values["up"] == 1
                loopback = device == "lo"
            mtu = values.get("mtu")
            speed = values.get("speed")
            speed_mbps = int(round(speed * 8 / 1e6)) if speed is not None and speed > 0 else None
            adapters.append(NetworkAdapter(name=device, mtu=int(mtu) if mtu is not None and mtu > 0 else None, is_up=is_up,
                                           speed_mbps=speed_mbps or None, mac=info.get("address") or None,
                                           is_loopback=loopback))
        return adapters

    def _filesystems(self) -> Optional[list[FileSystem]]:
        if not self.filesystems:
            return None
        # A mount point listed twice (mounted over): the one node_exporter could statfs is the one seen.
        visible: dict[str, tuple[Mount, dict[str, float]]] = {}
        for (device, fs_type, mount_point), values in sorted(self.filesystems.items()):
            mount = Mount(device, mount_point, fs_type, ())
            if is_pseudo(mount):
                continue
            kept = visible.get(mount_point)
            if kept is None or ("size" in values and "size" not in kept[1]):
                visible[mount_point] = (mount, values)
        found = []
        for mount_point in sorted(visible):
            mount, values = visible[mount_point]
            remote = is_remote(mount)
            size, avail = values.get("size"), values.get("avail")
            found.append(FileSystem(mount_point=mount_point, device=mount.device, fs_type=mount.fs_type,
                                    read_only=values.get("readonly") == 1, remote=remote,
                                    server=remote_server(mount.device, mount.fs_type) if remote else None,
                                    size_mb=int(size) // MB if size is not None and size >= 0 else None,
                                    available_mb=int(avail) // MB if avail is not None and avail >= 0 else None))
        return found

    def _os(self) -> Optional[OsInfo]:
        labels, uname = self.os_labels, self.uname_labels
        boot = self.scalars.get("boot_time")
        if labels is None and uname is None and boot is None:
            return None
        labels = labels or {}
        uname = uname or {}
        codename = labels.get("version_codename")
        if not codename:  # RHEL and friends: VERSION="9.2 (Plow)", as the os collector reads it
            match = _CODENAME.search(labels.get("version", ""))
            codename = match.group(1).strip() if match else None
        return OsInfo(name=labels.get("name") or None, release=labels.get("version_id") or None, version=codename or None,
                      pretty_name=labels.get("pretty_name") or None, kernel_release=uname.get("release") or None,
                      kernel_version=uname.get("version") or None, platform_type=uname.get("machine") or None,
                      boot_time=boot if boot is not None and boot > 0 else None)


def _scalar(short: str) -> Callable[[NodeFacts, Mapping[str, str], float], None]:
    def put(facts: NodeFacts, labels: Mapping[str, str], value: float) -> None:
        facts.scalars[short] = value
    return put


def _filesystem(short: str) -> Callable[[NodeFacts, Mapping[str, str], float], None]:
    def put(facts: NodeFacts, labels: Mapping[str, str], value: float) -> None:
        key = (labels.get("device", ""), labels.get("fstype", ""), labels.get("mountpoint", ""))
        if key[2]:
            values = facts.filesystems.get(key)
            if values is None:
                values = facts.filesystems[key] = {}
            values[short] = value
    return put


def _network(short: str) -> Callable[[NodeFacts, Mapping[str, str], float], None]:
    def put(facts: NodeFacts, labels: Mapping[str, str], value: float) -> None:
        device = labels.get("device")
        if device:
            values = facts.networks.get(device)
            if values is None:
                values = facts.networks[device] = {}
            values[short] = value
    return put


# Family -> what one sample of it does to a NodeFacts (NodeFacts.add; built once, never changed).
_SINKS: Mapping[str, Callable[[NodeFacts, Mapping[str, str], float], None]] = types.MappingProxyType({
    **{name: _scalar(short) for name, short in (*MEMORY.items(), *LOAD.items())},
    **{name: _filesystem(short) for name, short in FILESYSTEM.items()},
    **{name: _network(short) for name, short in NETWORK.items()},
    "node_cpu_seconds_total": NodeFacts._add_idle,
    "node_cpu_info": NodeFacts._add_cpu_info,
    "node_network_info": NodeFacts._add_network_info,
    "node_os_info": NodeFacts._add_os,
    "node_uname_info": NodeFacts._add_uname,
})


def _most_common(counts: Mapping[str, int]) -> Optional[str]:
    if len(counts) == 1:  # every CPU alike: the usual case
        return next(iter(counts))
    if not counts:
        return None
    best = max(counts.values())
    return min(name for name, count in counts.items() if count == best)


def instance_host(instance: str) -> str:
    """``instance`` without its port: ``host:9100`` -> ``host``, ``[v6]:9100`` -> ``v6``."""
    if instance.startswith("[") and "]" in instance:
        return instance[1:instance.index("]")]
    if instance.count(":") == 1:
        return instance.split(":", 1)[0]
    return instance
