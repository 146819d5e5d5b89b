"""The SSS Node object's vocabulary as glueinfo uses it (no I/O, no XML).

Shared by the renderer (node_xml.py) and the reader (node_reader.py) so the
two agree, field for field, on where each HostSnapshot fact lives in a
``<Node>``.  Each fact has exactly one home:

- its own element where the SSS Node spec has one (Id, Opsys, Arch, Feature,
  Configured/Processors, Configured/Memory, Available/Memory, ...);
- otherwise an ``<Extension name=".." type="..">`` listed in ``EXTENSIONS``;
- structured records (network adapters, filesystems, third-party collector
  facts) as one Extension each whose text is compact JSON.

Derived figures (State, Name, Description, Available/Utilized Processors,
Utilized Memory, Disk, Network) are computed from those facts and are not
read back from a Node glueinfo wrote.  A Node other software wrote keeps them
as given (``HostSnapshot.published``, docs/sss-node-reader.md).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Optional

from glueinfo.core.model import Accelerator
from glueinfo.core.records import dataclass
from glueinfo.sss.node_resources import RESOURCES_EXTRA as RESOURCES_EXTRA  # given here with the rest of the vocabulary

NODE_STATES = ("Idle", "Busy", "Offline", "Unknown", "Configured")
CATEGORIES = ("Configured", "Available", "Utilized")
CONSUMABLES = ("Processors", "Memory", "Disk", "Swap", "Network")

# Units written on consumables and assumed when a peer's document leaves them out.
DEFAULT_UNITS = {"Memory": "MB", "Swap": "MB", "Disk": "MB", "Network": "Mbps"}

# Extension types for the structured and repeated facts.
TYPE_NETWORK_ADAPTER = "NetworkAdapter"
TYPE_FILESYSTEM = "FileSystem"
TYPE_COLLECTOR = "Collector"
TYPE_EXTRA = "Extra"  # a third-party collector's facts (snapshot.extra[name])
TYPE_SITE = "Site"  # the admin's [extensions] config section
TYPE_ACCELERATOR = "Accelerator"
# The host's accelerators: one Extension whose text is the JSON list of its kinds ("[]": known to
# have none; no Extension: not known), besides the Configured Resource each kind makes (below).
ACCELERATORS = ("Accelerators", TYPE_ACCELERATOR)
RUNTIME_ENVIRONMENT = ("RunTimeEnvironment", "Static")
# The Extension types glueinfo writes besides those of EXTENSIONS: an Extension of another type, or of
# none, is another program's.
GLUEINFO_TYPES = frozenset({TYPE_NETWORK_ADAPTER, TYPE_FILESYSTEM, TYPE_COLLECTOR, TYPE_EXTRA, TYPE_SITE, TYPE_ACCELERATOR})

# The node reference's aggregation words (spec 4.4), and its attributes.
AGGREGATIONS = ("List", "Pattern", "Range")
REFERENCE_ATTRIBUTES = ("aggregation", "delimiter", "count")

# snapshot.extra key under which Resource elements (extensible consumables) are kept: RESOURCES_EXTRA,
# imported above from glueinfo.sss.node_resources, where it is defined.


@dataclass(frozen=True)
class ExtensionField:
    """One Node XML Extension and the snapshot field it carries."""

    name: str  # Extension name attribute
    type: str  # Extension type attribute: which part of the host it describes
    section: str  # HostSnapshot attribute ("snapshot" for the snapshot itself)
    attribute: str  # field of that section
    kind: str  # int, float, str, bool, time (ISO 8601 UTC), words (space-separated list)
    doc: str = ""


EXTENSIONS: tuple[ExtensionField, ...] = (
    ExtensionField("CpuVendor", "Cpu", "cpu", "vendor", "str", "CPU vendor as the kernel reports it"),
    ExtensionField("CpuModel", "Cpu", "cpu", "model_name", "str", "CPU model name"),
    ExtensionField("CpuVersion", "Cpu", "cpu", "version", "str", "family/model/stepping"),
    ExtensionField("ClockSpeed", "Cpu", "cpu", "clock_mhz", "int", "nominal clock speed, MHz"),
    ExtensionField("InstructionSet", "Cpu", "cpu", "instruction_set", "str", "e.g. x86_64"),
    ExtensionField("CpuFlags", "Cpu", "cpu", "features", "words", "notable CPU flags, space-separated"),
    ExtensionField("PhysicalCores", "Cpu", "cpu", "physical_cores", "int", "physical cores"),
    ExtensionField("Sockets", "Cpu", "cpu", "sockets", "int", "CPU sockets"),
    ExtensionField("CacheL1", "Cpu", "cpu", "cache_l1_kb", "int", "unified L1 cache, KB"),
    ExtensionField("CacheL1i", "Cpu", "cpu", "cache_l1i_kb", "int", "L1 instruction cache, KB"),
    ExtensionField("CacheL1d", "Cpu", "cpu", "cache_l1d_kb", "int", "L1 data cache, KB"),
    ExtensionField("CacheL2", "Cpu", "cpu", "cache_l2_kb", "int", "L2 cache, KB"),
    ExtensionField("CacheL3", "Cpu", "cpu", "cache_l3_kb", "int", "L3 cache, KB"),
    ExtensionField("VirtualMemory", "Memory", "memory", "virtual_mb", "int", "RAM + swap, MB"),
    ExtensionField("VirtualMemoryAvailable", "Memory", "memory", "virtual_available_mb", "int", "available RAM + free swap, MB"),
    ExtensionField("LoadAverage1", "Load", "load", "load1", "float", "1-minute load average"),
    ExtensionField("LoadAverage5", "Load", "load", "load5", "float", "5-minute load average"),
    ExtensionField("LoadAverage15", "Load", "load", "load15", "float", "15-minute load average"),
    ExtensionField("RunnableTasks", "Load", "load", "runnable_tasks", "int", "tasks running now"),
    ExtensionField("TotalTasks", "Load", "load", "total_tasks", "int", "tasks in the system"),
    ExtensionField("CpuUtilisation", "Load", "load", "cpu_utilisation_percent", "float", "CPU busy percent over CpuUtilisationInterval"),
    ExtensionField("CpuUtilisationInterval", "Load", "load", "utilisation_interval_s", "float", "seconds CpuUtilisation was measured over"),
    ExtensionField("OsRelease", "Os", "os", "release", "str", "os-release VERSION_ID"),
    ExtensionField("OsVersion", "Os", "os", "version", "str", "os-release VERSION_CODENAME"),
    ExtensionField("OsPrettyName", "Os", "os", "pretty_name", "str", "os-release PRETTY_NAME"),
    ExtensionField("Kernel", "Os", "os", "kernel_release", "str", "uname -r"),
    ExtensionField("KernelVersion", "Os", "os", "kernel_version", "str", "uname -v"),
    ExtensionField("BootTime", "Os", "os", "boot_time", "time", "when the host booted"),
    ExtensionField("SpecInt2000", "Static", "static", "si00", "int", "SpecInt2000 benchmark (config)"),
    ExtensionField("SpecFloat2000", "Static", "static", "sf00", "int", "SpecFloat2000 benchmark (config)"),
    ExtensionField("InboundIP", "Static", "static", "inbound_ip", "bool", "accepts inbound connections (config)"),
    ExtensionField("OutboundIP", "Static", "static", "outbound_ip", "bool", "may open outbound connections (config)"),
    ExtensionField("CollectedAt", "Glueinfo", "snapshot", "collected_at", "time", "when collection started"),
    ExtensionField("Source", "Glueinfo", "snapshot", "source", "str", "local, agent, spool, ..."),
    ExtensionField("HostRoot", "Glueinfo", "snapshot", "host_root", "str", "recorded host tree the facts were read from"),
)

# Keyed by (name, type); an Extension without a type attribute finds nothing.
EXTENSIONS_BY_KEY: dict[tuple[str, Optional[str]], ExtensionField] = {(f.name, f.type): f for f in EXTENSIONS}

# Filesystem types never counted in the Disk figures: memory-backed or read-only images.
PSEUDO_FILESYSTEMS = frozenset({
    "tmpfs", "devtmpfs", "ramfs", "squashfs", "overlay", "proc", "sysfs", "cgroup", "cgroup2", "devpts",
    "securityfs", "debugfs", "tracefs", "pstore", "bpf", "autofs", "mqueue", "hugetlbfs", "fusectl",
    "configfs", "efivarfs", "binfmt_misc", "nsfs", "iso9660", "zram",
})


def accelerator_resources(accelerators: Optional[Sequence[Accelerator]]) -> list[tuple[str, Optional[str], int]]:
    """The Configured ``<Resource name=TYPE type=KIND>COUNT</Resource>`` each kind of a host's
    accelerators makes (spec 4.3, the extensible consumable), as (name, type, count): the name is
    the accelerator type (``GPU``), the type its model, ``MIG`` and the profile after it for MIG
    instances (``NVIDIA A100-SXM4-80GB MIG 1g.10gb``); kinds that differ only in what the
    Resource does not say (memory, driver) are summed.  The one rule of the writer and the reader,
    which reads these back as the Accelerators Extension's, not as the host's own consumables."""
    counts: dict[tuple[str, Optional[str]], int] = {}
    for kind in accelerators or ():
        if kind.count <= 0:
            continue
        label = kind.model
        if kind.partition:
            base = kind.model or kind.vendor or kind.type
            if kind.partition == "MIG":  # a MIG instance whose profile the source did not name
                label = f"{base} MIG"
            elif kind.partition[:1].isdigit():  # a MIG profile, 1g.10gb
                label = f"{base} MIG {kind.partition}"
            else:
                label = f"{base} {kind.partition}"
        key = (kind.type or "GPU", label)
        counts[key] = counts.get(key, 0) + kind.count
    return [(name, label, count) for (name, label), count in counts.items()]


def short_name(hostname: str) -> str:
    """A Node's Name as glueinfo writes it: the first label of the host name (an address whole)."""
    if ":" not in hostname and not hostname.replace(".", "").isdigit():
        return hostname.split(".", 1)[0] or hostname  # no address has letters without a colon: no parse needed
    try:
        ipaddress.ip_address(hostname)
        return hostname
    except ValueError:
        return hostname.split(".", 1)[0] or hostname
