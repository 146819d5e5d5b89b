"""The prometheus and node_exporter sources against Debian's real Prometheus and node_exporter.

Four node_exporters on 127.0.0.x each read one recorded host tree; one
Prometheus scrapes them every second (tests/harness/prometheus_harness.py).
`glueinfo gather` (a real process, its JSON output) with either source must
give every fixture host what glueinfo's own collectors read from the same
tree (`glueinfo probe --host-root TREE`), field by field, except the fields
listed below that each source cannot know.  Exporters on one machine all
report this machine's nodename, so hosts are named by target: the ``host``
target label for prometheus, the name written beside each address for
node_exporter.

Filesystems: node_exporter statfs's ``TREE/MOUNTPOINT`` on this machine, so
the tree's ``/`` has the size of the real filesystem holding the tree (checked
against os.statvfs of it) and mount points absent from the tree have no size.

Killing an exporter: Prometheus drops its series at once; its host keeps its
last good snapshot, turns stale after [node] stale_after and is dropped after
[sources] drop_after (time moved on with GLUEINFO_CLOCK, nothing waited for),
the others unaffected.  A Prometheus that is down, slow, answers garbage or an
error status (a small fake server, for those failure modes only): one warning
naming the server, every host's last good data kept.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import HOSTS, REPO
from prometheus_harness import Rig, missing_tools
from waiting import wait_until

FIXTURES = ("xeon-gold-2s-ht", "wn-nfs-lustre", "arm-altra-q32", "epyc-container")
ADDRESSES = {name: f"127.0.0.{20 + i}" for i, name in enumerate(FIXTURES)}
STALE_AFTER, DROP_AFTER = 60, 120
VICTIM = "wn-nfs-lustre"

# Compared with `glueinfo probe --host-root TREE`, per part.
COMPARED = {
    "cpu": ("logical_cpus", "physical_cores", "sockets", "vendor", "model_name"),
    "memory": ("ram_mb", "ram_available_mb", "swap_mb", "swap_free_mb", "virtual_mb", "virtual_available_mb"),
    "load": ("load1", "load5", "load15", "runnable_tasks"),
    "os": ("name", "release", "version", "pretty_name", "boot_time"),
}
ADAPTER_FIELDS = ("name", "mtu", "is_up", "speed_mbps", "mac", "is_loopback")
# What node_exporter cannot tell (left None by both sources).
UNKNOWN = {
    "cpu": ("version", "clock_mhz", "cache_l1_kb", "cache_l1i_kb", "cache_l1d_kb", "cache_l2_kb", "cache_l3_kb"),
    "load": ("total_tasks", "cpu_utilisation_percent"),
}
UNKNOWN_ADAPTER = ("ipv4", "ipv6", "is_primary")  # addresses and routes: not exported ([] / False)
# node_uname_info is this machine's uname, whatever the tree: compared with this machine.
THIS_MACHINE = {"os": ("kernel_release", "platform_type"), "cpu": ("instruction_set",)}
# arm64 /proc/cpuinfo has no vendor_id / model name / physical id / core id: node_cpu_info leaves
# them empty (glueinfo names ARM parts from their numbers and counts cores from sysfs).
ARM_UNKNOWN = ("vendor", "model_name", "physical_cores", "sockets")
NOT_EXPORTED = re.compile(r"^/(dev|proc|run|sys|mnt|media)($|/)")


def run_glueinfo(*args: str, clock: float | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GLUEINFO_CONFIG", None)
    env.pop("GLUEINFO_CLOCK", None)
    if clock is not None:
        env["GLUEINFO_CLOCK"] = repr(clock)
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def gather(conf: Path, clock: float | None = None) -> tuple[dict, str]:
    done = run_glueinfo("gather", "--config", str(conf), clock=clock)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout), done.stderr


def probe(tree: Path) -> dict:
    done = run_glueinfo("probe", "--host-root", str(tree))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def free_port(addresses: list[str]) -> int:
    for _ in range(50):
        with socket.socket() as first:
            first.bind((addresses[0], 0))
            port = first.getsockname()[1]
        try:
            for address in addresses[1:]:
                with socket.socket() as other:
                    other.bind((address, port))
            return port
        except OSError:
            continue
    raise AssertionError("no port free on every exporter address")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    missing = missing_tools()
    if missing:
        pytest.skip("real Prometheus and node_exporter needed, missing: " + ", ".join(missing))
    workdir = tmp_path_factory.mktemp("prometheus")
    rig = Rig(workdir)
    try:
        port = free_port(list(ADDRESSES.values()))
        for name in FIXTURES:
            rig.start_exporter(name, HOSTS / name, ADDRESSES[name], port)
        rig.start_prometheus(free_port(["127.0.0.1"]))
        rig.wait_scraped()
        yield rig
    finally:
        rig.stop()


@pytest.fixture(scope="module")
def expected() -> dict[str, dict]:
    """Every fixture's snapshot as glueinfo's own collectors read its tree."""
    return {name: probe(HOSTS / name) for name in FIXTURES}


def config(path: Path, sources: str, state: Path) -> Path:
    state.mkdir(exist_ok=True)  # `gather` keeps last good snapshots there between runs once it exists
    path.write_text(f"[sources]\n{sources}\ntimeout = 2\nretries = 0\ndrop_after = {DROP_AFTER}\n"
                    f"[node]\nstale_after = {STALE_AFTER}\n[run]\nstate_dir = {state}\n")
    return path


def prometheus_conf(tmp: Path, url: str, name: str = "prometheus.conf") -> Path:
    return config(tmp / name, f"enabled = prometheus\nprometheus_url = {url}\nprometheus_selector = job=\"node\"\n"
                  "prometheus_identity = label:host", tmp / "state")


def exporter_conf(tmp: Path, rig: Rig) -> Path:
    targets = ", ".join(f"{e.target}={e.name}" for e in rig.exporters.values())
    return config(tmp / "node_exporter.conf", f"enabled = node_exporter\nnode_exporters = {targets}\n"
                  "node_exporter_identity = target", tmp / "state")


def hosts_of(result: dict) -> dict[str, dict]:
    return {h["hostname"]: h for h in result["hosts"]}


def mount_table(name: str) -> list[list[str]]:
    """The tree's /proc/mounts lines, split, octal escapes undone (``\\040`` is a space)."""
    lines = (HOSTS / name / "proc/mounts").read_text().splitlines()
    return [[re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), f) for f in line.split()] for line in lines]


