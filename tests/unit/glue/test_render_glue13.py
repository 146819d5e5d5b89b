"""The GLUE 1.3 tree: what brokers and slapd see, checked against hand-written facts
and against the installed schema files read here with a plain regex (not glueinfo's parser)."""

from __future__ import annotations

import json
import logging
import os
import random
import re
import subprocess
import sys

import pytest
from glue_sites import CLASSES, hostile_host, make_host, synthetic_site

from glueinfo.core.config import parse_text
from glueinfo.core.job import JobInfo
from glueinfo.core.ldif import parent_dn, parse_ldif
from glueinfo.core.model import QueueState
from glueinfo.publish.from_snapshots import build_site, build_site_ldif

XEON, EPYC, ARM, OLD, DESK = (hw for hw, _ in CLASSES)
BASE = "mds-vo-name=resource,o=grid"
CE_ID = "ce01.example.org:2119/jobmanager-fork-default"
SCHEMA_FILE = "/etc/ldap/schema/Glue-CE.schema"


def _names(body: str, keyword: str) -> set[str]:
    found = re.search(keyword + r"\s+(\([^)]*\)|\w+)", body)
    return set(re.findall(r"\w+", found.group(1))) if found else set()


def schema_classes() -> dict[str, dict]:
    """objectclass NAME -> {kind, must, may} straight from Glue-CE.schema."""
    text = re.sub(r"#[^\n]*", "", open(SCHEMA_FILE).read())
    classes = {}
    for body in re.findall(r"objectclass\s*\((.*?)\)\s*\)", text, re.S | re.I):
        body = body + ")"
        name = re.search(r"NAME\s+'(\w+)'", body).group(1)
        kind = re.search(r"\b(ABSTRACT|STRUCTURAL|AUXILIARY)\b", body).group(1)

        classes[name] = {"kind": kind, "must": _names(body, "MUST"), "may": _names(body, "MAY")}
    return classes


def state(**fields) -> QueueState:
    return QueueState(lrms_type="fork", **fields)


def build(hosts, conf="[ce:default]\naccess = VO:atlas\n", states=None, **options):
    config = parse_text(conf)
    states = states if states is not None else {CE_ID: state(status="Production", total_cpus=96, free_cpus=10)}
    return build_site(config, hosts, local_fqdn="ce01.example.org", states=states, **options)


def by_dn(result):
    return {e.dn: e for e in result.entries}


def of_class(result, name):
    return [e for e in result.entries if name in e.object_classes]


SMALL = [make_host(XEON, 0), make_host(XEON, 1), make_host(ARM, 0)]


def test_tree_layout_and_links():
    result = build(SMALL)
    assert not result.errors
    cluster_dn = f"GlueClusterUniqueID=ce01.example.org,{BASE}"
    xeon_sc = f"GlueSubClusterUniqueID=ce01.example.org-x86_64-intel-xeon-gold-6126,{cluster_dn}"
    arm_sc = f"GlueSubClusterUniqueID=ce01.example.org-aarch64-arm-neoverse-n1,{cluster_dn}"
    host0 = f"GlueHostUniqueID=wn-xeon-00000.example.org,{xeon_sc}"
    assert [e.dn for e in result.entries] == [
        cluster_dn,
        arm_sc,
        f"GlueHostUniqueID=wn-arm-00000.example.org,{arm_sc}",
        f"GlueHostLocalFileSystemName=/,GlueHostUniqueID=wn-arm-00000.example.org,{arm_sc}",
        f"GlueHostLocalFileSystemName=/scratch,GlueHostUniqueID=wn-arm-00000.example.org,{arm_sc}",
        f"GlueHostRemoteFileSystemName=/home,GlueHostUniqueID=wn-arm-00000.example.org,{arm_sc}",
        xeon_sc,
        host0,
        f"GlueHostLocalFileSystemName=/,{host0}",
        f"GlueHostLocalFileSystemName=/scratch,{host0}",
        f"GlueHostRemoteFileSystemName=/home,{host0}",
        f"GlueHostUniqueID=wn-xeon-00001.example.org,{xeon_sc}",
        f"GlueHostLocalFileSystemName=/,GlueHostUniqueID=wn-xeon-00001.example.org,{xeon_sc}",
        f"GlueHostLocalFileSystemName=/scratch,GlueHostUniqueID=wn-xeon-00001.example.org,{xeon_sc}",
        f"GlueHostRemoteFileSystemName=/home,GlueHostUniqueID=wn-xeon-00001.example.org,{xeon_sc}",
        f"GlueCEUniqueID={CE_ID},{BASE}",
        f"GlueVOViewLocalID=atlas,GlueCEUniqueID={CE_ID},{BASE}",  # access = VO:atlas
    ]
    entries = by_dn(result)
    assert entries[xeon_sc].get("GlueChunkKey") == ["GlueClusterUniqueID=ce01.example.org"]
    ce = entries[f"GlueCEUniqueID={CE_ID},{BASE}"]
    assert ce.get("GlueForeignKey") == ["GlueClusterUniqueID=ce01.example.org"]
    assert ce.get("GlueCEHostingCluster") == ["ce01.example.org"]
    assert entries[cluster_dn].get("GlueClusterService") == [CE_ID]
    assert entries[cluster_dn].get("GlueForeignKey") == [f"GlueCEUniqueID={CE_ID}"]
    assert entries[host0].get("GlueChunkKey") == [
        "GlueSubClusterUniqueID=ce01.example.org-x86_64-intel-xeon-gold-6126"]


