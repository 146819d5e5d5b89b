"""The spool source: Node XML files workers drop into a shared directory.

The first test runs the README's cron line for real (glueinfo node-xml of a
recorded fixture host written to a dot-file, then renamed) and reads the
spool back; the second fills a spool with everything a shared directory
collects over time: writes in progress, editor leftovers, a truncated file,
a copied file naming another host, a huge file, a directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from paths import HOSTS, REPO

from glueinfo.core.config import parse_text
from glueinfo.core.model import CpuInfo, HostSnapshot, MemoryInfo
from glueinfo.gather.gatherer import Gatherer
from glueinfo.sss.node_xml import render_node

HOSTS = HOSTS
REPO = REPO


def spool_config(spool: Path, **overrides):
    keys = {"enabled": "spool", "spool_dir": str(spool), "max_body": 65536, "drop_after": 3600, **overrides}
    lines = "".join(f"{key} = {value}\n" for key, value in keys.items())
    return parse_text(f"[sources]\n{lines}[node]\nstale_after = 300\n", "test.conf")


def test_the_documented_cron_line_feeds_the_head_node(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for fixture, name in (("wn-nfs-lustre", "wn042.example.org"), ("xeon-gold-2s-ht", "hpc-node17.cluster.example.org")):
        # README: glueinfo node-xml > SPOOL/.HOST.xml.tmp && mv -f SPOOL/.HOST.xml.tmp SPOOL/HOST.xml
        line = (f"{sys.executable} -m glueinfo.cli node-xml --host-root {HOSTS / fixture} > {spool}/.{name}.xml.tmp"
                f" && mv -f {spool}/.{name}.xml.tmp {spool}/{name}.xml")
        subprocess.run(["sh", "-c", line], check=True, env=env, timeout=60)
    result = Gatherer(spool_config(spool)).gather()
    assert result.failures == []
    hosts = {h.snapshot.hostname: h for h in result.hosts}
    assert sorted(hosts) == ["hpc-node17.cluster.example.org", "wn042.example.org"]
    wn = hosts["wn042.example.org"].snapshot
    # Facts as recorded in the fixture tree (its /proc/cpuinfo has 16 processors, MemTotal 65807864 kB).
    assert wn.source == "spool" and wn.cpu.logical_cpus == 16 and wn.memory.ram_mb == 65807864 // 1024
    assert {fs.fs_type for fs in wn.filesystems if fs.remote} >= {"nfs4", "lustre"}
    assert not hosts["wn042.example.org"].stale
    assert hosts["hpc-node17.cluster.example.org"].snapshot.cpu.sockets == 2


def node_file(path: Path, hostname: str, collected_at: float, with_time: bool = True) -> None:
    snap = HostSnapshot(hostname=hostname, collected_at=collected_at, cpu=CpuInfo(logical_cpus=4), memory=MemoryInfo(ram_mb=8000))
    data = render_node(snap, collected_at)
    if not with_time:
        data = b"\n".join(line for line in data.split(b"\n") if b'name="CollectedAt"' not in line)
    path.write_bytes(data)


def test_a_messy_spool_yields_only_the_finished_files(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    now = time.time()
    node_file(spool / "wn01.example.org.xml", "wn01.example.org", now - 10)
    node_file(spool / "wn02.xml", "wn02.example.org", now - 10)  # short file name for an FQDN Node: the same host
    node_file(spool / "wn03.example.org.xml", "wn03.example.org", 0, with_time=False)
    os.utime(spool / "wn03.example.org.xml", (now - 400, now - 400))  # no CollectedAt: the file's age counts
    node_file(spool / ".wn04.example.org.xml.tmp", "wn04.example.org", now)  # a write in progress
    (spool / "wn05.example.org.xml.tmp").write_bytes(b"<Node><Id>wn05")
    node_file(spool / "wn06.example.org.xml~", "wn06.example.org", now)  # an editor's backup
    node_file(spool / "wn07.example.org.xml", "wn01.example.org", now)  # copied from wn01: claims its Id
    (spool / "wn08.example.org.xml").write_bytes(b'<?xml version="1.0"?>\n<Node><Id>wn08.example.org</Id><Configured>')
    (spool / "wn09.example.org.xml").write_bytes(b"<Node>" + b" " * 70000 + b"</Node>")
    (spool / "notes.txt").write_text("not a node")
    (spool / "archive.xml").mkdir()

    result = Gatherer(spool_config(spool)).gather()
    hosts = {h.snapshot.hostname: h for h in result.hosts}
    assert sorted(hosts) == ["wn01.example.org", "wn02.example.org", "wn03.example.org"]
    assert abs(hosts["wn03.example.org"].snapshot.collected_at - (now - 400)) < 1e-3 and hosts["wn03.example.org"].stale
    assert not hosts["wn01.example.org"].stale and hosts["wn01.example.org"].snapshot.memory.ram_mb == 8000
    failures = {f.host: f.error for f in result.failures}
    assert sorted(failures) == ["wn07.example.org", "wn08.example.org", "wn09.example.org"]
    assert failures["wn07.example.org"] == "Node claims to be 'wn01.example.org', not 'wn07.example.org': refused"
    assert "not well-formed" in failures["wn08.example.org"]
    assert "over the limit of 65536 bytes" in failures["wn09.example.org"]


def test_a_file_that_turns_bad_keeps_its_last_good_snapshot(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    now = time.time()
    node_file(spool / "wn01.example.org.xml", "wn01.example.org", now - 5)
    gatherer = Gatherer(spool_config(spool))
    (first,) = gatherer.gather().hosts
    # A worker that does not write atomically is caught half-way.
    (spool / "wn01.example.org.xml").write_bytes(b'<?xml version="1.0"?>\n<Node><Id>wn01.exa')
    second = gatherer.gather()
    (kept,) = second.hosts
    assert kept.snapshot.collected_at == first.snapshot.collected_at
    assert abs(kept.snapshot.collected_at - (now - 5)) < 1e-3  # Node XML keeps microseconds
    assert [f.host for f in second.failures] == ["wn01.example.org"]
    # The next complete write is picked up.
    node_file(spool / "wn01.example.org.xml", "wn01.example.org", now)
    (fresh,) = gatherer.gather().hosts
    assert abs(fresh.snapshot.collected_at - now) < 1e-3


def test_a_missing_spool_directory_is_one_clear_failure(tmp_path):
    result = Gatherer(spool_config(tmp_path / "nope")).gather()
    assert result.hosts == []
    (failure,) = result.failures
    assert failure.error == "cannot list the spool: No such file or directory"
