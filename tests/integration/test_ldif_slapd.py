"""`glueinfo ldif` output loaded into a real slapd with the glue-schema files
(ldapadd -c, which checks more than slapadd), then queried the way brokers do.

The bar: zero rejected entries, for this machine, the recorded fixture
machines, a synthetic 1,000-host site in 5 hardware classes, and hostile host
facts.  Expected answers come from the hand-written host facts
(tests/glue_sites.py) and from /proc, never from glueinfo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from glue_sites import CLASSES, HOSTILE_MODEL, hostile_host, make_host, synthetic_site
from paths import HOSTS

from glueinfo.core.config import parse_text
from glueinfo.core.job import JobInfo
from glueinfo.core.model import QueueState
from glueinfo.publish.from_snapshots import build_site

pytestmark = pytest.mark.integration

BASE = "mds-vo-name=resource,o=grid"
FIXTURES = str(HOSTS)
FIXTURE_HOSTS = sorted(os.listdir(FIXTURES))


def glueinfo(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def load(slapd, text: str):
    result = slapd.ldapadd(text)
    assert result.ok, str(result)  # lists every rejected DN with slapd's reason
    return result


def test_this_machine_loads_and_reads_back_what_proc_says(slapd):
    result = load(slapd, glueinfo("ldif").stdout)
    assert len(result.added) >= 4  # cluster, SubCluster, host, CE (+ file systems)
    (host,) = slapd.ldapsearch(BASE, "(objectClass=GlueHost)")
    with open("/proc/cpuinfo") as handle:
        processors = sum(1 for line in handle if line.startswith("processor"))
    with open("/proc/meminfo") as handle:
        mem_total_kb = int(next(line for line in handle if line.startswith("MemTotal:")).split()[1])
    assert int(host.first("GlueHostArchitectureSMPSize")) == processors
    assert abs(int(host.first("GlueHostMainMemoryRAMSize")) - mem_total_kb / 1024) <= 1
    (ce,) = slapd.ldapsearch(BASE, "(objectClass=GlueCE)")
    assert int(ce.first("GlueCEInfoTotalCPUs")) == processors  # fork: this host's logical CPUs
    assert ce.first("GlueCEUniqueID").endswith(":2119/jobmanager-fork-default")


@pytest.mark.parametrize("fixture", FIXTURE_HOSTS)
def test_each_recorded_fixture_machine_loads_with_zero_rejections(slapd, fixture):
    text = glueinfo("ldif", "--host-root", os.path.join(FIXTURES, fixture)).stdout
    load(slapd, text)
    assert slapd.ldapsearch(BASE, "(objectClass=GlueHost)", ["GlueHostUniqueID"])


def test_the_fixture_machines_as_one_site_load_and_group(slapd, tmp_path):
    snapshots = [json.loads(glueinfo("probe", "--host-root", os.path.join(FIXTURES, f)).stdout) for f in FIXTURE_HOSTS]
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(snapshots))
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[cluster:lab]\nunique_id = lab.example.org\n[ce:default]\nhost = ce.example.org\naccess = VO:dteam\n")
    result = load(slapd, glueinfo("ldif", "--config", str(conf), "--snapshots", str(path)).stdout)
    hosts = slapd.ldapsearch(BASE, "(objectClass=GlueHost)", ["GlueHostUniqueID"])
    assert len(hosts) == len({s["hostname"] for s in snapshots})
    subclusters = slapd.ldapsearch(BASE, "(objectClass=GlueSubCluster)", ["GlueSubClusterLogicalCPUs"])
    assert 2 <= len(subclusters) <= len(hosts)  # different hardware: several SubClusters
    assert len(result.added) == len(slapd.ldapsearch(BASE, "(objectClass=*)", ["1.1"])) - 1  # all but the base


@pytest.fixture(scope="module")
def thousand_hosts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    path = tmp / "hosts.json"
    path.write_text(json.dumps([h.to_dict() for h in synthetic_site(1000)]))
    conf = tmp / "glueinfo.conf"
    conf.write_text("[site]\nid = EXAMPLE-T2\n[cluster:main]\nunique_id = cluster.example.org\n"
                    "[ce:long]\nhost = ce01.example.org\naccess = VO:atlas VO:cms\nmax_wall_clock_time = 2880\n")
    return glueinfo("ldif", "--config", str(conf), "--snapshots", str(path)).stdout


def test_thousand_host_site_in_five_classes_loads_and_answers_broker_queries(slapd, thousand_hosts):
    result = load(slapd, thousand_hosts)
    # o=grid: 1 site + 1 cluster + 5 SubClusters + 1,000 hosts + 3,000 file systems + 1 CE + 2 VOViews (atlas, cms);
    # the site has an id, so its GLUE 2 tree (o=glue) is printed and loaded too
    grid = [dn for dn in result.added if dn.lower().endswith("o=grid")]
    assert len(grid) == 1 + 1 + 5 + 1000 + 3000 + 1 + 2
    assert len(result.added) > len(grid) and all(dn.lower().endswith(("o=grid", "o=glue")) for dn in result.added)

    def search(filter, attrs=()):
        return slapd.ldapsearch(BASE, filter, list(attrs))

    # RAM: EPYC 515,800 MB and Neoverse 257,600 MB hosts have 200 GB or more.
    big = search("(&(objectClass=GlueSubCluster)(GlueHostMainMemoryRAMSize>=200000))", ["GlueHostProcessorModel"])
    assert sorted(e.first("GlueHostProcessorModel") for e in big) == ["AMD EPYC 7702 64-Core Processor", "Neoverse-N1"]
    # OS: the Xeon Gold and Core i7 classes run Debian.
    debian = search("(&(objectClass=GlueSubCluster)(GlueHostOperatingSystemName=Debian*)(GlueHostOperatingSystemRelease=12))",
                    ["GlueSubClusterLogicalCPUs"])
    assert sorted(int(e.first("GlueSubClusterLogicalCPUs")) for e in debian) == [50 * 12, 400 * 48]
    # Platform: 150 ARM hosts x 80 threads, 1 socket each.
    (arm,) = search("(&(objectClass=GlueSubCluster)(GlueHostArchitecturePlatformType=aarch64))")
    assert (int(arm.first("GlueSubClusterLogicalCPUs")), int(arm.first("GlueSubClusterPhysicalCPUs"))) == (150 * 80, 150)
    # Free CPUs on the CE, then follow its GlueForeignKey to the cluster and the SubClusters' GlueChunkKey back.
    (ce,) = search("(&(objectClass=GlueCE)(GlueCEStateFreeCPUs>=1)(GlueCEAccessControlBaseRule=VO:atlas))")
    total = sum(hw.threads * count for hw, count in CLASSES)
    assert int(ce.first("GlueCEInfoTotalCPUs")) == total == 98_200
    assert 1 <= int(ce.first("GlueCEStateFreeCPUs")) <= total
    assert ce.first("GlueCEPolicyMaxWallClockTime") == "2880"
    (link,) = ce.get("GlueForeignKey")
    attr, _, cluster_id = link.partition("=")
    (cluster,) = search(f"({attr}={cluster_id})")
    assert "GlueCluster" in cluster.object_classes and ce.first("GlueCEUniqueID") in cluster.get("GlueClusterService")
    members = search(f"(&(objectClass=GlueSubCluster)(GlueChunkKey=GlueClusterUniqueID={cluster_id}))",
                     ["GlueSubClusterLogicalCPUs"])
    assert len(members) == 5 and sum(int(e.first("GlueSubClusterLogicalCPUs")) for e in members) == total
    hosts_of_arm = search(f"(&(objectClass=GlueHost)(GlueChunkKey=GlueSubClusterUniqueID={arm.first('GlueSubClusterUniqueID')}))",
                          ["1.1"])
    assert len(hosts_of_arm) == 150
    assert len(search("(objectClass=GlueHostRemoteFileSystem)", ["1.1"])) == 1000
    (site,) = search("(objectClass=GlueSite)")
    assert site.first("GlueSiteUniqueID") == "EXAMPLE-T2"


def test_hostile_host_facts_load_with_zero_rejections_and_read_back(slapd):
    config = parse_text("[ce:default]\naccess = VO:atlas\n")
    states = {"ce01.example.org:2119/jobmanager-fork-default": QueueState(
        lrms_type="fork", status="Production", jobs=[JobInfo(local_id="17,a+b", local_owner="ünïcode", glue_status="RUNNING")])}
    long_name = make_host(CLASSES[0][0], 2)
    long_name.hostname = ".".join(["wn-" + "x" * 59] + ["x" * 62] * 3)  # 251 characters: DNS allows it, slapd's RDN not
    hosts = [hostile_host(), make_host(CLASSES[0][0], 1), long_name]
    result = build_site(config, hosts, local_fqdn="ce01.example.org", states=states)
    assert result.errors == []
    load(slapd, result.ldif())
    (host,) = slapd.ldapsearch(BASE, "(GlueHostUniqueID=node-1.weird.example.org)")
    assert host.first("GlueHostProcessorModel") == "Intel(R) Core(TM) i7 "
    assert HOSTILE_MODEL not in str(host)
    # docs/admin-guide.md "Text lengths": an OS version (VERSION_CODENAME) has at most 64 characters
    assert host.first("GlueHostOperatingSystemVersion") is None  # 5,000 are left out, never cut
    file_systems = slapd.ldapsearch(host.dn, "(objectClass=GlueHostLocalFileSystem)")
    names = {e.first("GlueHostLocalFileSystemName") for e in file_systems}
    assert {"/mnt/with space", "/mnt/a,b=c+d", "#leading", "/trailing  "} <= names
    assert "/mnt/new\nline" not in names  # control characters never pass the model boundary (core/validate.py)
    # 1,201 characters cannot name an entry (slapd's limit is about 220 bytes per DN component):
    # named by its start and a hash, the whole path in GlueHostLocalFileSystemRoot.
    (long_fs,) = [e for e in file_systems if e.first("GlueHostLocalFileSystemRoot") == "/" + "long" * 300]
    assert long_fs.first("GlueHostLocalFileSystemName").startswith("/longlong")
    assert len(long_fs.first("GlueHostLocalFileSystemName")) < 200
    (long_host,) = slapd.ldapsearch(BASE, "(GlueHostName=wn-xxx*)")
    assert long_host.first("GlueHostName") == long_name.hostname
    assert long_host.first("GlueHostUniqueID").startswith("wn-xxx") and "~" in long_host.first("GlueHostUniqueID")


def test_ce_jobs_load_under_their_ce(slapd):
    config = parse_text("[ce:default]\naccess = VO:atlas\npublish_jobs = yes\n")
    ce_id = "ce01.example.org:2119/jobmanager-fork-default"
    jobs = [JobInfo(local_id=str(i), local_owner="alice", glue_status=status)
            for i, status in enumerate(["RUNNING", "WAITING", "SUBMITTED"])]
    result = build_site(config, [make_host(CLASSES[0][0], 0)], local_fqdn="ce01.example.org",
                        states={ce_id: QueueState(lrms_type="fork", status="Production", jobs=jobs)})
    load(slapd, result.ldif())
    found = slapd.ldapsearch(f"GlueCEUniqueID={ce_id},{BASE}", "(&(objectClass=GlueCEJob)(GlueCEJobStatus=WAITING))")
    assert [e.first("GlueCEJobLocalID") for e in found] == ["1"]


def test_vo_views_answer_lcg_info_vo_filters_with_each_vos_own_jobs(slapd):
    """What `lcg-info --list-ce --vo dteam` intersects the CE list with: GlueVOViews whose access
    rule names the VO, each with that VO's job counts (issue 13's per-VO counts)."""
    from glueinfo.core.model import VoJobCounts

    config = parse_text("[ce:grid]\nlrms = slurm\nqueue = grid\naccess = VO:atlas, VO:dteam, VOMS:/atlas/Role=pilot\n"
                        "default_se = se.example.org\n")
    ce_id = "ce01.example.org:2119/jobmanager-slurm-grid"
    states = {ce_id: QueueState(lrms_type="slurm", status="Production", running_jobs=5, waiting_jobs=4, total_jobs=9,
                                free_job_slots=3, vo_counts={"atlas": VoJobCounts(running=4, waiting=2, total=6)})}
    result = build_site(config, [make_host(CLASSES[0][0], 1)], local_fqdn="ce01.example.org", states=states)
    assert result.errors == []
    load(slapd, result.ldif())
    ce_dn = f"GlueCEUniqueID={ce_id},{BASE}"
    (dteam,) = slapd.ldapsearch(BASE, "(&(objectClass=GlueVOView)(GlueCEAccessControlBaseRule=VO:dteam))")
    assert dteam.dn.lower() == f"GlueVOViewLocalID=dteam,{ce_dn}".lower()  # slapd spells Mds-Vo-name its way
    # no [vos] rule names dteam, so nothing counts its jobs: left out, not 0 (QueueState.counts_of_vo)
    assert [dteam.first(a) for a in ("GlueCEStateRunningJobs", "GlueCEStateWaitingJobs", "GlueCEStateTotalJobs",
                                     "GlueCEStateFreeJobSlots")] == [None, None, None, "3"]
    assert dteam.get("GlueChunkKey") == [f"GlueCEUniqueID={ce_id}"] and dteam.first("GlueCEInfoDefaultSE") == "se.example.org"
    (atlas,) = slapd.ldapsearch(BASE, "(&(objectClass=GlueVOView)(GlueCEAccessControlBaseRule=VO:atlas))")
    assert [atlas.first(a) for a in ("GlueCEStateRunningJobs", "GlueCEStateWaitingJobs", "GlueCEStateTotalJobs")] == [
        "4", "2", "6"]
    # one VOView per VO named by a VO: rule; the VOMS role rule stays on the CE only
    assert len(slapd.ldapsearch(BASE, "(objectClass=GlueVOView)")) == 2
    # unknown counts are left out, never published as 0
    unknown = build_site(config, [make_host(CLASSES[0][0], 1)], local_fqdn="ce01.example.org",
                         states={ce_id: QueueState(lrms_type="slurm", error="squeue failed")})
    view = next(e for e in unknown.entries if e.dn == f"GlueVOViewLocalID=atlas,{ce_dn}")
    assert "GlueCEStateRunningJobs" not in view and "GlueCEStateTotalJobs" not in view
