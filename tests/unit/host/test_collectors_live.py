"""The built-in collectors on this machine, checked against sources other than
psutil: /proc and /sys files read here by the test itself, and the tools an
admin would use (lscpu, df, uname), all from Debian's essential packages.

The collectors for other machines (two-socket servers, NFS and Lustre
mounts, arm64, ...) are checked on recorded trees in test_collectors_fixtures.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import struct
import subprocess

import pytest

from glueinfo.core.config import Config
from glueinfo.host.collect import CollectContext, local_hostname, probe
from glueinfo.host.collectors import cpu, filesystems, load, memory, network, opsys

LIVE = CollectContext(host_root="/")
ENV_C = {**os.environ, "LC_ALL": "C"}


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def cpuinfo_values(key: str) -> list[str]:
    return re.findall(rf"^{re.escape(key)}\s*:\s*(.*?)\s*$", read("/proc/cpuinfo"), re.M)


def meminfo_kb(key: str) -> int:
    return int(re.search(rf"^{key}:\s+(\d+) kB", read("/proc/meminfo"), re.M).group(1))


def lscpu() -> dict[str, str]:
    """`lscpu -J` flattened to field -> value."""
    out = subprocess.run(["lscpu", "-J"], capture_output=True, text=True, check=True, env=ENV_C).stdout
    fields: dict[str, str] = {}

    def walk(entries):
        for entry in entries:
            fields[entry["field"].rstrip(":")] = entry.get("data")
            walk(entry.get("children", []))

    walk(json.loads(out)["lscpu"])
    return fields


# -- cpu -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def live_cpu():
    return cpu.collect(LIVE)


def test_logical_cpus_match_proc_cpuinfo(live_cpu):
    assert live_cpu.logical_cpus == len(cpuinfo_values("processor"))


def test_cores_and_sockets_match_lscpu(live_cpu):
    info = lscpu()
    sockets = int(info.get("Socket(s)") or 1)
    assert live_cpu.sockets == sockets
    assert live_cpu.physical_cores == sockets * int(info["Core(s) per socket"])
    assert live_cpu.logical_cpus == live_cpu.physical_cores * int(info["Thread(s) per core"])


def test_model_vendor_and_features_match_proc_cpuinfo(live_cpu):
    names = cpuinfo_values("model name")
    if names:  # x86
        assert live_cpu.model_name == names[0]
        assert live_cpu.vendor == cpuinfo_values("vendor_id")[0]
        flags = set(cpuinfo_values("flags")[0].split())
    else:
        flags = set(cpuinfo_values("Features")[0].split())
    assert live_cpu.features and set(live_cpu.features) <= flags
    assert live_cpu.instruction_set == subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip()


def test_clock_is_the_nominal_rating_when_the_model_name_has_one(live_cpu):
    rating = re.search(r"@\s*([\d.]+)GHz", live_cpu.model_name or "")
    if rating:
        assert live_cpu.clock_mhz == round(float(rating.group(1)) * 1000)
    else:
        assert live_cpu.clock_mhz is None or 100 <= live_cpu.clock_mhz <= 10000


def test_caches_match_lscpu(live_cpu):
    out = subprocess.run(["lscpu", "-B", "-J", "-C"], capture_output=True, text=True, check=True, env=ENV_C).stdout
    sizes = {c["name"]: int(c["one-size"]) // 1024 for c in json.loads(out)["caches"]}
    assert live_cpu.cache_l1d_kb == sizes.get("L1d")
    assert live_cpu.cache_l1i_kb == sizes.get("L1i")
    assert live_cpu.cache_l2_kb == sizes.get("L2")
    assert live_cpu.cache_l3_kb == sizes.get("L3")


# -- memory and load -----------------------------------------------------------
def test_memory_matches_proc_meminfo():
    info = memory.collect(LIVE)
    assert info.ram_mb == meminfo_kb("MemTotal") // 1024
    assert info.swap_mb == meminfo_kb("SwapTotal") // 1024
    assert info.virtual_mb == info.ram_mb + info.swap_mb
    # available and free swap move while we look: within 64 MB
    assert abs(info.ram_available_mb - meminfo_kb("MemAvailable") // 1024) <= 64
    assert abs(info.swap_free_mb - meminfo_kb("SwapFree") // 1024) <= 64


def test_load_matches_proc_loadavg():
    before = read("/proc/loadavg").split()
    info = load.collect(LIVE)
    after = read("/proc/loadavg").split()
    for i, value in enumerate((info.load1, info.load5, info.load15)):
        low, high = sorted((float(before[i]), float(after[i])))
        assert low - 0.01 <= value <= high + 0.01  # /proc/loadavg rounds to 2 decimals
    totals = [int(x.split("/")[1]) for x in (before[3], after[3])]
    assert min(totals) - 50 <= info.total_tasks <= max(totals) + 50
    assert 1 <= info.runnable_tasks <= info.total_tasks  # at least the reader itself runs
    assert info.cpu_utilisation_percent is None  # not asked for


def test_cpu_utilisation_over_an_interval():
    info = load.collect(CollectContext(host_root="/", utilisation_interval_s=0.2))
    assert info.utilisation_interval_s == 0.2
    assert 0.0 <= info.cpu_utilisation_percent <= 100.0


# -- network -------------------------------------------------------------------
def ipv4_of(name: str):
    """The interface's primary IPv4 address by ioctl(SIOCGIFADDR), as ifconfig asks it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def ipv6_of(name: str) -> set[str]:
    found = set()
    if os.path.exists("/proc/net/if_inet6"):
        for line in read("/proc/net/if_inet6").splitlines():
            fields = line.split()
            if fields[-1] == name:
                found.add(socket.inet_ntop(socket.AF_INET6, bytes.fromhex(fields[0])))
    return found


