"""Config mistakes as an admin makes them, and the exact line glueinfo answers each with.

Every config error is one line, ``FILE:LINE: [section] key: why``, exit 2, with "did you
mean" for a name one letter off a known one; an inline ``# comment`` after a value is a
comment (cut off), a ``#`` without white space before it is part of the value.  A busy
port names ``[serve] listen``; a second ``glueinfo run`` on one state directory refuses
to start naming the first one's PID; a state directory or output directory that cannot
be written says so, and never "the previous file is unchanged" of a file there never was.

The expected lines are written here by hand: file and line from the file each test
writes, the PID from the process the test started.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from glueinfo_processes import start_glueinfo, stop_glueinfo
from paths import REPO


def glueinfo(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=timeout)


def outputs(tmp: Path) -> str:
    """[run] keys that keep a test off this machine's /var/lib/glueinfo."""
    return f"[run]\nstate_dir = {tmp / 'state'}\nldif_file = {tmp / 'glue.ldif'}\nnode_xml_file = {tmp / 'nodes.xml'}\n"


# (the file, the command, the line after "glueinfo: FILE:")
TABLE = [
    pytest.param("[sources]\nenabled = agents\nagents = wn[010-001].example.org\n", "gather",
                 "3: [sources] agents: 'wn[010-001].example.org': range '010-001' runs backwards",
                 id="backwards-agent-range"),
    pytest.param("[sources]\nenabled = local\nnode_exporters = wn[1-3]:9100, wn[9-4]:9100\n", "ldif",
                 "3: [sources] node_exporters: 'wn[9-4]:9100': range '9-4' runs backwards",
                 id="backwards-exporter-range"),
    pytest.param("[sources]\nenabled = agent\n", "ldif",
                 "2: [sources] enabled: unknown source(s) agent (did you mean agents?)", id="enabled-agent"),
    pytest.param("[sources]\nenabled = local, carrier-pigeon\n", "gather",
                 "2: [sources] enabled: unknown source(s) carrier-pigeon "
                 "(known: agents, ganglia, local, node_exporter, prometheus, spool)", id="enabled-unknown"),
    pytest.param("[serve]\nlistn = 127.0.0.1:23171\n", "ldif",
                 "2: [serve] listn: unknown key (did you mean listen?)", id="one-letter-key-typo"),
    pytest.param("[sources]\nenabled = local\nagent = wn01\n", "gather",
                 "3: [sources] agent: unknown key (did you mean agents?)", id="plural-key-typo"),
    pytest.param("[glueinfo]\nhostname = ce01.example.org\n[source]\nenabled = local\n", "ldif",
                 "3: unknown section [source] (did you mean [sources]?)", id="section-typo"),
    pytest.param("[clusters:main]\nhosts = wn*\n", "ldif",
                 "1: unknown section [clusters:main] (did you mean [cluster:main]?)", id="section-kind-typo"),
    pytest.param("[ce:long]\nlrms = pbs\npbs_flavour = torqe\n", "ldif",
                 "3: [ce:long] pbs_flavour: must be one of auto, openpbs, torque, got 'torqe' (did you mean torque?)",
                 id="choice-typo"),
    pytest.param("[serve]\nlisten = 127.0.0.1:7170x  # loopback only\n", "serve",
                 "2: [serve] listen: listen address '127.0.0.1:7170x': port '7170x' is not a number from 0 to 65535",
                 id="bad-listen-with-inline-comment"),
    pytest.param("[serve]\nrefresh_interval = inf\n", "serve",
                 "2: [serve] refresh_interval: expected a finite number, got 'inf'", id="infinite-interval"),
    pytest.param("[node]\nstale_after = nan\n", "ldif",
                 "2: [node] stale_after: expected a finite number, got 'nan'", id="nan-seconds"),
]


@pytest.mark.parametrize("text, command, expected", TABLE)
def test_each_mistake_is_one_line_naming_file_line_section_and_key(tmp_path, text, command, expected):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(text + outputs(tmp_path), encoding="utf-8")
    done = glueinfo(command, "--config", str(conf))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"glueinfo: {conf}:{expected}\n")


def test_an_inline_comment_after_a_value_is_cut_off_and_a_hash_inside_one_is_kept(tmp_path):
    from glueinfo.core.config import parse_text

    config = parse_text("[serve]\nlisten = 127.0.0.1:23171  # loopback only\n"
                        "[sources]\nagents = wn[01-02].example.org\t# rack 1\n"
                        "[site]\nweb = https://www.example.org/#grid\n", "site.conf")
    assert config.get("serve", "listen") == "127.0.0.1:23171"
    assert config.get("sources", "agents") == "wn[01-02].example.org"
    assert config.get("site", "web") == "https://www.example.org/#grid"


