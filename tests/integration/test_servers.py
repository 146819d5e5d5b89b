"""The real-server harness itself: slapd and Debian's BDII on loopback.

What a user would check: the servers answer ldapsearch on their port, data
given to them (ldapadd, BDII's static LDIF directory, a BDII provider) comes
back, rejections are reported with the DN, and the processes are gone after
stop.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from servers import Slapd, missing_slapd_tools, parse_ldapadd_output

from glueinfo.core.ldif import Entry, format_ldif, make_dn

BASE = "mds-vo-name=resource,o=grid"

CLUSTER = """dn: GlueClusterUniqueID={name},mds-vo-name=resource,o=grid
objectClass: GlueClusterTop
objectClass: GlueCluster
GlueClusterUniqueID: {name}
GlueClusterName: {title}
"""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ---------------------------------------------------------------- slapd


@pytest.mark.integration
def test_slapd_serves_the_base_entries(slapd):
    dns = {e.dn.lower() for e in slapd.ldapsearch("o=grid")} | {e.dn.lower() for e in slapd.ldapsearch("o=glue")}
    assert {"o=grid", "mds-vo-name=resource,o=grid", "o=glue", "glue2groupid=resource,o=glue"} <= dns
    assert slapd.url.startswith("ldap://127.0.0.1:")
    # Anyone may read, as brokers do; a plain ldapsearch on the port answers.
    out = subprocess.run(["ldapsearch", "-x", "-LLL", "-H", slapd.url, "-b", BASE, "-s", "base", "objectClass"],
                         capture_output=True, text=True, check=True).stdout
    assert "objectClass: Mds" in out


@pytest.mark.integration
def test_ldapadd_reports_each_rejected_dn_with_the_servers_reason(slapd):
    text = "\n".join([
        CLUSTER.format(name="good", title="fine"),
        CLUSTER.format(name="bad-value", title="caf\u00e9 \u2122"),
        CLUSTER.format(name="bad-attr", title="x") + "GlueClusterColour: blue\n",
        CLUSTER.format(name="good2", title="fine too"),
        CLUSTER.format(name="orphan", title="x").replace(BASE, "GlueClusterUniqueID=nowhere," + BASE),
    ])
    result = slapd.ldapadd(text)
    assert result.added == [f"GlueClusterUniqueID=good,{BASE}", f"GlueClusterUniqueID=good2,{BASE}"]
    assert result.rejected[f"GlueClusterUniqueID=bad-value,{BASE}"].startswith("Invalid syntax (21)")
    assert "GlueClusterName" in result.rejected[f"GlueClusterUniqueID=bad-value,{BASE}"]
    assert result.rejected[f"GlueClusterUniqueID=bad-attr,{BASE}"].startswith("Undefined attribute type (17)")
    assert result.rejected[f"GlueClusterUniqueID=orphan,GlueClusterUniqueID=nowhere,{BASE}"].startswith("No such object (32)")
    assert not result.ok and result.returncode != 0
    # -c: the good entries were stored despite the bad ones.
    names = sorted(e.first("GlueClusterUniqueID") for e in slapd.ldapsearch(BASE, "(objectClass=GlueCluster)"))
    assert names == ["good", "good2"]


def test_parse_ldapadd_output_without_errors():
    added, rejected = parse_ldapadd_output('adding new entry "o=grid"\n\nadding new entry "cn=a,o=grid"\n\n')
    assert added == ["o=grid", "cn=a,o=grid"] and rejected == {}


@pytest.mark.integration
def test_one_bind_dn_writes_glue1_and_glue2_trees(slapd):
    glue2 = """dn: GLUE2LocationID=loc1,GLUE2GroupID=resource,o=glue