def test_every_entry_has_schema_version_1_3_its_top_class_and_a_parent_before_it():
    result = build(SMALL, conf="[site]\nid = EXAMPLE-SITE\n[ce:default]\naccess = VO:atlas\n")
    seen = {BASE.lower()}
    tops = {"GlueSite": "GlueTop", "GlueCE": "GlueCETop", "GlueVOView": "GlueCETop"}  # VOViews as gLite published them
    for entry in result.entries:
        assert entry.get("GlueSchemaVersionMajor") == [1] or entry.get("GlueSchemaVersionMajor") == ["1"], entry.dn
        assert [str(v) for v in entry.get("GlueSchemaVersionMinor")] == ["3"], entry.dn
        assert "GlueSchemaVersion" in entry.object_classes
        structural = entry.object_classes[1]
        assert entry.object_classes[0] == tops.get(structural, "GlueClusterTop"), entry.dn
        assert parent_dn(entry.dn).lower() in seen, entry.dn
        seen.add(entry.dn.lower())


def test_host_entries_carry_every_host_auxiliary_class_of_the_schema():
    classes = schema_classes()
    host_aux = {name for name, c in classes.items() if c["kind"] == "AUXILIARY" and name.startswith("GlueHost")}
    # StorageDevice must name a device (MUST GlueHostStorageDeviceName, single-valued): the model has no such fact.
    assert host_aux - {"GlueHostStorageDevice"} == {
        "GlueHostArchitecture", "GlueHostProcessor", "GlueHostMainMemory", "GlueHostNetworkAdapter",
        "GlueHostProcessorLoad", "GlueHostSMPLoad", "GlueHostOperatingSystem", "GlueHostBenchmark",
        "GlueHostApplicationSoftware"}
    result = build(SMALL)
    for host in of_class(result, "GlueHost"):
        assert host_aux - {"GlueHostStorageDevice"} <= set(host.object_classes)


