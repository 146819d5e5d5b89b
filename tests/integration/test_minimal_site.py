"""A minimal site, published into a slapd laid out as BDII lays it out, read back as its consumers read it.

The site is declared the way admins start one: ``[site] id``, two ``[ce:NAME]`` queues (the live Slurm's
partitions ``long`` and ``short``, tests/harness/slurm_harness.py) with ``access`` rules, nothing about
connectivity, limits or the CE's middleware, and four workers whose own ``glueinfo node-xml`` filled a spool
(recorded host trees).  ``glueinfo publish`` writes it into a slapd with BDII's three databases and
BDII.schema, bound as BDII binds (``o=grid; o=glue; o=infosys``).  Then, with the real ``ldapsearch``:

- DIRAC's path (``GLUE2PolicyRule=VO:<vo>`` -> ``GLUE2MappingPolicyShareForeignKey`` -> ComputingShare ->
  ``GLUE2ComputingShareExecutionEnvironmentForeignKey`` -> ExecutionEnvironment with OS, platform and memory)
  reaches both queues, and the environments are the workers' (their Node XML, read here with lxml);
- every GLUE 2 foreign key names an entry the server holds;
- no retired middleware (CREAM, Globus GRAM) anywhere in o=grid or o=glue;
- BDII's statistics entry (``objectClass=UpdateStats`` under o=infosys, what ARGO's org.bdii.Freshness
  reads) is there with the publish's figures, and its ``modifyTimestamp`` advances with the next publish;
  a server without an o=infosys database costs no warning.

And DIRAC's own reader (``DIRAC.Core.Utilities.Glue2.getGlue2CEInfo`` from the ``dirac`` wheel, in the
test-only interpreter run-tests.sh installs: GLUEINFO_DIRAC_PYTHON) finds the site's CE in the tree as a
site BDII serves it, once the CE's type is known (DIRAC reads HTCondor-CE and ARC endpoints only).
"""

from __future__ import annotations

import calendar
import re
import subprocess
import time
from pathlib import Path

import pytest
from dirac_reader import dirac_python, dirac_read
from lxml import etree
from paths import HOSTS
from servers import Slapd, missing_slapd_tools, run_ldapsearch
from slurm_harness import SlurmCluster, missing_slurm_tools
from test_one_site import WORKERS, glueinfo, hostname_of

pytestmark = pytest.mark.integration

SITE_ID = "MINIMAL-SITE"
CE_HOST = "ce.minimal.example.org"
GLUE2 = "o=glue"
QUEUES_OF = {"dteam": {"long", "short"}, "atlas": {"long"}}
RETIRED = re.compile(rb"cream|gram|globus", re.IGNORECASE)
STATS_FILTER = "(|(objectClass=UpdateStats)(objectClass=InfoSystemStats))"  # ARGO's check_bdii_entries -f stats
BDII_SCHEMA = Path("/etc/bdii/BDII.schema")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = missing_slurm_tools()
    if missing:
        pytest.skip("real Slurm needed, missing: " + ", ".join(missing))
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def spool(tmp_path_factory) -> Path:
    """Each worker's Node XML, as its cron job (`glueinfo node-xml`) drops it."""
    directory = tmp_path_factory.mktemp("spool")
    bare = directory.parent / "bare.conf"
    bare.write_text("")
    for tree in WORKERS:
        node = glueinfo("node-xml", "--host-root", str(HOSTS / tree), config=bare).stdout
        (directory / f"{hostname_of(tree)}.xml").write_bytes(node)
    return directory


def bdii_layout(workdir: Path, suffixes=("o=grid", "o=glue", "o=infosys")) -> Slapd:
    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    if not BDII_SCHEMA.exists():
        pytest.skip(f"{BDII_SCHEMA} needed (Debian package bdii)")
    server = Slapd(workdir, layout="bdii")
    server.suffixes = suffixes
    return server.start()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    slapd = bdii_layout(tmp_path_factory.mktemp("slapd"))
    try:
        yield slapd
    finally:
        slapd.stop()


def minimal_config(directory: Path, slurm: SlurmCluster, spool: Path, server: Slapd, binds: str = "o=grid; o=glue; o=infosys",
                   ce_extra: str = "", extra: str = "") -> Path:
    """[site] id, two queues with access rules and nothing else a site would have to know; what points the test at
    its servers (the spool, the Slurm's config, the LDAP server, a state directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    password = directory / "password"
    password.write_text(server.password + "\n")
    config = directory / "glueinfo.conf"
    config.write_text(f"""
[site]
id = {SITE_ID}

[ce:long]
host = {CE_HOST}
lrms = slurm
slurm_conf = {slurm.conf}
access = VO:dteam VO:atlas
{ce_extra}

[ce:short]
host = {CE_HOST}
lrms = slurm
slurm_conf = {slurm.conf}
access = VO:dteam
{ce_extra}

[sources]
enabled = spool
spool_dir = {spool}

[run]
state_dir = {directory / "state"}

