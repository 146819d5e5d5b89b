"""The output family (glueinfo.publish.outputs): each output fails alone and keeps its own record;
the LDAP output binds each base as the identity of its suffix, as BDII's server needs."""

from __future__ import annotations

import io

import pytest

from glueinfo.core.runstats import JobStats
from glueinfo.glue.ldap_connection import PublishError
from glueinfo.publish.outputs import OutputError, OutputResult, Publication, all_outputs, make_outputs, publish_all
from glueinfo.publish.outputs.ldap import identity_for, ldap_targets, publish_bases
from glueinfo.publish.outputs.stdout import StdoutOutput
from glueinfo.site.publish_settings import LdapBind, LdapSettings, PublishSettings, ldap_binds


class Broken:
    name = "broken"

    def publish(self, publication: Publication) -> OutputResult:
        raise OSError("disk on fire")


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.seen = 0

    def publish(self, publication: Publication) -> OutputResult:
        self.seen += 1
        return OutputResult(note="ok", written=True)


def test_an_output_that_raises_fails_alone_and_its_record_says_why():
    clock = iter(float(t) for t in range(100, 200))
    records: dict[str, JobStats] = {}
    good = Counting()
    results = publish_all([Broken(), good], Publication(None), records, clock=lambda: next(clock))
    assert good.seen == 1 and results["counting"].error is None
    assert results["broken"].error == "OSError: disk on fire"
    assert records["broken"].failures == 1 and records["broken"].last_error == "OSError: disk on fire"
    assert records["broken"].last_success_at is None
    assert records["counting"].failures == 0 and records["counting"].last_success_at is not None
    publish_all([Broken(), good], Publication(None), records, clock=lambda: next(clock))
    assert records["broken"].runs == 2 and records["broken"].failures == 2 and good.seen == 2


def test_the_builtin_outputs_register_their_names_and_an_unknown_one_is_one_line():
    names = [plugin.name for plugin in all_outputs()]
    assert names[:4] == ["stdout", "file", "ldap", "amqp"]
    with pytest.raises(OutputError, match=r"^unknown output 'nosuch' \(known: amqp, file, htcondor-ce, ldap, stdout\)$"):
        make_outputs(["nosuch"], None, all_outputs())  # type: ignore[arg-type]


def test_stdout_refuses_a_document_it_does_not_know():
    with pytest.raises(ValueError, match="no document 'pdf'"):
        StdoutOutput("pdf", io.BytesIO())


BDII = (LdapBind("o=grid", "/etc/bdii/grid"), LdapBind("o=glue", "/etc/bdii/glue"), LdapBind("o=infosys", "/etc/bdii/infosys"))


@pytest.mark.parametrize("base, dn", [
    ("mds-vo-name=resource,o=grid", "o=grid"),
    ("Mds-Vo-Name=Resource,O=Grid", "o=grid"),
    ("GLUE2GroupID=resource,o=glue", "o=glue"),
    ("o=glue", "o=glue"),
    ("GLUE2DomainID=EXAMPLE,o=glue", "o=glue"),
])
def test_each_base_is_written_as_the_dn_of_its_suffix(base, dn):
    assert identity_for(base, BDII).dn == dn


def test_a_managers_dn_below_the_suffix_still_writes_that_suffix():
    binds = (LdapBind("cn=manager,o=grid"), LdapBind("cn=admin,o=glue"))
    assert identity_for("mds-vo-name=resource,o=grid", binds).dn == "cn=manager,o=grid"
    assert identity_for("GLUE2GroupID=resource,o=glue", binds).dn == "cn=admin,o=glue"


def test_one_bind_dn_writes_every_base_and_a_base_no_dn_holds_is_refused():
    assert identity_for("GLUE2GroupID=resource,o=glue", (LdapBind("o=grid"),)).dn == "o=grid"
    with pytest.raises(PublishError, match="no \\[ldap\\] bind_dn for the base o=other"):
        identity_for("o=other", BDII)


def test_bind_dns_and_password_files_pair_up_one_for_all_or_one_each():
    assert ldap_binds("o=grid; o=glue", "/p") == (LdapBind("o=grid", "/p"), LdapBind("o=glue", "/p"))
    assert ldap_binds("o=grid;o=glue", "/a; /b") == (LdapBind("o=grid", "/a"), LdapBind("o=glue", "/b"))
    assert ldap_binds("", "") == (LdapBind("", ""),)
    with pytest.raises(ValueError, match="2 bind DN\\(s\\) but 3 password files"):
        ldap_binds("o=grid; o=glue", "/a; /b; /c")


def test_targets_group_the_bases_by_identity_and_read_each_password(tmp_path):
    (tmp_path / "grid").write_text("g-secret\n")
    (tmp_path / "glue").write_text("l-secret\n")
    ldap = LdapSettings(url="ldap://x", binds=(LdapBind("o=grid", str(tmp_path / "grid")),
                                               LdapBind("o=glue", str(tmp_path / "glue"))))
    settings = PublishSettings(site_id="SITE", ldap=ldap)
    bases = publish_bases(settings)
    assert bases == ("mds-vo-name=resource,o=grid", "GLUE2GroupID=resource,o=glue")
    targets = ldap_targets(settings, bases, state_file=str(tmp_path / "state"))
    assert [(t.bind_dn, t.password, t.bases) for t in targets] == [
        ("o=grid", "g-secret", ("mds-vo-name=resource,o=grid",)),
        ("o=glue", "l-secret", ("GLUE2GroupID=resource,o=glue",))]
    assert {t.state_file for t in targets} == {str(tmp_path / "state.0"), str(tmp_path / "state.1")}


def test_a_version_left_out_leaves_its_tree_untouched():
    only2 = PublishSettings(versions=("2.0",), site_id="SITE")
    assert publish_bases(only2) == ("GLUE2GroupID=resource,o=glue",)
    only13 = PublishSettings(versions=("1.3",), site_id="SITE")
    assert publish_bases(only13) == ("mds-vo-name=resource,o=grid",)
    no_id = PublishSettings(site_id="")
    assert publish_bases(no_id) == ("mds-vo-name=resource,o=grid",)


def test_an_unreadable_password_file_is_one_line(tmp_path):
    ldap = LdapSettings(url="ldap://x", binds=(LdapBind("o=grid", str(tmp_path / "missing")),))
    with pytest.raises(PublishError, match=r"^\[ldap\] password_file .*missing: cannot be read: No such file or directory$"):
        ldap_targets(PublishSettings(ldap=ldap), ("o=grid",))