def test_host_entry_values_are_the_snapshot_facts():
    result = build(SMALL)
    host = next(e for e in of_class(result, "GlueHost") if e.first("GlueHostUniqueID") == "wn-xeon-00001.example.org")
    expected = {
        "GlueHostName": "wn-xeon-00001.example.org",
        "GlueHostArchitecturePlatformType": "x86_64", "GlueHostArchitectureSMPSize": 48,
        "GlueHostProcessorVendor": "GenuineIntel", "GlueHostProcessorModel": "Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz",
        "GlueHostProcessorClockSpeed": 2600, "GlueHostProcessorInstructionSet": "x86_64",
        "GlueHostProcessorOtherDescription": "Cores=12",  # 24 cores / 2 sockets
        "GlueHostProcessorCacheL1I": 32, "GlueHostProcessorCacheL1D": 32, "GlueHostProcessorCacheL2": 1024,
        "GlueHostMainMemoryRAMSize": 196_480, "GlueHostMainMemoryRAMAvailable": 196_480 // 2 + 1,
        "GlueHostNetworkAdapterName": "eth0", "GlueHostNetworkAdapterIPAddress": "10.0.0.1",
        "GlueHostNetworkAdapterMTU": 9000, "GlueHostNetworkAdapterInboundIP": False,
        "GlueHostNetworkAdapterOutboundIP": True,
        # load1 = (1 % 7) * 48 / 8 = 6: (48 - 6) x 100
        "GlueHostProcessorLoadLast1Min": 4200, "GlueHostSMPLoadLast15Min": 4200,
        "GlueHostOperatingSystemName": "Debian GNU/Linux", "GlueHostOperatingSystemRelease": "12",
        "GlueHostOperatingSystemVersion": "bookworm", "GlueHostBenchmarkSI00": 2500,
    }
    for name, value in expected.items():
        assert host.get(name) == [value], name
    assert host.get("GlueHostApplicationSoftwareRunTimeEnvironment") == ["GLITE-3_2_0", "R-4.3"]
    assert "GlueHostProcessorCacheL1" not in host  # no unified L1 on this CPU: left out, not 0
    fs = next(e for e in result.entries if e.dn.startswith("GlueHostRemoteFileSystemName=/home,GlueHostUniqueID=wn-xeon-00001"))
    assert fs.get("GlueHostRemoteFileSystemSize") == [50_000_000 * 1048576]  # bytes, as the schema's DESC says
    assert fs.get("GlueHostRemoteFileSystemServer") == ["nfs.example.org"]
    assert fs.get("GlueHostRemoteFileSystemType") == ["nfs4"] and fs.get("GlueHostRemoteFileSystemReadOnly") == [False]


def test_subcluster_publishes_shared_facts_within_its_schema_may_list():
    classes = schema_classes()
    allowed = classes["GlueSubCluster"]["may"] | classes["GlueSubCluster"]["must"]
    result = build([make_host(XEON, i) for i in range(3)])
    (sc,) = of_class(result, "GlueSubCluster")
    own = set(sc.attributes) - {"objectClass", "GlueChunkKey", "GlueSchemaVersionMajor", "GlueSchemaVersionMinor"}
    assert own <= allowed, own - allowed
    assert sc.get("GlueSubClusterPhysicalCPUs") == [6] and sc.get("GlueSubClusterLogicalCPUs") == [144]
    assert sc.get("GlueHostMainMemoryRAMSize") == [196_480] and sc.get("GlueHostArchitectureSMPSize") == [48]
    assert sc.get("GlueHostApplicationSoftwareRunTimeEnvironment") == ["GLITE-3_2_0", "R-4.3"]
    assert "GlueHostMainMemoryRAMAvailable" not in sc  # differs per host, and not a SubCluster attribute


def test_ce_state_and_policies_unknown_values_are_left_out_never_placeholders():
    conf = "[ce:default]\naccess = VO:atlas VO:cms\nmax_wall_clock_time = 2880\nmax_running_jobs = 100\n"
    failed = {CE_ID: state(error="slurm: sinfo timed out")}
    result = build(SMALL, conf=conf, states=failed)
    assert not result.errors
    text = result.ldif()
    for placeholder in ("444444", "999999999", "2146660842"):
        assert placeholder not in text
    ce = of_class(result, "GlueCE")[0]
    for name in ("GlueCEStateFreeCPUs", "GlueCEStateRunningJobs", "GlueCEStateWaitingJobs", "GlueCEStateTotalJobs",
                 "GlueCEStateEstimatedResponseTime", "GlueCEStateWorstResponseTime", "GlueCEStateStatus"):
        assert name not in ce, name
    # TotalCPUs is derived from the cluster's hosts (48 + 48 + 80 threads), not typed in the config.
    assert ce.get("GlueCEInfoTotalCPUs") == [176]
    assert ce.get("GlueCEPolicyMaxWallClockTime") == [2880] and ce.get("GlueCEPolicyMaxRunningJobs") == [100]
    assert ce.get("GlueCEAccessControlBaseRule") == ["VO:atlas", "VO:cms"]
    assert "GlueCEAccessControlBase" in ce.object_classes


