"""One publish layer (issue 24), from outside: every command and every output of the daemon
publish the same DNs and the same bytes, for [glue] versions 1.3, 2.0 and both, into a slapd
laid out as BDII lays it out (o=grid, o=glue and o=infosys, each database with its own rootdn).

A five-host site (this host a recorded tree, four workers in a spool; test_one_site's), with a
[site] id so that the GLUE 2 tree exists.  The LDIF of `glueinfo ldif` is the reference; the
same bytes must come from `gather --format ldif`, `serve`'s /ldif, and the daemon's file and
HTTP outputs; the daemon's LDAP output and `glueinfo publish` (bound as `o=grid; o=glue`) must
leave the server holding exactly those DNs, read back with the real ldapsearch, and nothing in
a tree the versions leave out.  The Node XML of `node-xml --site` must come alike from `gather
--format node-xml`, `serve`, the daemon's file and HTTP; the GLUE 2 JSON of `glue2-json` from
the daemon's /glue2.json, holding every o=glue entry's ID (none without version 2.0).
A write the server refuses makes `publish` exit 1, naming the
DN and the reason.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from glueinfo_processes import start_glueinfo, stop_glueinfo
from servers import Slapd
from test_one_site import glueinfo, make_site, served
from waiting import wait_until

from glueinfo.core.ldif import normalise_dn, parse_ldif

GLUE13_BASE = "mds-vo-name=resource,o=grid"
GLUE2_BASE = "GLUE2GroupID=resource,o=glue"
VERSIONS = {"1.3": "1.3", "2.0": "2.0", "both": "1.3, 2.0"}


def fetch(url: str) -> bytes | None:
    """The body of a GET, None for a 503 (nothing of that kind is published)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.read()
    except urllib.error.HTTPError as exc:
        assert exc.code == 503, f"{url}: {exc.code}"
        return None


def dns_below(entries, base: str) -> set[str]:
    key = normalise_dn(base)
    return {normalise_dn(e.dn) for e in entries if normalise_dn(e.dn).endswith("," + key)}


def server_dns(server: Slapd, base: str) -> set[str]:
    return dns_below(server.ldapsearch(base, "(objectClass=*)", ["1.1"]), base)


@pytest.fixture
def bdii_slapd(tmp_path):
    with Slapd(tmp_path / "slapd", layout="bdii") as server:
        yield server


def site_with(tmp_path: Path, versions: str, server: Slapd, **run: str) -> Path:
    password = tmp_path / "password"
    password.write_text(server.password + "\n")
    extra = "\n".join(f"{key} = {value}" for key, value in run.items())
    config = make_site(tmp_path, extra_run=extra)
    config.write_text(config.read_text() + f"""
[site]
id = EXAMPLE-SITE
name = Example site
[glue]
versions = {versions}
[ldap]
url = {server.url}
bind_dn = o=grid; o=glue
password_file = {password}
""")
    return config


