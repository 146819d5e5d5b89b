"""Every built-in collector on every recorded host tree in tests/fixtures/hosts.

The expected values are written by hand from the fixture files (the
arithmetic is shown next to each number), never computed by glueinfo.
"""

from __future__ import annotations

import os
import shutil

import pytest
from paths import HOSTS

from glueinfo.core.config import Config, parse_text
from glueinfo.core.model import CpuInfo, FileSystem, LoadInfo, MemoryInfo, NetworkAdapter, OsInfo, StaticFacts
from glueinfo.host.collect import CollectContext, local_hostname, probe
from glueinfo.host.collectors import cpu, filesystems, load, memory, network, opsys, static

HOSTS = str(HOSTS)
ALL_HOSTS = sorted(os.listdir(HOSTS))


def ctx(host: str, **kwargs) -> CollectContext:
    return CollectContext(host_root=os.path.join(HOSTS, host), **kwargs)


def test_every_fixture_is_covered_here():
    assert ALL_HOSTS == ["arm-altra-q32", "epyc-container", "vm-nonascii-cpu", "wn-nfs-lustre", "xeon-gold-2s-ht"]


# -- cpu -----------------------------------------------------------------------
EXPECTED_CPU = {
    # 2 x Xeon Gold 6126: 48 "processor" lines, physical id 0/1, 24 distinct core_cpus_list values.
    # Clock from "@ 2.60GHz", not cpufreq's turbo 3700000 kHz nor the idle "cpu MHz 1000.012".
    "xeon-gold-2s-ht": CpuInfo(
        logical_cpus=48, physical_cores=24, sockets=2, vendor="GenuineIntel",
        model_name="Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz", version="family 6 model 85 stepping 4",
        clock_mhz=2600, instruction_set="x86_64",
        features=["aes", "avx", "avx2", "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl", "fma", "sse4_2", "vmx"],
        cache_l1i_kb=32, cache_l1d_kb=32, cache_l2_kb=1024, cache_l3_kb=19712),
    # one E5-2620 v4, 8 cores x 2 threads; kernel 3.10 gives thread_siblings_list only.
    "wn-nfs-lustre": CpuInfo(
        logical_cpus=16, physical_cores=8, sockets=1, vendor="GenuineIntel",
        model_name="Intel(R) Xeon(R) CPU E5-2620 v4 @ 2.10GHz", version="family 6 model 79 stepping 1",
        clock_mhz=2100, instruction_set="x86_64",
        features=["aes", "avx", "avx2", "fma", "sse4_2", "vmx"],
        cache_l1i_kb=32, cache_l1d_kb=32, cache_l2_kb=256, cache_l3_kb=20480),
    # cpuinfo only: cores from (physical id, core id) pairs, no caches, no recorded machine.
    "vm-nonascii-cpu": CpuInfo(
        logical_cpus=4, physical_cores=4, sockets=1, vendor="GenuineIntel",
        model_name="Intel® Core™ i7-8700 CPU @ 3.20GHz", version="family 6 model 158 stepping 10",
        clock_mhz=3200, instruction_set=None,
        features=["aes", "avx", "avx2", "fma", "hypervisor", "sse4_2"]),
    # arm64: implementer 0x41 = ARM, part 0xd0c = Neoverse-N1; cpuinfo_max_freq 1700000 kHz; no L3 in sysfs.
    "arm-altra-q32": CpuInfo(
        logical_cpus=32, physical_cores=32, sockets=1, vendor="ARM", model_name="Neoverse-N1",
        version="implementer 0x41 architecture 8 variant 0x3 part 0xd0c revision 1",
        clock_mhz=1700, instruction_set="aarch64",
        features=["aes", "asimd", "asimddp", "atomics", "sha2"],
        cache_l1i_kb=64, cache_l1d_kb=64, cache_l2_kb=1024),
    # no "@" in the name, no cpufreq: "cpu MHz 2445.406" rounds to 2445. core_cpus_list 0-1, 2-3, 4-5, 6-7.
    "epyc-container": CpuInfo(
        logical_cpus=8, physical_cores=4, sockets=1, vendor="AuthenticAMD",
        model_name="AMD EPYC 7763 64-Core Processor", version="family 25 model 1 stepping 1",
        clock_mhz=2445, instruction_set="x86_64",
        features=["aes", "avx", "avx2", "fma", "hypervisor", "sha_ni", "sse4_2"],
        cache_l1i_kb=32, cache_l1d_kb=32, cache_l2_kb=512, cache_l3_kb=32768),
}