def test_a_batch_system_that_gives_no_cpu_count_has_none_published_not_the_hosts_threads():
    conf = "[ce:default]\nlrms = htcondor\nqueue = default\naccess = VO:atlas\n"
    ce_id = "ce01.example.org:2119/jobmanager-htcondor-default"
    failed = {ce_id: QueueState(lrms_type="condor", error="htcondor: condor_status -json exited 1")}
    ce = of_class(build(SMALL, conf=conf, states=failed), "GlueCE")[0]
    assert ce.get("GlueCEUniqueID") == [ce_id]
    # 176 hardware threads would overcount HTCondor's slots: unknown, left out
    assert "GlueCEInfoTotalCPUs" not in ce and "GlueCEStateFreeCPUs" not in ce


def test_lrms_state_wins_over_config_policies():
    conf = "[ce:default]\naccess = VO:atlas\nmax_wall_clock_time = 2880\nmax_cpu_time = 2000\n"
    states = {CE_ID: state(status="Draining", total_cpus=64, free_cpus=3, running_jobs=61, waiting_jobs=7, total_jobs=68,
                           max_wall_clock_time_min=1440, estimated_response_time_s=120)}
    ce = of_class(build(SMALL, conf=conf, states=states), "GlueCE")[0]
    assert ce.get("GlueCEPolicyMaxWallClockTime") == [1440]  # the LRMS says so
    assert ce.get("GlueCEPolicyMaxCPUTime") == [2000]  # only the config says so
    assert (ce.get("GlueCEStateStatus"), ce.get("GlueCEInfoTotalCPUs"), ce.get("GlueCEStateFreeCPUs")) == (["Draining"], [64], [3])
    assert (ce.get("GlueCEStateRunningJobs"), ce.get("GlueCEStateWaitingJobs"), ce.get("GlueCEStateTotalJobs")) == ([61], [7], [68])
    assert ce.get("GlueCEStateEstimatedResponseTime") == [120]


def test_each_voview_has_its_vos_own_waiting_times_else_the_ces():
    """Issue 25 item 5: a VO whose own jobs told how long they wait (glueinfo.lrms.waiting) has those
    in its VOView; another VO's job queues like any: the CE's.  Unknown is left out, never 2146660842."""
    conf = "[ce:default]\naccess = VO:atlas, VO:cms\n"
    states = {CE_ID: state(status="Production", estimated_response_time_s=600, worst_response_time_s=3600,
                           vo_response_times={"atlas": (120, 300)})}
    result = build(SMALL, conf=conf, states=states)
    (ce,) = of_class(result, "GlueCE")
    assert (ce.get("GlueCEStateEstimatedResponseTime"), ce.get("GlueCEStateWorstResponseTime")) == ([600], [3600])
    views = {v.first("GlueVOViewLocalID"): (v.get("GlueCEStateEstimatedResponseTime"), v.get("GlueCEStateWorstResponseTime"))
             for v in of_class(result, "GlueVOView")}
    assert views == {"atlas": ([120], [300]), "cms": ([600], [3600])}
    unknown = build(SMALL, conf=conf, states={CE_ID: state(status="Production")})
    for entry in of_class(unknown, "GlueCE") + of_class(unknown, "GlueVOView"):
        assert "GlueCEStateEstimatedResponseTime" not in entry and "GlueCEStateWorstResponseTime" not in entry
    assert "2146660842" not in unknown.ldif()


def test_no_access_rules_means_no_access_control_class_and_a_warning():
    result = build(SMALL, conf="")
    ce = of_class(result, "GlueCE")[0]
    assert "GlueCEAccessControlBase" not in ce.object_classes and not result.errors
    assert any("no access rules" in w for w in result.warnings)


def test_no_hosts_publishes_only_cluster_subcluster_and_ce():
    result = build(SMALL, publish_hosts=False)
    assert {e.object_classes[1] for e in result.entries} == {"GlueCluster", "GlueSubCluster", "GlueCE", "GlueVOView"}
    assert sum(e.first("GlueSubClusterLogicalCPUs") for e in of_class(result, "GlueSubCluster")) == 48 + 48 + 80
    conf_off = build(SMALL, conf="[glue]\npublish_hosts = no\n[ce:default]\naccess = VO:a\n")
    assert not of_class(conf_off, "GlueHost")


