"""The node_exporter mapping shared by the prometheus and node_exporter sources, on pages and
answers written here by hand (the figures are the page's, not glueinfo's)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from glueinfo.gather.sources import prometheus
from glueinfo.gather.sources._node_metrics import NodeFacts
from glueinfo.gather.sources.node_exporter import ExpositionError, parse_page, parse_page_whole, split_page

PAGE = b"""# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 8
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 10
node_cpu_seconds_total{cpu="0",mode="user"} 1
node_cpu_seconds_total{cpu="1",mode="idle"} 10
node_cpu_seconds_total{cpu="2",mode="idle"} 10
node_cpu_seconds_total{cpu="3",mode="idle"} 10
# TYPE node_cpu_info gauge
node_cpu_info{core="0",cpu="0",model_name="Xeon X",package="0",vendor="GenuineIntel"} 1
node_cpu_info{core="0",cpu="1",model_name="Xeon X",package="0",vendor="GenuineIntel"} 1
node_cpu_info{core="1",cpu="2",model_name="Xeon X",package="0",vendor="GenuineIntel"} 1
node_cpu_info{core="1",cpu="3",model_name="Xeon X",package="0",vendor="GenuineIntel"} 1
# TYPE node_memory_MemTotal_bytes gauge
node_memory_MemTotal_bytes 8.589934592e+09
# TYPE node_memory_SwapTotal_bytes gauge
node_memory_SwapTotal_bytes 1.073741824e+09
# TYPE node_memory_SwapFree_bytes gauge
node_memory_SwapFree_bytes NaN
# TYPE node_load1 gauge
node_load1 1.5
# TYPE node_procs_running gauge
node_procs_running 2
# TYPE node_filesystem_size_bytes gauge
node_filesystem_size_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 1.073741824e+10
node_filesystem_size_bytes{device="tmpfs",fstype="tmpfs",mountpoint="/tmp"} 1.073741824e+09
# TYPE node_filesystem_device_error gauge
node_filesystem_device_error{device="srv:/home",fstype="nfs4",mountpoint="/home"} 1
# TYPE node_network_flags gauge
node_network_flags{device="eth0"} 4099
node_network_flags{device="lo"} 9
# TYPE node_network_speed_bytes gauge
node_network_speed_bytes{device="eth0"} 1.25e+08
# TYPE node_network_info gauge
node_network_info{address="aa:bb:cc:dd:ee:ff",device="eth0",operstate="up"} 1
node_network_info{address="00:00:00:00:00:00",device="lo",operstate="unknown"} 1
# TYPE node_os_info gauge
node_os_info{name="Rocky Linux",pretty_name="Rocky Linux 9.3 (Blue Onyx)",version="9.3 (Blue Onyx)",version_id="9.3"} 1
# TYPE node_uname_info gauge
node_uname_info{machine="x86_64",nodename="wn1.example.org",release="5.14.0",version="#1 SMP"} 1
"""


def test_a_page_maps_to_the_facts_it_states_and_leaves_the_rest_unknown() -> None:
    facts = parse_page(PAGE)
    assert facts.nodename == "wn1.example.org"
    snap = facts.snapshot("wn1.example.org", 100.0)
    assert snap.cpu is not None and (snap.cpu.logical_cpus, snap.cpu.physical_cores, snap.cpu.sockets) == (4, 2, 1)
    assert (snap.cpu.model_name, snap.cpu.vendor, snap.cpu.instruction_set) == ("Xeon X", "GenuineIntel", "x86_64")
    assert snap.cpu.clock_mhz is None and snap.cpu.cache_l2_kb is None
    assert snap.memory is not None and (snap.memory.ram_mb, snap.memory.swap_mb) == (8192, 1024)
    assert snap.memory.swap_free_mb is None and snap.memory.virtual_available_mb is None  # NaN is not a number
    assert snap.load is not None and (snap.load.load1, snap.load.load5, snap.load.runnable_tasks) == (1.5, None, 2)
    assert snap.filesystems is not None
    fs = {f.mount_point: f for f in snap.filesystems}
    assert sorted(fs) == ["/", "/home"]  # tmpfs is pseudo, as the local collector has it
    assert fs["/"].size_mb == 10240 and fs["/home"].remote and fs["/home"].server == "srv" and fs["/home"].size_mb is None
    assert snap.network is not None
    nets = {a.name: a for a in snap.network}
    assert nets["eth0"].is_up and nets["eth0"].speed_mbps == 1000 and nets["eth0"].mac == "aa:bb:cc:dd:ee:ff"
    assert nets["lo"].is_up and nets["lo"].is_loopback and nets["lo"].speed_mbps is None
    assert nets["eth0"].ipv4 == [] and not nets["eth0"].is_primary
    assert snap.os is not None and (snap.os.name, snap.os.release, snap.os.version) == ("Rocky Linux", "9.3", "Blue Onyx")
    assert snap.os.kernel_release == "5.14.0"


@pytest.mark.parametrize("body, words", [
    (b"\xff\xfe", "not UTF-8"),
    (b"node_load1{oops 1\n", "not the Prometheus exposition format"),
    (b"<html>hello</html>\n", "no node_exporter metrics"),
])
def test_a_page_that_is_not_node_exporter_is_refused_in_one_line(body: bytes, words: str) -> None:
    with pytest.raises(ExpositionError) as caught:
        parse_page(body)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_instance_loses_its_port_only() -> None:
    assert prometheus.instance_host("wn1.example.org:9100") == "wn1.example.org"
    assert prometheus.instance_host("[2001:db8::1]:9100") == "2001:db8::1"
    assert prometheus.instance_host("wn1") == "wn1"


def test_the_selector_is_on_every_series_selector() -> None:
    for name, promql in prometheus.queries('job="node"').items():
        assert promql.count("{") == promql.count('job="node"') >= 1, (name, promql)


def answer(vector: list[dict]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": vector}}).encode()


def test_targets_sharing_one_name_are_refused_and_the_others_kept() -> None:
    def series(instance: str, nodename: str) -> dict:
        return {"metric": {"job": "node", "instance": instance, "nodename": nodename, "machine": "x86_64"},
                "value": [1000.0, "1"]}

    results = {name: [] for name in prometheus.queries("")}
    results["up"] = [{"metric": {"job": "node", "instance": i}, "value": [1000.0, "1"]} for i in ("a:1", "b:1", "c:1")]
    results["seen"] = [{"metric": {"job": "node", "instance": i}, "value": [1000.0, "998"]} for i in ("a:1", "b:1", "c:1")]
    results["node_uname_info"] = [series("a:1", "same"), series("b:1", "same"), series("c:1", "other")]
    facts = prometheus.target_facts(results)
    names = {key: prometheus._name("nodename", key, {}, target) for key, target in facts.items()}
    assert names == {("node", "a:1"): "same", ("node", "b:1"): "same", ("node", "c:1"): "other"}


@pytest.mark.parametrize("body, status, words", [
    (b"<html>", 200, "not the API's JSON"),
    (b'{"status":"error","errorType":"bad_data","error":"parse error"}', 400, "HTTP 400: bad_data: parse error"),
    (json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode(), 200, "not an instant vector"),
])
def test_an_answer_that_is_not_a_vector_is_one_line(body: bytes, status: int, words: str) -> None:
    with pytest.raises(prometheus.PrometheusError) as caught:
        prometheus._vector(body, status)
    assert words in str(caught.value)


# -- the per-CPU lines read beside prometheus_client's parser (node_exporter.split_page) ----------

def cpu_page(threads: int = 8, sockets: int = 2, tail: str = "") -> str:
    """A node_exporter-like page whose per-CPU families come in node_exporter's layout."""
    per_socket = threads // sockets
    lines = ["# HELP node_boot_time_seconds Node boot time, in unixtime.", "# TYPE node_boot_time_seconds gauge",
             "node_boot_time_seconds 1.7e+09",
             "# HELP node_cpu_guest_seconds_total Seconds the CPUs spent in guests (VMs) for each mode.",
             "# TYPE node_cpu_guest_seconds_total counter",
             *(f'node_cpu_guest_seconds_total{{cpu="{c}",mode="user"}} 0' for c in range(threads)),
             "# HELP node_cpu_info CPU information from /proc/cpuinfo.", "# TYPE node_cpu_info gauge",
             *(f'node_cpu_info{{cachesize="512 KB",core="{c % per_socket // 2}",cpu="{c}",family="25",'
               f'microcode="0xa0011d1",model="1",model_name="AMD EPYC 7543 32-Core Processor",'
               f'package="{c // per_socket}",stepping="1",vendor="AuthenticAMD"}} 1' for c in range(threads)),
             "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.",
             "# TYPE node_cpu_seconds_total counter",
             *(f'node_cpu_seconds_total{{cpu="{c}",mode="{m}"}} 123456.78' for c in range(threads)
               for m in ("idle", "system", "user")),
             "# HELP node_load1 1m load average.", "# TYPE node_load1 gauge", "node_load1 0.5",
             "# HELP node_uname_info Labeled system information as provided by the uname system call.",
             "# TYPE node_uname_info gauge",
             'node_uname_info{machine="x86_64",nodename="wn1",release="6.1.0",sysname="Linux",version="#1 SMP"} 1']
    return "\n".join(lines) + "\n" + tail


