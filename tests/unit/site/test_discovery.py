"""CEs found, not declared: HTCondor-CE's routes and ARC-CE's queues on recorded installations.

The recordings (tests/fixtures/discovery/, README there) are what
``condor_ce_config_val -dump -expanded`` prints on HTCondor-CE 23 and 24 head
nodes and the arc.conf of ARC 6 and 7 CEs.  A fake ``condor_ce_config_val``
prints a recording only when asked exactly what glueinfo asks; fake
``scontrol``/``qstat``/``arched`` print the batch systems' and ARC's own
answers.  The expected hosts, ports, queues and versions are read off the
recordings by eye and written here.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import FIXTURES

from glueinfo.core.config import ConfigError, parse_text
from glueinfo.core.ldif import parse_ldif
from glueinfo.site.discovery import arc, default_queue, htcondor_ce
from glueinfo.site.from_config import site_from_config

DISCOVERY = FIXTURES / "discovery"
PATTERN = (DISCOVERY / "pattern.txt").read_text(encoding="utf-8")
LOCAL = "head.example.org"


def script(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)


def fake_condor_ce(bin_dir: Path, recording: str) -> None:
    """condor_ce_config_val printing ``recording``'s dump when asked the dump glueinfo asks for."""
    script(bin_dir, "condor_ce_config_val",
           f'[ "$1 $2" = "-dump -expanded" ] && [ "$3" = \'{PATTERN}\' ] && [ $# -eq 3 ] || '
           '{ echo "unexpected arguments: $*" >&2; exit 2; }\n'
           f"exec cat '{DISCOVERY / recording / 'condor_ce_config_val-dump.txt'}'\n")


def fake_printing(bin_dir: Path, name: str, args: str, fixture: Path) -> None:
    script(bin_dir, name, f'[ "$*" = "{args}" ] || {{ echo "unexpected arguments: $*" >&2; exit 2; }}\n'
                          f"exec cat '{fixture}'\n")


def site(tmp_path: Path, conf: str = "", *, ce_bin: Path | None = None, arc_conf: Path | None = None):
    """The site model of ``conf`` with discovery pointed at ``ce_bin`` and ``arc_conf`` (nothing else)."""
    ce_bin = ce_bin or tmp_path / "nothing"
    ce_bin.mkdir(exist_ok=True)
    arc_conf = arc_conf or tmp_path / "no-arc.conf"
    text = f"[discovery]\ncondor_ce_bin_dir = {ce_bin}\narc_conf = {arc_conf}\narc_bin_dir = {ce_bin}\n{conf}"
    return site_from_config(parse_text(text), LOCAL)


def ces(model):
    return {ce.section: ce for ce in model.ces}


@pytest.fixture
def batch_bin(tmp_path, monkeypatch):
    """A bin dir first on PATH with the batch systems' recorded default-queue answers."""
    bin_dir = tmp_path / "batch"
    fake_printing(bin_dir, "scontrol", "show partition -o", DISCOVERY / "batch" / "slurm-23.02-scontrol_show_partition_o.txt")
    fake_printing(bin_dir, "qstat", "-Bf", DISCOVERY / "batch" / "torque-6.1.3-qstat_Bf.txt")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bin_dir


# -- HTCondor-CE ----------------------------------------------------------------------

def test_htcondor_ce_24_routes_in_transform_syntax_are_ces_of_slurm(tmp_path, batch_bin):
    fake_condor_ce(tmp_path / "ce", "htcondor-ce-24-slurm")
    found = ces(site(tmp_path, ce_bin=tmp_path / "ce"))
    assert list(found) == ["Atlas_Long", "Cms_Short", "Slurm_Cluster"]
    # default_queue, SET BatchQueue, and no queue: Slurm's Default=YES partition (main)
    assert [ce.queue for ce in found.values()] == ["long", "short", "main"]
    for ce in found.values():
        assert (ce.host, ce.port, ce.lrms) == ("ce01.example.org", 9619, "slurm")
        assert (ce.implementation_name, ce.implementation_version) == ("HTCondorCE", "24.0.2")
        assert ce.access == ("VO:atlas", "VO:cms", "VO:dteam")  # HTCONDORCE_VONames
    assert found["Atlas_Long"].unique_id == "ce01.example.org:9619/htcondorce-slurm-long"


