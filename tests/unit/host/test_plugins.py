"""Third-party collectors: a package built and installed during the test run is
picked up through the glueinfo.collectors entry point group, with no change to
glueinfo.  The plugin's source is tests/plugin_example/; a second, broken
plugin is written here to show that it cannot take the others down."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from paths import TESTS

HERE = str(TESTS)
FIXTURE_HOST = os.path.join(HERE, "fixtures", "hosts", "wn-nfs-lustre")

BROKEN_SETUP_CFG = """\
[metadata]
name = glueinfo-broken-plugin
version = 0.1

[options]
py_modules = glueinfo_broken_plugin

[options.entry_points]
glueinfo.collectors =
    broken = glueinfo_broken_plugin:NO_SUCH_COLLECTOR
"""


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory):
    """Build and install both plugins into a directory of their own, offline."""
    work = tmp_path_factory.mktemp("plugins")
    example = work / "example"
    shutil.copytree(os.path.join(HERE, "plugin_example"), example,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    broken = work / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n', encoding="utf-8")
    (broken / "setup.cfg").write_text(BROKEN_SETUP_CFG, encoding="utf-8")
    (broken / "glueinfo_broken_plugin.py").write_text("SOMETHING_ELSE = 1\n", encoding="utf-8")
    target = work / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(target), str(example), str(broken)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(target)


def glueinfo(site: str | None, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GLUEINFO_CONFIG", "PYTHONPATH")}
    if site:
        env["PYTHONPATH"] = site
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, env=env, timeout=60)


def rows(output: str) -> dict[str, list[str]]:
    lines = output.splitlines()
    assert lines[0].split() == ["NAME", "ENABLED", "DEFAULT", "SOURCE"]
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


def test_collectors_lists_the_plugins_with_their_package(site_dir):
    done = glueinfo(site_dir, "collectors")
    assert done.returncode == 0, done.stderr
    table = rows(done.stdout)
    assert table["example"] == ["yes", "on", "glueinfo-example-plugin"]
    assert table["example_off"] == ["no", "off", "glueinfo-example-plugin"]
    assert table["cpu"] == ["yes", "on", "builtin"]
    assert "broken" not in table
    # the broken plugin is reported, in one line, and does not stop the listing
    assert "collector plugin 'broken' from glueinfo-broken-plugin failed to load" in done.stderr


def test_without_the_package_there_is_no_plugin(site_dir):
    table = rows(glueinfo(None, "collectors").stdout)
    assert "example" not in table and "example_off" not in table


def test_probe_carries_the_plugin_facts(site_dir):
    done = glueinfo(site_dir, "probe")
    assert done.returncode == 0, done.stderr
    snapshot = json.loads(done.stdout)
    assert snapshot["extra"] == {"example": {"answer": 42, "live": True, "greeting": "Grüße"}}
    result = next(r for r in snapshot["collectors"] if r["name"] == "example")
    assert result["success"] is True and result["source"] == "glueinfo-example-plugin"
    assert snapshot["cpu"]["logical_cpus"] >= 1  # the built-ins still run


def test_a_plugin_off_by_default_is_enabled_from_the_command_line_or_config(site_dir, tmp_path):
    done = glueinfo(site_dir, "probe", "--collector", "example_off", "--no-collector", "example")
    assert json.loads(done.stdout)["extra"] == {"example_off": {"enabled_by": "configuration"}}
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[collectors]\nenable = example_off\n", encoding="utf-8")
    done = glueinfo(site_dir, "probe", "--config", str(conf))
    assert set(json.loads(done.stdout)["extra"]) == {"example", "example_off"}


def test_plugins_see_the_recorded_host_root(site_dir):
    done = glueinfo(site_dir, "probe", "--host-root", FIXTURE_HOST)
    snapshot = json.loads(done.stdout)
    assert snapshot["extra"]["example"]["live"] is False
    assert snapshot["hostname"] == "wn042.example.org"


def test_a_package_installed_while_running_is_found_by_the_next_discovery(site_dir, tmp_path, monkeypatch):
    """A long-running provider discovers collectors on every probe: one installed
    after the first discovery shows up in the next (the scan memo follows the
    directory's contents)."""
    from glueinfo.host.collect import plugin_collectors

    target = tmp_path / "site"
    target.mkdir()
    monkeypatch.syspath_prepend(str(target))
    assert "example" not in {c.name for c in plugin_collectors()}
    for name in os.listdir(site_dir):  # what pip put there, copied as an install would write it
        if name.startswith("glueinfo_example_plugin"):
            shutil.copytree(os.path.join(site_dir, name), target / name)
    found = {c.name: c.source for c in plugin_collectors()}
    assert found.get("example") == "glueinfo-example-plugin"
    shutil.rmtree(target / next(n for n in os.listdir(target) if n.endswith(".dist-info")))
    assert "example" not in {c.name for c in plugin_collectors()}


# -- plugins of the other families, with config keys of their own (issue 24) ---------------------------------------

def queue_file(tmp_path):
    """What the example batch system reads: its queue's figures, written by hand."""
    figures = tmp_path / "queue.json"
    figures.write_text('{"total": 96, "free": 17, "running": 5, "waiting": 3}')
    return figures


def plugin_site_config(tmp_path, queue_file, extra: str = "") -> str:
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"""
[glueinfo]
host_root = {FIXTURE_HOST}
[ce:ex]
lrms = example
queue = q1
example_queue_file = {queue_file}
[run]
state_dir = {tmp_path / "state"}
ldif_file = {tmp_path / "glue.ldif"}
node_xml_file = {tmp_path / "nodes.xml"}
{extra}
""", encoding="utf-8")
    return str(conf)


