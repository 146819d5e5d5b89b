"""The gatherer's rules: last good kept, staleness and dropping, merging duplicates.

Sources here are small in-test Source values whose reports the test sets
cycle by cycle; the clock is the test's.  Expected values are written out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from paths import REPO

from glueinfo.core.config import parse_text
from glueinfo.core.freshness import is_expired, is_stale
from glueinfo.core.model import CpuInfo, FileSystem, HostSnapshot, LoadInfo, MemoryInfo, NetworkAdapter, OsInfo
from glueinfo.core.validate import validate_snapshot
from glueinfo.gather.gatherer import Gatherer
from glueinfo.gather.identity import same_host
from glueinfo.gather.merge import merge
from glueinfo.gather.registry import Source, SourceFailure, SourceReport

T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A source whose next report the test sets."""

    def __init__(self, name: str):
        self.name = name
        self.next: SourceReport = SourceReport()

    def source(self) -> Source:
        return Source(self.name, lambda ctx: self.next)


def config(text: str = "") -> object:
    return parse_text("[node]\nstale_after = 300\n[sources]\ndrop_after = 3600\ngather_timeout = 2\n" + text, "test.conf")


def agent_snapshot(name: str, at: float, load1: float = 1.0) -> HostSnapshot:
    return HostSnapshot(
        hostname=name, collected_at=at, source="agents",
        cpu=CpuInfo(logical_cpus=16, physical_cores=8, sockets=2, vendor="GenuineIntel", model_name="Xeon Gold 6130",
                    clock_mhz=2100, instruction_set="x86_64", features=["avx2"], cache_l3_kb=22528),
        memory=MemoryInfo(ram_mb=64000, ram_available_mb=60000, swap_mb=8000, swap_free_mb=8000),
        load=LoadInfo(load1=load1, load5=1.0, load15=1.0),
        network=[NetworkAdapter(name="eth0", ipv4=["10.1.0.1"], mtu=9000, is_up=True, is_primary=True)],
        filesystems=[FileSystem(mount_point="/scratch", device="/dev/sdb1", fs_type="xfs", size_mb=900000, available_mb=500000)],
        os=OsInfo(name="Debian GNU/Linux", release="12", version="bookworm", kernel_release="6.1.0-18-amd64", platform_type="x86_64"),
    )


def ganglia_snapshot(name: str, at: float, load1: float = 7.0) -> HostSnapshot:
    return HostSnapshot(
        hostname=name, collected_at=at, source="ganglia",
        cpu=CpuInfo(logical_cpus=16, clock_mhz=2100, instruction_set="x86_64"),
        memory=MemoryInfo(ram_mb=64000, ram_available_mb=12000, swap_mb=8000, swap_free_mb=7000),
        load=LoadInfo(load1=load1, load5=6.0, load15=5.0),
        os=OsInfo(kernel_release="6.1.0-18-amd64", platform_type="x86_64"),
        extra={"ganglia": {"cluster": "batch"}},
    )


# -- freshness ---------------------------------------------------------------------------


def test_staleness_rule():
    snap = HostSnapshot(hostname="a", collected_at=T0)
    assert not is_stale(snap, T0 + 300, 300) and is_stale(snap, T0 + 301, 300)
    assert is_stale(snap, T0 - 301, 300)  # collected "in the future": a wrong clock
    assert is_stale(HostSnapshot(hostname="a", collected_at=0.0), T0, 300)
    assert not is_expired(snap, T0 + 3600, 3600) and is_expired(snap, T0 + 3601, 3600)


# -- merging -----------------------------------------------------------------------------


def test_newest_wins_and_ganglia_gaps_are_filled_from_the_agent():
    agent = agent_snapshot("wn001.example.org", T0 - 60)
    gang = ganglia_snapshot("wn001.example.org", T0 - 5)
    merged = merge([agent, gang], now=T0, stale_after=300)
    assert merged.collected_at == T0 - 5 and merged.source == "ganglia"
    assert merged.load.load1 == 7.0 and merged.memory.ram_available_mb == 12000 and merged.memory.swap_free_mb == 7000
    # Ganglia cannot tell these: they come from the agent.
    assert merged.cpu.model_name == "Xeon Gold 6130" and merged.cpu.sockets == 2 and merged.cpu.features == ["avx2"]
    assert merged.network[0].name == "eth0" and merged.filesystems[0].available_mb == 500000
    assert merged.os.name == "Debian GNU/Linux" and merged.os.version == "bookworm"
    assert merged.extra["ganglia"] == {"cluster": "batch"}
    assert merged.extra["gather"] == {"sources": {"agents": T0 - 60, "ganglia": T0 - 5}}
    # The inputs are not changed.
    assert gang.cpu.model_name is None and agent.load.load1 == 1.0


