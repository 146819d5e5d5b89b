"""Synthetic hosts and sites for the GLUE tests and benchmarks/glue.py.

Every fact is written here by hand (per hardware class), so tests can state
what a broker must find without asking glueinfo.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from glueinfo.core.model import CpuInfo, FileSystem, HostSnapshot, LoadInfo, MemoryInfo, NetworkAdapter, OsInfo, StaticFacts


@dataclass(frozen=True)
class HardwareClass:
    name: str
    platform: str
    vendor: str
    model: str
    clock_mhz: int
    sockets: int
    cores: int  # physical cores per host
    threads: int  # logical CPUs per host
    ram_mb: int
    os_name: str
    os_release: str
    os_version: str
    instruction_set: str
    cache_l1i_kb: int = 32
    cache_l1d_kb: int = 32
    cache_l2_kb: int = 1024


# Five classes of the 1,000-host site: (class, number of hosts).
CLASSES = (
    (HardwareClass("xeon", "x86_64", "GenuineIntel", "Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz", 2600, 2, 24, 48,
                   196_480, "Debian GNU/Linux", "12", "bookworm", "x86_64"), 400),
    (HardwareClass("epyc", "x86_64", "AuthenticAMD", "AMD EPYC 7702 64-Core Processor", 2000, 2, 128, 256,
                   515_800, "Rocky Linux", "9.3", "Blue Onyx", "x86_64", cache_l2_kb=512), 250),
    (HardwareClass("arm", "aarch64", "ARM", "Neoverse-N1", 3000, 1, 80, 80,
                   257_600, "Ubuntu", "22.04", "jammy", "aarch64", cache_l1i_kb=64, cache_l1d_kb=64), 150),
    (HardwareClass("old", "x86_64", "GenuineIntel", "Intel(R) Xeon(R) CPU E5-2620 v4 @ 2.10GHz", 2100, 1, 8, 16,
                   64_300, "CentOS Linux", "7", "Core", "x86_64", cache_l2_kb=256), 150),
    (HardwareClass("desk", "x86_64", "GenuineIntel", "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", 3200, 1, 6, 12,
                   31_900, "Debian GNU/Linux", "12", "bookworm", "x86_64", cache_l2_kb=256), 50),
)


def make_host(hw: HardwareClass, index: int, domain: str = "example.org", collected_at: float = 1_700_000_000.0,
              runtime_environment: tuple[str, ...] = ("GLITE-3_2_0", "R-4.3"), si00: int | None = 2500) -> HostSnapshot:
    """Host number ``index`` of a hardware class; load and free memory vary with the index."""
    load1 = (index % 7) * hw.threads / 8  # 0 .. 0.75 x threads
    return HostSnapshot(
        hostname=f"wn-{hw.name}-{index:05d}.{domain}",
        collected_at=collected_at,
        source="synthetic",
        cpu=CpuInfo(logical_cpus=hw.threads, physical_cores=hw.cores, sockets=hw.sockets, vendor=hw.vendor,
                    model_name=hw.model, version="family 6 model 85 stepping 4" if hw.vendor == "GenuineIntel" else None,
                    clock_mhz=hw.clock_mhz, instruction_set=hw.instruction_set, features=["avx2"] if hw.platform == "x86_64" else [],
                    cache_l1i_kb=hw.cache_l1i_kb, cache_l1d_kb=hw.cache_l1d_kb, cache_l2_kb=hw.cache_l2_kb),
        memory=MemoryInfo(ram_mb=hw.ram_mb, ram_available_mb=hw.ram_mb // 2 + index % 100, swap_mb=0, swap_free_mb=0,
                          virtual_mb=hw.ram_mb, virtual_available_mb=hw.ram_mb // 2 + index % 100),
        load=LoadInfo(load1=load1, load5=load1, load15=load1, runnable_tasks=1, total_tasks=300),
        network=[NetworkAdapter(name="lo", ipv4=["127.0.0.1"], mtu=65536, is_up=True, is_loopback=True),
                 NetworkAdapter(name="eth0", ipv4=[f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"],
                                mtu=9000, is_up=True, speed_mbps=25000, is_primary=True)],
        filesystems=[
            FileSystem(mount_point="/", device="/dev/sda1", fs_type="ext4", size_mb=100_000, available_mb=50_000 + index % 1000),
            FileSystem(mount_point="/scratch", device="/dev/nvme0n1p1", fs_type="xfs", size_mb=1_800_000,
                       available_mb=900_000),
            FileSystem(mount_point="/home", device="nfs.example.org:/export/home", fs_type="nfs4", remote=True,
                       server="nfs.example.org", size_mb=50_000_000, available_mb=20_000_000),
        ],
        os=OsInfo(name=hw.os_name, release=hw.os_release, version=hw.os_version, pretty_name=f"{hw.os_name} {hw.os_release}",
                  kernel_release="6.1.0-13-amd64", platform_type=hw.platform),
        static=StaticFacts(si00=si00, runtime_environment=list(runtime_environment), inbound_ip=False, outbound_ip=True),
    )


def synthetic_site(total: int = 1000) -> list[HostSnapshot]:
    """``total`` hosts in the five CLASSES, in the classes' proportions (1,000 -> 400/250/150/150/50)."""
    hosts = []
    base = sum(count for _, count in CLASSES)
    for hw, count in CLASSES:
        for index in range(count * total // base):
            hosts.append(make_host(hw, index))
    return hosts


HOSTILE_MODEL = "Intel® Core™ i7 Процессор"


def hostile_host() -> HostSnapshot:
    """A host whose facts need DN escaping, base64, transliteration or shortening (its name is a
    DNS name: any other is refused at the model boundary, glueinfo.core.validate; the mount point
    with a newline is dropped there too)."""
    host = make_host(CLASSES[4][0], 0)
    host.hostname = "node-1.weird.example.org"
    host.cpu = dataclasses.replace(host.cpu, model_name=HOSTILE_MODEL, vendor="Ω" * 3)
    host.os = dataclasses.replace(host.os, name="Debian GNU/Linux ™", version="x" * 5000)
    host.filesystems = [
        FileSystem(mount_point="/mnt/with space", fs_type="ext4", size_mb=1, available_mb=1),
        FileSystem(mount_point="/mnt/a,b=c+d", fs_type="ext4"),
        FileSystem(mount_point="/mnt/new\nline", fs_type="ext4"),
        FileSystem(mount_point="#leading", fs_type="ext4"),
        FileSystem(mount_point="/trailing  ", fs_type="ext4"),
        FileSystem(mount_point="/DUP", fs_type="ext4"),  # the same name as "/dup  " to slapd (case, trailing spaces):
        FileSystem(mount_point="/dup  ", fs_type="xfs"),  # published once
        FileSystem(mount_point="/" + "long" * 300, fs_type="ext4"),
    ]
    return host
