"""The collector runner: isolation, per-collector results, enable/disable."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from glueinfo.core.config import parse_text
from glueinfo.core.model import MemoryInfo
from glueinfo.host.collect import CollectContext, Collector, CollectorError, collect_host, probe, select

BUILTINS = ["cpu", "memory", "load", "network", "filesystems", "os", "static", "accelerators"]


def boom(ctx):
    raise RuntimeError("sensor on fire")


def good_memory(ctx):
    return MemoryInfo(ram_mb=1024)


def extra_facts(ctx):
    return {"gpus": 2, "model": "A100"}


@pytest.fixture
def release():
    """An event that lets the hanging collector's thread finish after the test."""
    event = threading.Event()
    yield event
    event.set()


def test_a_raising_and_a_hanging_collector_do_not_stop_the_others(release):
    def hang(ctx):
        release.wait(30)
        return {"late": True}

    collectors = [Collector("boom", boom), Collector("hang", hang), Collector("memory", good_memory, field="memory"),
                  Collector("gpu", extra_facts)]
    # The hanging one is abandoned at its timeout, not waited for: it returns only once released, after this.
    snapshot = collect_host(collectors, CollectContext(host_root="/", config={"hostname": "h.example.org"}), timeout_s=0.3)
    results = {r.name: r for r in snapshot.collectors}
    assert [r.name for r in snapshot.collectors] == ["boom", "hang", "memory", "gpu"]
    assert results["boom"].success is False
    assert results["boom"].error == "RuntimeError: sensor on fire"
    assert results["hang"].success is False
    assert results["hang"].error == "timed out after 0.3 s"
    assert results["memory"].success and results["memory"].error is None
    assert results["gpu"].success
    assert snapshot.memory == MemoryInfo(ram_mb=1024)
    assert snapshot.extra == {"gpu": {"gpus": 2, "model": "A100"}}
    assert "hang" not in snapshot.extra and "boom" not in snapshot.extra
    assert snapshot.hostname == "h.example.org"


def test_two_hanging_collectors_each_get_their_own_timeout(release):
    def hang(ctx):
        release.wait(30)
        return {"late": True}

    collectors = [Collector("hang1", hang), Collector("gpu", extra_facts), Collector("hang2", hang),
                  Collector("memory", good_memory, field="memory")]
    snapshot = collect_host(collectors, CollectContext(config={"hostname": "x"}), timeout_s=0.2)
    assert [(r.name, r.success, r.error) for r in snapshot.collectors] == [
        ("hang1", False, "timed out after 0.2 s"), ("gpu", True, None),
        ("hang2", False, "timed out after 0.2 s"), ("memory", True, None)]
    assert snapshot.extra == {"gpu": {"gpus": 2, "model": "A100"}} and snapshot.memory == MemoryInfo(ram_mb=1024)
    release.set()
    time.sleep(0.1)  # the abandoned workers wake up: their late answers must not appear
    assert snapshot.extra == {"gpu": {"gpus": 2, "model": "A100"}}


def test_results_carry_durations():
    # Each collector is timed by the context's clock (the one the snapshot is stamped with): here a
    # test clock that only the slow collector's work moves on, by 5 s.
    now = [1000.0]

    def slow(ctx):
        now[0] += 5.0
        return {"ok": 1}

    snapshot = collect_host([Collector("slow", slow), Collector("quick", extra_facts)],
                            CollectContext(config={"hostname": "x"}, clock=lambda: now[0]), timeout_s=5)
    assert {r.name: r.duration_s for r in snapshot.collectors} == {"slow": 5.0, "quick": 0.0}


def test_a_plugin_returning_something_else_than_facts_is_a_failure():
    snapshot = collect_host([Collector("odd", lambda ctx: [1, 2, 3])], CollectContext(config={"hostname": "x"}))
    (result,) = snapshot.collectors
    assert result.success is False and result.error == "returned list, expected a dict of facts"
    assert snapshot.extra == {}


def test_select_applies_defaults_enable_and_disable():
    collectors = [Collector("a", extra_facts), Collector("b", extra_facts, default_enabled=False), Collector("c", extra_facts)]
    assert [c.name for c in select(collectors)] == ["a", "c"]
    assert [c.name for c in select(collectors, enable=["b"])] == ["a", "b", "c"]
    assert [c.name for c in select(collectors, disable=["a"])] == ["c"]


def test_unknown_names_are_a_clear_error():
    collectors = [Collector("a", extra_facts), Collector("b", extra_facts)]
    with pytest.raises(CollectorError, match=r"^unknown collector\(s\): nope, zz \(known: a, b\)$"):
        select(collectors, enable=["zz"], disable=["nope"])
    with pytest.raises(CollectorError, match="both enabled and disabled: a"):
        select(collectors, enable=["a"], disable=["a"])


def test_config_file_disables_collectors():
    config = parse_text("[collectors]\ndisable = network, filesystems\n", "test.conf")
    snapshot = probe(config)
    assert [r.name for r in snapshot.collectors] == ["cpu", "memory", "load", "os", "static", "accelerators"]
    assert snapshot.network is None and snapshot.filesystems is None
    assert snapshot.cpu is not None


def test_command_line_overrides_the_config_file():
    config = parse_text("[collectors]\ndisable = network, filesystems\n", "test.conf")
    snapshot = probe(config, enable=["network"], disable=["load"])
    assert [r.name for r in snapshot.collectors] == ["cpu", "memory", "network", "os", "static", "accelerators"]
    assert snapshot.network is not None and snapshot.load is None


def test_unknown_name_in_config_is_a_clear_error():
    with pytest.raises(CollectorError, match=r"unknown collector\(s\): gpu"):
        probe(parse_text("[collectors]\nenable = gpu\n", "test.conf"))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, timeout=60)


def test_cli_enable_and_disable(tmp_path):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[collectors]\ndisable = filesystems\n", encoding="utf-8")
    done = run_cli("probe", "--config", str(conf), "--no-collector", "network", "--no-collector", "load")
    assert done.returncode == 0, done.stderr
    names = [r["name"] for r in json.loads(done.stdout)["collectors"]]
    assert names == ["cpu", "memory", "os", "static", "accelerators"]
    done = run_cli("probe", "--config", str(conf), "--collector", "filesystems")
    assert [r["name"] for r in json.loads(done.stdout)["collectors"]] == BUILTINS


def test_cli_unknown_collector_exits_2_with_one_line():
    done = run_cli("probe", "--no-collector", "nosuch")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("glueinfo: unknown collector(s): nosuch (known: ")