def test_adapters_match_sys_class_net():
    adapters = {a.name: a for a in network.collect(LIVE)}
    assert set(adapters) == set(os.listdir("/sys/class/net"))
    for name, adapter in adapters.items():
        base = f"/sys/class/net/{name}"
        assert adapter.mtu == int(read(f"{base}/mtu")), name
        assert adapter.mac == (read(f"{base}/address").strip() or None), name
        assert adapter.is_loopback == (int(read(f"{base}/type")) == 772), name
        operstate = read(f"{base}/operstate").strip()
        if operstate == "up":
            assert adapter.is_up, name
        elif operstate == "down":
            assert adapter.is_up is False, name
        try:
            speed = int(read(f"{base}/speed"))
        except (OSError, ValueError):
            speed = -1
        assert adapter.speed_mbps == (speed if speed > 0 else None), name
        v4 = ipv4_of(name)
        assert (v4 in adapter.ipv4) if v4 else adapter.ipv4 == [], name
        assert set(adapter.ipv6) == ipv6_of(name), name


def test_primary_adapter_carries_the_default_route_and_is_never_loopback():
    adapters = network.collect(LIVE)
    primaries = [a.name for a in adapters if a.is_primary]
    default_ifaces = [line.split()[0] for line in read("/proc/net/route").splitlines()[1:]
                      if line.split()[1] == "00000000" and line.split()[7] == "00000000"]
    assert len(primaries) <= 1
    if default_ifaces:
        assert primaries and primaries[0] in default_ifaces
    assert not any(a.is_primary and a.is_loopback for a in adapters)
    assert any(a.is_loopback and a.name == "lo" for a in adapters)  # loopback is recorded


# -- filesystems -----------------------------------------------------------------
def proc_mounts() -> list[list[str]]:
    lines = [line.split() for line in read("/proc/self/mounts").splitlines()]
    for fields in lines:
        fields[1] = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
    return lines


def test_every_reported_mount_is_a_visible_mount_of_proc_self_mounts():
    lines = proc_mounts()
    visible = {fields[1]: fields for fields in lines}  # the last mount on a point is the one seen
    for fs in filesystems.collect(LIVE):
        fields = visible[fs.mount_point]
        assert (fs.device, fs.fs_type) == (fields[0], fields[2])
        assert fs.read_only == ("ro" in fields[3].split(","))


def test_block_device_mounts_are_all_reported():
    reported = {fs.mount_point for fs in filesystems.collect(LIVE)}
    visible = {fields[1]: fields for fields in proc_mounts()}
    # squashfs images and bind-mounted single files (a container's /etc/hosts) are not filesystems to publish
    on_disks = {mp for mp, fields in visible.items()
                if fields[0].startswith("/dev/") and fields[2] != "squashfs" and not os.path.isfile(mp)}
    assert on_disks and on_disks <= reported


def test_root_size_matches_df():
    root = next(fs for fs in filesystems.collect(LIVE) if fs.mount_point == "/")
    out = subprocess.run(["df", "-P", "-B1", "/"], capture_output=True, text=True, check=True, env=ENV_C).stdout
    size, _used, avail = (int(x) for x in out.splitlines()[1].split()[1:4])
    assert root.size_mb == size // (1 << 20)
    assert abs(root.available_mb - avail // (1 << 20)) <= 256  # others write while we look


def test_pseudo_filesystems_are_left_out():
    types = {fs.fs_type for fs in filesystems.collect(LIVE)}
    assert not types & {"proc", "sysfs", "devpts", "cgroup", "cgroup2", "tmpfs", "devtmpfs"}


# -- os and identity -------------------------------------------------------------
def test_os_matches_etc_os_release_and_uname():
    info = opsys.collect(LIVE)
    release = dict(re.findall(r'^(\w+)="?(.*?)"?$', read("/etc/os-release"), re.M))
    assert info.name == release["NAME"]
    assert info.release == release.get("VERSION_ID")
    assert info.pretty_name == release.get("PRETTY_NAME")
    if "VERSION_CODENAME" in release:
        assert info.version == release["VERSION_CODENAME"]
    uname = subprocess.run(["uname", "-r", "-m"], capture_output=True, text=True, check=True).stdout.split()
    assert [info.kernel_release, info.platform_type] == uname
    assert info.kernel_version == subprocess.run(["uname", "-v"], capture_output=True, text=True).stdout.strip()
    btime = int(re.search(r"^btime (\d+)", read("/proc/stat"), re.M).group(1))
    assert abs(info.boot_time - btime) <= 1


def test_hostname_is_this_host():
    name = local_hostname(LIVE)
    assert name.split(".")[0] == socket.gethostname().split(".")[0]


def test_full_probe_of_this_host_succeeds():
    snapshot = probe(Config())
    assert snapshot.host_root is None and snapshot.source == "local"
    assert [r.name for r in snapshot.collectors if not r.success] == []
    assert all(r.duration_s >= 0 for r in snapshot.collectors)
    for part in ("cpu", "memory", "load", "network", "filesystems", "os", "static"):
        assert getattr(snapshot, part) is not None, part
