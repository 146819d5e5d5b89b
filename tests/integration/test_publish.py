"""`glueinfo publish` into a real slapd (ldap3 on our side; ldapsearch and slapd's
own cn=Monitor operation counters to check what happened)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from glue_sites import CLASSES, make_host
from paths import REPO
from servers import Slapd, missing_slapd_tools

from glueinfo.core.ldif import normalise_dn, parse_ldif, value_text
from glueinfo.glue.ldap_diff import changes_for

pytestmark = pytest.mark.integration

BASE = "mds-vo-name=resource,o=grid"
FORBIDDEN = "forbidden.example.org"
CONF = """
[cluster:main]
unique_id = main.example.org
hosts = wn-xeon-* wn-arm-*
[ce:default]
cluster = main
host = ce01.example.org
access = VO:atlas
"""
# The same site with a second cluster, for the old hosts, under the subtree slapd refuses.
CONF_WITH_REFUSED_CLUSTER = CONF + f"""
[cluster:other]
unique_id = {FORBIDDEN}
hosts = wn-old-*
"""


class MonitoredSlapd(Slapd):
    """The harness's slapd plus cn=Monitor (operation counters) and a publishing
    account, cn=publisher,o=grid, that may write everything but one subtree
    (to make the server refuse some entries; the rootdn would bypass that)."""

    publisher = "cn=publisher,o=grid"

    def __init__(self, *args, read_only_subtree: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.read_only_subtree = read_only_subtree

    def _config(self) -> str:
        text = super()._config()
        rules = f'access to dn.subtree="{self.read_only_subtree}" by * read\n' if self.read_only_subtree else ""
        rules += f'access to * by dn.exact="{self.publisher}" write by dn.exact="{self.bind_dn}" write by * read\n'
        text = text.replace(f'access to * by dn.exact="{self.bind_dn}" write by * read\n', rules, 1)
        return text + '\ndatabase monitor\naccess to dn.subtree="cn=monitor" by * read\n'

    def start(self, timeout: float = 20.0):
        super().start(timeout)
        result = self.ldapadd(f"dn: {self.publisher}\nobjectClass: person\ncn: publisher\nsn: publisher\n"
                              f"userPassword: {self.password}\n")
        assert result.ok, str(result)
        return self

    def operations(self) -> dict[str, int]:
        """Adds, modifies and deletes slapd has completed since it started."""
        found = {e.dn.split(",")[0][3:]: int(e.first("monitorOpCompleted"))
                 for e in self.ldapsearch("cn=Operations,cn=Monitor", "(objectClass=*)", ["monitorOpCompleted"], scope="one")}
        return {name: found[name] for name in ("Add", "Modify", "Delete")}


@pytest.fixture
def server(tmp_path):
    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    with MonitoredSlapd(tmp_path / "slapd", read_only_subtree=f"GlueClusterUniqueID={FORBIDDEN},{BASE}") as slapd:
        yield slapd


class Site:
    """Files for one publishing site: config, snapshots, password, state."""

    def __init__(self, tmp_path, slapd, hosts, conf=CONF):
        self.tmp, self.slapd = tmp_path, slapd
        self.conf = tmp_path / "glueinfo.conf"
        self.conf.write_text(conf)
        self.password = tmp_path / "password"
        self.password.write_text(slapd.password + "\n")
        self.state = tmp_path / "state.json"
        self.snapshots = tmp_path / "hosts.json"
        self.set_hosts(hosts)

    def set_hosts(self, hosts):
        self.hosts = hosts
        self.snapshots.write_text(json.dumps([h.to_dict() for h in hosts]))

    def glueinfo(self, command, *extra, url=None):
        args = [sys.executable, "-m", "glueinfo.cli", command, "--config", str(self.conf), "--snapshots", str(self.snapshots)]
        if command == "publish":
            args += ["--ldap", url or self.slapd.url, "--bind-dn", self.slapd.publisher, "--password-file", str(self.password),
                     "--state-file", str(self.state), "--stats"]
        return subprocess.run([*args, *extra], capture_output=True, text=True, timeout=600)

    def publish(self, *extra, url=None):
        proc = self.glueinfo("publish", *extra, url=url)
        stats = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
        return proc, stats


def content(entries):
    """DN -> attribute -> sorted values, for everything below the base."""
    base = normalise_dn(BASE)
    return {normalise_dn(e.dn): {n.lower(): sorted(value_text(v) for v in vs) for n, vs in e.attributes.items()}
            for e in entries if normalise_dn(e.dn).endswith("," + base)}


def hosts_ok():
    return [make_host(CLASSES[0][0], i) for i in range(6)] + [make_host(CLASSES[2][0], i) for i in range(3)]


def test_publish_then_no_change_run_sends_no_writes(server, tmp_path):
    site = Site(tmp_path, server, hosts_ok())
    proc, stats = site.publish()
    assert proc.returncode == 0, proc.stderr
    expected = parse_ldif(site.glueinfo("ldif").stdout)
    on_server = server.ldapsearch(BASE, "(objectClass=*)")
    assert content(on_server) == content(expected)
    assert stats["added"] == len(expected) and stats["writes"] == len(expected)

    before = server.operations()
    proc, stats = site.publish()
    assert proc.returncode == 0, proc.stderr
    assert server.operations() == before  # slapd itself saw no add, modify or delete
    assert (stats["writes"], stats["unchanged"]) == (0, len(expected))
    # Without the state file every entry is read and compared in full: still nothing to write.
    proc, stats = site.publish("--no-state")
    assert server.operations() == before and stats["compared_in_full"] == len(expected) and stats["writes"] == 0


def test_changes_are_applied_and_untouched_entries_are_not_rewritten(server, tmp_path):
    site = Site(tmp_path, server, hosts_ok())
    assert site.publish()[0].returncode == 0
    csn_before = {normalise_dn(e.dn): e.first("entryCSN") for e in server.ldapsearch(BASE, "(objectClass=*)", ["entryCSN"])}
    hosts = hosts_ok()
    hosts[1].memory.ram_available_mb += 1000  # one host's free memory: one attribute of one entry
    del hosts[5]  # a host and its three file systems go
    hosts.append(make_host(CLASSES[2][0], 7))  # a new one comes
    site.set_hosts(hosts)
    before = server.operations()
    proc, stats = site.publish()
    assert proc.returncode == 0, proc.stderr
    after = server.operations()
    assert after["Add"] - before["Add"] == stats["added"] == 4
    assert after["Delete"] - before["Delete"] == stats["deleted"] == 4
    assert after["Modify"] - before["Modify"] == stats["modified"]
    assert content(server.ldapsearch(BASE, "(objectClass=*)")) == content(parse_ldif(site.glueinfo("ldif").stdout))
    csn_after = {normalise_dn(e.dn): e.first("entryCSN") for e in server.ldapsearch(BASE, "(objectClass=*)", ["entryCSN"])}
    rewritten = {dn for dn in csn_after if dn in csn_before and csn_after[dn] != csn_before[dn]}
    assert len(rewritten) == stats["modified"]
    assert any(dn.startswith("gluehostuniqueid=wn-xeon-00001.example.org,") for dn in rewritten)
    assert not any("wn-xeon-00002" in dn for dn in rewritten)  # an untouched host keeps its entryCSN


def test_changes_for_touches_only_differing_attributes():
    from glueinfo.core.ldif import Entry

    new = Entry("GlueHostUniqueID=a,o=grid", {"objectClass": ["GlueClusterTop", "GlueHost"], "GlueHostUniqueID": "a",
                                              "GlueHostMainMemoryRAMSize": 64, "GlueHostName": "a"})
    server = {"objectClass": [b"GlueClusterTop", b"GlueHost"], "GlueHostUniqueID": [b"A"], "GlueHostMainMemoryRAMSize": [b"32"],
              "GlueHostProcessorModel": [b"old"]}
    changes = changes_for(new, server)
    assert sorted(changes) == ["GlueHostMainMemoryRAMSize", "GlueHostName", "GlueHostProcessorModel"]
    assert changes["GlueHostMainMemoryRAMSize"][0][1] == ["64"] and changes["GlueHostProcessorModel"][0][1] == []
    server["objectClass"] = [b"GlueClusterTop", b"GlueSubCluster"]
    assert changes_for(new, server) is None  # another structural class: delete and add


def test_someone_elses_change_on_the_server_is_found_and_repaired(server, tmp_path):
    site = Site(tmp_path, server, hosts_ok())
    assert site.publish()[0].returncode == 0
    (host,) = server.ldapsearch(BASE, "(GlueHostUniqueID=wn-arm-00001.example.org)", ["1.1"])
    subprocess.run(["ldapmodify", "-x", "-H", server.url, "-D", server.bind_dn, "-w", server.password],
                   input=f"dn: {host.dn}\nchangetype: modify\nreplace: GlueHostMainMemoryRAMSize\nGlueHostMainMemoryRAMSize: 1\n",
                   text=True, check=True, capture_output=True)
    proc, stats = site.publish()
    assert proc.returncode == 0 and (stats["modified"], stats["compared_in_full"]) == (1, 1)
    (host,) = server.ldapsearch(BASE, "(GlueHostUniqueID=wn-arm-00001.example.org)", ["GlueHostMainMemoryRAMSize"])
    assert host.first("GlueHostMainMemoryRAMSize") == str(CLASSES[2][0].ram_mb)


def test_refused_entries_are_reported_by_dn_and_the_rest_is_applied(server, tmp_path):
    hosts = hosts_ok() + [make_host(CLASSES[3][0], i) for i in range(2)]  # wn-old-* go to the cluster slapd refuses
    site = Site(tmp_path, server, hosts, conf=CONF_WITH_REFUSED_CLUSTER)
    proc, stats = site.publish()
    assert proc.returncode == 1
    cluster_dn = f"GlueClusterUniqueID={FORBIDDEN},{BASE}"
    refused = [line for line in proc.stderr.splitlines() if "refused" in line]
    assert refused[0] == f"glueinfo: {cluster_dn}: add refused: insufficientAccessRights (50): no write access to entry"
    assert all(FORBIDDEN in line for line in refused)
    assert len(refused) == stats["rejected"] == 1 + 1 + 2 * 4  # cluster, its SubCluster, 2 hosts x (host + 3 file systems)
    assert sum("its parent entry was refused" in line for line in refused) == stats["rejected"] - 1
    published = server.ldapsearch(BASE, "(objectClass=GlueHost)", ["GlueHostUniqueID"])
    assert len(published) == 9  # every host of the other cluster is there
    assert server.ldapsearch(BASE, "(objectClass=GlueCE)", ["1.1"])


def test_unreachable_server_and_bad_password_are_one_line_errors_and_nothing_is_kept(server, tmp_path):
    site = Site(tmp_path, server, hosts_ok())
    proc, _ = site.publish(url="ldap://127.0.0.1:1")
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if "publish:" in line]
    assert errors == ["glueinfo: publish: ldap://127.0.0.1:1: cannot reach the LDAP server: socket connection error while "
                      "opening: [Errno 111] Connection refused"]
    assert not site.state.exists()
    site.password.write_text("wrong\n")
    proc, _ = site.publish()
    assert proc.returncode == 1 and "bind as cn=publisher,o=grid refused: invalidCredentials (49)" in proc.stderr
    assert server.ldapsearch(BASE, "(objectClass=GlueHost)", ["1.1"]) == []
    proc = site.glueinfo("publish", "--password-file", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "cannot be read" in proc.stderr


def test_a_missing_base_is_created(server, tmp_path):
    subprocess.run(["ldapdelete", "-x", "-H", server.url, "-D", server.bind_dn, "-w", server.password, BASE], check=True)
    site = Site(tmp_path, server, hosts_ok()[:1])
    proc, stats = site.publish()
    assert proc.returncode == 0, proc.stderr
    (base,) = server.ldapsearch(BASE, "(objectClass=*)", scope="base")
    assert [c.lower() for c in base.object_classes] == ["mds"]
    assert stats["added"] == len(server.ldapsearch(BASE, "(objectClass=*)", ["1.1"])) - 1


def test_publish_under_another_base(server, tmp_path):
    site = Site(tmp_path, server, hosts_ok()[:2])
    proc, _ = site.publish("--base", "mds-vo-name=EXAMPLE-SITE,o=grid")
    assert proc.returncode == 0, proc.stderr
    assert len(server.ldapsearch("mds-vo-name=EXAMPLE-SITE,o=grid", "(objectClass=GlueHost)", ["1.1"])) == 2
    assert os.path.exists(site.state)


def test_entries_someone_else_adds_or_deletes_are_put_right(server, tmp_path):
    site = Site(tmp_path, server, hosts_ok())
    assert site.publish()[0].returncode == 0
    (host,) = server.ldapsearch(BASE, "(GlueHostUniqueID=wn-xeon-00003.example.org)", ["1.1"])
    for child in server.ldapsearch(host.dn, "(objectClass=*)", ["1.1"], scope="one"):
        subprocess.run(["ldapdelete", "-x", "-H", server.url, "-D", server.bind_dn, "-w", server.password, child.dn], check=True)
    subprocess.run(["ldapdelete", "-x", "-H", server.url, "-D", server.bind_dn, "-w", server.password, host.dn], check=True)
    intruder = f"GlueClusterUniqueID=intruder,{BASE}"
    assert server.ldapadd(f"dn: {intruder}\nobjectClass: GlueClusterTop\nobjectClass: GlueCluster\n"
                          "GlueClusterUniqueID: intruder\n").ok
    before = server.operations()
    proc, stats = site.publish()
    assert proc.returncode == 0, proc.stderr
    after = server.operations()
    assert (stats["added"], stats["deleted"], stats["modified"]) == (4, 1, 0)
    assert (after["Add"] - before["Add"], after["Delete"] - before["Delete"]) == (4, 1)
    assert content(server.ldapsearch(BASE, "(objectClass=*)")) == content(parse_ldif(site.glueinfo("ldif").stdout))
    assert site.publish()[1]["writes"] == 0


def test_entry_digest_depends_on_content_only():
    from glueinfo.core.ldif import Entry
    from glueinfo.glue.ldap_state import entry_digest

    def make(text):
        return Entry("GlueHostUniqueID=a,o=grid", {"objectClass": ["GlueClusterTop", "GlueHost"], "GlueHostUniqueID": text,
                                                   "GlueHostArchitectureSMPSize": 4})

    first = make("a")
    digest = entry_digest(first)
    keep = [first.attributes["objectClass"]] * 3 + [first.attributes[k] for k in first.attributes]  # more references
    rebuilt = make("".join(["", "a"]))  # equal text, another (not interned) string object
    assert entry_digest(first) == digest == entry_digest(rebuilt) and keep
    assert entry_digest(make("b")) != digest


def test_static_entries_outside_the_base_are_reported_not_sent(server, tmp_path):
    static = tmp_path / "static"
    static.mkdir()
    (static / "elsewhere.ldif").write_text("dn: GlueServiceUniqueID=x,mds-vo-name=other,o=grid\nobjectClass: GlueTop\n"
                                           "objectClass: GlueService\nGlueServiceUniqueID: x\n")
    site = Site(tmp_path, server, hosts_ok()[:1], conf=CONF + f"[glue]\nstatic_ldif_dir = {static}\n")
    proc, stats = site.publish()
    assert proc.returncode == 1 and stats["rejected"] == 1
    assert "GlueServiceUniqueID=x,mds-vo-name=other,o=grid: add refused: notSent (0): not below the base" in proc.stderr
    assert server.ldapsearch(BASE, "(objectClass=GlueHost)", ["1.1"])  # the rest is published


# -- o=glue next to o=grid, pipelined writes, progress --------------------------------------

GLUE2 = "GLUE2GroupID=resource,o=glue"
SERVICE_DN = f"GLUE2ServiceID=urn:ogf:ComputingService:ce01:0,{GLUE2}"


def glue2_ldif(hosts, memory_mb=64000):
    """Hand-made GLUE 2 entries GLUE20.schema accepts: a ComputingService, per host an
    ExecutionEnvironment below it and two Benchmarks below that."""
    parts = [f"dn: {SERVICE_DN}\nobjectClass: GLUE2Service\nobjectClass: GLUE2ComputingService\n"
             "GLUE2ServiceID: urn:ogf:ComputingService:ce01:0\nGLUE2ServiceType: org.glite.ce.CREAM\n"
             "GLUE2ServiceQualityLevel: production\nGLUE2ServiceAdminDomainForeignKey: EXAMPLE-SITE\n"]
    for host in hosts:
        ee = f"GLUE2ResourceID={host.hostname},{SERVICE_DN}"
        parts.append(f"dn: {ee}\nobjectClass: GLUE2Resource\nobjectClass: GLUE2ExecutionEnvironment\n"
                     f"GLUE2ResourceID: {host.hostname}\nGLUE2ResourceManagerForeignKey: urn:ogf:ComputingManager:ce01:fork\n"
                     f"GLUE2ExecutionEnvironmentPlatform: amd64\nGLUE2ExecutionEnvironmentMainMemorySize: {memory_mb}\n"
                     "GLUE2ExecutionEnvironmentOSFamily: linux\nGLUE2ExecutionEnvironmentConnectivityIn: FALSE\n"
                     "GLUE2ExecutionEnvironmentConnectivityOut: TRUE\n")
        for kind in ("hep-spec06", "specint2000"):
            parts.append(f"dn: GLUE2BenchmarkID={host.hostname}:{kind},{ee}\nobjectClass: GLUE2Benchmark\n"
                         f"GLUE2BenchmarkID: {host.hostname}:{kind}\nGLUE2BenchmarkType: {kind}\nGLUE2BenchmarkValue: 10\n")
    return "\n".join(parts)


def two_suffix_site(tmp_path, slapd, hosts):
    static = tmp_path / "static"
    static.mkdir(exist_ok=True)
    (static / "glue2.ldif").write_text(glue2_ldif(hosts))
    return Site(tmp_path, slapd, hosts, conf=CONF + f"[glue]\nstatic_ldif_dir = {static}\n[ldap]\nextra_bases = {GLUE2}\n")


def tree(slapd, base):
    key = normalise_dn(base)
    return {normalise_dn(e.dn): {n.lower(): sorted(value_text(v) for v in vs) for n, vs in e.attributes.items()}
            for e in slapd.ldapsearch(base, "(objectClass=*)") if normalise_dn(e.dn) != key}


def fed(site, base):
    key = normalise_dn(base)
    return {dn: attrs for dn, attrs in content_under(parse_ldif(site.glueinfo("ldif").stdout), key).items()}


def content_under(entries, key):
    return {normalise_dn(e.dn): {n.lower(): sorted(value_text(v) for v in vs) for n, vs in e.attributes.items()}
            for e in entries if normalise_dn(e.dn).endswith("," + key)}


def test_o_grid_and_o_glue_are_kept_in_one_run_with_no_writes_when_nothing_changed(server, tmp_path):
    hosts = hosts_ok()
    site = two_suffix_site(tmp_path, server, hosts)
    proc, stats = site.publish()
    assert proc.returncode == 0, proc.stderr
    grid, glue = fed(site, BASE), fed(site, GLUE2)
    assert len(glue) == 1 + 3 * len(hosts)
    assert tree(server, BASE) == grid and tree(server, GLUE2) == glue
    assert stats["added"] == len(grid) + len(glue)
    before = server.operations()
    proc, stats = site.publish()
    assert proc.returncode == 0 and stats["writes"] == 0 and server.operations() == before
    # A GLUE 2 change, a GLUE 2 host gone: modified and deleted in o=glue, o=grid untouched.
    (tmp_path / "static" / "glue2.ldif").write_text(glue2_ldif(hosts[1:], memory_mb=65000))
    proc, stats = site.publish()
    assert proc.returncode == 0, proc.stderr
    after = server.operations()
    assert (stats["modified"], stats["deleted"], stats["added"]) == (len(hosts) - 1, 3, 0)
    assert (after["Modify"] - before["Modify"], after["Delete"] - before["Delete"]) == (len(hosts) - 1, 3)
    assert tree(server, GLUE2) == fed(site, GLUE2) and tree(server, BASE) == grid
    assert site.publish()[1]["writes"] == 0


def test_a_refused_o_glue_parent_is_reported_first_and_its_children_are_never_sent(tmp_path):
    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    hosts = hosts_ok()
    refused_ee = f"GLUE2ResourceID={hosts[2].hostname},{SERVICE_DN}"
    with MonitoredSlapd(tmp_path / "slapd", read_only_subtree=refused_ee) as slapd:
        site = two_suffix_site(tmp_path, slapd, hosts)
        before = slapd.operations()
        proc, stats = site.publish()
        assert proc.returncode == 1
        lines = [line for line in proc.stderr.splitlines() if "refused" in line]
        assert lines[0] == f"glueinfo: {refused_ee}: add refused: insufficientAccessRights (50): no write access to entry"
        assert sorted(lines[1:]) == sorted(
            f"glueinfo: GLUE2BenchmarkID={hosts[2].hostname}:{kind},{refused_ee}: add refused: notSent (0): "
            "its parent entry was refused" for kind in ("hep-spec06", "specint2000"))
        # slapd saw one add per entry it stored plus the refused one: the children were not sent.
        assert slapd.operations()["Add"] - before["Add"] == stats["added"] + 1
        assert len(tree(slapd, GLUE2)) == 1 + 3 * len(hosts) - 3 and tree(slapd, BASE) == fed(site, BASE)


def test_progress_line_on_a_terminal_and_a_summary_otherwise(server, tmp_path):
    import pty

    site = Site(tmp_path, server, hosts_ok())
    args = [sys.executable, "-m", "glueinfo.cli", "publish", "--config", str(site.conf), "--snapshots", str(site.snapshots),
            "--ldap", server.url, "--bind-dn", server.publisher, "--password-file", str(site.password), "--no-state", "--stats"]
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=terminal, timeout=120)
        os.close(terminal)
        terminal = -1
        output = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the other side is closed and everything was read
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    assert proc.returncode == 0
    writes = json.loads(proc.stdout.decode().strip().splitlines()[-1])["writes"]
    text = output.decode()
    assert f"\rglueinfo: publish: {writes} of {writes} writes answered (100%)" in text
    # The line is blanked and the summary written over it: on the terminal the summary is what stays.
    assert text.rstrip().rsplit("\r", 1)[-1].startswith(f"glueinfo: publish: {server.url} {BASE}: {writes} added, ")
    assert text.count("\n") == 1

    proc, stats = site.publish("--no-state")  # stderr a pipe: the summary alone, after nothing else
    assert "\r" not in proc.stderr and "writes answered" not in proc.stderr
    assert proc.stderr.splitlines() == [f"glueinfo: publish: {server.url} {BASE}: 0 added, 0 modified, 0 deleted, "
                                        f"{stats['unchanged']} unchanged (0 writes, 0 not accepted) in "
                                        f"{stats['seconds']:.1f} s"]


def test_publish_keeps_both_trees_of_a_site_with_glue2(server, tmp_path):
    """A site with [site] id publishes o=grid and o=glue in one run (the o=glue subtree found from
    the tree itself), exactly what `glueinfo ldif` prints, and a second run writes nothing."""
    example = (REPO / "etc" / "examples" / "glue2-site.conf").read_text()
    site = Site(tmp_path, server, hosts_ok(), conf=example + f"\n[run]\nstate_dir = {tmp_path / 'run-state'}\n")
    env_clock = {"GLUEINFO_CLOCK": "1800000000"}
    for host in site.hosts:
        host.collected_at = 1800000000 - 30.0
    site.set_hosts(site.hosts)
    old = os.environ.get("GLUEINFO_CLOCK")
    os.environ.update(env_clock)
    try:
        proc, stats = site.publish()
        printed = parse_ldif(site.glueinfo("ldif").stdout)
        again, again_stats = site.publish()
    finally:
        if old is None:
            os.environ.pop("GLUEINFO_CLOCK")
        else:
            os.environ["GLUEINFO_CLOCK"] = old
    assert proc.returncode in (0, 1), proc.stderr  # 1 only for the example's Slurm CEs, which have no Slurm here
    glue = {normalise_dn(e.dn) for e in printed if normalise_dn(e.dn).endswith("o=glue")}
    assert glue, "the example site has a GLUE 2 tree"
    on_server = {normalise_dn(e.dn) for e in server.ldapsearch("o=glue", "(objectClass=GLUE2Entity)")}
    assert glue <= on_server
    assert stats["added"] == len(printed)
    assert again_stats["writes"] == 0 and again_stats["unchanged"] == len(printed)