def test_htcondor_ce_24_routes_to_the_local_pool_feed_its_schedd_once(tmp_path, caplog):
    fake_condor_ce(tmp_path / "ce", "htcondor-ce-24-condor")
    with caplog.at_level(logging.INFO):
        found = ces(site(tmp_path, ce_bin=tmp_path / "ce"))
    # UNIVERSE VANILLA and TargetUniverse = 5 both go to JOB_ROUTER_SCHEDD2_NAME: one queue, one CE
    assert list(found) == ["Whole_Node"]
    ce = found["Whole_Node"]
    assert (ce.host, ce.port, ce.lrms, ce.queue, ce.implementation_version) == (
        "ce02.example.org", 9619, "htcondor", "ce02.example.org", "24.1.2")
    assert "route Condor_Pool feeds the same queue as [ce:Whole_Node]" in caplog.text


def test_htcondor_ce_23_old_classad_routes_are_ces_of_pbs(tmp_path, batch_bin):
    fake_condor_ce(tmp_path / "ce", "htcondor-ce-23-pbs")
    found = ces(site(tmp_path, ce_bin=tmp_path / "ce"))
    assert list(found) == ["OSG_COVID19_Jobs", "Local_PBS", "Ops_Tests"]
    # set_default_queue, no queue: the Torque server's default_queue (batch), queue = "express"
    assert [ce.queue for ce in found.values()] == ["covid19", "batch", "express"]
    assert {(ce.host, ce.port, ce.lrms, ce.implementation_version) for ce in found.values()} == {
        ("ce03.example.org", 9619, "pbs", "23.0.17")}
    assert all(ce.access == () for ce in found.values())  # no HTCONDORCE_VONames there


def test_job_router_order_and_which_syntax_counts():
    entries = '[ name = "A"; GridResource = "batch sge"; set_default_queue = "all.q"; ] [ name = "B"; TargetUniverse = 5; ]'
    transform = '  UNIVERSE GRID\n  GridResource = "batch lsf"\n  default_queue = grid\n'
    params = {"JOB_ROUTER_ENTRIES": entries, "JOB_ROUTER_ROUTE_B": transform}
    # entries are read only when the deprecated syntax is on (HTCondor-CE 23's default, off from 24)
    assert htcondor_ce.routes_of(params) == []
    old = {**params, "JOB_ROUTER_USE_DEPRECATED_ROUTER_ENTRIES": "True"}
    assert [(r.name, r.grid_resource, r.queue) for r in htcondor_ce.routes_of(old)] == [
        ("A", "batch sge", "all.q"), ("B", "", "")]
    # JOB_ROUTER_ROUTE_NAMES orders them, and a JOB_ROUTER_ROUTE_<name> overrides the entry of that name
    named = {**old, "JOB_ROUTER_ROUTE_NAMES": "B, A"}
    assert [(r.name, r.universe, r.grid_resource, r.queue) for r in htcondor_ce.routes_of(named)] == [
        ("B", "grid", "batch lsf", "grid"), ("A", "", "batch sge", "all.q")]


def test_routes_glueinfo_cannot_place_are_one_warning_each(caplog):
    params = {"FULL_HOSTNAME": "ce.example.org", "JOB_ROUTER_ROUTE_NAMES": "Split Remote Local Ok",
              "JOB_ROUTER_ROUTE_SPLIT": 'if $(X)\n  GridResource = "batch slurm"\nelse\n  UNIVERSE VANILLA\nendif\n',
              "JOB_ROUTER_ROUTE_REMOTE": 'GridResource = "condor schedd.example.org pool.example.org:9618"\n',
              "JOB_ROUTER_ROUTE_LOCAL": "UNIVERSE LOCAL\n",
              "JOB_ROUTER_ROUTE_OK": 'GridResource = "batch slurm"\nSET BatchQueue "grid"\n'}
    warnings: list[str] = []
    found = htcondor_ce.found_ces("", params, LOCAL, warnings.append)
    assert [(ce.name, ce.values["queue"]) for ce in found] == [("Ok", "grid")]
    assert len(warnings) == 3
    assert "route Split" in warnings[0] and "if block" in warnings[0]
    assert "route Remote" in warnings[1] and "condor schedd.example.org" in warnings[1]
    assert "route Local" in warnings[2] and "'local'" in warnings[2]