@pytest.mark.integration
@pytest.mark.parametrize("versions", sorted(VERSIONS))
def test_every_command_and_output_publishes_the_same_dns_and_bytes(tmp_path, bdii_slapd, versions):
    config = site_with(tmp_path, VERSIONS[versions], bdii_slapd, ldap_sync="yes", serve="yes", lrms_interval="1")

    # The daemon first: its file, HTTP and LDAP outputs from one publish of the whole site (its
    # state directory then holds the SubCluster ids every command after it keeps).
    daemon = start_glueinfo(config, tmp_path / "run.log", command=("run",), env={"GLUEINFO_CLOCK": "1790000000"})
    try:
        # An LRMS refresh after the gather: the CE figures count the five hosts, as a command's do.
        whole_site = r"cycle gather: 5 hosts .*\n(.*\n)*.*cycle lrms: 5 hosts .*LDAP \+\d+"
        wait_until(lambda: re.search(whole_site, daemon.log_text()),
                   "the daemon gathered the five hosts and refreshed the LRMS into LDAP", 90, step=0.1,
                   detail=daemon.log_text, still_running=lambda: daemon.process.poll() is None)
        assert re.search(whole_site, daemon.log_text()), daemon.log_text()
        http = {path: fetch(f"http://{daemon.host}:{daemon.port}{path}") for path in ("/ldif", "/nodes.xml", "/glue2.json")}
    finally:
        assert stop_glueinfo(daemon) == 0, daemon.log_text()
    assert "refused" not in daemon.log_text(), daemon.log_text()

    ldif = glueinfo("ldif", config=config).stdout
    entries = parse_ldif(ldif.decode())
    glue13, glue2 = dns_below(entries, GLUE13_BASE), dns_below(entries, GLUE2_BASE)
    # The versions decide the trees, and nothing else does.
    assert bool(glue13) == (versions != "2.0")
    assert bool(glue2) == (versions != "1.3")
    assert len(entries) == len(glue13) + len(glue2)

    assert (tmp_path / "out" / "glue.ldif").read_bytes() == ldif
    assert http["/ldif"] == ldif
    assert glueinfo("gather", "--format", "ldif", config=config).stdout == ldif
    answers = served(config, tmp_path, ("/ldif", "/nodes.xml"))
    assert answers["/ldif"] == ldif

    # The Node XML: the same document from every command and output.
    nodes = glueinfo("node-xml", "--site", config=config).stdout
    assert nodes.count(b"<Node>") == 5
    assert glueinfo("gather", "--format", "node-xml", "--pretty", config=config).stdout == nodes
    assert (tmp_path / "out" / "nodes.xml").read_bytes() == nodes
    assert http["/nodes.xml"] == nodes and answers["/nodes.xml"] == nodes

    # The GLUE 2 JSON: the o=glue tree's objects, the same from the command and the daemon, none without 2.0.
    as_json = glueinfo("glue2-json", config=config, check=False)
    if glue2:
        assert as_json.returncode == 0, as_json.stderr.decode()
        assert http["/glue2.json"] == as_json.stdout
        ids = set(re.findall(rb'"ID": "([^"]+)"', as_json.stdout))
        assert {dn.split(",")[0].split("=", 1)[1].encode() for dn in glue2 if not dn.startswith("glue2groupid=")} <= {
            i.lower() for i in ids}
    else:
        assert as_json.returncode == 1 and b"leaves GLUE 2 out" in as_json.stderr
        assert http["/glue2.json"] is None
    assert server_dns(bdii_slapd, GLUE13_BASE) == glue13
    assert server_dns(bdii_slapd, GLUE2_BASE) == glue2

    # publish after the daemon: the same trees, so nothing to write, and exit 0.
    published = glueinfo("publish", "--no-state", "--stats", config=config)
    stats = published.stdout.decode().strip().splitlines()[-1]
    assert '"added": 0' in stats and '"deleted": 0' in stats and '"rejected": 0' in stats, published.stderr.decode()
    assert server_dns(bdii_slapd, GLUE13_BASE) == glue13
    assert server_dns(bdii_slapd, GLUE2_BASE) == glue2


@pytest.mark.integration
def test_publish_into_an_empty_bdii_layout_server_writes_each_tree_as_its_suffix(tmp_path, bdii_slapd):
    config = site_with(tmp_path, "1.3, 2.0", bdii_slapd)
    entries = parse_ldif(glueinfo("ldif", config=config).stdout.decode())
    glueinfo("publish", "--no-state", config=config)
    assert server_dns(bdii_slapd, GLUE13_BASE) == dns_below(entries, GLUE13_BASE)
    assert server_dns(bdii_slapd, GLUE2_BASE) == dns_below(entries, GLUE2_BASE) != set()


@pytest.mark.integration
def test_a_write_the_server_refuses_makes_publish_exit_1_naming_the_dn_and_reason(tmp_path, bdii_slapd):
    # Bound as o=grid alone, as a site that copied one bind DN would: o=glue's database refuses every add.
    config = site_with(tmp_path, "1.3, 2.0", bdii_slapd)
    config.write_text(config.read_text().replace("bind_dn = o=grid; o=glue", "bind_dn = o=grid"))
    proc = glueinfo("publish", "--no-state", config=config, check=False)
    stderr = proc.stderr.decode()
    assert proc.returncode == 1, stderr
    refusals = [line for line in stderr.splitlines() if "refused" in line and "GLUE2" in line]
    assert any("insufficientAccessRights (50)" in line for line in refusals), stderr
    assert all("insufficientAccessRights (50)" in line or "its parent entry was refused" in line for line in refusals), stderr
    # o=grid, which this identity may write, was written all the same.
    assert server_dns(bdii_slapd, GLUE13_BASE)
