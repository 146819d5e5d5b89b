"""The node_exporter mapping shared by the prometheus and node_exporter sources, on pages and
answers written here by hand (the figures are the page's, not glueinfo's)."""

from __future__ import annotations

import json

import pytest

from glueinfo.gather.sources import prometheus
from glueinfo.gather.sources.node_exporter import ExpositionError, parse_page

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