def test_a_default_queue_that_cannot_be_read_is_a_warning_naming_the_key(tmp_path, caplog):
    fake_condor_ce(tmp_path / "ce", "htcondor-ce-24-slurm")
    (tmp_path / "empty").mkdir()
    with caplog.at_level(logging.WARNING):
        found = ces(site(tmp_path, f"[ce:Slurm_Cluster]\nslurm_bin_dir = {tmp_path / 'empty'}\n", ce_bin=tmp_path / "ce"))
    assert found["Slurm_Cluster"].queue == "Slurm_Cluster"
    assert "scontrol: command not found" in caplog.text and "set [ce:Slurm_Cluster] queue" in caplog.text


def test_the_default_queue_each_batch_system_names():
    batch = DISCOVERY / "batch"
    assert default_queue.pbs_default((batch / "openpbs-23.06-qstat_Bf.txt").read_text(encoding="utf-8")) == "workq"
    assert default_queue.pbs_default((batch / "torque-6.1.3-qstat_Bf.txt").read_text(encoding="utf-8")) == "batch"
    partitions = (batch / "slurm-23.02-scontrol_show_partition_o.txt").read_text(encoding="utf-8")
    assert default_queue.slurm_default(partitions) == "main"
    no_default = partitions.replace("Default=YES", "Default=NO")
    assert default_queue.slurm_default(no_default) is None  # three partitions, none the default: not guessed
    assert default_queue.slurm_default(no_default.splitlines()[1]) == "long"  # the only one there is


def test_a_declared_ce_overrides_what_was_found_key_by_key(tmp_path, batch_bin):
    fake_condor_ce(tmp_path / "ce", "htcondor-ce-24-slurm")
    conf = ("[ce:Atlas_Long]\naccess = VO:atlas\nport = 9620\n"
            "[ce:shortq]\nqueue = short\nimplementation_version = 24.0.2-site\n"
            "[ce:Slurm_Cluster]\nqueue = long2\n")
    found = ces(site(tmp_path, conf, ce_bin=tmp_path / "ce"))
    # Cms_Short is the [ce:shortq] that writes its queue: one CE, named as declared
    assert list(found) == ["Atlas_Long", "shortq", "Slurm_Cluster"]
    atlas = found["Atlas_Long"]
    assert (atlas.access, atlas.port) == (("VO:atlas",), 9620)  # the admin's keys
    assert (atlas.host, atlas.queue, atlas.lrms, atlas.implementation_name) == ("ce01.example.org", "long", "slurm", "HTCondorCE")
    assert (found["shortq"].queue, found["shortq"].implementation_version, found["shortq"].host) == (
        "short", "24.0.2-site", "ce01.example.org")
    assert found["Slurm_Cluster"].queue == "long2"  # named: the batch system is not asked


def test_a_declared_ce_that_matches_nothing_stays_beside_the_found_ones(tmp_path, batch_bin):
    fake_condor_ce(tmp_path / "ce", "htcondor-ce-24-slurm")
    found = ces(site(tmp_path, "[ce:gpu]\nlrms = slurm\nqueue = gpu\n", ce_bin=tmp_path / "ce"))
    assert list(found) == ["gpu", "Atlas_Long", "Cms_Short", "Slurm_Cluster"]
    assert (found["gpu"].host, found["gpu"].implementation_name) == (LOCAL, "")


@pytest.mark.parametrize("body, says", [
    ('echo "ERROR: no config" >&2; exit 1\n', "exited 1: ERROR: no config"),
    ("sleep 30\n", "timed out"),
    ("echo 'JOB_ROUTER_ENTRIES @=end'; echo '   ['\n", "without its closing @end"),
])
def test_an_htcondor_ce_that_cannot_be_read_is_one_warning_and_no_ce(tmp_path, caplog, body, says):
    script(tmp_path / "ce", "condor_ce_config_val", body)
    with caplog.at_level(logging.WARNING):
        found = ces(site_from_config(parse_text(f"[discovery]\ncondor_ce_bin_dir = {tmp_path / 'ce'}\n"
                                                f"arc_conf = {tmp_path / 'no'}\ntimeout = 0.5\n"), LOCAL))
    assert [(ce.section, ce.lrms, ce.implementation_name) for ce in found.values()] == [("", "fork", "")]
    assert says in caplog.text and "no HTCondor-CE CE published" in caplog.text


def test_discovery_can_be_switched_off(tmp_path):
    fake_condor_ce(tmp_path / "ce", "htcondor-ce-24-slurm")
    conf = f"[discovery]\nenabled =\ncondor_ce_bin_dir = {tmp_path / 'ce'}\n"
    assert [ce.implementation_name for ce in site_from_config(parse_text(conf), LOCAL).ces] == [""]
    with pytest.raises(ConfigError, match=r"\[discovery\] enabled: must be one of htcondor-ce, arc, got 'cream'"):
        parse_text("[discovery]\nenabled = cream\n")