def ce_values(ldif: str, attribute: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in ldif.splitlines() if line.startswith(f"{attribute}: ")]


def test_a_third_party_batch_system_reads_its_own_declared_keys(site_dir, tmp_path):
    figures = queue_file(tmp_path)
    conf = plugin_site_config(tmp_path, figures)
    done = glueinfo(site_dir, "ldif", "--glue", "1.3", "--config", conf)
    assert done.returncode == 0, done.stderr
    assert ce_values(done.stdout, "GlueCEInfoLRMSType") == ["example"]
    assert ce_values(done.stdout, "GlueCEStateFreeCPUs") == ["17"]
    assert ce_values(done.stdout, "GlueCEStateWaitingJobs") == ["3"]
    assert ce_values(done.stdout, "GlueCEInfoLRMSVersion") == ["7"]  # the plugin's declared default
    # Without the package, the same key is a config error naming it, as any unknown key is.
    done = glueinfo(None, "ldif", "--config", conf)
    assert done.returncode == 2
    assert "[ce:ex] example_queue_file: unknown key" in done.stderr


def test_a_declared_key_is_typed_as_the_plugin_declares_it(site_dir, tmp_path):
    figures = queue_file(tmp_path)
    conf = plugin_site_config(tmp_path, figures)
    with open(conf, "a", encoding="utf-8") as handle:
        handle.write("[ce:ex2]\nlrms = example\nexample_queue_file = x\nexample_version = seven\n")
    done = glueinfo(site_dir, "ldif", "--config", conf)
    assert done.returncode == 2
    assert "[ce:ex2] example_version: expected a whole number, got 'seven'" in done.stderr


def test_an_installed_output_publishes_from_its_own_section_beside_the_file(site_dir, tmp_path):
    figures = queue_file(tmp_path)
    summary = tmp_path / "summary.txt"
    conf = plugin_site_config(tmp_path, figures, extra=f"outputs = example-summary\n[output:example-summary]\npath = {summary}\n"
                                                       "prefix = CE=\n")
    done = glueinfo(site_dir, "run", "--once", "--config", conf)
    assert done.returncode == 0, done.stderr
    ce_ids = ce_values((tmp_path / "glue.ldif").read_text(), "GlueCEUniqueID")
    assert len(ce_ids) == 1
    assert summary.read_text() == f"CE={ce_ids[0]} 17\n"
    assert "summary of 1 CEs" in done.stderr  # its note in the cycle's log line


def test_an_output_nobody_provides_is_refused_as_a_config_error(tmp_path):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"[glueinfo]\nhost_root = {FIXTURE_HOST}\n[run]\nstate_dir = {tmp_path / 's'}\nldif_file = {tmp_path / 'l'}\n"
                    f"node_xml_file = {tmp_path / 'n'}\noutputs = nosuch\n", encoding="utf-8")
    done = glueinfo(None, "run", "--once", "--config", str(conf))
    assert done.returncode == 2
    assert "unknown output 'nosuch' (known: amqp, file, htcondor-ce, http, ldap, stdout)" in done.stderr