@pytest.mark.parametrize("host", ALL_HOSTS)
def test_cpu(host):
    assert cpu.collect(ctx(host)) == EXPECTED_CPU[host]


# -- memory --------------------------------------------------------------------
EXPECTED_MEMORY = {
    # 196446948 kB // 1024 = 191842; 189003112 // 1024 = 184573; 8388604 // 1024 = 8191
    "xeon-gold-2s-ht": MemoryInfo(191842, 184573, 8191, 8191, 191842 + 8191, 184573 + 8191),
    # 65807864 // 1024 = 64265; 51239100 // 1024 = 50038; 4194300 // 1024 = 4095; 4093948 // 1024 = 3997
    "wn-nfs-lustre": MemoryInfo(64265, 50038, 4095, 3997, 64265 + 4095, 50038 + 3997),
    # 8148712 // 1024 = 7957; 7012344 // 1024 = 6847; no swap
    "vm-nonascii-cpu": MemoryInfo(7957, 6847, 0, 0, 7957, 6847),
    # 131488292 // 1024 = 128406; 127311504 // 1024 = 124327
    "arm-altra-q32": MemoryInfo(128406, 124327, 0, 0, 128406, 124327),
    # 32873200 // 1024 = 32102; 30512344 // 1024 = 29797; 2097148 // 1024 = 2047
    "epyc-container": MemoryInfo(32102, 29797, 2047, 2047, 32102 + 2047, 29797 + 2047),
}


@pytest.mark.parametrize("host", ALL_HOSTS)
def test_memory(host):
    assert memory.collect(ctx(host)) == EXPECTED_MEMORY[host]


# -- load ----------------------------------------------------------------------
EXPECTED_LOAD = {
    "xeon-gold-2s-ht": LoadInfo(23.51, 22.87, 21.40, 25, 1324),
    "wn-nfs-lustre": LoadInfo(15.92, 15.40, 14.98, 17, 912),
    "vm-nonascii-cpu": LoadInfo(0.42, 0.30, 0.21, 1, 187),
    "arm-altra-q32": LoadInfo(31.98, 31.50, 30.02, 33, 655),
    "epyc-container": LoadInfo(2.00, 1.75, 1.10, 3, 402),
}


@pytest.mark.parametrize("host", ALL_HOSTS)
def test_load(host):
    assert load.collect(ctx(host)) == EXPECTED_LOAD[host]


def test_a_recorded_tree_has_no_utilisation_interval():
    # A recording is one moment: utilisation over an interval is unknown, not invented.
    info = load.collect(ctx("xeon-gold-2s-ht", utilisation_interval_s=0.05))
    assert info.cpu_utilisation_percent is None and info.utilisation_interval_s is None


# GLUE ProcessorLoad / SMPLoad: (logical CPUs - load average) x 100.
EXPECTED_GLUE_LOAD = {
    "xeon-gold-2s-ht": (2449, 2513, 2660),  # (48 - 23.51) * 100, (48 - 22.87) * 100, (48 - 21.40) * 100
    "arm-altra-q32": (2, 50, 198),  # (32 - 31.98) * 100, (32 - 31.50) * 100, (32 - 30.02) * 100
    "epyc-container": (600, 625, 690),  # (8 - 2.00) * 100, (8 - 1.75) * 100, (8 - 1.10) * 100
}


@pytest.mark.parametrize("host", sorted(EXPECTED_GLUE_LOAD))
def test_glue_load_figures(host):
    snapshot = probe(Config(), host_root=os.path.join(HOSTS, host))
    assert snapshot.glue_load_figures() == EXPECTED_GLUE_LOAD[host]


# -- network -------------------------------------------------------------------
LO = NetworkAdapter("lo", ["127.0.0.1"], ["::1"], 65536, True, None, "00:00:00:00:00:00", is_loopback=True)
LO_NO_ADDRESSES = NetworkAdapter("lo", [], [], 65536, True, None, "00:00:00:00:00:00", is_loopback=True)

