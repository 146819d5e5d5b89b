"""`glueinfo probe` and `glueinfo collectors` as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from paths import HOSTS

from glueinfo.core.model import HostSnapshot

HOSTS = str(HOSTS)
BUILTINS = ["cpu", "memory", "load", "network", "filesystems", "os", "static", "accelerators"]


def glueinfo(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if k != "GLUEINFO_CONFIG"}
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, env=env, timeout=60)


def test_probe_prints_one_line_of_json_for_this_host():
    done = glueinfo("probe")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.count("\n") == 1
    snapshot = HostSnapshot.from_json(done.stdout)
    assert snapshot.cpu.logical_cpus == open("/proc/cpuinfo").read().count("processor\t:")
    assert [r.name for r in snapshot.collectors] == BUILTINS
    assert all(r.success for r in snapshot.collectors)


def test_pretty_is_indented_and_has_the_same_facts():
    plain = json.loads(glueinfo("probe").stdout)
    done = glueinfo("probe", "--pretty")
    assert done.returncode == 0
    assert done.stdout.startswith('{\n  "hostname": ')
    pretty = json.loads(done.stdout)
    for part in ("hostname", "cpu", "os", "network"):
        assert pretty[part] == plain[part], part
    assert pretty["memory"]["ram_mb"] == plain["memory"]["ram_mb"]


def test_host_root_reads_a_recorded_host():
    root = os.path.join(HOSTS, "xeon-gold-2s-ht")
    done = glueinfo("probe", "--host-root", root)
    assert done.returncode == 0, done.stderr
    snapshot = json.loads(done.stdout)
    assert snapshot["hostname"] == "hpc-node17.cluster.example.org"
    assert snapshot["host_root"] == root
    assert (snapshot["cpu"]["sockets"], snapshot["cpu"]["physical_cores"], snapshot["cpu"]["logical_cpus"]) == (2, 24, 48)
    assert snapshot["os"]["pretty_name"] == "Rocky Linux 9.2 (Blue Onyx)"


def test_host_root_from_the_config_file(tmp_path):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"[glueinfo]\nhost_root = {os.path.join(HOSTS, 'arm-altra-q32')}\nhostname = alias.example.org\n",
                    encoding="utf-8")
    snapshot = json.loads(glueinfo("probe", "--config", str(conf)).stdout)
    assert snapshot["cpu"]["instruction_set"] == "aarch64"
    assert snapshot["hostname"] == "alias.example.org"


def test_non_ascii_is_printed_as_utf8():
    done = glueinfo("probe", "--pretty", "--host-root", os.path.join(HOSTS, "vm-nonascii-cpu"))
    assert '"model_name": "Intel® Core™ i7-8700 CPU @ 3.20GHz"' in done.stdout


def test_utilisation_interval_from_config(tmp_path):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[collectors]\nutilisation_interval = 0.2\n", encoding="utf-8")
    load = json.loads(glueinfo("probe", "--config", str(conf)).stdout)["load"]
    assert load["utilisation_interval_s"] == 0.2
    assert 0.0 <= load["cpu_utilisation_percent"] <= 100.0


def test_failed_collectors_are_warned_about_one_line_each_and_recorded(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(os.path.join(HOSTS, "wn-nfs-lustre"), root)
    (root / ".glueinfo" / "recorded.json").write_text("[1, 2", encoding="utf-8")
    done = glueinfo("probe", "--host-root", str(root))
    assert done.returncode == 0  # a snapshot with failed parts is still a snapshot
    warnings = done.stderr.splitlines()
    assert [w.split(":")[2].strip() for w in warnings] == [
        "collector cpu failed", "collector network failed", "collector filesystems failed", "collector os failed"]
    assert all(w.startswith("glueinfo: WARNING: collector ") and "recorded.json: not valid JSON" in w for w in warnings)
    failed = {r["name"]: r["error"] for r in json.loads(done.stdout)["collectors"] if not r["success"]}
    assert sorted(failed) == ["cpu", "filesystems", "network", "os"]


def test_collectors_lists_every_builtin():
    done = glueinfo("collectors")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ENABLED", "DEFAULT", "SOURCE"]
    table = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    for name in BUILTINS:
        assert table[name] == ["yes", "on", "builtin"]


def test_collectors_shows_what_the_command_line_disables():
    table = {line.split()[0]: line.split()[1] for line in glueinfo("collectors", "--no-collector", "network").stdout.splitlines()[1:]}
    assert table["network"] == "no" and table["cpu"] == "yes"


def one_line_error(done: subprocess.CompletedProcess, starts: str) -> None:
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(starts), done.stderr


def test_usage_errors_exit_2_in_one_line(tmp_path):
    one_line_error(glueinfo("probe", "--bogus"), "glueinfo: unrecognized arguments: --bogus")
    one_line_error(glueinfo(), "glueinfo: the following arguments are required: COMMAND")
    one_line_error(glueinfo("nosuch"), "glueinfo: argument COMMAND: invalid choice: 'nosuch'")
    one_line_error(glueinfo("probe", "--host-root", str(tmp_path / "gone")), f"glueinfo: host root {tmp_path / 'gone'}: no such directory")
    one_line_error(glueinfo("probe", "--collector", "gpu"), "glueinfo: unknown collector(s): gpu (known: ")


def test_help_and_version():
    assert glueinfo("--version").stdout.startswith("glueinfo ")
    done = glueinfo("probe", "--help")
    assert done.returncode == 0 and "--pretty" in done.stdout and "--host-root" in done.stdout


def test_console_script_is_installed():
    script = shutil.which("glueinfo", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    assert script, "pip install -e '.[test]' installs the glueinfo console script"
    done = subprocess.run([script, "probe", "--host-root", os.path.join(HOSTS, "epyc-container")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)["cpu"]["vendor"] == "AuthenticAMD"