def test_jobs_are_published_under_their_ce_only_when_asked():
    jobs = [JobInfo(local_id="1001", local_owner="alice", glue_status="RUNNING"),
            JobInfo(local_id="1002", local_owner="bob", glue_status="WAITING", scheduler_specific="Priority")]
    states = {CE_ID: state(status="Production", running_jobs=1, waiting_jobs=1, jobs=jobs)}
    assert not of_class(build(SMALL, states=states), "GlueCEJob")
    result = build(SMALL, conf="[ce:default]\naccess = VO:a\npublish_jobs = yes\n", states=states)
    published = of_class(result, "GlueCEJob")
    assert [(e.dn, e.first("GlueCEJobStatus"), e.first("GlueCEJobLocalOwner")) for e in published] == [
        (f"GlueCEJobLocalID=1001,GlueCEUniqueID={CE_ID},{BASE}", "RUNNING", "alice"),
        (f"GlueCEJobLocalID=1002,GlueCEUniqueID={CE_ID},{BASE}", "WAITING", "bob")]
    assert published[0].first("GlueCEJobGlobalID") == f"{CE_ID}/1001"


def test_site_entry_only_when_the_site_is_named():
    assert not of_class(build(SMALL), "GlueSite")
    result = build(SMALL, conf="[site]\nid = EXAMPLE-T2\nname = Example Tier-2\nother_info = TIER=2 GRID=EGI\n"
                               "[ce:default]\naccess = VO:a\n")
    (site,) = of_class(result, "GlueSite")
    assert site.dn == f"GlueSiteUniqueID=EXAMPLE-T2,{BASE}"
    assert site.get("GlueSiteOtherInfo") == ["TIER=2", "GRID=EGI"]
    cluster = of_class(result, "GlueCluster")[0]
    assert "GlueSiteUniqueID=EXAMPLE-T2" in cluster.get("GlueForeignKey")


def test_site_contacts_are_mailto_urls_as_the_schema_says():
    # Glue-CORE.schema: "mailto: followed by a list of email addresses"; glue-validator's glue1 Email_t wants it too.
    result = build(SMALL, conf="[site]\nid = EXAMPLE-T2\nemail = grid-admin@example.org\n"
                               "sysadmin_contact = mailto:ops@example.org\nuser_support_contact = help@example.org\n"
                               "security_contact = https://example.org/security\n[ce:default]\naccess = VO:a\n")
    (site,) = of_class(result, "GlueSite")
    assert site.first("GlueSiteEmailContact") == "mailto:grid-admin@example.org"
    assert site.first("GlueSiteSysAdminContact") == "mailto:ops@example.org"
    assert site.first("GlueSiteUserSupportContact") == "mailto:help@example.org"
    assert site.first("GlueSiteSecurityContact") == "https://example.org/security"


def test_same_hosts_same_text_whatever_their_order():
    hosts = synthetic_site(50)
    first, _ = build_site_ldif(parse_text(""), hosts, local_fqdn="ce01.example.org", states={CE_ID: state()})
    random.Random(3).shuffle(hosts)
    again, _ = build_site_ldif(parse_text(""), hosts, local_fqdn="ce01.example.org", states={CE_ID: state()})
    assert first == again


def test_hostile_facts_become_schema_valid_and_say_so():
    result = build([hostile_host(), make_host(DESK, 1)])
    assert result.errors == []
    host = next(e for e in of_class(result, "GlueHost") if "weird" in e.first("GlueHostUniqueID"))
    assert host.first("GlueHostUniqueID") == "node-1.weird.example.org"
    assert host.first("GlueHostProcessorModel") == "Intel(R) Core(TM) i7 "
    assert "GlueHostProcessorVendor" not in host  # no ASCII form at all: dropped
    assert any("GlueHostProcessorVendor" in w and "dropped" in w for w in result.warnings)
    assert any("not ASCII" in w for w in result.warnings)
    names = [e.first("GlueHostLocalFileSystemName") for e in result.entries if "GlueHostLocalFileSystem" in e.object_classes
             and "weird" in e.dn]
    assert "/trailing  " in names and "/mnt/a,b=c+d" in names and "#leading" in names
    assert not [n for n in names if "new" in n]  # a mount point with a newline is dropped at the model boundary
    assert [n for n in names if n.strip().lower() == "/dup"] == ["/DUP"]  # one of the two, the first in order
    assert any("same LDAP name" in w for w in result.warnings)


