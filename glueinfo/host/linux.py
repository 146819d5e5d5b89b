"""Everything glueinfo reads from a Linux host, in one place.

``LinuxHost(root)`` answers questions about one machine.  For ``root == "/"``
(this machine, "live") it asks psutil where psutil has the answer (CPU counts,
memory, load averages, interface addresses and flags, boot time, CPU
utilisation) and the system calls ``statvfs``/``uname``; everything psutil
does not know comes from /proc, /sys and /etc.  For any other root (a
*recorded tree* of another machine) every fact comes from files below the
root; nothing is read from this machine and no global state is touched (psutil's
``PROCFS_PATH`` is never set).

The methods return facts as they are read (bytes, kHz, kernel strings); the
collectors in ``glueinfo.host.collectors`` turn them into the model's units and
decide what they mean.  An unreadable or missing file gives ``None`` (unknown),
never a guess.

Recorded trees
--------------
A recorded tree holds, at the same paths below ROOT, the files of another
machine that glueinfo reads (only those are needed)::

    proc/cpuinfo  proc/meminfo  proc/loadavg  proc/stat  proc/self/mounts (or proc/mounts)
    proc/net/route  proc/net/ipv6_route  proc/sys/kernel/{osrelease,version,hostname}
    sys/devices/system/cpu/cpuN/topology/{physical_package_id,core_cpus_list|thread_siblings_list}
    sys/devices/system/cpu/cpu0/cache/indexN/{level,type,size}
    sys/devices/system/cpu/cpu0/cpufreq/{base_frequency,cpuinfo_max_freq}
    sys/class/net/IFACE/{mtu,flags,operstate,speed,address,type}
    etc/os-release (or usr/lib/os-release)  etc/hostname
    sys/bus/pci/devices/ADDRESS/{class,vendor,device,mem_info_vram_total}
    proc/driver/nvidia/gpus/ADDRESS/information  proc/driver/nvidia/version
    usr/share/misc/pci.ids (or usr/share/hwdata/pci.ids)

plus ``ROOT/.glueinfo/recorded.json`` for the facts that only a system call
gives, and what the GPU tools answered on that machine (:data:`RECORDED_TOOLS`):
``ROOT/.glueinfo/nvml.json`` (NVML's answers, in the form :meth:`LinuxHost.nvml_answers`
gives them), ``nvidia-smi-q-x.xml`` (``nvidia-smi -q -x``), ``amd-smi-static.json``
(``amd-smi static --json``), ``rocm-smi.json`` (``rocm-smi --showproductname
--showmeminfo vram --showbus --showdriverversion --json``).  Every key is optional; a fact it does not give stays unknown::

    {
      "format": 1,
      "hostname": "wn042.example.org",   # the FQDN (else proc/sys/kernel/hostname, then etc/hostname)
      "machine": "x86_64",               # uname -m
      "interfaces": {                    # getifaddrs(3): addresses per adapter
        "eth0": {"ipv4": ["10.1.2.42"], "ipv6": ["2001:db8::42", "fe80::1"]}
      },
      "statvfs": {                       # statvfs(2) per mount point, in f_frsize units
        "/home": {"frsize": 4096, "blocks": 262144, "bavail": 131072}
      }
    }
"""

from __future__ import annotations

import os
import re
import threading
from functools import cached_property
from typing import Any, NamedTuple, Optional

RECORDED_FILE = ".glueinfo/recorded.json"

# Network interface flag bits (linux/if.h) and the ARP hardware type of loopback.
IFF_UP = 0x1
IFF_LOOPBACK = 0x8
ARPHRD_LOOPBACK = 772
# Route flags (linux/route.h, ipv6_route.h).
RTF_UP = 0x1
RTF_REJECT = 0x200

# A statvfs(2) on a remote mount can block for minutes when the server is gone;
# past this the mount is reported without sizes instead of holding up the probe.
REMOTE_STATVFS_TIMEOUT_S = 1.0