def test_fast_changing_facts_never_come_from_a_stale_snapshot():
    agent = agent_snapshot("wn001.example.org", T0 - 900)  # stale
    gang = ganglia_snapshot("wn001.example.org", T0 - 5)
    gang.load = None
    gang.memory = MemoryInfo(ram_mb=64000)
    merged = merge([agent, gang], now=T0, stale_after=300)
    assert merged.load is None
    assert merged.memory.ram_available_mb is None and merged.memory.swap_free_mb is None
    assert merged.memory.swap_mb == 8000  # lasting facts are still filled in
    assert merged.filesystems[0].mount_point == "/scratch" and merged.filesystems[0].available_mb is None
    assert agent.filesystems[0].available_mb == 500000


def test_same_instant_the_local_probe_beats_ganglia():
    local = agent_snapshot("ce.example.org", T0, load1=0.5)
    local.source = "local"
    gang = ganglia_snapshot("ce.example.org", T0, load1=9.0)
    assert merge([gang, local], now=T0, stale_after=300).load.load1 == 0.5


def test_short_names_match_their_fqdn():
    assert same_host("wn001", "wn001.example.org") and same_host("WN001.Example.ORG.", "wn001.example.org")
    assert not same_host("wn001.other.org", "wn001.example.org") and not same_host("wn002", "wn001")


# -- the gatherer ------------------------------------------------------------------------


def test_a_short_ganglia_name_merges_with_the_agents_fqdn_unless_ambiguous():
    clock = Clock()
    agents, ganglia = Scripted("agents"), Scripted("ganglia")
    agents.next = SourceReport(snapshots=[agent_snapshot("wn001.example.org", T0 - 30),
                                          agent_snapshot("wn002.site-a.org", T0 - 30), agent_snapshot("wn002.site-b.org", T0 - 30)])
    ganglia.next = SourceReport(snapshots=[ganglia_snapshot("wn001", T0 - 5), ganglia_snapshot("wn002", T0 - 5)])
    result = Gatherer(config(), clock=clock, sources=[agents.source(), ganglia.source()]).gather()
    names = [h.snapshot.hostname for h in result.hosts]
    assert names == ["wn001.example.org", "wn002", "wn002.site-a.org", "wn002.site-b.org"]
    wn001 = result.hosts[0]
    assert wn001.sources == {"agents": T0 - 30, "ganglia": T0 - 5} and wn001.snapshot.load.load1 == 7.0


def test_last_good_is_kept_through_failures_then_goes_stale_then_is_dropped():
    clock = Clock()
    agents = Scripted("agents")
    gatherer = Gatherer(config(), clock=clock, sources=[agents.source()])
    agents.next = SourceReport(snapshots=[agent_snapshot("a.example.org", T0), agent_snapshot("b.example.org", T0)])
    first = gatherer.gather()
    assert [h.stale for h in first.hosts] == [False, False]

    # a fails from now on (bad answer, then a snapshot refused whole: no believable time); b keeps answering.
    absurd = agent_snapshot("a.example.org", T0 + 100)
    absurd.collected_at = float("nan")
    for step, report_a in enumerate([SourceFailure("a.example.org:7170", "not well-formed XML", host="a.example.org"), absurd]):
        clock.now = T0 + 100 * (step + 1)
        agents.next = SourceReport(snapshots=[agent_snapshot("b.example.org", clock.now)])
        if isinstance(report_a, SourceFailure):
            agents.next.failures.append(report_a)
        else:
            agents.next.snapshots.append(report_a)
        result = gatherer.gather()
        hosts = {h.snapshot.hostname: h for h in result.hosts}
        assert hosts["a.example.org"].snapshot.collected_at == T0  # last good, unchanged
        assert hosts["a.example.org"].snapshot.memory.ram_mb == 64000
        assert not hosts["a.example.org"].stale and not hosts["b.example.org"].stale
        assert [f.host for f in result.failures] == ["a.example.org"]
    assert "collection time nan is not a time" in result.failures[0].error

    clock.now = T0 + 301
    agents.next = SourceReport(snapshots=[agent_snapshot("b.example.org", clock.now)])
    hosts = {h.snapshot.hostname: h for h in gatherer.gather().hosts}
    assert hosts["a.example.org"].stale and not hosts["b.example.org"].stale

    clock.now = T0 + 3601
    agents.next = SourceReport(snapshots=[agent_snapshot("b.example.org", clock.now)])
    result = gatherer.gather()
    assert [h.snapshot.hostname for h in result.hosts] == ["b.example.org"]
    assert result.dropped == ["a.example.org"]
    assert [s.hostname for s in result.fresh_snapshots()] == ["b.example.org"]


