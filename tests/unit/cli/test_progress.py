"""Progress on stderr for `ldif`, `gather` and `publish`: on a terminal once the command has run a
second, rewritten in place with \\r and blanked at the end; never when stderr is a pipe (BDII).

The slow step is real: the CE's batch system is a `sinfo` that takes 2.5 s to fail, so every
command spends that long asking it.  The terminal is a real pseudo-terminal (the pty module).
"""

from __future__ import annotations

import io
import logging
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

from glueinfo.commands.progress import Progress

SLOW = 2.5  # seconds the batch system takes to answer: past the one second progress waits for


def slow_site(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sinfo", "squeue", "scontrol", "sacct", "sacctmgr"):
        script = bin_dir / tool
        slow = f'[ "$1" = --version ] && sleep {SLOW}\n' if tool == "sinfo" else ""  # the plugin's first question
        script.write_text(f"#!/bin/sh\n{slow}echo 'slurm_load_partitions: Unable to contact slurm controller' >&2\nexit 1\n")
        script.chmod(0o755)
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"[ce:long]\nlrms = slurm\nslurm_bin_dir = {bin_dir}\naccess = VO:dteam\n"
                    f"[run]\nstate_dir = {tmp_path / 'state'}\n")
    return conf


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "glueinfo.cli", *args]


def on_a_terminal(argv: list[str], stdout: Path) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal and stdout to a file; (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    with open(stdout, "wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=slave, cwd=REPO, env=env)
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    return process.wait(60), received.decode("utf-8", "replace")


def in_a_pipe(argv: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    return subprocess.run(argv, capture_output=True, cwd=REPO, env=env, timeout=60)


@pytest.mark.parametrize("args, shown", [
    (["ldif"], "glueinfo: ldif: asking the batch systems about 1 host..."),
    (["gather", "--format", "ldif"], "glueinfo: gather: asking the batch systems about 1 host..."),
    (["publish", "--ldap", "ldap://127.0.0.1:1"], "glueinfo: publish: asking the batch systems about 1 host..."),
])
def test_a_slow_command_shows_its_stage_on_a_terminal_and_nothing_in_a_pipe(tmp_path, args, shown):
    conf = slow_site(tmp_path)
    argv = command(*args, "--config", str(conf))
    code, terminal = on_a_terminal(argv, tmp_path / "out.ldif")
    assert f"\r{shown} " in terminal, terminal
    assert terminal.count(shown) >= 2  # rewritten in place while it lasts (every half second, with the seconds)
    # blanked before the warnings and at the end: every line that is not progress starts clean
    lines = [line.rsplit("\r", 1)[-1] for line in terminal.replace("\r\n", "\n").split("\n")]
    assert all(not line.startswith("glueinfo: " + args[0] + ": ") or "..." not in line for line in lines if line), terminal
    assert "Unable to contact slurm controller" in terminal  # the batch system's error, on a line of its own
    if args[0] != "publish":
        assert (tmp_path / "out.ldif").read_text().startswith("dn: ")  # stdout is the LDIF alone
    piped = in_a_pipe(argv)
    assert piped.returncode == code
    assert b"\r" not in piped.stderr and b"asking the batch systems" not in piped.stderr
    assert b"Unable to contact slurm controller" in piped.stderr


def test_a_quick_command_shows_no_progress_even_on_a_terminal(tmp_path):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"[ce:default]\naccess = VO:dteam\n[run]\nstate_dir = {tmp_path / 'state'}\n")
    code, terminal = on_a_terminal(command("ldif", "--glue", "1.3", "--config", str(conf), "--no-hosts"), tmp_path / "o")
    assert code == 0
    assert "glueinfo: ldif: " not in terminal and "\r" not in terminal.replace("\r\n", "\n"), terminal


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_waits_a_second_then_is_rewritten_and_blanked():
    now = [100.0]
    stream = Terminal()
    progress = Progress("ldif", stream, clock=lambda: now[0])
    assert progress.enabled
    progress.stage("gathering hosts")
    now[0] = 100.9
    progress.tick()
    assert stream.getvalue() == ""  # under a second: nothing
    now[0] = 101.2
    progress.tick()
    assert stream.getvalue() == "\rglueinfo: ldif: gathering hosts... 1 s"
    now[0] = 103.0
    progress.stage("assembling 30,000 hosts")
    assert stream.getvalue().endswith("\rglueinfo: ldif: assembling 30,000 hosts... 3 s")
    width = len("glueinfo: ldif: assembling 30,000 hosts... 3 s")
    progress.close()
    assert stream.getvalue().endswith("\r" + " " * width + "\r")


def test_a_warning_is_printed_on_a_clean_line_and_pause_stops_the_line():
    now = [0.0]
    stream = Terminal()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with Progress("gather", stream, clock=lambda: now[0], every_s=3600) as progress:
            now[0] = 2.0
            progress.stage("gathering hosts")
            drawn = "glueinfo: gather: gathering hosts... 2 s"
            logging.getLogger("glueinfo.test").warning("wn01.example.org: connection refused")
            assert stream.getvalue() == f"\r{drawn}\r{' ' * len(drawn)}\rwn01.example.org: connection refused\n"
            progress.pause()
            progress.stage("writing 3 hosts")
            assert stream.getvalue().endswith("connection refused\n")  # nothing drawn once paused
    finally:
        root.removeHandler(handler)
    assert handler.filters == []


def test_not_a_terminal_means_nothing_at_all():
    stream = io.StringIO()
    now = [0.0]
    with Progress("ldif", stream, clock=lambda: now[0]) as progress:
        now[0] = 30.0
        progress.stage("rendering the LDIF")
        progress.tick()
    assert not progress.enabled and stream.getvalue() == ""