def test_schema_mistakes_in_a_custom_template_are_reported_by_dn_and_the_rest_published(tmp_path):
    from glueinfo.glue.templates import builtin_templates_dir

    for name in ("site", "cluster", "subcluster", "ce"):
        text = open(f"{builtin_templates_dir()}/{name}.ldif").read()
        if name == "ce":
            text = text.replace("GlueCEName: ${CE_NAME}\n", "GlueCEName: ${CE_NAME}\nGlueHostName: oops\n")
        (tmp_path / f"{name}.ldif").write_text(text)
    result = build(SMALL, conf=f"[glue]\ntemplates_dir = {tmp_path}\n[ce:default]\naccess = VO:a\n")
    # the refused CE's VOView falls with it (its parent is not published)
    assert [(p.dn, p.attribute) for p in result.errors] == [(f"GlueCEUniqueID={CE_ID},{BASE}", "GlueHostName"),
                                                            (f"GlueVOViewLocalID=a,GlueCEUniqueID={CE_ID},{BASE}", None)]
    assert "not allowed" in result.errors[0].message
    assert not of_class(result, "GlueCE") and of_class(result, "GlueHost")


def test_without_schema_files_it_warns_once_and_still_publishes_ascii(caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="glueinfo.glue")
    result = build([hostile_host()], conf=f"[glue]\nschema_dir = {tmp_path}/none\n[ce:default]\naccess = VO:a\n")
    assert not result.checked
    assert [r.getMessage() for r in caplog.records].count(
        f"LDAP schema directory {tmp_path}/none does not exist: publishing without a schema check") == 1
    assert result.ldif().isascii() and of_class(result, "GlueHost")


def test_static_ldif_files_are_published_as_they_are(tmp_path):
    (tmp_path / "se.ldif").write_text(
        f"dn: GlueSEUniqueID=se.example.org,{BASE}\nobjectClass: GlueTop\nobjectClass: GlueSE\nobjectClass: GlueKey\n"
        "objectClass: GlueSchemaVersion\nGlueSEUniqueID: se.example.org\nGlueForeignKey: GlueSiteUniqueID=X\n"
        "GlueSchemaVersionMajor: 1\nGlueSchemaVersionMinor: 3\n")
    (tmp_path / "broken.ldif").write_text("this is not LDIF\n")
    result = build(SMALL, conf=f"[glue]\nstatic_ldif_dir = {tmp_path}\n[ce:default]\naccess = VO:a\n")
    assert f"GlueSEUniqueID=se.example.org,{BASE}" in by_dn(result)
    assert any("broken.ldif" in w for w in result.warnings)


# -- the command ------------------------------------------------------------------------

def run_cli(*args, input=None):
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, input=input,
                          timeout=120)


def test_ldif_command_from_snapshots_and_check_of_its_own_output(tmp_path):
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in SMALL]))
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[cluster:main]\nunique_id = cluster.example.org\n[ce:default]\nhost = ce01.example.org\naccess = VO:atlas\n")
    proc = run_cli("ldif", "--config", str(conf), "--snapshots", str(snapshots))
    assert proc.returncode == 0, proc.stderr
    entries = parse_ldif(proc.stdout)
    assert len([e for e in entries if "GlueHost" in e.object_classes]) == 3
    out = tmp_path / "out.ldif"
    out.write_text(proc.stdout)
    check = run_cli("ldif", "--check", str(out))
    assert (check.returncode, check.stdout) == (0, "")
    no_hosts = run_cli("ldif", "--config", str(conf), "--snapshots", str(snapshots), "--no-hosts")
    assert "GlueHostUniqueID" not in no_hosts.stdout and "GlueSubClusterUniqueID" in no_hosts.stdout


def test_ldif_check_reports_other_providers_mistakes_by_dn(tmp_path):
    bad = tmp_path / "bad.ldif"
    bad.write_text(f"dn: GlueCEUniqueID=x,{BASE}\nobjectClass: GlueCETop\nobjectClass: GlueCE\nobjectClass: GlueCEState\n"
                   "GlueCEUniqueID: x\nGlueCEStateWaitingJobs: 12.5\nGlueCEStateStatus: Production\n"
                   "GlueCEStateStatus: Closed\n")
    proc = run_cli("ldif", "--check", str(bad))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith(f"GlueCEUniqueID=x,{BASE}: ") for line in lines)
    assert "GlueCEStateWaitingJobs" in proc.stdout and "single-valued" in proc.stdout
    missing = run_cli("ldif", "--check", str(tmp_path / "nope.ldif"))
    assert missing.returncode == 2 and "nope.ldif" in missing.stderr and missing.stderr.count("\n") == 1


