"""Hostile files (issue 12, case 6): a FIFO in the state directory hung `glueinfo
run` at start (logging nothing, ignoring SIGTERM), and the spool followed
symlinks, so a worker able to write the spool could make a root daemon open
any file.  Spool, state and snapshot reads now open only regular files inside
their directory; everything else is named in one line and skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from glueinfo_processes import run_glueinfo
from paths import REPO

XEON = REPO / "tests" / "fixtures" / "hosts" / "xeon-gold-2s-ht"
XEON_NAME = json.loads((XEON / ".glueinfo" / "recorded.json").read_text())["hostname"]


def node_xml(tmp) -> bytes:
    """The xeon fixture machine's Node, as its own `glueinfo node-xml` cron job would write it."""
    config = tmp / "worker.conf"
    config.write_text(f"[run]\nstate_dir = {tmp / 'worker-state'}\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "node-xml", "--host-root", str(XEON), "--config", str(config)],
                          capture_output=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_fifos_in_the_state_directory_do_not_hang_run(tmp_path):
    state = tmp_path / "state"
    (state / "hosts").mkdir(parents=True)
    for fifo in ("lock", "subclusters.json", f"hosts/{XEON_NAME}.json"):
        os.mkfifo(state / fifo)
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[glueinfo]\nhost_root = {XEON}\n"
                      f"[run]\nstate_dir = {state}\nldif_file = {tmp_path / 'glue.ldif'}\n"
                      f"node_xml_file = {tmp_path / 'nodes.xml'}\n")
    # A hang is the failure: `timeout` turns it into an exception instead of a stuck CI run.
    proc = run_glueinfo("run", "--once", "--config", str(config), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"GlueHostUniqueID: {XEON_NAME}" in (tmp_path / "glue.ldif").read_text()
    assert "subclusters.json" in proc.stderr and "is a FIFO, not a regular file" in proc.stderr


def test_the_spool_never_follows_a_symlink(tmp_path):
    spool, outside = tmp_path / "spool", tmp_path / "outside"
    spool.mkdir()
    outside.mkdir()
    (outside / f"{XEON_NAME}.xml").write_bytes(node_xml(tmp_path))
    os.symlink(outside / f"{XEON_NAME}.xml", spool / f"{XEON_NAME}.xml")  # a valid Node, but outside the spool
    os.symlink("/etc/shadow", spool / "wn02.example.org.xml")
    os.mkfifo(outside / "fifo")
    os.symlink(outside / "fifo", spool / "wn03.example.org.xml")
    os.mkfifo(spool / "wn04.example.org.xml")
    # one honest worker beside them: the rest of the spool is still read
    (spool / "wn05.example.org.xml").write_bytes(node_xml(tmp_path).replace(XEON_NAME.encode(), b"wn05.example.org"))
    config = tmp_path / "head.conf"
    config.write_text(f"[sources]\nenabled = spool\nspool_dir = {spool}\n[run]\nstate_dir = {tmp_path / 'state'}\n")
    proc = run_glueinfo("gather", "--config", str(config), timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [h["hostname"] for h in result["hosts"]] == ["wn05.example.org"]
    errors = {os.path.basename(f["target"]): f["error"] for f in result["failures"]}
    assert errors == {f"{XEON_NAME}.xml": "a symlink: not read", "wn02.example.org.xml": "a symlink: not read",
                      "wn03.example.org.xml": "a symlink: not read", "wn04.example.org.xml": "not a regular file: not read"}


def test_a_fifo_among_the_site_snapshots_is_skipped(tmp_path):
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    (snapshots / "good.xml").write_bytes(node_xml(tmp_path))
    os.mkfifo(snapshots / "stuck.json")
    os.symlink("/etc/shadow", snapshots / "shadow.json")
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[sources]\nenabled =\n[node]\nsite_snapshots = {snapshots}\n[run]\nstate_dir = {tmp_path / 'state'}\n")
    proc = run_glueinfo("ldif", "--config", str(config), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"GlueHostUniqueID: {XEON_NAME}" in proc.stdout
    assert "stuck.json: is a FIFO, not a regular file: not read" in proc.stderr
    assert "shadow.json: is a symlink: not followed" in proc.stderr
