"""Ganglia as a source of host snapshots.

Parsing is checked on recorded documents: a real gmond 3.7.2 answer
(fixtures/ganglia/gmond-3.7.2-one-host.xml) and a gmetad-style site with
nested GRIDs written by hand in the same layout (gmetad-example-site.xml),
expected values worked out by hand from the KB/GB figures in the files.
The integration test starts Debian's real gmond on loopback and checks what
glueinfo reads from it against /proc and uname.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time

import pytest
from paths import FIXTURES
from waiting import wait_until

from glueinfo.core.config import parse_text
from glueinfo.core.hostrange import Target
from glueinfo.gather.gatherer import Gatherer
from glueinfo.gather.sources.ganglia import GangliaError, parse_ganglia, read_port, without_doctype

FIXTURES = FIXTURES / "ganglia"
GMOND = "/usr/sbin/gmond"
NOW = 1800000000.0


def load(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def by_name(report):
    return {s.hostname: s for s in report.snapshots}


# -- parsing recorded documents --------------------------------------------------------


def test_real_gmond_answer_is_read():
    report = parse_ganglia(load("gmond-3.7.2-one-host.xml"), fetched_at=1795357703.0, max_bytes=2**20)
    assert report.failures == []
    (host,) = report.snapshots
    assert host.hostname == "localhost" and host.source == "ganglia"
    assert host.collected_at == 1795357701.0  # fetched 1795357703 minus TN="2"
    assert host.cpu.logical_cpus == 2 and host.cpu.clock_mhz == 1995 and host.cpu.instruction_set == "x86_64"
    assert host.memory.ram_mb == 24684092 // 1024
    assert host.memory.ram_available_mb == 24074056 // 1024 + 52612 // 1024 + 375232 // 1024
    assert host.memory.swap_mb == 0 and host.memory.swap_free_mb == 0
    assert (host.load.load1, host.load.load5, host.load.load15) == (0.57, 0.29, 0.15)
    assert host.os.kernel_release == "6.18.44-fc-v657" and host.os.boot_time == 1795357108.0
    assert host.os.name is None  # Ganglia's os_name is the kernel name, not the distribution
    assert host.extra["ganglia"]["os_name"] == "Linux"
    assert host.extra["ganglia"]["cluster"] == "test" and host.extra["ganglia"]["ip"] == "127.0.0.1"


def test_gmetad_site_maps_every_metric_and_leaves_unknowns_none():
    report = parse_ganglia(load("gmetad-example-site.xml"), fetched_at=NOW, max_bytes=2**20)
    hosts = by_name(report)
    wn = hosts["wn001.example.org"]
    assert wn.collected_at == NOW - 5
    assert (wn.cpu.logical_cpus, wn.cpu.clock_mhz, wn.cpu.instruction_set) == (16, 2400, "x86_64")
    # What Ganglia cannot tell stays unknown.
    assert (wn.cpu.sockets, wn.cpu.physical_cores, wn.cpu.model_name, wn.cpu.cache_l2_kb) == (None, None, None, None)
    assert wn.network is None and wn.filesystems is None and wn.static is None
    assert wn.memory.ram_mb == 64299  # 65843056 KB
    assert wn.memory.ram_available_mb == 976 + 24 + 1953  # free + buffers + cached, each KB -> MB rounded down
    assert (wn.memory.swap_mb, wn.memory.swap_free_mb) == (8191, 8191)
    assert wn.memory.virtual_mb == 64299 + 8191
    assert (wn.load.load1, wn.load.load5, wn.load.load15) == (3.5, 4.0, 4.2)
    assert (wn.load.runnable_tasks, wn.load.total_tasks) == (4, 612)
    assert wn.load.cpu_utilisation_percent == 22.5 and wn.load.utilisation_interval_s is None
    assert (wn.os.kernel_release, wn.os.platform_type, wn.os.boot_time) == ("5.10.0-28-amd64", "x86_64", 1700000000.0)
    assert wn.extra["ganglia"]["disk_total_mb"] == 953868  # 931.512 GB
    assert wn.extra["ganglia"]["disk_free_mb"] == 512256  # 500.25 GB
    assert wn.extra["ganglia"]["cluster"] == "batch" and wn.extra["ganglia"]["location"] == "rack 1, slot 1"

    short = hosts["wn002"]
    assert short.collected_at == NOW - 400
    assert short.memory.ram_mb == 15935 and short.memory.ram_available_mb is None and short.memory.swap_mb is None
    assert short.os is None

    gpu = hosts["gpu01.example.org"]  # inside a nested GRID
    assert gpu.cpu.logical_cpus == 64
    assert gpu.memory is None  # a unit glueinfo does not know is not guessed
    assert gpu.extra["ganglia"]["cluster"] == "gpu"


def test_a_bad_host_record_is_a_failure_naming_it_and_the_others_are_read():
    report = parse_ganglia(load("gmetad-example-site.xml"), fetched_at=NOW, max_bytes=2**20)
    assert [(f.host, f.error) for f in report.failures] == [("bad01.example.org", "metric cpu_num has a non-numeric value 'lots'")]
    assert len(report.snapshots) == 4


@pytest.mark.parametrize("document, words", [
    # External entity: the DTD is cut away, so &xxe; is an undeclared entity.
    (b'<?xml version="1.0"?><!DOCTYPE GANGLIA_XML [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
     b'<GANGLIA_XML><CLUSTER NAME="c"><HOST NAME="&xxe;" TN="1"/></CLUSTER></GANGLIA_XML>', "not well-formed"),
    # Billion laughs.
    (b'<!DOCTYPE GANGLIA_XML [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
     b'<GANGLIA_XML><HOST NAME="&b;" TN="1"/></GANGLIA_XML>', "not well-formed"),
    # A "]>" hidden in an entity value to end the cut early: what is left is still refused.
    (b'<!DOCTYPE GANGLIA_XML [<!ENTITY a "]>"><!ENTITY x SYSTEM "file:///etc/passwd">]>'
     b'<GANGLIA_XML><HOST NAME="&x;" TN="1"/></GANGLIA_XML>', "DTDs and entity declarations are not accepted"),
    (b'<GANGLIA_XML><CLUSTER NAME="c"><HOST NAME="a"', "not well-formed"),
    (b'<html><body>nope</body></html>', "not <GANGLIA_XML>"),
])
def test_hostile_documents_are_refused(document, words):
    with pytest.raises(GangliaError) as info:
        parse_ganglia(document, fetched_at=NOW, max_bytes=2**20)
    assert words in str(info.value)
    assert "root:" not in str(info.value)


def test_doctype_cut_keeps_everything_else():
    data = load("gmond-3.7.2-one-host.xml")
    cut = without_doctype(data)
    assert b"<!DOCTYPE" not in cut and b"<!ELEMENT" not in cut
    assert cut.endswith(data[data.index(b"<GANGLIA_XML"):])


# -- through the gatherer, from a TCP port ---------------------------------------------


class OneShotXmlPort:
    """A port that sends a fixed document and closes, as gmond/gmetad do."""

    def __init__(self, document: bytes):
        self.document = document
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(self.document)

    def close(self):
        self.sock.close()


def config_for(port: int, extra: str = ""):
    return parse_text(f"[sources]\nenabled = ganglia\nganglia = 127.0.0.1:{port}\n{extra}"
                      "[node]\nstale_after = 300\n", "test.conf")


def test_gather_from_a_gmetad_port_marks_stale_and_drops_old_hosts():
    server = OneShotXmlPort(load("gmetad-example-site.xml"))
    try:
        result = Gatherer(config_for(server.port, "drop_after = 3600\n"), clock=lambda: NOW).gather()
    finally:
        server.close()
    hosts = {h.snapshot.hostname: h for h in result.hosts}
    # wn001 (TN 5) fresh, wn002 (TN 400) stale, gpu01 (TN 4000) beyond drop_after, bad01 unreadable,
    # neg01 reports a negative load average: that figure is dropped (unknown), the rest of the host kept.
    assert sorted(hosts) == ["neg01.example.org", "wn001.example.org", "wn002"]
    assert hosts["wn001.example.org"].stale is False and hosts["wn002"].stale is True
    assert hosts["wn002"].age_s == 400
    assert hosts["neg01.example.org"].snapshot.load.load1 is None
    errors = {f.host: f.error for f in result.failures}
    assert list(errors) == ["bad01.example.org"] and "non-numeric" in errors["bad01.example.org"]
    assert result.counts == {"ganglia": 4}  # wn001, wn002, neg01 and gpu01 (believed, then dropped as too old)


def test_an_unreachable_ganglia_port_is_one_failure():
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    result = Gatherer(config_for(port), clock=time.time).gather()
    assert result.hosts == []
    (failure,) = result.failures
    assert failure.target == f"127.0.0.1:{port}" and "refused" in failure.error.lower()


def test_a_document_over_the_size_limit_is_refused():
    server = OneShotXmlPort(load("gmetad-example-site.xml"))
    try:
        with pytest.raises(GangliaError, match="over the limit of 4096 bytes"):
            read_port(Target("127.0.0.1", server.port), 5.0, 4096)
    finally:
        server.close()


# -- a real gmond ------------------------------------------------------------------------


def free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


GMOND_CONF = """\
globals {{
  daemonize = no
  setuid = no
  debug_level = 0
  max_udp_msg_len = 1472
  mute = no
  deaf = no
  host_dmax = 0
  cleanup_threshold = 300
  gexec = no
  send_metadata_interval = 5
}}
cluster {{ name = "glueinfo-test" owner = "glueinfo" latlong = "unspecified" url = "unspecified" }}
host {{ location = "unspecified" }}
udp_send_channel {{ host = 127.0.0.1 port = {udp} ttl = 1 }}
udp_recv_channel {{ port = {udp} bind = 127.0.0.1 }}
tcp_accept_channel {{ port = {tcp} bind = 127.0.0.1 }}
modules {{
  module {{ name = "core_metrics" }}
  module {{ name = "cpu_module" path = "modcpu.so" }}
  module {{ name = "disk_module" path = "moddisk.so" }}
  module {{ name = "load_module" path = "modload.so" }}
  module {{ name = "mem_module" path = "modmem.so" }}
  module {{ name = "proc_module" path = "modproc.so" }}
  module {{ name = "sys_module" path = "modsys.so" }}
}}
collection_group {{ collect_once = yes time_threshold = 20 metric {{ name = "heartbeat" }} }}
collection_group {{ collect_once = yes time_threshold = 60
  metric {{ name = "cpu_num" }} metric {{ name = "cpu_speed" }} metric {{ name = "mem_total" }} metric {{ name = "swap_total" }}
  metric {{ name = "boottime" }} metric {{ name = "machine_type" }} metric {{ name = "os_name" }} metric {{ name = "os_release" }} }}
