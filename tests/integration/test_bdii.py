"""glueinfo as a provider of Debian's real BDII (tests/servers.py: its slapd,
its bdii-update loop with a short cycle, the -h/-p shim of the harness), queried
port-2170 style with ldapsearch under mds-vo-name=resource,o=grid."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
from glue_sites import CLASSES, synthetic_site
from paths import REPO
from waiting import wait_until

pytestmark = pytest.mark.integration

BASE = "mds-vo-name=resource,o=grid"
ROOT = str(REPO)


@pytest.fixture
def bdii(bdii):
    bdii.clear()
    yield bdii
    bdii.clear(wait=False)


def provider_script(*args: str) -> str:
    """What an admin installs in /var/lib/bdii/gip/provider: a script running `glueinfo ldif`."""
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "glueinfo.cli", "ldif", *args))
    return f"#!/bin/sh\ncd {shlex.quote(ROOT)}\nexec {command} 2>/dev/null\n"


def ldapsearch(bdii, filter: str, *attrs: str) -> str:
    """A broker's query: plain ldapsearch against the BDII's port."""
    proc = subprocess.run(["ldapsearch", "-x", "-LLL", "-H", bdii.url, "-b", BASE, filter, *attrs],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_bdii_serves_this_host_through_the_glueinfo_provider(bdii, tmp_path):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[ce:default]\naccess = VO:dteam\n")
    bdii.add_provider("glueinfo", provider_script("--config", str(conf)))
    bdii.wait_for_update()
    ce = ldapsearch(bdii, "(&(objectClass=GlueCE)(GlueCEAccessControlBaseRule=VO:dteam))", "GlueCEUniqueID",
                    "GlueCEInfoTotalCPUs", "GlueCEStateStatus")
    assert ":2119/jobmanager-fork-default" in ce and "GlueCEStateStatus: Production" in ce
    with open("/proc/cpuinfo") as handle:
        processors = sum(1 for line in handle if line.startswith("processor"))
    assert f"GlueCEInfoTotalCPUs: {processors}" in ce
    hosts = bdii.ldapsearch(BASE, "(objectClass=GlueHost)", ["GlueHostArchitectureSMPSize"])
    assert [int(h.first("GlueHostArchitectureSMPSize")) for h in hosts] == [processors]
    assert "ldap_add" not in bdii.log_text()  # nothing of ours was rejected


def test_bdii_serves_a_thousand_host_site_and_answers_broker_queries(bdii, tmp_path):
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in synthetic_site(1000)]))
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[cluster:main]\nunique_id = cluster.example.org\n"
                    "[ce:long]\nhost = ce01.example.org\nlrms = fork\naccess = VO:atlas\n")
    bdii.add_provider("glueinfo", provider_script("--config", str(conf), "--snapshots", str(snapshots)))
    bdii.wait_for_update(timeout=300)
    assert "ldap_add" not in bdii.log_text(), bdii.log_text()[-3000:]
    hosts = bdii.ldapsearch(BASE, "(objectClass=GlueHost)", ["1.1"])
    assert len(hosts) == 1000
    big = ldapsearch(bdii, "(&(objectClass=GlueSubCluster)(GlueHostMainMemoryRAMSize>=200000))", "GlueHostProcessorModel")
    assert sorted(line for line in big.splitlines() if line.startswith("GlueHostProcessorModel")) == [
        "GlueHostProcessorModel: AMD EPYC 7702 64-Core Processor", "GlueHostProcessorModel: Neoverse-N1"]
    free = ldapsearch(bdii, "(&(objectClass=GlueCE)(GlueCEStateFreeCPUs>=1))", "GlueCEInfoTotalCPUs", "GlueForeignKey")
    assert f"GlueCEInfoTotalCPUs: {sum(hw.threads * n for hw, n in CLASSES)}" in free
    assert "GlueForeignKey: GlueClusterUniqueID=cluster.example.org" in free
    chunk = ldapsearch(bdii, "(&(objectClass=GlueSubCluster)(GlueChunkKey=GlueClusterUniqueID=cluster.example.org)"
                             "(GlueHostArchitecturePlatformType=aarch64))", "GlueSubClusterLogicalCPUs")
    assert "GlueSubClusterLogicalCPUs: 12000" in chunk  # 150 hosts x 80 threads


def test_bdii_serves_the_generated_services_and_ce_se_bindings(bdii, tmp_path):
    """What sites once wrote by hand in static LDIF (the resource BDII's GlueService, the CE-SE
    bindings) is generated from the config, and answers lcg-infosites' service and closeSE selections."""
    config = tmp_path / "glueinfo.conf"
    config.write_text("[site]\nid = EXAMPLE-SITE\n[glue]\n"
                      "information_service_url = ldap://ce01.example.org:2170/mds-vo-name=resource,o=grid\n"
                      "[ce:long]\nhost = ce01.example.org\nport = 9619\nimplementation_name = HTCondorCE\n"
                      "access = VO:atlas\nclose_se = se01.example.org=/storage/data\n"
                      f"[run]\nstate_dir = {tmp_path / 'state'}\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "ldif", "--glue", "1.3", "--config", str(config)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # only the generated services and bindings: this module's BDII is shared, and this machine's own
    # cluster and SubCluster entries would be counted by the tests after this one
    records = [block for block in proc.stdout.split("\n\n")
               if block.startswith(("dn: GlueServiceUniqueID=", "dn: GlueCESEBind"))]
    assert len(records) == 4  # the CE's service, the resource BDII's, one bind group, one bind
    bdii.add_static_ldif("glueinfo", "\n\n".join(records) + "\n")
    bdii.wait_for_update()
    assert "ldap_add" not in bdii.log_text()
    service = ldapsearch(bdii, "(GlueServiceType=bdii_resource)", "GlueServiceEndpoint")
    assert "GlueServiceEndpoint: ldap://ce01.example.org:2170/mds-vo-name=resource,o=grid" in service
    ce = ldapsearch(bdii, "(GlueServiceType=org.opensciencegrid.htcondorce)", "GlueServiceEndpoint")
    assert "GlueServiceEndpoint: condor://ce01.example.org:9619" in ce
    groups = bdii.ldapsearch(BASE, "(objectClass=GlueCESEBindGroup)", ["GlueCESEBindGroupCEUniqueID",
                                                                       "GlueCESEBindGroupSEUniqueID"])
    assert [(g.first("GlueCESEBindGroupCEUniqueID"), g.first("GlueCESEBindGroupSEUniqueID")) for g in groups] == [
        ("ce01.example.org:9619/jobmanager-fork-long", "se01.example.org")]
    binds = bdii.ldapsearch(BASE, "(objectClass=GlueCESEBind)", ["GlueCESEBindSEUniqueID", "GlueCESEBindCEAccesspoint"])
    assert [(b.first("GlueCESEBindSEUniqueID"), b.first("GlueCESEBindCEAccesspoint")) for b in binds] == [
        ("se01.example.org", "/storage/data")]


def test_an_os_update_is_modified_in_place_in_bdii_never_renamed_or_re_added(bdii, tmp_path):
    """The issue's case: one host alone in its SubCluster updates its OS (Rocky 9.3 -> 9.4).  Its
    SubCluster keeps its id, so BDII modifies entries in place: at no moment an extra
    SubCluster, and no entry deleted and re-added (each keeps its entryUUID)."""
    import dataclasses
    import time

    from glue_sites import make_host

    from glueinfo.sss.node_xml import render_node

    xeon, epyc = CLASSES[0][0], CLASSES[1][0]
    spool, state = tmp_path / "spool", tmp_path / "state"
    spool.mkdir()
    state.mkdir()  # a one-shot `glueinfo ldif` keeps its SubCluster ids only in a state directory that exists
    hosts = [make_host(xeon, i) for i in range(3)] + [make_host(epyc, 0)]

    def write_spool(release: str) -> None:
        now = time.time()
        for host in hosts:
            if host.os and host.cpu and host.cpu.vendor == "AuthenticAMD":
                host = dataclasses.replace(host, os=dataclasses.replace(host.os, release=release))
            node = render_node(dataclasses.replace(host, collected_at=now), now)
            (spool / f".{host.hostname}.tmp").write_bytes(node)
            os.replace(spool / f".{host.hostname}.tmp", spool / f"{host.hostname}.xml")

    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"[sources]\nenabled = spool\nspool_dir = {spool}\n[run]\nstate_dir = {state}\n"
                    "[ce:default]\naccess = VO:dteam\n")
    write_spool("9.3")
    bdii.add_provider("glueinfo", provider_script("--config", str(conf)))
    bdii.wait_for_update()

    def tree() -> dict[str, str]:
        return {e.dn.lower(): e.first("entryUUID") for e in bdii.ldapsearch(BASE, "(objectClass=*)", ["entryUUID"])}

    def subclusters() -> list:
        return bdii.ldapsearch(BASE, "(objectClass=GlueSubCluster)", ["GlueSubClusterUniqueID", "GlueHostOperatingSystemRelease"])

    before = tree()
    assert len(subclusters()) == 2
    write_spool("9.4")
    seen_counts = set()

    def updated() -> bool:
        found = subclusters()
        seen_counts.add(len(found))
        return any(sc.first("GlueHostOperatingSystemRelease") == "9.4" for sc in found)

    assert wait_until(updated, "the BDII published the SubCluster's OS release 9.4", 90, step=0.2,
                      detail=lambda: bdii.log_text()[-2000:])
    assert seen_counts == {2}  # never a transient third SubCluster
    after = tree()
    assert after == before  # the same DNs, and no entry deleted and re-added (same entryUUID)
    assert "ldap_add" not in bdii.log_text()
