"""A worker cannot speak for another host (issue 12, case 2).

Real `glueinfo serve` agents on loopback addresses, each publishing a recorded
fixture machine under the name its config gives; the head node's `glueinfo
gather` (JSON, what it prints) pulls them.  Before the fix, an agent listed
by address that answered with the *short* name of another listed host was
merged into that host: its CPU model and RAM won.
"""

from __future__ import annotations

import json

import pytest
from glueinfo_processes import run_glueinfo, start_glueinfo, stop_glueinfo
from paths import REPO

HOSTS = REPO / "tests" / "fixtures" / "hosts"
VICTIM_TREE, ATTACKER_TREE = HOSTS / "xeon-gold-2s-ht", HOSTS / "arm-altra-q32"


def meminfo_mb(tree) -> int:
    """MemTotal of a recorded tree, in MB, read straight from its /proc/meminfo."""
    for line in (tree / "proc" / "meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal")


def agent(tmp, name: str, address: str, tree, hostname: str):
    config = tmp / f"{name}.conf"
    config.write_text(f"[glueinfo]\nhost_root = {tree}\nhostname = {hostname}\n"
                      f"[serve]\nlisten = {address}:0\nrefresh_interval = 3600\n"
                      f"[run]\nstate_dir = {tmp / name / 'state'}\n")
    return start_glueinfo(config, tmp / f"{name}.log")


@pytest.fixture
def agents(tmp_path):
    started = []

    def start(*args):
        served = agent(tmp_path, *args)
        started.append(served)
        return served

    yield start
    for served in started:
        stop_glueinfo(served)


def gather(tmp, agents_list: str) -> dict:
    config = tmp / "head.conf"
    config.write_text(f"[sources]\nenabled = agents\nagents = {agents_list}\n[run]\nstate_dir = {tmp / 'head-state'}\n")
    proc = run_glueinfo("gather", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) | {"stderr": proc.stderr}


@pytest.mark.parametrize("order", ["victim first", "attacker first"])
def test_an_address_answering_a_listed_hosts_short_name_is_refused(tmp_path, agents, order):
    victim = agents("victim", "127.0.0.1", VICTIM_TREE, "localhost.cluster.example.org")
    attacker = agents("attacker", "127.0.0.3", ATTACKER_TREE, "localhost")  # the victim's short name
    listed = [f"localhost:{victim.port}", f"127.0.0.3:{attacker.port}"]
    result = gather(tmp_path, ", ".join(listed if order == "victim first" else listed[::-1]))
    hosts = {h["hostname"]: h["snapshot"] for h in result["hosts"]}
    assert list(hosts) == ["localhost.cluster.example.org"]
    assert hosts["localhost.cluster.example.org"]["memory"]["ram_mb"] == meminfo_mb(VICTIM_TREE)
    assert hosts["localhost.cluster.example.org"]["cpu"]["instruction_set"] == "x86_64"
    [refusal] = [f for f in result["failures"] if f["target"] == f"127.0.0.3:{attacker.port}"]
    assert "'localhost'" in refusal["error"] and f"localhost:{victim.port}" in refusal["error"]
    assert "refused" in refusal["error"]


def test_an_address_named_in_the_config_must_answer_with_that_name(tmp_path, agents):
    victim = agents("victim", "127.0.0.2", VICTIM_TREE, "hpc-node17.cluster.example.org")
    attacker = agents("attacker", "127.0.0.3", ATTACKER_TREE, "hpc-node17")
    impostor = agents("impostor", "127.0.0.4", ATTACKER_TREE, "hpc-node99.cluster.example.org")
    result = gather(tmp_path, f"127.0.0.2:{victim.port}=hpc-node17.cluster.example.org, 127.0.0.3:{attacker.port}, "
                              f"127.0.0.4:{impostor.port}=hpc-node18.cluster.example.org")
    hosts = {h["hostname"]: h["snapshot"] for h in result["hosts"]}
    assert list(hosts) == ["hpc-node17.cluster.example.org"]
    assert hosts["hpc-node17.cluster.example.org"]["memory"]["ram_mb"] == meminfo_mb(VICTIM_TREE)
    errors = {f["target"]: f["error"] for f in result["failures"]}
    assert "'hpc-node17'" in errors[f"127.0.0.3:{attacker.port}"] and "hpc-node17.cluster.example.org" in \
        errors[f"127.0.0.3:{attacker.port}"]
    assert errors[f"127.0.0.4:{impostor.port}"] == \
        "Node claims to be 'hpc-node99.cluster.example.org', not 'hpc-node18.cluster.example.org': refused"
    assert "hpc-node17" in result["stderr"] and "refused" in result["stderr"]  # logged, with both names
