"""Many hosts across a real network path: agents on their own loopback addresses.

Four `glueinfo serve` agents run as separate processes, each bound to its own
address (127.0.0.2 ... 127.0.0.5, the same port: listed to the head node as
one range ``127.0.0.[2-5]:PORT``) and each reporting a different recorded
machine (``--host-root`` of a fixture tree).  The head node gathers them:

- ``glueinfo gather --format ldif`` gives one SubCluster per machine, with
  the CPU and RAM the fixture files record, and the LDIF loads into the real
  test slapd with zero rejections;
- a head `glueinfo serve` publishes every agent's Node in /nodes.xml; one
  agent is killed mid-run: its host turns State Unknown (and leaves the
  free-CPU figure), then disappears, while the others stay as they were.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import waiting
from lxml import etree
from paths import HOSTS, REPO

from glueinfo.core.config import parse_text
from glueinfo.core.ldif import parse_ldif
from glueinfo.glue.build import render_site
from glueinfo.site.assemble import SiteAssembler

REPO = REPO
HOSTS = HOSTS
FIXTURES = ("xeon-gold-2s-ht", "wn-nfs-lustre", "arm-altra-q32", "epyc-container")
ADDRESSES = tuple(f"127.0.0.{i}" for i in range(2, 2 + len(FIXTURES)))
STALE_AFTER, DROP_AFTER = 4, 9


def recorded(fixture: str) -> dict:
    """The machine's facts straight from its recorded files, not through glueinfo."""
    root = HOSTS / fixture
    cpuinfo = (root / "proc/cpuinfo").read_text(encoding="utf-8")
    meminfo = dict(line.split(":", 1) for line in (root / "proc/meminfo").read_text().splitlines() if ":" in line)
    load1 = float((root / "proc/loadavg").read_text().split()[0])
    cpus = sum(1 for line in cpuinfo.splitlines() if line.startswith("processor"))
    return {"hostname": json.loads((root / ".glueinfo/recorded.json").read_text())["hostname"],
            "cpus": cpus, "ram_mb": int(meminfo["MemTotal"].split()[0]) // 1024,
            "free_cpus": max(0, cpus - round(load1))}


