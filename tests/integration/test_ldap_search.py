"""How `glueinfo publish` reads a subtree (glueinfo.glue.ldap_wire.search_subtree: BER on the
connection's socket, page by page), checked against what the real ldapsearch reads from the same
real slapd."""

from __future__ import annotations

import subprocess
import sys

import pytest
from paths import REPO
from servers import Slapd, missing_slapd_tools

from glueinfo.core.ldif import normalise_dn, value_text
from glueinfo.glue.ldap_connection import LdapTarget, PublishError, connect
from glueinfo.glue.ldap_wire import ANY_ENTRY, greater_or_equal, search_subtree

pytestmark = pytest.mark.integration

BASE = "mds-vo-name=resource,o=grid"
READER = "cn=reader,o=grid"  # held to a size limit (LimitedSlapd)
LONG = "x" * 70_000  # a value whose BER length takes three bytes
CONF = """
[cluster:main]
unique_id = main.example.org
[ce:default]
cluster = main
host = ce01.example.org
access = VO:atlas
"""


class LimitedSlapd(Slapd):
    """The harness's slapd with a reader account held to slapd's default size limit (500
    entries a search, paged or not) in o=grid."""

    def _config(self) -> str:
        text = super()._config()
        assert 'suffix "o=grid"\n' in text
        return text.replace('suffix "o=grid"\n', f'suffix "o=grid"\nlimits dn.exact="{READER}" size=500\n', 1)

    def start(self, timeout: float = 20.0) -> LimitedSlapd:
        super().start(timeout)
        result = self.ldapadd(f"dn: {READER}\nobjectClass: person\ncn: reader\nsn: reader\nuserPassword: {self.password}\n")
        assert result.ok, str(result)
        return self


@pytest.fixture
def server(tmp_path):
    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    with LimitedSlapd(tmp_path / "slapd") as slapd:
        yield slapd


def units(count: int) -> str:
    """organizationalUnits below BASE: UTF-8 in the DN and in the values, several descriptions
    each, one of them 70,000 characters long."""
    return "".join(f"dn: ou=Grüße {index} ☃,{BASE}\nobjectClass: organizationalUnit\nou: Grüße {index} ☃\n"
                   f"description: Ünit {index}\ndescription: second\n"
                   + (f"description: {LONG}\n" if index == 3 else "") + "\n" for index in range(count))


def listed(slapd: Slapd, who: str, base: str, attributes: list[str], filter: bytes = ANY_ENTRY,
           page_size: int = 1000) -> dict[str, dict[str, list[str]]]:
    conn = connect(LdapTarget(url=slapd.url, bind_dn=who, password=slapd.password, base_dn=base))
    try:
        return {normalise_dn(dn): {name.lower(): sorted(v.decode() for v in values) for name, values in found.items()}
                for dn, found in search_subtree(conn.socket, base, attributes, filter, 10, page_size=page_size)}
    finally:
        conn.unbind()


def by_ldapsearch(slapd: Slapd, base: str, filter: str, attributes: list[str]) -> dict[str, dict[str, list[str]]]:
    return {normalise_dn(entry.dn): {name.lower(): sorted(value_text(v) for v in values)
                                     for name, values in entry.attributes.items()}
            for entry in slapd.ldapsearch(base, filter, attributes)}


def test_a_subtree_read_page_by_page_is_what_ldapsearch_reads(server):
    assert server.ldapadd(units(23)).ok
    # 24 entries (the base too) in pages of 5: the paging cookie is followed to the last page.
    mine = listed(server, server.bind_dn, BASE, ["entryCSN", "ou", "description"], page_size=5)
    theirs = by_ldapsearch(server, BASE, "(objectClass=*)", ["entryCSN", "ou", "description"])
    assert len(mine) == 24
    assert mine == theirs
    assert mine[normalise_dn(f"ou=Grüße 3 ☃,{BASE}")]["description"] == sorted(["Ünit 3", "second", LONG])


def test_the_entries_written_since_an_entrycsn_are_those_ldapsearch_finds(server):
    assert server.ldapadd(units(6)).ok
    csns = sorted(entry.first("entryCSN") for entry in server.ldapsearch(BASE, "(objectClass=*)", ["entryCSN"]))
    since = csns[4]
    mine = listed(server, server.bind_dn, BASE, ["entryCSN"], filter=greater_or_equal("entryCSN", since))
    assert mine == by_ldapsearch(server, BASE, f"(entryCSN>={since})", ["entryCSN"])
    assert len(mine) == len(csns) - 4


def test_a_search_the_server_refuses_is_a_one_line_error_not_a_short_list(server):
    assert server.ldapadd(units(600)).ok
    with pytest.raises(PublishError, match=r"^cannot read mds-vo-name=resource,o=grid: sizeLimitExceeded \(4\)$"):
        listed(server, READER, BASE, ["entryCSN"])
    with pytest.raises(PublishError, match=r"noSuchObject \(32\)"):
        listed(server, server.bind_dn, f"ou=nowhere,{BASE}", ["entryCSN"])


def test_publish_bound_as_an_identity_the_size_limit_stops_says_so_and_writes_nothing(server, tmp_path):
    assert server.ldapadd(units(600)).ok
    before = by_ldapsearch(server, BASE, "(objectClass=*)", ["entryCSN"])
    (tmp_path / "glueinfo.conf").write_text(CONF)
    (tmp_path / "password").write_text(server.password + "\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "publish", "--config", str(tmp_path / "glueinfo.conf"),
                           "--ldap", server.url, "--bind-dn", READER, "--password-file", str(tmp_path / "password"),
                           "--state-file", str(tmp_path / "state.json")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (f"glueinfo: publish: cannot read {BASE}: sizeLimitExceeded (4)")
    assert by_ldapsearch(server, BASE, "(objectClass=*)", ["entryCSN"]) == before  # no entry added, changed or deleted
