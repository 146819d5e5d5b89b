"""State on disk: last good snapshots survive a restart; a corrupt state file
at start is ignored with a warning naming it, and rebuilt."""

from __future__ import annotations

import json
import os

from glueinfo.core.model import CpuInfo, HostSnapshot, LoadInfo, MemoryInfo
from glueinfo.gather.state import StateStore


def snap(host: str, at: float, source: str, ram: int = 16000) -> HostSnapshot:
    return HostSnapshot(hostname=host, collected_at=at, source=source, cpu=CpuInfo(logical_cpus=8, model_name="Xeon™ Gold"),
                        memory=MemoryInfo(ram_mb=ram, ram_available_mb=ram // 2), load=LoadInfo(load1=1.5, load5=1.0, load15=0.5))


def test_snapshots_come_back_after_a_restart_with_their_own_age(tmp_path):
    store = StateStore(str(tmp_path), clock=lambda: 2000.0)
    states = {"wn01.example.org": {"agents": snap("wn01.example.org", 1000.0, "agents"),
                                   "ganglia": snap("wn01", 1500.0, "ganglia", ram=15999)},
              "ce.example.org": {"local": snap("ce.example.org", 1900.5, "local")}}
    assert store.save(states) == []
    files = sorted(os.listdir(tmp_path / "hosts"))
    assert files == ["ce.example.org.json", "wn01.example.org.json"]
    on_disk = json.loads((tmp_path / "hosts" / "wn01.example.org.json").read_text())
    assert on_disk["host"] == "wn01.example.org" and sorted(on_disk["sources"]) == ["agents", "ganglia"]
    assert on_disk["sources"]["ganglia"]["collected_at"] == 1500.0

    warnings: list[str] = []
    loaded = StateStore(str(tmp_path), on_warning=warnings.append).load()
    assert warnings == []
    assert sorted(loaded) == ["ce.example.org", "wn01.example.org"]
    again = loaded["wn01.example.org"]["agents"]
    assert again.collected_at == 1000.0  # not the time of the restart
    assert again.cpu.model_name == "Xeon™ Gold" and again.memory.ram_mb == 16000
    assert loaded["wn01.example.org"]["ganglia"].hostname == "wn01"
    assert loaded["ce.example.org"]["local"].to_dict() == states["ce.example.org"]["local"].to_dict()


def test_only_changed_hosts_are_written_and_gone_hosts_removed(tmp_path):
    now = [1000.0]
    store = StateStore(str(tmp_path), clock=lambda: now[0], refresh_after_s=300.0)
    a, b = snap("a.example.org", 10.0, "spool"), snap("b.example.org", 10.0, "spool")
    store.save({"a.example.org": {"spool": a}, "b.example.org": {"spool": b}})
    path_a, path_b = tmp_path / "hosts" / "a.example.org.json", tmp_path / "hosts" / "b.example.org.json"
    inode_a, inode_b = path_a.stat().st_ino, path_b.stat().st_ino
    newer_b = {"spool": snap("b.example.org", 20.0, "spool")}
    # A newer snapshot from the same source within refresh_after_s: not rewritten yet.
    now[0] = 1200.0
    store.save({"a.example.org": {"spool": a}, "b.example.org": newer_b})
    assert path_b.stat().st_ino == inode_b
    # Once refresh_after_s has passed since the file was written: replaced (by rename).
    now[0] = 1301.0
    store.save({"a.example.org": {"spool": a}, "b.example.org": newer_b})
    assert path_a.stat().st_ino == inode_a  # unchanged host: not rewritten
    assert path_b.stat().st_ino != inode_b
    assert json.loads(path_b.read_text())["sources"]["spool"]["collected_at"] == 20.0
    # A source that appears is written at once.
    inode_b = path_b.stat().st_ino
    now[0] = 1310.0
    store.save({"a.example.org": {"spool": a}, "b.example.org": {**newer_b, "agents": snap("b.example.org", 30.0, "agents")}})
    assert path_b.stat().st_ino != inode_b and set(json.loads(path_b.read_text())["sources"]) == {"spool", "agents"}
    store.save({"b.example.org": newer_b})
    assert not path_a.exists()  # a host forgotten by the gatherer is forgotten on disk too


def test_corrupt_state_files_are_ignored_with_a_warning_and_rebuilt(tmp_path):
    good = StateStore(str(tmp_path))
    good.save({"ok.example.org": {"agents": snap("ok.example.org", 50.0, "agents")}})
    hosts = tmp_path / "hosts"
    corrupt = {
        "truncated.example.org.json": json.dumps({"format": 1, "host": "truncated.example.org",
                                                  "sources": {"agents": snap("truncated.example.org", 1.0, "agents").to_dict()}})[:150],
        "binary.example.org.json": b"\x00\xff\xfe garbage",
        "list.example.org.json": "[1, 2, 3]",
        "wrongtype.example.org.json": json.dumps({"format": 1, "host": "wrongtype.example.org", "sources": {
            "agents": {"hostname": "wrongtype.example.org", "collected_at": "yesterday"}}}),
        "other.example.org.json": json.dumps({"format": 1, "host": "ok.example.org", "sources": {}}),
    }
    for name, content in corrupt.items():
        (hosts / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    (hosts / ".ok.example.org.json.a1b2c3.tmp").write_text("half a file")  # a save killed mid-write

    warnings: list[str] = []
    store = StateStore(str(tmp_path), on_warning=warnings.append)
    loaded = store.load()
    assert list(loaded) == ["ok.example.org"]
    assert len(warnings) == len(corrupt)
    for name in corrupt:
        (line,) = [w for w in warnings if name in w]
        assert "\n" not in line and "ignored" in line and str(hosts / name) in line
    assert any("collected_at" in w and "wrongtype" in w for w in warnings)
    assert not (hosts / ".ok.example.org.json.a1b2c3.tmp").exists()

    # The next save rebuilds the files of hosts still known and removes the rest.
    store.save({"ok.example.org": loaded["ok.example.org"],
                "truncated.example.org": {"agents": snap("truncated.example.org", 60.0, "agents")}})
    assert sorted(os.listdir(hosts)) == ["ok.example.org.json", "truncated.example.org.json"]
    warnings.clear()
    reloaded = StateStore(str(tmp_path), on_warning=warnings.append).load()
    assert warnings == []
    assert reloaded["truncated.example.org"]["agents"].collected_at == 60.0


def test_a_missing_state_directory_is_an_empty_start_and_is_created_on_save(tmp_path):
    store = StateStore(str(tmp_path / "not" / "yet"))
    assert store.load() == {}
    assert store.save({"x.example.org": {"local": snap("x.example.org", 1.0, "local")}}) == []
    assert (tmp_path / "not" / "yet" / "hosts" / "x.example.org.json").exists()


def test_a_host_reported_again_keeps_its_unchanged_facts_as_the_same_objects_and_new_bad_values_are_still_dropped():
    """The gatherer's last good snapshots: a report whose lasting facts equal the last one's shares
    the last one's objects (what the renderers' caches key on); changed parts are validated as
    ever, so a bad value is dropped however the rest compares."""
    from glueinfo.core.config import parse_text
    from glueinfo.gather.gatherer import Gatherer, GatherResult
    from glueinfo.gather.registry import SourceReport

    gatherer = Gatherer(parse_text("[sources]\nenabled = spool\n", "/etc/glueinfo/glueinfo.conf"), clock=lambda: 2000.0, sources=[])
    first = snap("wn01.example.org", 1000.0, "spool")
    gatherer.take("spool", SourceReport(snapshots=[first]), GatherResult(started_at=2000.0, duration_s=0.0))
    again = snap("wn01.example.org", 1060.0, "spool")
    again.load = LoadInfo(load1=-3.0, load5=1.0, load15=0.5)  # a bad new value
    assert again.cpu is not first.cpu and again.cpu == first.cpu
    result = GatherResult(started_at=2000.0, duration_s=0.0)
    gatherer.take("spool", SourceReport(snapshots=[again]), result)
    kept = gatherer.last_good["wn01.example.org"]["spool"]
    assert kept.collected_at == 1060.0 and result.failures == []
    assert kept.cpu is first.cpu and kept.memory is first.memory  # equal: the objects already believed
    assert kept.load.load1 is None and kept.load.load5 == 1.0  # changed and bad: dropped, the rest kept
    bigger = snap("wn01.example.org", 1120.0, "spool", ram=32000)
    gatherer.take("spool", SourceReport(snapshots=[bigger]), GatherResult(started_at=2000.0, duration_s=0.0))
    kept = gatherer.last_good["wn01.example.org"]["spool"]
    assert kept.memory.ram_mb == 32000 and kept.memory is not first.memory and kept.cpu is first.cpu