def common_free_port() -> int:
    """A TCP port free on every agent address (binding 127.0.0.x works in this sandbox)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((ADDRESSES[0], 0))
            port = probe.getsockname()[1]
        try:
            for address in ADDRESSES:
                with socket.socket() as other:
                    other.bind((address, port))
            return port
        except OSError:
            continue
    raise AssertionError("no port free on every agent address")


def get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read()


def wait_until(predicate, timeout: float, what: str, step: float = 0.25):
    return waiting.wait_until(predicate, what, timeout, step=step)


def start_serve(args: list[str], address: str, port: int, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GLUEINFO_CONFIG", None)
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "serve", "--listen", f"{address}:{port}", *args],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()

    def answering():
        if proc.poll() is not None:
            raise AssertionError(f"serve on {address}:{port} exited: {log_path.read_text()[-2000:]}")
        try:
            return get(f"http://{address}:{port}/health", 1.0)
        except OSError:
            return None

    wait_until(answering, 30, f"serve on {address}:{port}")
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def agents(tmp_path):
    port = common_free_port()
    conf = tmp_path / "agent.conf"
    conf.write_text("[node]\nstale_after = 300\n")
    procs = {}
    try:
        for fixture, address in zip(FIXTURES, ADDRESSES, strict=True):
            procs[fixture] = start_serve(["--config", str(conf), "--host-root", str(HOSTS / fixture), "--no-ldif",
                                          "--refresh-interval", "1"], address, port, tmp_path / f"agent-{address}.log")
        yield port, procs
    finally:
        for proc in procs.values():
            stop(proc)


def head_config_text(port: int) -> str:
    return ("[sources]\nenabled = agents\n"
            f"agents = 127.0.0.[2-{1 + len(FIXTURES)}]:{port}\n"
            f"timeout = 1\nretries = 1\nretry_backoff = 0.05\ndrop_after = {DROP_AFTER}\n"
            f"[node]\nstale_after = {STALE_AFTER}\n")


@pytest.mark.integration
def test_head_gathers_agents_into_subclusters_slapd_accepts(agents, slapd, tmp_path):
    port, _ = agents
    conf = tmp_path / "head.conf"
    conf.write_text(head_config_text(port))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "gather", "--config", str(conf), "--format", "ldif"],
                          capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    ldif = proc.stdout.decode("utf-8")

    result = slapd.ldapadd(ldif)
    assert result.ok, str(result)
    assert len(result.added) == len(parse_ldif(ldif))

    machines = {recorded(f)["hostname"]: recorded(f) for f in FIXTURES}
    subclusters = slapd.ldapsearch("mds-vo-name=resource,o=grid", "(objectClass=GlueSubCluster)",
                                   ["GlueSubClusterLogicalCPUs", "GlueHostMainMemoryRAMSize"])
    hosts = slapd.ldapsearch("mds-vo-name=resource,o=grid", "(objectClass=GlueHost)", ["GlueHostUniqueID"])
    assert len(subclusters) == len(FIXTURES)  # four different machines: four SubClusters
    assert sorted(h.first("GlueHostUniqueID") for h in hosts) == sorted(machines)
    found = sorted((int(s.first("GlueSubClusterLogicalCPUs")), int(s.first("GlueHostMainMemoryRAMSize"))) for s in subclusters)
    assert found == sorted((m["cpus"], m["ram_mb"]) for m in machines.values())
    # Each host sits under the SubCluster with its own CPU count.
    for host in hosts:
        parent = next(s for s in subclusters if host.dn.lower().endswith(s.dn.lower()))
        assert int(parent.first("GlueSubClusterLogicalCPUs")) == machines[host.first("GlueHostUniqueID")]["cpus"]
    ce = slapd.ldapsearch("mds-vo-name=resource,o=grid", "(objectClass=GlueCE)", ["GlueCEStateFreeCPUs"])
    assert [int(e.first("GlueCEStateFreeCPUs")) for e in ce] == [sum(m["free_cpus"] for m in machines.values())]


def node_states(nodes_xml: bytes) -> dict[str, str]:
    root = etree.fromstring(nodes_xml)
    return {node.findtext("Id"): node.findtext("State") for node in root.iter("Node")}


@pytest.mark.integration
def test_a_killed_agent_goes_unknown_then_disappears_and_the_others_carry_on(agents, slapd, tmp_path):
    port, procs = agents
    conf = tmp_path / "head.conf"
    conf.write_text(head_config_text(port))
    head_port = common_free_port()
    head = start_serve(["--config", str(conf), "--no-ldif", "--refresh-interval", "1"], "127.0.0.1", head_port,
                       tmp_path / "head.log")
    gatherer = SiteAssembler(parse_text(head_config_text(port), "head.conf"), state_dir="")  # the same view, in-process
    machines = {f: recorded(f) for f in FIXTURES}
    victim = machines["wn-nfs-lustre"]["hostname"]
    others = [m["hostname"] for f, m in machines.items() if f != "wn-nfs-lustre"]
    nodes_url = f"http://127.0.0.1:{head_port}/nodes.xml"
    try:
        states = wait_until(lambda: (s := node_states(get(nodes_url))) and all(m["hostname"] in s for m in machines.values()) and s,
                            30, "every agent's Node at the head")
        assert all(states[m["hostname"]] in ("Idle", "Busy") for m in machines.values()), states
        assert not any(h.stale for h in gatherer.gather().hosts)

        procs["wn-nfs-lustre"].kill()  # SIGKILL by PID: a worker that dies mid-run
        procs["wn-nfs-lustre"].wait()

        # Kept while fresh, then Unknown once [node] stale_after has passed.
        states = wait_until(lambda: (s := node_states(get(nodes_url))).get(victim) == "Unknown" and s,
                            STALE_AFTER + 15, "the dead agent's host to turn Unknown")
        assert all(states[name] in ("Idle", "Busy") for name in others), states
        result = wait_until(lambda: (r := gatherer.gather()) and any(h.stale and h.snapshot.hostname == victim for h in r.hosts) and r,
                            STALE_AFTER + 15, "the in-process gather to see it stale")
        failures = [f for f in result.failures if f.host == victim]
        assert failures and "refused" in failures[0].error.lower()
        gatherer.refresh_lrms()  # with the fresh hosts only
        build = render_site(gatherer.assemble())
        ldif = build.ldif()
        slapd_result = slapd.ldapadd(ldif)
        assert slapd_result.ok, str(slapd_result)
        (ce,) = slapd.ldapsearch("mds-vo-name=resource,o=grid", "(objectClass=GlueCE)", ["GlueCEStateFreeCPUs"])
        # The stale host is still published but no longer counted as free CPUs.
        assert int(ce.first("GlueCEStateFreeCPUs")) == sum(m["free_cpus"] for f, m in machines.items() if f != "wn-nfs-lustre")
        assert victim in {h.first("GlueHostUniqueID") for h in slapd.ldapsearch(
            "mds-vo-name=resource,o=grid", "(objectClass=GlueHost)", ["GlueHostUniqueID"])}

        # Gone after [sources] drop_after; the others never went Unknown.
        states = wait_until(lambda: victim not in (s := node_states(get(nodes_url))) and s,
                            DROP_AFTER + 15, "the dead agent's host to disappear")
        assert all(states[name] in ("Idle", "Busy") for name in others), states
        # The test's own gatherer may hold a later snapshot of the victim than the head's last one
        # (each copy ages from its own collected_at), so it may drop it a refresh later.
        final = wait_until(lambda: (r := gatherer.gather()) and victim not in {h.snapshot.hostname for h in r.hosts} and r,
                           15, "the test's gatherer to drop the dead agent's host too")
        assert sorted(h.snapshot.hostname for h in final.hosts if not h.stale) == sorted(others)
    finally:
        stop(head)
