"""A worker cannot speak for another host (issue 12, case 2).

Real `glueinfo serve` agents on loopback addresses, each publishing a recorded
fixture machine under the name its config gives; the head node's `glueinfo
gather` (JSON, what it prints) pulls them.  Before the fix, an agent listed
by address that answered with the *short* name of another listed host was
merged into that host: its CPU model and RAM won.
"""

from __future__ import annotations

import json
import socket
import threading
import time

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


def gmond_document(hosts: list[tuple[str, str, int]]) -> bytes:
    """A gmond XML port's answer: HOSTs (NAME, IP, mem_total in KB), reported just now."""
    now = int(time.time())
    body = "".join(
        f'<HOST NAME="{name}" IP="{ip}" REPORTED="{now}" TN="1" TMAX="20" DMAX="0" GMOND_STARTED="{now - 100}">'
        f'<METRIC NAME="mem_total" VAL="{mem_kb}" TYPE="float" UNITS="KB" TN="1" TMAX="1200" DMAX="0" SLOPE="zero"/>'
        f'<METRIC NAME="cpu_num" VAL="8" TYPE="uint16" UNITS="CPUs" TN="1" TMAX="1200" DMAX="0" SLOPE="zero"/>'
        f'</HOST>' for name, ip, mem_kb in hosts)
    return (f'<?xml version="1.0" encoding="ISO-8859-1" standalone="yes"?>\n<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">'
            f'<CLUSTER NAME="c" LOCALTIME="{now}" OWNER="o" LATLONG="l" URL="u">{body}</CLUSTER></GANGLIA_XML>\n').encode()


def test_a_ganglia_host_name_is_bound_to_its_address(tmp_path):
    """Ganglia's identity of a HOST is its NAME and IP: another address using the NAME is refused."""
    document = gmond_document([("wn01.example.org", "10.0.0.1", 16 * 1024 * 1024),
                               ("wn01.example.org", "10.0.0.66", 1024 * 1024 * 1024)])
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():  # a gmond XML port: the whole document to every connection, then close
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.sendall(document)

    threading.Thread(target=serve, daemon=True).start()
    try:
        config = tmp_path / "head.conf"
        config.write_text(f"[sources]\nenabled = ganglia\nganglia = 127.0.0.1:{listener.getsockname()[1]}\n"
                          f"[run]\nstate_dir = {tmp_path / 'state'}\n")
        proc = run_glueinfo("gather", "--config", str(config))
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    [host] = result["hosts"]
    assert host["snapshot"]["memory"]["ram_mb"] == 16 * 1024
    [refusal] = [f for f in result["failures"] if "10.0.0.66" in f["target"]]
    assert "bound to the HOST at 10.0.0.1" in refusal["error"]