@pytest.mark.parametrize("argv", [["ldif", "--snapshots", "/nonexistent.json"]])
def test_bad_snapshot_file_is_a_one_line_usage_error(argv):
    proc = run_cli(*argv)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("no such file") and proc.stdout == ""


def test_parsed_schema_is_cached_and_reparsed_when_a_file_changes(tmp_path, monkeypatch):
    import shutil

    from glueinfo.glue.schema import load as pipeline

    schema_dir = tmp_path / "schema"
    schema_dir.mkdir()
    for name in pipeline.GLUE13_SCHEMA_FILES:
        shutil.copy(f"/etc/ldap/schema/{name}", schema_dir / name)
    first = pipeline.load_glue_schema(str(schema_dir), cache_dir=str(tmp_path / "cache"))
    assert first is not None and len(list((tmp_path / "cache").iterdir())) == 1
    parsed = []
    real = pipeline.load_schema
    monkeypatch.setattr(pipeline, "load_schema", lambda *a: parsed.append(a) or real(*a))
    again = pipeline.load_glue_schema(str(schema_dir), cache_dir=str(tmp_path / "cache"))
    assert parsed == [] and again.attribute("GlueCEStateFreeCPUs").name == "GlueCEStateFreeCPUs"
    with open(schema_dir / "Glue-CE.schema", "a") as handle:  # an edited schema file is parsed again
        handle.write("\n# edited\n")
    pipeline.load_glue_schema(str(schema_dir), cache_dir=str(tmp_path / "cache"))
    assert len(parsed) == 1
    (tmp_path / "a-file").write_text("")  # a cache that cannot be written (even by root) is no error
    assert pipeline.load_glue_schema(str(schema_dir), cache_dir=str(tmp_path / "a-file" / "cache")) is not None
    for name in os.listdir(tmp_path / "cache"):  # nor is a damaged one
        (tmp_path / "cache" / name).write_bytes(b"garbage")
    assert pipeline.load_glue_schema(str(schema_dir), cache_dir=str(tmp_path / "cache")) is not None
    assert len(parsed) == 3  # the edited file, the unwritable cache, the damaged one


def test_a_vo_admitted_only_by_fqans_has_its_voview_with_those_rules_as_its_glue2_share():
    conf = "[ce:default]\naccess = VOMS:/atlas/Role=pilot VOMS:/atlas/Role=production VO:cms VOMS:/cms/Role=pilot\n"
    views = {e.get("GlueVOViewLocalID")[0]: e.get("GlueCEAccessControlBaseRule") for e in of_class(build(SMALL, conf=conf),
                                                                                                        "GlueVOView")}
    # cms: VO:cms admits the whole VO (its pilots too); atlas only its pilots and production managers
    assert views == {"atlas": ["VOMS:/atlas/Role=pilot", "VOMS:/atlas/Role=production"], "cms": ["VO:cms"]}



def test_a_sites_own_voview_template_from_before_fqan_voviews_still_publishes(tmp_path):
    from glueinfo.glue.templates import builtin_templates_dir

    for name in ("site", "cluster", "subcluster", "ce", "voview"):
        text = open(f"{builtin_templates_dir()}/{name}.ldif").read()
        (tmp_path / f"{name}.ldif").write_text(text.replace("# @multi     ACCESS_RULE\n", ""))  # as copied before
    conf = f"[glue]\ntemplates_dir = {tmp_path}\n[ce:default]\naccess = VOMS:/atlas/Role=pilot VOMS:/atlas/Role=production\n"
    views = of_class(build(SMALL, conf=conf), "GlueVOView")
    # one value, the first rule, where the built-in template gives both: the tree is still published
    assert [(v.get("GlueVOViewLocalID"), v.get("GlueCEAccessControlBaseRule")) for v in views] == [
        (["atlas"], ["VOMS:/atlas/Role=pilot"])]