# -- ARC-CE -----------------------------------------------------------------------------

def fake_arched(bin_dir: Path, version: str) -> None:
    script(bin_dir, "arched", f'[ "$*" = "--version" ] || exit 2\necho "arched version {version}"\n')


def test_arc_6_queues_are_ces_of_slurm_with_arcs_own_paths(tmp_path):
    fake_arched(tmp_path / "bin", "6.21.1")
    found = ces(site(tmp_path, ce_bin=tmp_path / "bin", arc_conf=DISCOVERY / "arc-6-slurm" / "arc.conf"))
    assert list(found) == ["grid", "gridlong"]  # [queue:test] is commented out
    for ce in found.values():
        assert (ce.host, ce.port, ce.lrms, ce.queue) == ("arc01.example.org", 443, "slurm", ce.section)
        assert (ce.implementation_name, ce.implementation_version) == ("ARC-CE", "6.21.1")
        assert ce.options["slurm_bin_dir"] == "/usr/bin"  # [lrms] slurm_bin_path
    assert found["grid"].access == ("VO:atlas", "VO:ops")  # [infosys/cluster] advertisedvo
    assert found["gridlong"].access == ("VO:atlas",)  # the queue's own
    assert found["grid"].unique_id == "arc01.example.org:443/nordugrid-slurm-grid"


def test_arc_7_with_htcondor_and_its_own_port(tmp_path):
    found = ces(site(tmp_path, arc_conf=DISCOVERY / "arc-7-condor" / "arc.conf"))
    assert list(found) == ["htcondor"]
    ce = found["htcondor"]
    assert (ce.host, ce.port, ce.lrms, ce.queue) == ("arc7.example.org", 8443, "htcondor", "all")
    assert ce.implementation_version == ""  # no arched to ask: unknown, not invented
    assert (ce.options["condor_config"], ce.options["condor_bin_dir"]) == ("/etc/condor/condor_config", "/usr/bin")
    assert "endpoint_url" not in ce.options or not ce.options["endpoint_url"]


def test_arc_conf_is_read_as_arcs_own_parser_reads_it():
    blocks = arc.parse_arc_conf(
        "hostname = ignored.example.org\n"          # before any block: ignored
        "[common]\n"
        "hostname=first.example.org\n"
        "[lrms]\n"
        "lrms = slurm # not a comment in arc.conf\n"
        "  # indented: an option named '#', not a comment\n"
        "[queue: spaced ]\n"
        "advertisedvo\n"
        "[common]\n"                                 # written again: its last body counts
        "hostname = second.example.org\n")
    assert blocks["common"] == [("hostname", "second.example.org")]
    assert blocks["lrms"][0] == ("lrms", "slurm # not a comment in arc.conf")
    assert blocks["queue:spaced"] == [("advertisedvo", "")]


