"""Both GLUE trees from the commands a site runs: `glueinfo ldif` prints o=grid then o=glue (a BDII
provider emits both), `--glue` picks one, `gather --format ldif` prints the same bytes, and the
whole stream loads into a real slapd with zero rejections."""

from __future__ import annotations

import json
import os

import pytest
from glue_sites import CLASSES, make_host
from glueinfo_processes import run_glueinfo
from paths import REPO

pytestmark = pytest.mark.integration
EXAMPLE = REPO / "etc" / "examples" / "glue2-site.conf"
CLOCK = "1800000000"


@pytest.fixture
def site_files(tmp_path):
    hosts = [make_host(hw, i) for hw, _ in CLASSES[:2] for i in range(3)]
    for host in hosts:
        host.collected_at = float(CLOCK) - 30
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in hosts]))
    config = tmp_path / "site.conf"
    # the example site, its own state directory, its hosts as site snapshots (what gather also reads)
    config.write_text(EXAMPLE.read_text() + f"\n[run]\nstate_dir = {tmp_path / 'state'}\n[sources]\nenabled =\n"
                      f"[node]\nsite_snapshots = {snapshots}\n")
    return config


def records(ldif: str) -> list[str]:
    """The DNs of an LDIF stream, in order (continuation lines joined, comment lines skipped)."""
    return [line[4:] for line in ldif.replace("\n ", "").splitlines() if line.startswith("dn: ")]


def test_ldif_prints_both_trees_and_they_load_into_slapd(site_files, slapd):
    env = {"GLUEINFO_CLOCK": CLOCK}
    both = run_glueinfo("ldif", "--config", str(site_files), env=env)
    assert both.returncode in (0, 1), both.stderr  # 1: the example's Slurm CEs have no Slurm here (said on stderr)
    dns = records(both.stdout)
    grid = [dn for dn in dns if dn.lower().endswith("o=grid")]
    glue = [dn for dn in dns if dn.lower().endswith("o=glue")]
    assert grid and glue and len(grid) + len(glue) == len(dns)
    assert dns.index(glue[0]) > dns.index(grid[-1])  # o=grid first, then o=glue
    loaded = slapd.ldapadd(both.stdout)
    assert loaded.ok, str(loaded)
    assert len(loaded.added) == len(dns)

    only_glue2 = run_glueinfo("ldif", "--glue", "2.0", "--config", str(site_files), env=env)
    assert records(only_glue2.stdout) == glue
    only_glue13 = run_glueinfo("ldif", "--glue", "1.3", "--config", str(site_files), env=env)
    assert records(only_glue13.stdout) == grid

    gathered = run_glueinfo("gather", "--format", "ldif", "--config", str(site_files), env=env)
    assert gathered.stdout == both.stdout  # the same bytes from every command
    assert os.environ.get("GLUEINFO_CLOCK") is None


def test_serve_answers_glue2_json_with_the_services_ldif_publishes(site_files, tmp_path):
    import http.client

    from glueinfo_processes import start_glueinfo, stop_glueinfo

    env = {"GLUEINFO_CLOCK": CLOCK}
    ldif = run_glueinfo("ldif", "--glue", "2.0", "--config", str(site_files), env=env).stdout
    service_ids = sorted(line.split(": ", 1)[1] for line in ldif.replace("\n ", "").splitlines()
                         if line.startswith("GLUE2ServiceID: "))
    with open(site_files, "a") as handle:
        handle.write("[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n")
    served = start_glueinfo(site_files, tmp_path / "serve.log", env=env)
    try:
        connection = http.client.HTTPConnection(served.host, served.port, timeout=60)
        connection.request("GET", "/glue2.json")
        answer = connection.getresponse()
        body = answer.read()
    finally:
        stop_glueinfo(served)
    assert answer.status == 200, body
    assert answer.getheader("Content-Type") == "application/json"
    document = json.loads(body)

    def ids(node, found):  # every ID of a ComputingService object, wherever the rendering nests it
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "ComputingService":
                    found.extend(item["ID"] for item in value)
                ids(value, found)
        elif isinstance(node, list):
            for item in node:
                ids(item, found)
        return found

    assert sorted(ids(document, [])) == service_ids and service_ids


def test_run_writes_the_same_two_trees_as_ldif(site_files, tmp_path):
    env = {"GLUEINFO_CLOCK": CLOCK}
    printed = run_glueinfo("ldif", "--config", str(site_files), env=env).stdout
    text = site_files.read_text().replace(
        "\n[run]\n", f"\n[run]\nldif_file = {tmp_path / 'glue.ldif'}\nnode_xml_file = {tmp_path / 'nodes.xml'}\n", 1)
    site_files.write_text(text)
    proc = run_glueinfo("run", "--once", "--config", str(site_files), env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "glue.ldif").read_text() == printed
    assert any(dn.lower().endswith("o=glue") for dn in records(printed))