EXPECTED_NETWORK = {
    # default route 0.0.0.0 via eno1; eno2 flags 0x1002 (no IFF_UP) and no speed file.
    "xeon-gold-2s-ht": [
        NetworkAdapter("eno1", ["192.168.1.17"], ["fe80::3eec:efff:fe1a:2b3c"], 1500, True, 10000, "3c:ec:ef:1a:2b:3c",
                       is_primary=True),
        NetworkAdapter("eno2", [], [], 1500, False, None, "3c:ec:ef:1a:2b:3d"),
        NetworkAdapter("ib0", ["10.16.0.17"], [], 2044, True, 100000,
                       "80:00:02:08:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:5b:1c:2e"),
        LO,
    ],
    "wn-nfs-lustre": [
        NetworkAdapter("eth0", ["10.0.0.42"], ["2001:db8:10::42", "fe80::225:90ff:feab:cd42"], 1500, True, 1000,
                       "00:25:90:ab:cd:42", is_primary=True),
        NetworkAdapter("ib0", ["10.10.1.42"], [], 65520, True, 56000,
                       "a0:00:02:20:fe:80:00:00:00:00:00:00:24:8a:07:03:00:91:7b:42"),
        LO,
    ],
    # no recorded.json: addresses unknown (empty), the rest from sysfs and the route table.
    "vm-nonascii-cpu": [
        NetworkAdapter("enp1s0", [], [], 1500, True, None, "52:54:00:6b:3c:11", is_primary=True),
        LO_NO_ADDRESSES,
    ],
    # no IPv4 default route; the IPv6 ::/0 route goes via enP1p1s0 (the lo ::/0 one is a reject route).
    "arm-altra-q32": [
        NetworkAdapter("docker0", ["172.17.0.1"], [], 1500, False, None, "02:42:9c:1e:aa:01"),
        NetworkAdapter("enP1p1s0", ["10.20.0.31"], ["2001:db8:a::31", "fe80::bace:f6ff:fe0a:1122"], 9000, True, 25000,
                       "b8:ce:f6:0a:11:22", is_primary=True),
        LO,
    ],
    # two default routes: eth1 (metric 200, listed first) and eth0 (metric 100) -> eth0.
    "epyc-container": [
        NetworkAdapter("eth0", ["172.31.0.7"], [], 9001, True, None, "0a:5e:12:34:56:78", is_primary=True),
        NetworkAdapter("eth1", ["192.168.0.7"], [], 1500, True, None, "0a:5e:12:34:56:79"),
        LO,
    ],
}


@pytest.mark.parametrize("host", ALL_HOSTS)
def test_network(host):
    assert network.collect(ctx(host)) == EXPECTED_NETWORK[host]


# -- filesystems -----------------------------------------------------------------
# size_mb = blocks * frsize // 2**20; with frsize 4096 that is blocks // 256, with 1 MiB blocks it is blocks.
EXPECTED_FILESYSTEMS = {
    "xeon-gold-2s-ht": [
        FileSystem("/", "/dev/mapper/rl-root", "xfs", False, False, None, 71680, 47104),  # 18350080/256, 12058624/256
        FileSystem("/boot", "/dev/sda2", "xfs", False, False, None, 1014, 704),  # 259584/256, 180224/256
        FileSystem("/boot/efi", "/dev/sda1", "vfat", False, False, None, 598, 590),  # 153290/256 = 598.8, 151292/256 = 590.98
        FileSystem("/scratch", "/dev/nvme0n1", "xfs", False, False, None, 1831384, 1794048),  # 468834304/256, 459276288/256
    ],
    "wn-nfs-lustre": [
        # "rootfs /" is mounted over by /dev/sda2; the tmpfs, cgroup, autofs /cvmfs, rpc_pipefs lines are left out.
        FileSystem("/", "/dev/sda2", "ext4", False, False, None, 50000, 35200),  # 12800000/256, 9011200/256
        FileSystem("/boot", "/dev/sda1", "ext4", False, False, None, 975, 728),  # 249830/256 = 975.9, 186521/256 = 728.6
        FileSystem("/tmp", "/dev/sdb1", "xfs", False, False, None, 457728, 454656),  # 117178368/256, 116391936/256
        FileSystem("/home", "nfs01.example.org:/export/home", "nfs4", False, True, "nfs01.example.org", 9830400, 2293760),
        FileSystem("/opt/sw", "nfs02.example.org:/export/sw", "nfs", True, True, "nfs02.example.org", 1024000, 307200),
        # 268435456000/256 = 1048576000, 107374182400/256 = 419430400
        FileSystem("/lustre/scratch", "10.10.0.1@o2ib:10.10.0.2@o2ib:/scratch", "lustre", False, True,
                   "10.10.0.1@o2ib:10.10.0.2@o2ib", 1048576000, 419430400),
        # its server did not answer when recorded: listed, sizes unknown
        FileSystem("/mnt/projects", "//fs.example.org/projects", "cifs", False, True, "fs.example.org", None, None),
        FileSystem("/cvmfs/atlas.cern.ch", "cvmfs2", "fuse", True, True, None, 20480, 5120),  # 5242880/256, 1310720/256
        FileSystem("/data/run logs", "/dev/sdc1", "ext4", False, False, None, 10240, 9216),  # "\040" is a space
        # /dev/sdd1 mounted first, then /dev/sde1 over it: only the visible one
        FileSystem("/var/spool/jobs", "/dev/sde1", "xfs", False, False, None, 2048, 1024),
    ],
    # no recorded.json: no sizes
    "vm-nonascii-cpu": [
        FileSystem("/", "/dev/vda1", "ext4", False, False, None, None, None),
        FileSystem("/srv/данные", "/dev/vdb1", "ext4", True, False, None, None, None),
    ],
    "arm-altra-q32": [
        FileSystem("/", "/dev/nvme0n1p2", "ext4", False, False, None, 480000, 393216),  # 122880000/256, 100663296/256
        FileSystem("/boot/efi", "/dev/nvme0n1p1", "vfat", False, False, None, 510, 505),  # 130812/256 = 510.98, 129324/256 = 505.2
        # the snap squashfs is left out
        FileSystem("/mnt/alice", "alice@login.example.org:/home/alice", "fuse.sshfs", False, True, "login.example.org",
                   1024000, 512000),  # 262144000/256, 131072000/256
        FileSystem("/mnt/beegfs", "beegfs_nodev", "beegfs", False, True, None, 10485760, 5242880),  # 20971520 * 0.5 MiB
        FileSystem("/mnt/cephfs", "10.20.0.1:6789,10.20.0.2:6789:/", "ceph", False, True, "10.20.0.1:6789,10.20.0.2:6789",
                   10485760, 2621440),  # 2621440 * 4 MiB, 655360 * 4 MiB
    ],
    # a container: its overlay root is kept; the /etc/hosts bind mount, tmpfs /dev and cgroup are not.
    "epyc-container": [
        FileSystem("/", "overlay", "overlay", False, False, None, 126976, 95232),  # 32505856/256, 24379392/256
        FileSystem("/gpfs/projects", "gpfs0", "gpfs", False, True, None, 104857600, 52428800),
        FileSystem("/mnt/gluster", "gluster1.example.org:/vol0", "fuse.glusterfs", False, True, "gluster1.example.org",
                   102400, 51200),  # 26214400/256, 13107200/256
        FileSystem("/mnt/data6", "[2001:db8::5]:/export/data", "nfs4", False, True, "2001:db8::5", 10240, 1024),
    ],
}