objectClass: GLUE2Location
GLUE2LocationID: loc1
GLUE2EntityName: Z\u00fcrich
"""
    result = slapd.ldapadd(glue2 + "\n" + CLUSTER.format(name="c", title="c"))
    assert result.ok, str(result)
    [location] = slapd.ldapsearch("o=glue", "(objectClass=GLUE2Location)")
    assert location.get("GLUE2EntityName") == ["Z\u00fcrich"]


@pytest.mark.integration
def test_reset_leaves_only_the_base_entries(slapd):
    assert slapd.ldapadd(CLUSTER.format(name="c", title="c")).ok
    assert slapd.ldapadd(CLUSTER.format(name="s", title="s").replace(
        "GlueClusterUniqueID=s,", "GlueClusterUniqueID=s,GlueClusterUniqueID=c,")).ok
    slapd.reset()
    assert [e.dn for e in slapd.ldapsearch(BASE, "(objectClass=GlueCluster)")] == []
    assert len(slapd.ldapsearch(BASE, scope="base")) == 1


@pytest.mark.integration
def test_slapd_stop_ends_the_process(tmp_path):
    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    server = Slapd(tmp_path / "s").start()
    pid = server.pid
    assert pid_alive(pid)
    server.stop()
    assert not pid_alive(pid)


# ---------------------------------------------------------------- BDII
# One BDII serves the whole module (fixture in conftest.py); each test starts
# from the package's default tree.


@pytest.fixture
def bdii(bdii):
    bdii.clear()
    return bdii


@pytest.mark.integration
def test_bdii_serves_static_ldif_and_provider_output(bdii):
    bdii.add_static_ldif("site-static", CLUSTER.format(name="static-cluster", title="from gip/ldif"))
    provider_ldif = CLUSTER.format(name="provided-cluster", title="from a provider")
    bdii.add_provider("glue-provider", f"#!/bin/sh\ncat <<'EOF'\n{provider_ldif}\nEOF\n")
    bdii.wait_for_update()

    # What a broker does: an anonymous ldapsearch on BDII's port.
    out = subprocess.run(["ldapsearch", "-x", "-LLL", "-H", bdii.url, "-b", BASE, "(objectClass=GlueCluster)",
                          "GlueClusterName"], capture_output=True, text=True, check=True).stdout
    assert "GlueClusterName: from gip/ldif" in out
    assert "GlueClusterName: from a provider" in out
    # The base entries come from the package's own default.ldif.
    assert [e.dn.lower() for e in bdii.ldapsearch(BASE, scope="base")] == [BASE]


@pytest.mark.integration
def test_bdii_drops_what_slapd_rejects_and_counts_it(bdii):
    good = CLUSTER.format(name="kept", title="ok")
    bad = CLUSTER.format(name="rejected", title="caf\u00e9")  # non-ASCII in an IA5 attribute
    bdii.add_provider("mixed-provider", f"#!/bin/sh\ncat <<'EOF'\n{good}\n{bad}\nEOF\n")
    bdii.wait_for_update()
    names = {e.first("GlueClusterUniqueID") for e in bdii.ldapsearch(BASE, "(objectClass=GlueCluster)")}
    assert "kept" in names and "rejected" not in names
    assert "ldap_add: Invalid syntax (21)" in bdii.log_text(), bdii.log_text()[-3000:]


@pytest.mark.integration
def test_bdii_removes_entries_of_a_provider_that_is_gone(bdii):
    path = bdii.add_provider("short-lived", "#!/bin/sh\ncat <<'EOF'\n" + CLUSTER.format(name="ephemeral", title="x") + "\nEOF\n")
    bdii.wait_for_update()
    assert bdii.ldapsearch(BASE, "(GlueClusterUniqueID=ephemeral)")
    bdii.remove(path)
    bdii.wait_for_update()
    assert bdii.ldapsearch(BASE, "(GlueClusterUniqueID=ephemeral)") == []


@pytest.mark.integration
def test_writer_dns_are_stable_in_bdii(bdii):
    """BDII 6.0.0 diffs DNs as strings against what slapd hands back; DNs the
    writer escaped must not look new (delete + re-add) on every cycle."""
    bdii.wait_for_update()
    # default.ldif's o=shadow has no database here: BDII "adds" it every cycle.
    baseline = bdii.stats()["NewEntries"]
    entries = []
    for host in ["#hash-first", "trailing ", " leading", "a,b=c+d;e", 'q"uote\\back<lt>gt']:
        dn = make_dn("GlueHostUniqueID", host, BASE)
        entries.append(Entry(dn, {"objectClass": ["GlueClusterTop", "GlueHost"], "GlueHostUniqueID": host}))
        entries.append(Entry(make_dn("GlueHostLocalFileSystemName", "/x " + host, dn),
                             {"objectClass": ["GlueHostLocalFileSystem"], "GlueHostLocalFileSystemName": "/x " + host}))
    (bdii.workdir / "escaped.ldif").write_text(format_ldif(entries))
    bdii.add_provider("escaped-dns", f"#!/bin/sh\ncat {bdii.workdir}/escaped.ldif\n")
    bdii.wait_for_update()
    served = bdii.ldapsearch(BASE, "(|(objectClass=GlueHost)(objectClass=GlueHostLocalFileSystem))", ["1.1"])
    assert len([e for e in served if "GlueHostUniqueID=" in e.dn]) >= len(entries)
    bdii.wait_for_update()  # a cycle that sees its own previous result ...
    bdii.wait_for_update()  # ... and one more: nothing new, nothing deleted
    stats = bdii.stats()
    assert (stats["NewEntries"], stats["DeletedEntries"]) == (baseline, "0"), bdii.log_text()[-3000:]


@pytest.mark.integration
def test_bdii_needs_the_shim_only_because_of_openldap_2_5(bdii):
    # The packaged tools refuse -h/-p ...
    plain = subprocess.run(["ldapsearch", "-x", "-h", "127.0.0.1", "-p", str(bdii.port), "-b", "o=grid", "-s", "base"],
                           capture_output=True, text=True)
    assert plain.returncode != 0
    # ... the harness's shim (first in bdii-update's PATH only) turns them into -H.
    shimmed = subprocess.run([str(bdii.bin_dir / "ldapsearch"), "-x", "-LLL", "-h", "127.0.0.1", "-p", str(bdii.port),
                              "-b", "o=grid", "-s", "base", "o"], capture_output=True, text=True)
    assert shimmed.returncode == 0 and "o: grid" in shimmed.stdout