def replace_line(page: str, number: int, family: str, new: str) -> str:
    """``page`` with the ``number``-th line of ``family``'s samples replaced by ``new``."""
    lines = page.split("\n")
    at = [i for i, line in enumerate(lines) if line.startswith(family + "{")][number]
    lines[at] = new
    return "\n".join(lines)


def insert_after(page: str, number: int, family: str, new: str) -> str:
    lines = page.split("\n")
    at = [i for i, line in enumerate(lines) if line.startswith(family + "{")][number]
    lines.insert(at + 1, new)
    return "\n".join(lines)


INFO = 'node_cpu_info{core="0",cpu="5",model_name="%s",package="%s",vendor="%s"} %s'
IDLE = 'node_cpu_seconds_total{cpu="%s",mode="idle"} %s'
HOSTILE = {
    "plain": cpu_page(),
    "one cpu": cpu_page(threads=1, sockets=1),
    "escaped quote in a model": replace_line(cpu_page(), 3, "node_cpu_info", INFO % ('Xeon \\"X\\"', "0", "Intel", "1")),
    "backslash in a model": replace_line(cpu_page(), 5, "node_cpu_info", INFO % ("Xeon\\\\X", "1", "Intel", "1")),
    "a newline escape": replace_line(cpu_page(), 5, "node_cpu_info", INFO % ("Xeon\\nX", "1", "Intel", "1")),
    "another model mid-run": replace_line(cpu_page(), 4, "node_cpu_info", INFO % ("Other", "7", "Intel", "1")),
    "most CPUs another model": "\n".join(line.replace("AMD EPYC 7543 32-Core Processor", "Other") if 'cpu="1"' not in line
                                         else line for line in cpu_page().split("\n")),
    "punctuation in values": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("a,b}c=d{e f", "0", "x y", "1")),
    "a comma first in a value": replace_line(cpu_page(), 2, "node_cpu_info", INFO % (",X", "0", ",Intel,", "1")),
    "unicode in values": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("Ünïcode ✓", "0", "Intel", "1")),
    "a timestamp": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X", "0", "Intel", "1 1700000000000")),
    "two spaces before the value": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X", "0", "Intel", " 1")),
    "a tab before the value": replace_line(cpu_page(), 2, "node_cpu_info", (INFO % ("X", "0", "Intel", "")) + "\t1"),
    "a count of CPUs": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X", "0", "Intel", "40")),
    "exponent and leading zeros": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X", "007", "Intel", "1e3")),
    "NaN": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X", "0", "Intel", "NaN")),
    "+Inf idle": replace_line(cpu_page(), 2, "node_cpu_seconds_total", IDLE % ("2", "+Inf")),
    "negative idle": replace_line(cpu_page(), 2, "node_cpu_seconds_total", IDLE % ("2", "-1")),
    "underscore in a value": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X", "0", "Intel", "1_0")),
    "trailing comma": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{core="0",package="1",} 1'),
    "spaces in the labels": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{core="0", package = "1"} 1'),
    "no labels": replace_line(cpu_page(), 2, "node_cpu_info", "node_cpu_info{} 1"),
    "a repeated label": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{core="0",core="1"} 1'),
    "a reserved label": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{__x="0",core="1"} 1'),
    "a label name with a digit first": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{0core="0"} 1'),
    "a quoted label name": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{"core"="0"} 1'),
    "an unclosed quote": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{core="0} 1'),
    "no value": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{core="0"}'),
    "a second name in the labels": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info{__name__="x"} 1'),
    "a space before the labels": replace_line(cpu_page(), 2, "node_cpu_info", 'node_cpu_info {core="9",package="3"} 1'),
    "mode idle in another label": replace_line(cpu_page(), 2, "node_cpu_seconds_total",
                                               'node_cpu_seconds_total{cpu="mode=\\"idle\\"",mode="user"} 1'),
    "mode idle in a plain value": replace_line(cpu_page(), 2, "node_cpu_seconds_total",
                                               'node_cpu_seconds_total{cpu="mode=idle",mode="idle"} 1'),
    "typed a counter": cpu_page().replace("# TYPE node_cpu_info gauge", "# TYPE node_cpu_info counter"),
    "idle typed a gauge": cpu_page().replace("# TYPE node_cpu_seconds_total counter", "# TYPE node_cpu_seconds_total gauge"),
    "retyped after the run": cpu_page().replace("# HELP node_cpu_seconds_total",
                                                "# TYPE node_cpu_info counter\n# HELP node_cpu_seconds_total"),
    "retyped in the run": insert_after(cpu_page(), 3, "node_cpu_info", "# TYPE node_cpu_info counter"),
    "help repeated in the run": insert_after(cpu_page(), 3, "node_cpu_info", "# HELP node_cpu_info again"),
    "another family in the run": insert_after(cpu_page(), 3, "node_cpu_info", "node_load1 7"),
    "a comment in the run": insert_after(cpu_page(), 3, "node_cpu_info", "# just a comment"),
    "a blank line in the run": insert_after(cpu_page(), 3, "node_cpu_info", ""),
    "a tab in the type line": cpu_page().replace("# TYPE node_cpu_info gauge", "# TYPE\tnode_cpu_info gauge"),
    "the type line twice": cpu_page().replace("# TYPE node_cpu_info gauge", "# TYPE node_cpu_info gauge\n" * 2),
    "the run ends the page": cpu_page().split("# HELP node_cpu_seconds_total")[0],
    "runs of both families twice": cpu_page() + "\n".join(cpu_page().split("\n")[5:]),
    "a type line without a type": cpu_page().replace("# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.",
                                                     "# TYPE node_load5"),
    "a carriage return mid-line": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X\rY", "0", "Intel", "1")),
    "a line separator in a value": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X\u2028Y", "0", "Intel", "1")),
    "a form feed in a value": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X\x0cY", "0", "Intel", "1")),
    "a NUL in a value": replace_line(cpu_page(), 2, "node_cpu_info", INFO % ("X\x00Y", "0", "Intel", "1")),
    "the test page": PAGE.decode(),
}