# PCI classes (class << 8 | subclass) of accelerators: VGA-compatible, 3D and other display
# controllers, and processing accelerators (the PCI Code and ID Assignment specification).
PCI_CLASS_VGA, PCI_CLASS_3D, PCI_CLASS_DISPLAY, PCI_CLASS_PROCESSING = 0x0300, 0x0302, 0x0380, 0x1200
ACCELERATOR_CLASSES = frozenset({PCI_CLASS_VGA, PCI_CLASS_3D, PCI_CLASS_DISPLAY, PCI_CLASS_PROCESSING})
PCI_VENDOR_NVIDIA, PCI_VENDOR_AMD, PCI_VENDOR_INTEL = 0x10DE, 0x1002, 0x8086
PCI_IDS_FILES = ("usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids")
NVML_LIBRARY = "libnvidia-ml.so.1"
# What the GPU tools answered on a recorded host, below ROOT/.glueinfo (see the module docstring).
RECORDED_DIR = ".glueinfo"
RECORDED_TOOLS = {"nvml": "nvml.json", "nvidia-smi": "nvidia-smi-q-x.xml", "amd-smi": "amd-smi-static.json",
                  "rocm-smi": "rocm-smi.json"}
MAX_TOOL_OUTPUT = 16 * 2**20  # nvidia-smi -q -x of 16 GPUs is ~0.5 MB
MAX_ACCELERATOR_DEVICES = 1024  # devices (and MIG instances) one host's answer may list


class PciDevice(NamedTuple):
    address: str  # domain:bus:device.function, e.g. 0000:18:00.0
    vendor: int
    device: int
    pci_class: int  # the 24-bit class code: class, subclass, programming interface
    vram_bytes: Optional[int]  # amdgpu's mem_info_vram_total, where the driver gives it


class Memory(NamedTuple):
    total: Optional[int]  # bytes
    available: Optional[int]
    swap_total: Optional[int]
    swap_free: Optional[int]


class LoadAverage(NamedTuple):
    load1: Optional[float]
    load5: Optional[float]
    load15: Optional[float]
    running: Optional[int]  # the kernel's runnable count at the moment of reading
    total: Optional[int]  # tasks (threads) in the system


class Cache(NamedTuple):
    level: int
    type: str  # Data, Instruction, Unified
    size_kb: int


class Interface(NamedTuple):
    name: str
    ipv4: list[str]
    ipv6: list[str]
    mtu: Optional[int]
    is_up: Optional[bool]
    speed_mbps: Optional[int]  # None when the driver does not say
    mac: Optional[str]
    is_loopback: bool


class Mount(NamedTuple):
    device: str
    mount_point: str
    fs_type: str
    options: tuple[str, ...]


class Space(NamedTuple):
    total: int  # bytes, f_blocks * f_frsize (as psutil.disk_usage().total)
    available: int  # bytes available to unprivileged users, f_bavail * f_frsize


def unescape_mount_field(text: str) -> str:
    """Undo the kernel's octal escapes in /proc/mounts (``\\040`` is a space)."""
    if "\\" not in text:
        return text
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def _int(text: Optional[str], base: int = 10) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text.strip(), base)
    except ValueError:
        return None


def parse_key_values(block: str) -> dict[str, str]:
    """``key : value`` lines (/proc/cpuinfo, /proc/meminfo) into a dict; the first of a key wins."""
    result: dict[str, str] = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            result.setdefault(key.strip(), value.strip())
    return result


def parse_os_release(text: str) -> dict[str, str]:
    """os-release(5): shell-style KEY=value lines, values optionally quoted."""
    result = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        quote = value[:1]
        if quote in ("'", '"') and len(value) >= 2 and value[-1] == quote:
            value = value[1:-1]
            if quote == '"' and "\\" in value:
                value = re.sub(r'\\([$"`\\])', r"\1", value)
        result[key.strip()] = value
    return result


def parse_cache_size_kb(text: str) -> Optional[int]:
    """sysfs cache sizes: ``32K``, ``1024K``, ``32M``."""
    text = (text or "").strip()
    scale = {"K": 1, "M": 1024, "G": 1024 * 1024}.get(text[-1:], 1)
    digits = text[:-1].strip() if text[-1:] in ("K", "M", "G") else text
    return int(digits) * scale if digits.isdigit() else None


def _recorded_problem(data: Any) -> Optional[str]:
    """What is wrong with the shape of a recorded.json, or None."""
    if not isinstance(data, dict):
        return "expected a JSON object"
    for key in ("hostname", "machine"):
        if key in data and not isinstance(data[key], str):
            return f"{key!r} must be a string"
    interfaces = data.get("interfaces", {})
    if not isinstance(interfaces, dict):
        return "'interfaces' must map adapter names to {\"ipv4\": [...], \"ipv6\": [...]}"
    for name, addresses in interfaces.items():
        if not isinstance(addresses, dict) or not all(
                isinstance(addresses.get(family, []), list) and all(isinstance(a, str) for a in addresses.get(family, []))
                for family in ("ipv4", "ipv6")):
            return f"interfaces[{name!r}] must be {{\"ipv4\": [strings], \"ipv6\": [strings]}}"
    statvfs = data.get("statvfs", {})
    if not isinstance(statvfs, dict):
        return "'statvfs' must map mount points to {\"frsize\", \"blocks\", \"bavail\"}"
    for mount_point, entry in statvfs.items():
        if not isinstance(entry, dict) or not all(_whole_number(entry.get(k)) for k in ("frsize", "blocks", "bavail")):
            return f"statvfs[{mount_point!r}] must have whole numbers frsize, blocks and bavail"
    return None