[ldap]
url = {server.url}
bind_dn = {binds}
password_file = {password}
{extra}
""")
    return config


@pytest.fixture(scope="module")
def published(tmp_path_factory, slurm, spool, server):
    """The minimal site published once; the publish's stderr."""
    config = minimal_config(tmp_path_factory.mktemp("site"), slurm, spool, server)
    proc = glueinfo("publish", "--no-state", config=config, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    return config, proc.stderr.decode()


def one(server: Slapd, filter: str):
    entries = run_ldapsearch(server.url, GLUE2, filter)
    assert len(entries) == 1, (filter, [e.dn for e in entries])
    return entries[0]


def workers_environments(spool: Path) -> set[tuple[str, int]]:
    """(platform, main memory MB) of each worker that says its platform, from the Node XML it published (Arch,
    Configured/Memory).  A worker that does not (the recorded lab-vm3) has no ExecutionEnvironment: GLUE 2 has no
    word for an unknown platform, so its SubCluster's is left out with a warning naming the key that states it."""
    found = set()
    for path in spool.glob("*.xml"):
        node = etree.parse(str(path)).getroot()
        if node.findtext("Arch"):
            found.add((node.findtext("Arch"), int(node.findtext("Configured/Memory"))))
    return found


def test_dirac_path_reaches_both_queues_and_the_workers_environments(published, server, spool):
    environments = set()
    for vo, queues in QUEUES_OF.items():
        reached = set()
        for policy in run_ldapsearch(server.url, GLUE2, f"(&(objectClass=GLUE2Policy)(GLUE2PolicyRule=VO:{vo}))"):
            if "GLUE2MappingPolicyShareForeignKey" not in policy:
                continue  # an endpoint's AccessPolicy
            share = one(server, f"(&(objectClass=GLUE2ComputingShare)(GLUE2ShareID={policy.first('GLUE2MappingPolicyShareForeignKey')}))")
            keys = share.get("GLUE2ComputingShareExecutionEnvironmentForeignKey")
            assert keys, share.dn
            for key in keys:
                ee = one(server, f"(&(objectClass=GLUE2ExecutionEnvironment)(GLUE2ResourceID={key}))")
                assert ee.first("GLUE2ExecutionEnvironmentOSFamily") == "linux"
                assert ee.first("GLUE2ExecutionEnvironmentConnectivityIn") == "undefined"  # nobody stated it
                environments.add((ee.first("GLUE2ExecutionEnvironmentPlatform"),
                                  int(ee.first("GLUE2ExecutionEnvironmentMainMemorySize"))))
            reached.add(share.first("GLUE2ComputingShareMappingQueue"))
        assert reached == queues, vo
    assert environments == workers_environments(spool) and len(environments) == len(WORKERS) - 1
    _, stderr = published
    (left_out,) = [line for line in stderr.splitlines() if "ExecutionEnvironment" in line and "left out" in line]
    assert "platform" in left_out and "[cluster:" in left_out


def test_every_glue2_foreign_key_names_an_entry_the_server_holds(published, server):
    entries = run_ldapsearch(server.url, GLUE2)
    ids = {str(v) for e in entries for name, values in e.attributes.items() if name.endswith("ID") for v in values}
    keys = [(e.dn, name, str(v)) for e in entries for name, values in e.attributes.items() if name.endswith("ForeignKey")
            for v in values]
    assert len(keys) > 20
    assert [k for k in keys if k[2] not in ids] == []
    (domain,) = [e for e in entries if "GLUE2AdminDomain" in e.object_classes]
    assert domain.first("GLUE2DomainID") == SITE_ID


def test_no_retired_middleware_anywhere(published, server):
    for base in ("o=grid", "o=glue"):
        proc = subprocess.run(["ldapsearch", "-x", "-LLL", "-o", "ldif-wrap=no", "-H", server.url, "-b", base],
                              capture_output=True, check=True, timeout=60)
        assert b"dn: " in proc.stdout
        assert RETIRED.findall(proc.stdout) == [], base
    _, stderr = published
    assert len([line for line in stderr.splitlines() if "implementation_name" in line]) == 1, stderr


def stats_entries(server: Slapd):
    """ARGO's org.bdii.Freshness search: the statistics entries under o=infosys, with modifyTimestamp."""
    return run_ldapsearch(server.url, "o=infosys", STATS_FILTER, ["*", "modifyTimestamp"])


def timestamp(entry) -> int:
    return calendar.timegm(time.strptime(str(entry.first("modifyTimestamp")), "%Y%m%d%H%M%SZ"))


def test_bdii_statistics_are_kept_fresh_as_bdii_update_keeps_them(tmp_path, slurm, spool):
    with bdii_layout(tmp_path / "slapd") as server:
        config = minimal_config(tmp_path / "site", slurm, spool, server)
        assert stats_entries(server) == []
        glueinfo("publish", "--no-state", config=config)
        (first,) = stats_entries(server)
        assert first.dn == "Hostname=127.0.0.1,o=infosys" and "UpdateStats" in first.object_classes
        published = len(run_ldapsearch(server.url, "mds-vo-name=resource,o=grid", attrs=["1.1"])) - 1 + \
            len(run_ldapsearch(server.url, "GLUE2GroupID=resource,o=glue", attrs=["1.1"])) - 1
        assert int(first.first("TotalEntries")) == int(first.first("NewEntries")) == published
        assert int(first.first("FailedAdds")) == int(first.first("DeletedEntries")) == 0
        while time.time() < timestamp(first) + 1.05:  # modifyTimestamp counts whole seconds
            time.sleep(0.1)
        glueinfo("publish", "--no-state", config=config)
        (second,) = stats_entries(server)
        assert timestamp(second) > timestamp(first)
        assert int(second.first("TotalEntries")) == published and int(second.first("NewEntries")) == 0


def test_the_daemon_keeps_the_statistics_too(tmp_path, slurm, spool):
    with bdii_layout(tmp_path / "slapd") as server:
        out = tmp_path / "out"
        out.mkdir()
        config = minimal_config(tmp_path / "site", slurm, spool, server)
        config.write_text(config.read_text().replace("[run]\n", f"[run]\nldap_sync = yes\nldif_file = {out / 'glue.ldif'}\n"
                                                                  f"node_xml_file = {out / 'nodes.xml'}\n"))
        glueinfo("run", "--once", config=config)
        (stats,) = stats_entries(server)
        published = len(run_ldapsearch(server.url, "mds-vo-name=resource,o=grid", attrs=["1.1"])) - 1 + \
            len(run_ldapsearch(server.url, "GLUE2GroupID=resource,o=glue", attrs=["1.1"])) - 1
        assert int(stats.first("TotalEntries")) == published > 0


def test_a_server_without_an_infosys_database_costs_no_warning(tmp_path, slurm, spool):
    # One identity writing o=grid (GLUE 1.3 only), on a server whose databases are o=grid and o=glue.
    with bdii_layout(tmp_path / "slapd", suffixes=("o=grid", "o=glue")) as server:
        config = minimal_config(tmp_path / "site", slurm, spool, server, binds="o=grid", extra="[glue]\nversions = 1.3\n")
        proc = glueinfo("publish", "--no-state", "-vv", config=config)
        stderr = proc.stderr.decode()
        said = [line for line in stderr.splitlines() if "o=infosys" in line]
        assert said and all(": DEBUG: " in line for line in said), stderr
        assert run_ldapsearch(server.url, "mds-vo-name=resource,o=grid", "(objectClass=GlueCE)", ["1.1"])


def test_diracs_own_reader_finds_the_ce_with_the_workers_environment(tmp_path, slurm, spool):
    python = dirac_python()
    # As a site BDII serves it (DIRAC skips entries without GLUE2DomainID in their DN), with the CE's type
    # known, which HTCondor-CE discovery gives (DIRAC tells HTCondor-CE and ARC endpoints apart, no other).
    with bdii_layout(tmp_path / "slapd") as server:
        config = minimal_config(tmp_path / "site", slurm, spool, server, ce_extra="implementation_name = HTCondorCE\nport = 9619",
                                extra="[glue]\ndit = site\n")
        glueinfo("publish", "--no-state", config=config)
        lowest = min(memory for _, memory in workers_environments(spool))
        for vo in QUEUES_OF:
            result = dirac_read(python, vo, server, tmp_path / f"{vo}.json")
            assert result["OK"], result
            ce = result["Value"][SITE_ID]["CEs"][CE_HOST]
            # DIRAC names an HTCondor-CE's one queue "condor"; its figures are the environment with the least memory.
            assert set(ce["Queues"]) == {"condor"}
            assert ce["GlueHostMainMemoryRAMSize"] == str(lowest)
            assert ce["GlueHostOperatingSystemName"] == "linux"
            queue = ce["Queues"]["condor"]
            assert queue["GlueCEStateStatus"] == "production"
            # The partitions' MaxTime (scontrol show partition), in minutes as DIRAC turns GLUE 2's seconds back
            assert int(queue["GlueCEPolicyMaxWallClockTime"]) in (SlurmCluster.SHORT_MAX_MIN, SlurmCluster.LONG_MAX_MIN)


def test_diracs_reader_walks_a_ce_of_unknown_type_to_its_environments_and_lists_no_ce(tmp_path, slurm, spool):
    python = dirac_python()
    with bdii_layout(tmp_path / "slapd") as server:
        config = minimal_config(tmp_path / "site", slurm, spool, server, extra="[glue]\ndit = site\n")
        glueinfo("publish", "--no-state", config=config)
        result = dirac_read(python, "dteam", server, tmp_path / "dteam.json")
    # OK: policies, shares and ExecutionEnvironments were found (without an environment DIRAC answers
    # "No information found for executionEnvironments"); no CE, as DIRAC cannot submit to an unknown type.
    assert result["OK"] and result["Value"] == {}, result