def test_an_older_report_never_replaces_a_newer_one():
    clock = Clock()
    agents = Scripted("agents")
    gatherer = Gatherer(config(), clock=clock, sources=[agents.source()])
    agents.next = SourceReport(snapshots=[agent_snapshot("a.example.org", T0, load1=2.0)])
    gatherer.gather()
    agents.next = SourceReport(snapshots=[agent_snapshot("a.example.org", T0 - 50, load1=9.0)])
    (host,) = gatherer.gather().hosts
    assert host.snapshot.load.load1 == 2.0


def test_a_clock_ahead_counts_as_heard_now():
    clock = Clock()
    agents = Scripted("agents")
    agents.next = SourceReport(snapshots=[agent_snapshot("a.example.org", T0 + 7200)])
    (host,) = Gatherer(config(), clock=clock, sources=[agents.source()]).gather().hosts
    assert host.snapshot.collected_at == T0 and not host.stale


def test_a_source_that_raises_or_hangs_does_not_stop_the_others():
    clock = time.time
    release = threading.Event()

    def hangs(ctx):
        release.wait(30)
        return SourceReport()

    def raises(ctx):
        raise RuntimeError("boom")

    good = Scripted("agents")
    good.next = SourceReport(snapshots=[agent_snapshot("a.example.org", time.time())])
    gatherer = Gatherer(config(), clock=clock, sources=[Source("slow", hangs), Source("broken", raises), good.source()])
    result = gatherer.gather()  # returns while "slow" still hangs: released only after
    release.set()
    assert [h.snapshot.hostname for h in result.hosts] == ["a.example.org"]
    assert {f.source: f.error for f in result.failures} == {
        "slow": "did not finish within [sources] gather_timeout", "broken": "RuntimeError: boom"}


@pytest.mark.parametrize("change, words, gone", [
    (lambda s: setattr(s.cpu, "logical_cpus", 10**9), "cpu.logical_cpus = 1e+09 is beyond belief", ("cpu", "logical_cpus")),
    (lambda s: setattr(s.cpu, "logical_cpus", 0), "cpu.logical_cpus is 0", ("cpu", "logical_cpus")),
    (lambda s: setattr(s.load, "load1", float("nan")), "load.load1 is nan", ("load", "load1")),
    (lambda s: setattr(s.memory, "ram_available_mb", 70000), "memory.ram_available_mb 70000 > ram_mb 64000",
     ("memory", "ram_available_mb")),
    (lambda s: setattr(s.cpu, "model_name", "Xeon\x00\x1b[2J"), "cpu.model_name holds control characters", ("cpu", "model_name")),
])
def test_an_unbelievable_field_is_dropped_and_named_the_rest_kept(change, words, gone):
    snap = agent_snapshot("wn01.example.org", T0)
    assert validate_snapshot(snap, T0).dropped == []
    change(snap)
    checked = validate_snapshot(snap, T0)
    assert checked.dropped == [f"host wn01.example.org: {words}: dropped"]
    assert getattr(getattr(checked.snapshot, gone[0]), gone[1]) is None
    assert checked.snapshot.memory.ram_mb == 64000 and checked.snapshot.hostname == "wn01.example.org"
    assert getattr(getattr(snap, gone[0]), gone[1]) is not None  # the caller's snapshot is untouched