@pytest.mark.parametrize("host", ALL_HOSTS)
def test_filesystems(host):
    assert filesystems.collect(ctx(host)) == EXPECTED_FILESYSTEMS[host]


# -- os ------------------------------------------------------------------------
EXPECTED_OS = {
    # no VERSION_CODENAME: the codename is the parenthesised part of VERSION
    "xeon-gold-2s-ht": OsInfo("Rocky Linux", "9.2", "Blue Onyx", "Rocky Linux 9.2 (Blue Onyx)",
                              "5.14.0-284.11.1.el9_2.x86_64", "#1 SMP PREEMPT_DYNAMIC Tue May 9 17:09:15 UTC 2023",
                              "x86_64", 1700000000.0),
    "wn-nfs-lustre": OsInfo("CentOS Linux", "7", "Core", "CentOS Linux 7 (Core)", "3.10.0-1160.102.1.el7.x86_64",
                            "#1 SMP Tue Oct 17 15:42:21 UTC 2023", "x86_64", 1698765432.0),
    # no recorded.json: the architecture is unknown
    "vm-nonascii-cpu": OsInfo("Debian GNU/Linux", "11", "bullseye", "Debian GNU/Linux 11 (bullseye)", "5.10.0-26-amd64",
                              "#1 SMP Debian 5.10.197-1 (2023-09-29)", None, 1701234567.0),
    "arm-altra-q32": OsInfo("Ubuntu", "22.04", "jammy", "Ubuntu 22.04.3 LTS", "5.15.0-91-generic",
                            "#101-Ubuntu SMP Tue Nov 14 13:29:11 UTC 2023", "aarch64", 1702000000.0),
    # neither VERSION_CODENAME nor "(...)" in VERSION: unknown
    "epyc-container": OsInfo("openSUSE Leap", "15.5", None, "openSUSE Leap 15.5", "5.14.21-150500.55.39-default",
                             "#1 SMP PREEMPT_DYNAMIC Tue Dec 5 10:06:35 UTC 2023 (2e4092e)", "x86_64", 1703000000.0),
}


@pytest.mark.parametrize("host", ALL_HOSTS)
def test_os(host):
    assert opsys.collect(ctx(host)) == EXPECTED_OS[host]