collection_group {{ collect_every = 5 time_threshold = 10
  metric {{ name = "load_one" }} metric {{ name = "load_five" }} metric {{ name = "load_fifteen" }}
  metric {{ name = "mem_free" }} metric {{ name = "mem_buffers" }} metric {{ name = "mem_cached" }} metric {{ name = "swap_free" }}
  metric {{ name = "proc_run" }} metric {{ name = "proc_total" }} }}
"""


def gmond_module_dir() -> str:
    for candidate in ("/usr/lib/x86_64-linux-gnu/ganglia", "/usr/lib/aarch64-linux-gnu/ganglia", "/usr/lib64/ganglia", "/usr/lib/ganglia"):
        if os.path.exists(os.path.join(candidate, "modcpu.so")):
            return candidate
    pytest.skip("gmond's metric modules (ganglia-monitor) are not installed")


@pytest.fixture
def gmond(tmp_path):
    if not shutil.which(GMOND) and not os.path.exists(GMOND):
        pytest.skip("gmond (Debian package ganglia-monitor) is not installed")
    modules = gmond_module_dir()
    tcp, udp = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_DGRAM)
    conf = tmp_path / "gmond.conf"
    conf.write_text(GMOND_CONF.format(tcp=tcp, udp=udp).replace('path = "mod', f'path = "{modules}/mod'))
    log = open(tmp_path / "gmond.log", "wb")
    proc = subprocess.Popen([GMOND, "-c", str(conf), "-f"], stdout=log, stderr=subprocess.STDOUT)
    try:
        def serving() -> bool:
            data = read_port(Target("127.0.0.1", tcp), 2.0, 2**22)
            return b'NAME="mem_total"' in data and b'NAME="cpu_num"' in data and b'NAME="load_one"' in data

        wait_until(serving, "gmond served its metrics (mem_total, cpu_num, load_one)", 30, step=0.3, ignore=(OSError,),
                   detail=lambda: (tmp_path / "gmond.log").read_text()[-2000:], still_running=lambda: proc.poll() is None)
        yield tcp
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def proc_facts() -> dict:
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
        cpus = sum(1 for line in handle if line.startswith("processor"))
    with open("/proc/meminfo", encoding="utf-8") as handle:
        meminfo = {line.split(":")[0]: int(line.split()[1]) for line in handle if line.split()[1].isdigit()}
    with open("/proc/stat", encoding="utf-8") as handle:
        btime = next(int(line.split()[1]) for line in handle if line.startswith("btime"))
    return {"cpus": cpus, "mem_total_kb": meminfo["MemTotal"], "swap_total_kb": meminfo["SwapTotal"], "btime": btime}


@pytest.mark.integration
def test_real_gmond_host_matches_proc(gmond):
    config = parse_text(f"[sources]\nenabled = ganglia\nganglia = 127.0.0.1:{gmond}\n", "test.conf")
    before = time.time()
    result = Gatherer(config).gather()
    assert result.failures == []
    (host,) = result.hosts
    snap = host.snapshot
    facts = proc_facts()
    assert snap.source == "ganglia" and host.stale is False
    assert before - 60 <= snap.collected_at <= time.time()
    assert snap.cpu.logical_cpus == facts["cpus"]
    assert snap.memory.ram_mb == facts["mem_total_kb"] // 1024
    assert snap.memory.swap_mb == facts["swap_total_kb"] // 1024
    assert 0 <= snap.memory.ram_available_mb <= snap.memory.ram_mb
    assert snap.cpu.instruction_set == os.uname().machine == snap.os.platform_type
    assert snap.os.kernel_release == os.uname().release
    assert abs(snap.os.boot_time - facts["btime"]) <= 2
    with open("/proc/loadavg", encoding="ascii") as handle:
        load15 = float(handle.read().split()[2])
    assert abs(snap.load.load15 - load15) < 1.0  # the 15-minute average moves slowly
    assert snap.cpu.model_name is None and snap.filesystems is None  # not something gmond tells


def test_a_size_too_large_for_mb_is_a_failure_naming_the_metric():
    # 1e305 TB is a finite float as written but infinite in MB: it must not crash the parse.
    data = load("gmond-3.7.2-one-host.xml")
    start = data.index(b'<METRIC NAME="mem_total"')
    end = data.index(b">", start)
    tag = data[start:end]
    hostile = tag.replace(tag[tag.index(b'VAL="'):tag.index(b'"', tag.index(b'VAL="') + 5) + 1], b'VAL="1e305"')
    hostile = hostile.replace(b'UNITS="KB"', b'UNITS="TB"')
    report = parse_ganglia(data.replace(tag, hostile), fetched_at=NOW, max_bytes=2**20)
    assert report.snapshots == []
    [failure] = report.failures
    assert "mem_total" in failure.error and "too large" in failure.error