def outcome(parse: Callable[[bytes], NodeFacts], page: str) -> tuple[str, object]:
    try:
        facts = parse(page.encode())
    except ExpositionError as exc:
        return "refused", str(exc)
    return "read", (facts.nodename, facts.snapshot("wn1", 100.0))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_per_cpu_lines_read_beside_the_parser_give_what_the_whole_parse_gives(name: str) -> None:
    assert outcome(parse_page, HOSTILE[name]) == outcome(parse_page_whole, HOSTILE[name])


def test_lines_read_beside_the_parser_are_only_plain_per_cpu_lines_after_the_first() -> None:
    parsed, read = split_page(cpu_page(threads=8))
    assert len(read) == 7 + 7  # node_cpu_info and idle lines after each family's first
    assert {name for name, _, _ in read} == {"node_cpu_info", "node_cpu_seconds_total"}
    assert parsed.count("node_cpu_info{") == 1 and parsed.count("node_cpu_seconds_total{") == 1
    _, read = split_page(HOSTILE["retyped in the run"])
    assert not [s for s in read if s[0] == "node_cpu_info"]  # the later TYPE renames the family's lines: parser's call
    _, read = split_page(HOSTILE["escaped quote in a model"])
    assert not [s for s in read if s[0] == "node_cpu_info"]  # a run not ended as node_exporter ends it: all parsed