@pytest.mark.parametrize("conf, says", [
    ("[arex]\n[arex/ws]\n[queue:q]\n", "no [lrms] lrms"),
    ("[lrms]\nlrms=boinc\n[arex]\n[arex/ws/jobs]\n[queue:q]\n", "'boinc' has no glueinfo LRMS plugin"),
    ("[lrms]\nlrms=slurm\n[arex]\n[gridftpd/jobs]\n[queue:q]\n", "no [arex/ws/jobs]"),
    ("[lrms]\nlrms=slurm\n[arex]\n[arex/ws/jobs]\n", "no [queue:NAME] block"),
])
def test_an_arc_ce_that_says_too_little_is_one_warning_and_no_ce(tmp_path, caplog, conf, says):
    path = tmp_path / "arc.conf"
    path.write_text(conf, encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        found = ces(site(tmp_path, arc_conf=path))
    assert [ce.implementation_name for ce in found.values()] == [""]
    assert says in caplog.text and "no ARC-CE CE published" in caplog.text


def test_arc_pbspro_is_the_pbs_plugin_reading_openpbs(tmp_path):
    path = tmp_path / "arc.conf"
    path.write_text("[common]\nhostname=arc.example.org\n[lrms]\nlrms=pbspro gridlong\npbs_bin_path=/opt/pbs/bin\n"
                    "[arex]\n[arex/ws]\nwsurl=https://arc.example.org/ce/arex\n[arex/ws/jobs]\n[queue:gridlong]\n", encoding="utf-8")
    ce = ces(site(tmp_path, arc_conf=path))["gridlong"]
    assert (ce.lrms, ce.options["pbs_flavour"], ce.options["pbs_bin_dir"], ce.port) == ("pbs", "openpbs", "/opt/pbs/bin", 443)
    assert ce.options["endpoint_url"] == "https://arc.example.org/ce/arex"  # not the default form: kept as A-REX says


def test_a_host_with_arc_conf_but_no_arex_is_no_ce(tmp_path, caplog):
    path = tmp_path / "arc.conf"
    path.write_text("[common]\n[datadelivery-service]\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        assert [ce.implementation_name for ce in site(tmp_path, arc_conf=path).ces] == [""]
    assert caplog.text == ""


# -- what the site publishes ------------------------------------------------------------

def glueinfo_ldif(tmp_path: Path, conf: str, path_dirs: list[Path]) -> subprocess.CompletedProcess:
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[site]\nid = EXAMPLE-SITE\n[run]\nstate_dir =\n{conf}", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    env["PATH"] = os.pathsep.join([*map(str, path_dirs), env.get("PATH", "")])
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", "ldif", "--config", str(config)], capture_output=True,
                          text=True, env=env, timeout=120)


def values(entries, attr):
    return {str(value) for entry in entries for value in entry.attributes.get(attr, [])}


def test_ldif_publishes_the_htcondor_ce_found_on_path(tmp_path, batch_bin):
    fake_condor_ce(tmp_path / "ce", "htcondor-ce-24-slurm")
    # No Slurm answers here: the admin's status keeps the endpoint and shares published (GLUE 2 needs a serving state)
    status = "".join(f"[ce:{name}]\nstatus = Production\n" for name in ("Atlas_Long", "Cms_Short", "Slurm_Cluster"))
    done = glueinfo_ldif(tmp_path, f"[discovery]\narc_conf = {tmp_path / 'none'}\n{status}", [tmp_path / "ce", batch_bin])
    assert done.returncode == 0, done.stderr
    entries = parse_ldif(done.stdout)
    assert values(entries, "GLUE2EndpointURL") == {"condor://ce01.example.org:9619"}
    assert values(entries, "GLUE2EndpointInterfaceName") == {"org.opensciencegrid.htcondorce"}
    assert values(entries, "GLUE2ServiceType") == {"org.opensciencegrid.htcondorce"}
    assert values(entries, "GLUE2EndpointImplementationVersion") == {"24.0.2"}
    assert values(entries, "GlueCEImplementationName") == {"HTCondorCE"}
    assert values(entries, "GlueCEUniqueID") == {f"ce01.example.org:9619/htcondorce-slurm-{q}" for q in ("long", "short", "main")}
    assert values(entries, "GLUE2ComputingShareMappingQueue") == {"long", "short", "main"}


def test_ldif_publishes_the_arc_ce_of_arc_conf(tmp_path):
    fake_arched(tmp_path / "bin", "7.0.0")
    done = glueinfo_ldif(tmp_path, f"[discovery]\narc_conf = {DISCOVERY / 'arc-7-condor' / 'arc.conf'}\n"
                                   f"condor_ce_bin_dir = {tmp_path / 'bin'}\narc_bin_dir = {tmp_path / 'bin'}\n"
                                   "[ce:htcondor]\nstatus = Production\n", [])
    assert done.returncode == 0, done.stderr
    entries = parse_ldif(done.stdout)
    assert values(entries, "GLUE2EndpointURL") == {"https://arc7.example.org:8443/arex"}
    assert values(entries, "GLUE2EndpointInterfaceName") == {"org.nordugrid.arcrest"}
    assert values(entries, "GLUE2ServiceType") == {"org.nordugrid.arex"}
    assert values(entries, "GLUE2EndpointImplementationName") == {"nordugrid-arc"}
    assert values(entries, "GLUE2EndpointImplementationVersion") == {"7.0.0"}
    assert values(entries, "GlueCEImplementationName") == {"ARC-CE"}


def test_a_site_with_neither_advertises_no_such_middleware(tmp_path):
    (tmp_path / "bin").mkdir()
    done = glueinfo_ldif(tmp_path, f"[discovery]\ncondor_ce_bin_dir = {tmp_path / 'bin'}\narc_conf = {tmp_path / 'none'}\n", [])
    assert done.returncode == 0, done.stderr
    for word in ("HTCondor", "htcondorce", "condor://", "nordugrid", "ARC-CE", "arex"):
        assert word not in done.stdout