def _whole_number(value: object) -> bool:
    """A JSON whole number >= 0 (true/false are not numbers here)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _cpu_dirs(names: list[str]) -> list[str]:
    return sorted((n for n in names if n.startswith("cpu") and n[3:].isdigit()), key=lambda n: int(n[3:]))


class LinuxHost:
    """One Linux machine: this one (``root="/"``) or a recorded tree below ``root``."""

    def __init__(self, root: str = "/") -> None:
        self.root = root or "/"
        self.live = os.path.realpath(self.root) == "/"

    # -- files -------------------------------------------------------------
    def path(self, relative: str) -> str:
        return os.path.join(self.root, relative.lstrip("/"))

    def read(self, relative: str) -> Optional[str]:
        """A file's text, or None when it is missing or unreadable.  Plain
        os.read: three times cheaper than open() on small /sys files."""
        try:
            fd = os.open(self.path(relative), os.O_RDONLY)
        except OSError:
            return None
        try:
            chunks = []
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except OSError:
            return None
        finally:
            os.close(fd)
        return b"".join(chunks).decode("utf-8", errors="replace")

    def read_line(self, relative: str) -> Optional[str]:
        """A one-value file (sysfs attribute, /proc/sys, /proc/loadavg), stripped.
        Such files are under a page and come whole in one read."""
        try:
            fd = os.open(self.path(relative), os.O_RDONLY)
        except OSError:
            return None
        try:
            return os.read(fd, 65536).decode("utf-8", errors="replace").strip()
        except OSError:
            return None
        finally:
            os.close(fd)

    def listdir(self, relative: str) -> list[str]:
        try:
            return os.listdir(self.path(relative))
        except OSError:
            return []

    @cached_property
    def recorded(self) -> dict[str, Any]:
        """ROOT/.glueinfo/recorded.json (see the module doc); {} when live or absent."""
        if self.live:
            return {}
        text = self.read(RECORDED_FILE)
        if text is None:
            return {}
        import json

        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{self.path(RECORDED_FILE)}: not valid JSON: {exc}") from None
        problem = _recorded_problem(data)
        if problem:
            raise ValueError(f"{self.path(RECORDED_FILE)}: {problem}")
        recorded: dict[str, Any] = data  # _recorded_problem checked its shape
        return recorded

    # -- identity ----------------------------------------------------------
    def hostname(self) -> Optional[str]:
        """A recorded tree's host name: recorded.json, else the kernel's, else /etc/hostname.
        A broken recorded.json is skipped here (the collectors that need it report it)."""
        try:
            recorded = self.recorded.get("hostname")
        except ValueError:
            recorded = None
        if isinstance(recorded, str) and recorded:
            return recorded
        for relative in ("proc/sys/kernel/hostname", "etc/hostname"):
            name = self.read_line(relative)
            if name:
                return name
        return None

    def machine(self) -> Optional[str]:
        """uname -m: the system call when live, recorded.json otherwise."""
        if self.live:
            return os.uname().machine
        return self.recorded.get("machine") or None

    def kernel_release(self) -> Optional[str]:
        return self.read_line("proc/sys/kernel/osrelease") or None

    def kernel_version(self) -> Optional[str]:
        return self.read_line("proc/sys/kernel/version") or None

    def os_release(self) -> dict[str, str]:
        """/etc/os-release, falling back to /usr/lib/os-release as os-release(5) says."""
        for relative in ("etc/os-release", "usr/lib/os-release"):
            text = self.read(relative)
            if text is not None:
                return parse_os_release(text)
        return {}

    def boot_time(self) -> Optional[float]:
        if self.live:
            import psutil

            return float(psutil.boot_time())
        stat = self.read("proc/stat") or ""
        match = re.search(r"^btime\s+(\d+)", stat, re.M)
        return float(match.group(1)) if match else None

    # -- CPU ---------------------------------------------------------------
    @cached_property
    def _cpuinfo_text(self) -> str:
        return self.read("proc/cpuinfo") or ""

    @cached_property
    def cpuinfo(self) -> dict[str, str]:
        """The first processor's /proc/cpuinfo fields, plus machine-wide lines
        (aarch64 prints some, e.g. ``Hardware``, after the last processor)."""
        blocks = [b for b in self._cpuinfo_text.split("\n\n") if b.strip()]
        if not blocks:
            return {}
        fields = parse_key_values(blocks[0])
        for block in blocks[1:]:
            if not any(line.startswith("processor") for line in block.splitlines()):
                for key, value in parse_key_values(block).items():
                    fields.setdefault(key, value)
        return fields

    def _cpuinfo_all(self, key: str) -> list[str]:
        # str.find rather than a regex per key: compiling patterns was a visible
        # part of a fresh `glueinfo probe`.
        text = "\n" + self._cpuinfo_text
        needle = "\n" + key
        values = []
        start = text.find(needle)
        while start != -1:
            end = text.find("\n", start + 1)
            name, sep, value = text[start + 1:end if end != -1 else len(text)].partition(":")
            if sep and name.strip() == key:
                values.append(value.strip())
            start = text.find(needle, start + 1)
        return values

    def logical_cpus(self) -> Optional[int]:
        """Hardware threads online: psutil live, /proc/cpuinfo ``processor`` lines recorded."""
        if self.live:
            import psutil

            return psutil.cpu_count(logical=True)
        return len(self._cpuinfo_all("processor")) or None

    def _cpu_topology_files(self, name: str) -> list[str]:
        """One sysfs topology attribute of every CPU, e.g. physical_package_id."""
        base = "sys/devices/system/cpu"
        values = []
        for cpu in _cpu_dirs(self.listdir(base)):
            value = self.read_line(f"{base}/{cpu}/topology/{name}")
            if value:
                values.append(value)
        return values

    def physical_cores(self) -> Optional[int]:
        """Cores: psutil live; recorded, distinct sysfs core sibling lists (what psutil
        reads), else distinct (physical id, core id) pairs of /proc/cpuinfo."""
        if self.live:
            import psutil

            return psutil.cpu_count(logical=False)
        cores = set(self._cpu_topology_files("core_cpus_list") or self._cpu_topology_files("thread_siblings_list"))
        if cores:
            return len(cores)
        pairs = set(zip(self._cpuinfo_all("physical id"), self._cpuinfo_all("core id"), strict=False))
        return len(pairs) or None

    def sockets(self) -> Optional[int]:
        """Distinct /proc/cpuinfo ``physical id`` values (x86), else distinct sysfs
        physical_package_id values (-1 means unknown); psutil has no answer."""
        ids = set(self._cpuinfo_all("physical id"))
        if ids:
            return len(ids)
        packages = set(self._cpu_topology_files("physical_package_id")) - {"-1"}
        return len(packages) or None

    def caches(self) -> list[Cache]:
        """CPU 0's caches from sysfs: each one's size per instance (an L3 shared by a
        socket is its whole size, not divided or summed)."""
        base = "sys/devices/system/cpu/cpu0/cache"
        found = []
        for index in sorted(n for n in self.listdir(base) if n.startswith("index")):
            level = _int(self.read_line(f"{base}/{index}/level"))
            kind = self.read_line(f"{base}/{index}/type")
            size = parse_cache_size_kb(self.read_line(f"{base}/{index}/size") or "")
            if level is not None and kind and size is not None:
                found.append(Cache(level, kind, size))
        return found

    def cpufreq_khz(self, name: str) -> Optional[int]:
        """A cpufreq value of CPU 0 (``base_frequency``, ``cpuinfo_max_freq``) in kHz."""
        value = _int(self.read_line(f"sys/devices/system/cpu/cpu0/cpufreq/{name}"))
        return value if value and value > 0 else None

    def cpu_utilisation(self, interval_s: float) -> Optional[float]:
        """Percent of all CPUs busy over the next ``interval_s`` seconds (live only:
        a recorded tree is a single moment, it has no interval)."""
        if not self.live:
            return None
        import psutil

        return float(psutil.cpu_percent(interval=interval_s))

    # -- memory and load -----------------------------------------------------
    def memory(self) -> Memory:
        """/proc/meminfo MemTotal, MemAvailable, SwapTotal, SwapFree, live and recorded.

        The very lines psutil.virtual_memory() and swap_memory() report, read
        directly: psutil parses the file twice in Python and reads /proc/vmstat
        for page counters glueinfo does not use, which cost a seventh of a
        probe.  MemAvailable is unknown (None) on kernels before 3.14, where
        psutil would estimate it."""
        info = parse_key_values(self.read("proc/meminfo") or "")

        def kib(key: str) -> Optional[int]:
            value = info.get(key, "").split()
            return int(value[0]) * 1024 if value and value[0].isdigit() else None

        return Memory(kib("MemTotal"), kib("MemAvailable"), kib("SwapTotal"), kib("SwapFree"))

    def load(self) -> LoadAverage:
        """Averages from psutil live; the task counts (and the recorded averages)
        from /proc/loadavg, ``1.20 0.90 0.75 3/812 12345``."""
        fields = (self.read_line("proc/loadavg") or "").split()
        running = total = None
        if len(fields) >= 4 and "/" in fields[3]:
            running, total = (_int(x) for x in fields[3].split("/", 1))
        if self.live:
            import psutil

            l1, l5, l15 = psutil.getloadavg()
            return LoadAverage(l1, l5, l15, running, total)
        try:
            r1, r5, r15 = (float(x) for x in fields[:3])
        except ValueError:  # not numbers, or fewer than three
            return LoadAverage(None, None, None, running, total)
        return LoadAverage(r1, r5, r15, running, total)

    # -- network ----------------------------------------------------------
    def interfaces(self) -> list[Interface]:
        """Every adapter the kernel has.  Live: psutil's addresses and stats
        (up = running, as psutil says), loopback from its flags, speed 0 read as
        unknown.  Recorded: sysfs, up = IFF_UP and operstate up/unknown (what
        makes the kernel report IFF_RUNNING), addresses from recorded.json."""
        if self.live:
            return self._live_interfaces()
        recorded = self.recorded.get("interfaces") or {}
        found = []
        for name in sorted(self.listdir("sys/class/net")):
            base = f"sys/class/net/{name}"
            flags = _int(self.read_line(f"{base}/flags"), 16)
            operstate = self.read_line(f"{base}/operstate")
            is_up = None
            if flags is not None:
                is_up = bool(flags & IFF_UP) and operstate in ("up", "unknown")
            loopback = (flags is not None and bool(flags & IFF_LOOPBACK)) or _int(self.read_line(f"{base}/type")) == ARPHRD_LOOPBACK
            speed = _int(self.read_line(f"{base}/speed"))
            mac = self.read_line(f"{base}/address") or None
            addresses = recorded.get(name) or {}
            found.append(Interface(name, list(addresses.get("ipv4") or []), list(addresses.get("ipv6") or []),
                                   _int(self.read_line(f"{base}/mtu")), is_up,
                                   speed if speed and speed > 0 else None, mac, loopback))
        return found

    def _live_interfaces(self) -> list[Interface]:
        import socket

        import psutil

        addrs = psutil.net_if_addrs()
        stats = psutil.net_if_stats()
        found = []
        for name in sorted(set(addrs) | set(stats)):
            ipv4, ipv6, mac = [], [], None
            for addr in addrs.get(name, ()):
                if addr.family == socket.AF_INET:
                    ipv4.append(addr.address)
                elif addr.family == socket.AF_INET6:
                    ipv6.append(addr.address.split("%", 1)[0])  # drop the "%eth0" scope
                elif addr.family == psutil.AF_LINK:
                    mac = addr.address or None
            stat = stats.get(name)
            flags = set(stat.flags.split(",")) if stat is not None else set()
            found.append(Interface(name, ipv4, ipv6,
                                   stat.mtu if stat is not None else None,
                                   stat.isup if stat is not None else None,
                                   stat.speed if stat is not None and stat.speed > 0 else None,
                                   mac, "loopback" in flags))
        return found

    def default_route_interfaces(self) -> list[str]:
        """Adapters carrying a default route, best (lowest metric) first: IPv4
        routes of /proc/net/route, then IPv6 ones of /proc/net/ipv6_route."""
        routes: list[tuple[int, int, str]] = []
        for line in (self.read("proc/net/route") or "").splitlines()[1:]:
            fields = line.split()
            if len(fields) < 8:
                continue
            iface, destination, flags, metric, mask = fields[0], fields[1], _int(fields[3], 16), _int(fields[6]), fields[7]
            if destination == "00000000" and mask == "00000000" and flags is not None and flags & RTF_UP:
                routes.append((0, metric or 0, iface))
        for line in (self.read("proc/net/ipv6_route") or "").splitlines():
            fields = line.split()
            if len(fields) < 10:
                continue
            destination, prefix, metric, flags, iface = fields[0], fields[1], _int(fields[5], 16), _int(fields[8], 16), fields[9]
            if (destination == "0" * 32 and prefix == "00" and flags is not None
                    and flags & RTF_UP and not flags & RTF_REJECT):
                routes.append((1, metric or 0, iface))
        ordered = []
        for _family, _metric, iface in sorted(routes):
            if iface not in ordered:
                ordered.append(iface)
        return ordered

    # -- filesystems ------------------------------------------------------
    def mounts(self) -> list[Mount]:
        """Every line of /proc/self/mounts (network filesystems included, which
        psutil.disk_partitions(all=False) would drop), escapes undone."""
        text = self.read("proc/self/mounts")
        if text is None:
            text = self.read("proc/mounts") or ""
        found = []
        for line in text.splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            found.append(Mount(unescape_mount_field(fields[0]), unescape_mount_field(fields[1]),
                               fields[2], tuple(fields[3].split(","))))
        return found

    def space(self, mount_points: list[str], slow: frozenset[str] = frozenset(),
              timeout_s: float = REMOTE_STATVFS_TIMEOUT_S) -> dict[str, Space]:
        """Size and available space per mount point: statvfs(2) live (as
        psutil.disk_usage does), recorded.json ``statvfs`` otherwise.  Mount
        points in ``slow`` (remote ones) are asked in threads of their own and
        left out when they do not answer within ``timeout_s``."""
        if not self.live:
            recorded = self.recorded.get("statvfs") or {}
            found = {}
            for mount_point in mount_points:
                entry = recorded.get(mount_point)  # its shape is checked when recorded.json is read
                if entry is not None:
                    found[mount_point] = Space(entry["blocks"] * entry["frsize"], entry["bavail"] * entry["frsize"])
            return found

        found = {}
        waiting: list[tuple[threading.Thread, str, list[Space]]] = []
        for mount_point in mount_points:
            if mount_point in slow:
                box: list[Space] = []
                thread = threading.Thread(target=self._statvfs_into, args=(mount_point, box),
                                          name=f"statvfs {mount_point}", daemon=True)
                thread.start()
                waiting.append((thread, mount_point, box))
                continue
            space = self._statvfs(mount_point)
            if space is not None:
                found[mount_point] = space
        if waiting:
            import time

            deadline = time.monotonic() + timeout_s
            for thread, mount_point, box in waiting:
                thread.join(max(0.0, deadline - time.monotonic()))
                if box:  # a thread still blocked in statvfs is abandoned; it dies with the process
                    found[mount_point] = box[0]
        return found

    @staticmethod
    def _statvfs(mount_point: str) -> Optional[Space]:
        try:
            st = os.statvfs(mount_point)
        except OSError:
            return None
        return Space(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)

    def _statvfs_into(self, mount_point: str, box: list[Space]) -> None:
        space = self._statvfs(mount_point)
        if space is not None:
            box.append(space)

    # -- accelerators -------------------------------------------------------
    def pci_devices(self, wanted: frozenset[int] = ACCELERATOR_CLASSES) -> Optional[list[PciDevice]]:
        """The PCI devices whose class (its upper 16 bits: class and subclass, e.g. 0x0302) is in
        ``wanted``, by address, from /sys/bus/pci/devices; with ``mem_info_vram_total`` where the
        driver (amdgpu) gives it.  None when that directory cannot be listed (no sysfs, or not
        mounted in a container): unknown, not "none"."""
        base = "sys/bus/pci/devices"
        try:
            addresses = os.listdir(self.path(base))
        except OSError:
            return None
        found = []
        for address in sorted(addresses):
            pci_class = _int(self.read_line(f"{base}/{address}/class"), 16)
            if pci_class is None or pci_class >> 8 not in wanted:
                continue
            vendor = _int(self.read_line(f"{base}/{address}/vendor"), 16)
            device = _int(self.read_line(f"{base}/{address}/device"), 16)
            if vendor is None or device is None:
                continue
            vram = _int(self.read_line(f"{base}/{address}/mem_info_vram_total")) if vendor == PCI_VENDOR_AMD else None
            found.append(PciDevice(address, vendor, device, pci_class, vram if vram and vram > 0 else None))
        return found

    def pci_ids(self, wanted: set[tuple[int, int]]) -> dict[tuple[int, Optional[int]], str]:
        """Names from the pci.ids database installed on the host (/usr/share/misc/pci.ids, else
        /usr/share/hwdata/pci.ids): ``(vendor, None)`` -> the vendor's name and ``(vendor, device)``
        -> the device's, for the pairs in ``wanted`` it lists; {} when none is installed."""
        if not wanted:
            return {}
        for relative in PCI_IDS_FILES:
            text = self.read(relative)
            if text is not None:
                return parse_pci_ids(text, wanted)
        return {}

    def nvidia_proc_gpus(self) -> dict[str, dict[str, str]]:
        """/proc/driver/nvidia/gpus/ADDRESS/information of each GPU the NVIDIA kernel driver holds,
        as ``key: value`` pairs (``Model``, ``Bus Location``, ...), by PCI address (lower case); {}
        when the driver is not loaded."""
        base = "proc/driver/nvidia/gpus"
        found = {}
        for address in sorted(self.listdir(base)):
            text = self.read(f"{base}/{address}/information")
            if text is not None:
                found[address.lower()] = parse_key_values(text)
        return found

    def nvidia_driver_version(self) -> Optional[str]:
        """The NVIDIA kernel module's version from /proc/driver/nvidia/version
        (``NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  <date>``), or None."""
        match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", self.read("proc/driver/nvidia/version") or "")
        return match.group(1) if match else None

    def nvml_answers(self, max_devices: int = MAX_ACCELERATOR_DEVICES) -> Optional[dict[str, Any]]:
        """What NVIDIA's management library (NVML) says of the host's GPUs, as plain data (the
        ``.glueinfo/nvml.json`` form)::

            {"nvmlSystemGetDriverVersion": "565.57.01", "nvmlSystemGetCudaDriverVersion": 12070,
             "devices": [{"nvmlDeviceGetName": "NVIDIA H100 80GB HBM3",
                          "nvmlDeviceGetPciInfo": {"busId": "00000000:18:00.0", "pciDeviceId": 590418142},
                          "nvmlDeviceGetMemoryInfo": {"total": 85520809984},
                          "nvmlDeviceGetCudaComputeCapability": [9, 0],
                          "nvmlDeviceGetMaxClockInfo": {"graphics": 1980},
                          "nvmlDeviceGetMigMode": [0, 0],
                          "migDevices": [{"nvmlDeviceGetName": ..., "nvmlDeviceGetMemoryInfo": {"total": ...}}]}]}

        A call NVML refuses (not supported on this GPU) is left out.  Live: through NVIDIA's binding
        ``pynvml`` (the ``nvidia-ml-py`` package, glueinfo's ``[gpu]`` extra), imported only when
        ``libnvidia-ml.so.1`` loads; None when the library is absent, the binding not installed or
        NVML will not start (no driver).  Recorded: ``.glueinfo/nvml.json``, None when absent;
        ValueError when it is not JSON."""
        if not self.live:
            text = self.read(f"{RECORDED_DIR}/{RECORDED_TOOLS['nvml']}")
            if text is None:
                return None
            import json

            try:
                data = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{self.path(RECORDED_DIR)}/{RECORDED_TOOLS['nvml']}: not valid JSON: {exc}") from None
            return data if isinstance(data, dict) else None
        return _live_nvml_answers(max_devices)

    def tool_output(self, tool: str, argv: list[str], timeout_s: float, max_bytes: int = MAX_TOOL_OUTPUT) -> Optional[str]:
        """What a GPU tool (``tool``: a key of :data:`RECORDED_TOOLS`) printed.  Live: ``argv`` run
        when its program is on PATH, within ``timeout_s`` and ``max_bytes`` (glueinfo.core.bounded_run:
        its own process group, killed whatever happens); None when it is not installed.  Recorded:
        the file ``.glueinfo/<RECORDED_TOOLS[tool]>``, None when absent.  Raises
        glueinfo.core.bounded_run.CommandError (timed out, too much, not text) and RuntimeError
        (a non-zero exit, with the first line of its stderr)."""
        if not self.live:
            return self.read(f"{RECORDED_DIR}/{RECORDED_TOOLS[tool]}")
        import shutil

        program = shutil.which(argv[0])
        if program is None:
            return None
        from glueinfo.core.bounded_run import decode_text, run_bounded

        done = run_bounded([program, *argv[1:]], timeout_s, max_bytes)
        if done.returncode != 0:
            first = next((line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()), "")
            raise RuntimeError(f"{argv[0]} exited with status {done.returncode}{': ' + first[:200] if first else ''}")
        return decode_text(done.stdout, argv[0])