# -- hostname and static facts ---------------------------------------------------
EXPECTED_HOSTNAME = {
    "xeon-gold-2s-ht": "hpc-node17.cluster.example.org",  # recorded.json, not the short kernel name
    "wn-nfs-lustre": "wn042.example.org",
    "vm-nonascii-cpu": "lab-vm3",  # no recorded.json: proc/sys/kernel/hostname
    "arm-altra-q32": "arm01.example.org",
    "epyc-container": "epyc-ctr-7.cloud.example.org",
}


@pytest.mark.parametrize("host", ALL_HOSTS)
def test_hostname(host):
    assert local_hostname(ctx(host)) == EXPECTED_HOSTNAME[host]


def test_configured_hostname_wins():
    assert local_hostname(ctx("wn-nfs-lustre", config={"hostname": "alias.example.org"})) == "alias.example.org"


def test_static_facts_come_from_the_config():
    config = parse_text(
        "[static]\nsi00 = 2150\nsf00 = 1900\nruntime_environment = VO-atlas-release-22, GLITE-3_2_0\n"
        "features = infiniband avx512\ninbound_ip = no\noutbound_ip = yes\n"
        "[extensions]\nwn_type = compute\n", "site.conf")
    snapshot = probe(config, host_root=os.path.join(HOSTS, "wn-nfs-lustre"))
    assert snapshot.static == StaticFacts(si00=2150, sf00=1900, runtime_environment=["VO-atlas-release-22", "GLITE-3_2_0"],
                                          features=["infiniband", "avx512"], inbound_ip=False, outbound_ip=True,
                                          extensions={"wn_type": "compute"})


def test_static_facts_unset_stay_unknown():
    assert static.collect(CollectContext(config={})) == StaticFacts()


# -- whole probe of a recorded tree ------------------------------------------------
@pytest.mark.parametrize("host", ALL_HOSTS)
def test_probe_of_a_recorded_tree_runs_every_collector(host):
    snapshot = probe(Config(), host_root=os.path.join(HOSTS, host))
    assert snapshot.host_root == os.path.join(HOSTS, host)
    assert snapshot.hostname == EXPECTED_HOSTNAME[host]
    assert [(r.name, r.success, r.error) for r in snapshot.collectors] == [
        (name, True, None) for name in ("cpu", "memory", "load", "network", "filesystems", "os", "static", "accelerators")]
    assert snapshot.cpu == EXPECTED_CPU[host]
    assert snapshot.filesystems == EXPECTED_FILESYSTEMS[host]


@pytest.mark.parametrize("content, why", [
    ("{not json", "not valid JSON"),
    ('{"statvfs": {"/": {"frsize": "4k", "blocks": 1, "bavail": 1}}}', "statvfs['/'] must have whole numbers frsize, blocks and bavail"),
    ('{"interfaces": ["eth0"]}', "'interfaces' must map adapter names to"),
    ('{"machine": 64}', "'machine' must be a string"),
])
def test_a_broken_recording_fails_only_the_collectors_that_need_it(tmp_path, content, why):
    root = tmp_path / "host"
    shutil.copytree(os.path.join(HOSTS, "wn-nfs-lustre"), root)
    (root / ".glueinfo" / "recorded.json").write_text(content, encoding="utf-8")
    snapshot = probe(Config(), host_root=str(root))
    results = {r.name: r for r in snapshot.collectors}
    # uname -m, addresses and mount sizes live in recorded.json: these collectors say so
    for name in ("cpu", "network", "filesystems", "os"):
        assert not results[name].success
        assert results[name].error.startswith(f"ValueError: {root}/.glueinfo/recorded.json: {why}")
        assert "\n" not in results[name].error
    assert snapshot.cpu is None and snapshot.network is None and snapshot.filesystems is None and snapshot.os is None
    # the others read /proc files only and are not affected
    assert snapshot.memory == EXPECTED_MEMORY["wn-nfs-lustre"]
    assert snapshot.load == EXPECTED_LOAD["wn-nfs-lustre"]
    assert snapshot.hostname == "wn042.example.org"  # proc/sys/kernel/hostname


def test_missing_files_leave_facts_unknown(tmp_path):
    (tmp_path / "proc").mkdir()
    snapshot = probe(Config(), host_root=str(tmp_path))
    assert all(r.success for r in snapshot.collectors), snapshot.collectors
    assert snapshot.cpu == CpuInfo()
    assert snapshot.memory == MemoryInfo()
    assert snapshot.load == LoadInfo()
    assert snapshot.network == [] and snapshot.filesystems == []
    assert snapshot.os == OsInfo()