def check_host(name: str, got: dict, want: dict) -> None:
    """One gathered snapshot against the probe of the same tree, field by field."""
    arm = name.startswith("arm")
    for part, fields in COMPARED.items():
        for key in fields:
            if arm and part == "cpu" and key in ARM_UNKNOWN:
                assert got[part][key] is None, (name, part, key)
                continue
            assert got[part][key] == want[part][key], (name, part, key, got[part][key], want[part][key])
    for part, fields in UNKNOWN.items():
        for key in fields:
            assert got[part][key] is None, (name, part, key)
    assert got["cpu"]["features"] == [], name
    uname = os.uname()
    assert got["os"]["kernel_release"] == uname.release and got["os"]["platform_type"] == uname.machine, name
    assert got["cpu"]["instruction_set"] == uname.machine, name
    adapters = {a["name"]: a for a in got["network"]}
    assert sorted(adapters) == sorted(a["name"] for a in want["network"]), name
    for adapter in want["network"]:
        mine = adapters[adapter["name"]]
        for key in ADAPTER_FIELDS:
            assert mine[key] == adapter[key], (name, adapter["name"], key, mine[key], adapter[key])
        assert mine["ipv4"] == [] and mine["ipv6"] == [] and mine["is_primary"] is False, (name, adapter["name"])
    # The same mounts as the tree lists; sizes from statfs of TREE/MOUNTPOINT on this machine.
    # Debian's node_exporter leaves out mount points under /dev, /proc, /run, /sys, /mnt and /media
    # (its --collector.filesystem.mount-points-exclude default), and overlay filesystems (a container's
    # root, which glueinfo keeps; --collector.filesystem.fs-types-exclude): those are not known.
    mounts = {f["mount_point"]: f for f in got["filesystems"]}
    shown = [f for f in want["filesystems"] if not NOT_EXPORTED.match(f["mount_point"]) and f["fs_type"] != "overlay"]
    assert sorted(mounts) == sorted(f["mount_point"] for f in shown), name
    for fs in shown:
        mine = mounts[fs["mount_point"]]
        # A mount point mounted over is listed once per device, in no telling order: which is on
        # top is not known, so it may be any device the tree mounts there.
        below = {(m[0], m[2]) for m in mount_table(name) if m[1] == fs["mount_point"]}
        assert (mine["device"], mine["fs_type"]) in below, (name, fs["mount_point"], mine, below)
        if len(below) == 1:
            for key in ("device", "fs_type", "remote", "server"):
                assert mine[key] == fs[key], (name, fs["mount_point"], key, mine[key], fs[key])
        if not (HOSTS / name / fs["mount_point"].lstrip("/")).is_dir():
            assert mine["size_mb"] is None and mine["available_mb"] is None, (name, fs["mount_point"])
    if "/" not in mounts:
        return
    live = os.statvfs(HOSTS / name)
    assert mounts["/"]["size_mb"] == live.f_blocks * live.f_frsize // 2**20, name
    # Free space moves while other tests write: within 1% of the size.
    assert abs(mounts["/"]["available_mb"] - live.f_bavail * live.f_frsize // 2**20) <= mounts["/"]["size_mb"] // 100


def test_prometheus_source_gives_each_host_what_its_tree_says(rig: Rig, expected: dict, tmp_path: Path) -> None:
    result, stderr = gather(prometheus_conf(tmp_path, rig.url))
    assert result["failures"] == [], stderr
    hosts = hosts_of(result)
    assert sorted(hosts) == sorted(FIXTURES)
    for name in FIXTURES:
        assert not hosts[name]["stale"] and list(hosts[name]["sources"]) == ["prometheus"]
        check_host(name, hosts[name]["snapshot"], expected[name])


def test_node_exporter_source_gives_each_host_what_its_tree_says(rig: Rig, expected: dict, tmp_path: Path) -> None:
    result, stderr = gather(exporter_conf(tmp_path, rig))
    assert result["failures"] == [], stderr
    hosts = hosts_of(result)
    assert sorted(hosts) == sorted(FIXTURES)
    for name in FIXTURES:
        assert not hosts[name]["stale"] and list(hosts[name]["sources"]) == ["node_exporter"]
        check_host(name, hosts[name]["snapshot"], expected[name])


def test_nodename_identity_refuses_targets_that_share_one_kernel(rig: Rig, tmp_path: Path) -> None:
    conf = config(tmp_path / "nodename.conf", f"enabled = prometheus\nprometheus_url = {rig.url}\n"
                  "prometheus_identity = nodename", tmp_path / "state")
    result, _ = gather(conf)
    assert result["hosts"] == []
    assert sorted(f["target"] for f in result["failures"]) == sorted(e.target for e in rig.exporters.values())
    assert all(f["host"] == os.uname().nodename and "also given by" in f["error"] for f in result["failures"])


class FakePrometheus:
    """A stand-in for the failure modes only: garbage, an error status, or an answer too slow."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if fake.mode == "slow":
                    time.sleep(4)
                status, body = {"garbage": (200, b"<html>not json</html>"),
                                "error": (503, b'{"status":"error","errorType":"unavailable","error":"overloaded"}'),
                                "slow": (200, b"{}")}[fake.mode]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("mode", ["down", "slow", "garbage", "error"])
def test_a_failing_prometheus_is_one_warning_and_the_last_good_data_stays(rig: Rig, tmp_path: Path, mode: str) -> None:
    good, _ = gather(prometheus_conf(tmp_path, rig.url))
    assert sorted(hosts_of(good)) == sorted(FIXTURES)
    fake = FakePrometheus(mode) if mode != "down" else None
    url = fake.url if fake else f"http://127.0.0.1:{free_port(['127.0.0.1'])}"
    try:
        result, stderr = gather(prometheus_conf(tmp_path, url, "broken.conf"))
    finally:
        if fake:
            fake.close()
    assert len(result["failures"]) == 1, result["failures"]
    failure = result["failures"][0]
    assert failure["target"] == url and failure["source"] == "prometheus"
    expected_words = {"down": "refused", "slow": "within", "garbage": "not the API's JSON", "error": "503"}[mode]
    assert expected_words in failure["error"], failure
    assert sum(url in line for line in stderr.splitlines()) == 1, stderr
    kept = hosts_of(result)
    assert sorted(kept) == sorted(FIXTURES) and not any(h["stale"] for h in kept.values())
    for name in FIXTURES:
        assert kept[name]["snapshot"]["memory"] == hosts_of(good)[name]["snapshot"]["memory"]


def test_a_killed_exporter_turns_unknown_then_disappears_the_others_carry_on(rig: Rig, tmp_path: Path) -> None:
    conf = prometheus_conf(tmp_path, rig.url)
    first, _ = gather(conf)
    assert sorted(hosts_of(first)) == sorted(FIXTURES)
    victim_target = rig.exporters[VICTIM].target

    rig.kill_exporter(VICTIM)
    wait_until(lambda: rig.up().get(VICTIM) == 0, "Prometheus saw the exporter down", 20, step=0.2)

    now = time.time()
    result, _ = gather(conf, clock=now)
    hosts = hosts_of(result)
    assert sorted(hosts) == sorted(FIXTURES) and not any(h["stale"] for h in hosts.values())  # last good, still fresh
    assert [f["target"] for f in result["failures"]] == [victim_target]

    later, _ = gather(conf, clock=now + STALE_AFTER + 5)
    hosts = hosts_of(later)
    assert hosts[VICTIM]["stale"]
    assert not any(h["stale"] for name, h in hosts.items() if name != VICTIM)
    node_xml = run_glueinfo("gather", "--config", str(conf), "--format", "node-xml", clock=now + STALE_AFTER + 6)
    assert node_xml.returncode == 0, node_xml.stderr
    states = dict(re.findall(r"<Id>([^<]+)</Id>.*?<State>([^<]+)</State>", node_xml.stdout, flags=re.S))
    assert states[VICTIM] == "Unknown" and all(states[n] != "Unknown" for n in FIXTURES if n != VICTIM), states

    gone, _ = gather(conf, clock=now + DROP_AFTER + 5)
    hosts = hosts_of(gone)
    assert sorted(hosts) == sorted(n for n in FIXTURES if n != VICTIM)
    assert not any(h["stale"] for h in hosts.values())