def busy_port() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


@pytest.mark.parametrize("command", [["serve"], ["run", "--once"]])
def test_a_busy_port_names_serve_listen(tmp_path, command):
    with busy_port() as taken:
        port = taken.getsockname()[1]
        conf = tmp_path / "glueinfo.conf"
        # the inline comment is cut: the port is read, and the key is named with its line
        conf.write_text(f"[serve]\nlisten = 127.0.0.1:{port}  # loopback only\n" + outputs(tmp_path)
                        + "serve = yes\n", encoding="utf-8")
        done = glueinfo(*command, "--config", str(conf))
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (f"glueinfo: {conf}:2: [serve] listen: cannot listen on 127.0.0.1:{port}: "
                                            "Address already in use")


def test_a_busy_port_given_on_the_command_line_names_listen_option(tmp_path):
    with busy_port() as taken:
        port = taken.getsockname()[1]
        conf = tmp_path / "glueinfo.conf"
        conf.write_text(outputs(tmp_path), encoding="utf-8")
        done = glueinfo("serve", "--config", str(conf), "--listen", f"127.0.0.1:{port}")
    assert (done.returncode, done.stderr) == (2, f"glueinfo: --listen: cannot listen on 127.0.0.1:{port}: "
                                                 "Address already in use\n")


@pytest.mark.parametrize("value", ["nan", "inf", "1e300", "0.5"])
def test_a_refresh_interval_that_is_no_interval_is_a_usage_error(tmp_path, value):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(outputs(tmp_path), encoding="utf-8")
    done = glueinfo("serve", "--config", str(conf), "--listen", "127.0.0.1:0", "--refresh-interval", value)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"glueinfo: --refresh-interval: expected seconds from 1 to 604800, got {float(value):g}\n"


def test_a_second_run_on_the_same_state_directory_refuses_naming_the_first(tmp_path):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"[serve]\nlisten = 127.0.0.1:0\n{outputs(tmp_path)}serve = yes\n", encoding="utf-8")
    first = start_glueinfo(conf, tmp_path / "first.log", command=("run",))  # serving: the state is taken by then
    try:
        second = glueinfo("run", "--config", str(conf))
        assert first.process.poll() is None
    finally:
        assert stop_glueinfo(first) == 0, (tmp_path / "first.log").read_text()
    assert second.returncode == 2
    assert second.stderr.splitlines()[-1] == (
        f"glueinfo: {conf}:4: [run] state_dir: {tmp_path / 'state'}: another glueinfo run (PID {first.process.pid}) "
        "holds its lock and writes there; stop it, or give this one a state_dir of its own")
    again = glueinfo("run", "--once", "--config", str(conf))  # the first has stopped: the directory is free again
    assert again.returncode == 0 and "holds its lock" not in again.stderr, again.stderr


@pytest.fixture
def read_only_dir(tmp_path):
    """A mounted read-only tmpfs (root only): a directory nobody may write, not even root."""
    mount_point = tmp_path / "ro"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(mount_point)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_a_state_directory_that_cannot_be_written_says_so(tmp_path, read_only_dir):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"[run]\nstate_dir = {read_only_dir}\nldif_file = {tmp_path / 'glue.ldif'}\nnode_xml_file =\n",
                    encoding="utf-8")
    done = glueinfo("run", "--once", "--config", str(conf))
    assert done.returncode == 0, done.stderr
    warnings = [line.split(": WARNING: ", 1)[1] for line in done.stderr.splitlines() if ": WARNING: " in line]
    assert f"state directory {read_only_dir}: cannot be written: Read-only file system; nothing is remembered " \
           "across restarts" in warnings
    assert "lock" not in done.stderr  # not taken for another glueinfo
    assert (tmp_path / "glue.ldif").exists()  # published all the same


def test_an_output_directory_that_cannot_be_written_has_no_previous_file_to_keep(tmp_path, read_only_dir):
    conf = tmp_path / "glueinfo.conf"
    ldif = read_only_dir / "glue.ldif"
    conf.write_text(f"[run]\nstate_dir = {tmp_path / 'state'}\nldif_file = {ldif}\nnode_xml_file =\n", encoding="utf-8")
    done = glueinfo("run", "--once", "--config", str(conf))
    assert done.returncode == 1  # nothing published
    warnings = [line.split(": WARNING: ", 1)[1] for line in done.stderr.splitlines() if ": WARNING: " in line]
    assert f"{ldif}: not written: Read-only file system [EROFS]; there is no previous file" in warnings
    assert "unchanged" not in done.stderr