def test_a_snapshot_with_a_bad_host_name_is_refused():
    snap = agent_snapshot("wn01.example.org", T0)
    snap.hostname = "wn01; rm -rf /"
    checked = validate_snapshot(snap, T0)
    assert checked.snapshot is None and "is not a DNS name" in checked.refused


# -- the command ----------------------------------------------------------------------------

REPO = REPO
FIXTURE = REPO / "tests" / "fixtures" / "hosts" / "wn-nfs-lustre"


def run_cli(tmp_path, conf: str, *args: str):
    path = tmp_path / "glueinfo.conf"
    path.write_text(conf)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "gather", "--config", str(path), *args],
                          capture_output=True, text=True, env=env, timeout=120)
    return proc, (json.loads(proc.stdout) if proc.stdout.startswith("{") else None)


def test_gather_command_prints_the_local_host_as_json(tmp_path):
    proc, data = run_cli(tmp_path, "[sources]\nenabled = local\n", "--host-root", str(FIXTURE))
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads((FIXTURE / ".glueinfo" / "recorded.json").read_text())
    (host,) = data["hosts"]
    assert host["hostname"] == recorded["hostname"] and host["stale"] is False
    assert list(host["sources"]) == ["local"] and host["snapshot"]["cpu"]["logical_cpus"] == 16
    assert data["failures"] == []


def test_gather_command_refuses_an_unknown_source_in_one_line(tmp_path):
    proc, _ = run_cli(tmp_path, "[sources]\nenabled = local, carrier-pigeon\n")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "[sources] enabled: unknown source(s) carrier-pigeon" in proc.stderr


def test_gather_command_with_a_bad_range_names_it_and_fails(tmp_path):
    # a config error: the file is refused before anything is gathered, with its file and line
    proc, data = run_cli(tmp_path, "[sources]\nenabled = agents\nagents = wn[10-2].example.org\n")
    assert proc.returncode == 2 and data is None
    assert proc.stderr == (f"glueinfo: {tmp_path / 'glueinfo.conf'}:3: [sources] agents: 'wn[10-2].example.org': "
                           "range '10-2' runs backwards\n")


def test_hosts_listed_again_without_news_age_turn_stale_and_go_exactly_as_a_fresh_listing_says():
    """hosts() answers from its last list while nothing changed: the ages move on, and the list is
    made again when a snapshot crosses stale_after (300 s) or drop_after (3,600 s), or one comes."""
    clock = Clock()
    agents, ganglia = Scripted("agents"), Scripted("ganglia")
    gatherer = Gatherer(config(), clock=clock, sources=[agents.source(), ganglia.source()])
    agents.next = SourceReport(snapshots=[agent_snapshot("a.example.org", T0), agent_snapshot("b.example.org", T0 - 200)])
    ganglia.next = SourceReport(snapshots=[ganglia_snapshot("a.example.org", T0 - 250)])
    gatherer.gather()
    agents.next = ganglia.next = SourceReport()

    def listing(at: float) -> dict[str, tuple[bool, float, float]]:
        return {h.snapshot.hostname: (h.stale, h.age_s, h.snapshot.memory.ram_available_mb) for h in gatherer.hosts(at)}

    # a: agent at T0 (60,000 MB free), Ganglia at T0-250 (12,000 MB free); b: agent at T0-200.
    assert listing(T0 + 10) == {"a.example.org": (False, 10.0, 60000), "b.example.org": (False, 210.0, 60000)}
    assert listing(T0 + 20) == {"a.example.org": (False, 20.0, 60000), "b.example.org": (False, 220.0, 60000)}
    assert listing(T0 + 101) == {"a.example.org": (False, 101.0, 60000), "b.example.org": (True, 301.0, 60000)}
    agents.next = SourceReport(snapshots=[agent_snapshot("b.example.org", T0 + 150)])
    clock.now = T0 + 150
    gatherer.gather(list_hosts=False)
    assert listing(T0 + 160) == {"a.example.org": (False, 160.0, 60000), "b.example.org": (False, 10.0, 60000)}
    assert listing(T0 + 301)["a.example.org"] == (True, 301.0, 60000)
    assert listing(T0 + 3401)["a.example.org"][0]  # Ganglia's report dropped at T0+3350: the agent's, still stale
    assert list(listing(T0 + 3601)) == ["b.example.org"]