def parse_pci_ids(text: str, wanted: set[tuple[int, int]]) -> dict[tuple[int, Optional[int]], str]:
    """The vendor and device names of pci.ids (``vendor  name`` lines, devices below them after
    one tab) for the (vendor, device) pairs in ``wanted``: only their vendors' blocks are read."""
    names: dict[tuple[int, Optional[int]], str] = {}
    for vendor in sorted({v for v, _ in wanted}):
        start = text.find(f"\n{vendor:04x}  ")
        if start == -1:
            continue
        end = text.find("\n", start + 1)
        names[(vendor, None)] = text[start + 7:end if end != -1 else len(text)].strip()
        devices = {d for v, d in wanted if v == vendor}
        position = end
        while position != -1 and position + 1 < len(text):
            line_end = text.find("\n", position + 1)
            line = text[position + 1:line_end if line_end != -1 else len(text)]
            if line and not line.startswith(("\t", "#")):
                break  # the next vendor's block
            if line.startswith("\t") and not line.startswith("\t\t"):
                device = _int(line[1:5], 16)
                if device in devices and line[5:7] == "  ":
                    names[(vendor, device)] = line[7:].strip()
            position = line_end
    return names


def _live_nvml_answers(max_devices: int) -> Optional[dict[str, Any]]:
    """NVML's answers through pynvml on this machine (see LinuxHost.nvml_answers); None when NVML
    cannot be used here.  The library is looked for before the binding is imported, so a host
    without NVIDIA's driver pays a failed dlopen, not an import."""
    import ctypes

    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return None
    try:
        import importlib

        nvml = importlib.import_module("pynvml")
    except ImportError:
        return None
    try:
        nvml.nvmlInit()
    except Exception:  # pynvml.NVMLError: no driver, a driver/library mismatch  # noqa: BLE001
        return None
    try:
        answers: dict[str, Any] = {}

        def ask(target: dict[str, Any], name: str, call: Any) -> None:
            try:
                target[name] = call()
            except Exception:  # NVMLError: not supported on this GPU, or not in this driver  # noqa: BLE001
                pass

        ask(answers, "nvmlSystemGetDriverVersion", lambda: _text(nvml.nvmlSystemGetDriverVersion()))
        ask(answers, "nvmlSystemGetCudaDriverVersion", nvml.nvmlSystemGetCudaDriverVersion)
        devices = []
        for index in range(min(int(nvml.nvmlDeviceGetCount()), max_devices)):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            device: dict[str, Any] = {}
            _nvml_device(nvml, handle, device, ask)
            ask(device, "nvmlDeviceGetPciInfo", lambda h=handle: _nvml_pci(nvml, h))
            ask(device, "nvmlDeviceGetCudaComputeCapability", lambda h=handle: list(nvml.nvmlDeviceGetCudaComputeCapability(h)))
            ask(device, "nvmlDeviceGetMaxClockInfo",
                lambda h=handle: {"graphics": int(nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_GRAPHICS))})
            ask(device, "nvmlDeviceGetMigMode", lambda h=handle: list(nvml.nvmlDeviceGetMigMode(h)))
            if (device.get("nvmlDeviceGetMigMode") or [0])[0] == 1:
                instances = []
                for slot in range(min(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)), max_devices)):
                    try:
                        instance = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                    except Exception:  # NVML_ERROR_NOT_FOUND: an empty slot  # noqa: BLE001
                        continue
                    record: dict[str, Any] = {}
                    _nvml_device(nvml, instance, record, ask)
                    instances.append(record)
                device["migDevices"] = instances
            devices.append(device)
        answers["devices"] = devices
        return answers
    except Exception:  # noqa: BLE001  # NVML lost mid-way (a GPU fell off the bus): nothing half-read
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _nvml_device(nvml: Any, handle: Any, record: dict[str, Any], ask: Any) -> None:
    """The name and memory size of one device or MIG instance."""
    ask(record, "nvmlDeviceGetName", lambda: _text(nvml.nvmlDeviceGetName(handle)))
    ask(record, "nvmlDeviceGetMemoryInfo", lambda: {"total": int(nvml.nvmlDeviceGetMemoryInfo(handle).total)})


def _nvml_pci(nvml: Any, handle: Any) -> dict[str, Any]:
    info = nvml.nvmlDeviceGetPciInfo(handle)
    return {"busId": _text(info.busId), "pciDeviceId": int(info.pciDeviceId)}


def _text(value: Any) -> str:
    """pynvml gives str in its newer releases, bytes in older ones."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
