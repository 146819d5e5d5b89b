"""BDII's statistics entry (UpdateStats, /etc/bdii/BDII.schema) as the ldap output writes it after each
synchronisation: who writes it, and which figure means what (bdii-update's counting of a cycle).
tests/integration/test_minimal_site.py reads it back from slapd with ldapsearch."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from glueinfo.core.config import parse_text
from glueinfo.glue.ldapsync import PublishReport, Rejection
from glueinfo.publish.outputs.ldap import infosys_target, update_stats
from glueinfo.site.publish_settings import publish_settings

BDII_SCHEMA = Path("/etc/bdii/BDII.schema")


def settings(tmp_path, bind_dn: str, files: int = 1):
    paths = []
    for i in range(files):
        path = tmp_path / f"password{i}"
        path.write_text(f"secret{i}\n")
        paths.append(str(path))
    return publish_settings(parse_text(f"[ldap]\nurl = ldap://bdii.example.org:2170\nbind_dn = {bind_dn}\n"
                                       f"password_file = {'; '.join(paths)}\n"))


def test_written_as_the_infosys_rootdn_of_a_bdii_layout(tmp_path):
    target = infosys_target(settings(tmp_path, "o=grid; o=glue; o=infosys", files=3))
    assert (target.bind_dn, target.password, target.url) == ("o=infosys", "secret2", "ldap://bdii.example.org:2170")


def test_one_identity_writes_it_too(tmp_path):
    assert infosys_target(settings(tmp_path, "cn=manager,o=grid")).bind_dn == "cn=manager,o=grid"


def test_no_identity_for_infosys_is_said_at_debug_only(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="glueinfo.publish.outputs.ldap")
    assert infosys_target(settings(tmp_path, "o=grid; o=glue")) is None
    assert [r.levelno for r in caplog.records] == [logging.DEBUG] and "o=infosys" in caplog.records[0].getMessage()


def test_figures_count_the_synchronisation_as_bdii_update_counts_a_cycle():
    report = PublishReport(added=5, modified=3, deleted=2, unchanged=40, seconds=2.7, rejected=[
        Rejection("A", "add", 65, "objectClassViolation", ""), Rejection("B,A", "add", 0, "notSent", "its parent"),
        Rejection("C", "modify", 50, "insufficientAccessRights", ""), Rejection("D", "delete", 66, "notAllowedOnNonLeaf", "")])
    figures = update_stats(report)
    assert figures == {"TotalEntries": 48, "NewEntries": 5, "ModifiedEntries": 3, "DeletedEntries": 2,
                       "FailedAdds": 1, "FailedModifies": 1, "FailedDeletes": 1, "UpdateTime": 2, "DBUpdateTime": 2,
                       "QueryTime": 0, "ProvidersTime": 0, "PluginsTime": 0, "ReadTime": 0}


@pytest.mark.skipif(not BDII_SCHEMA.exists(), reason="/etc/bdii/BDII.schema (Debian package bdii)")
def test_every_figure_the_schema_requires_and_nothing_else():
    text = BDII_SCHEMA.read_text()
    must = re.search(r"NAME\s+'UpdateStats'.*?MUST\s*\(([^)]*)\)", text, re.S).group(1)
    required = {name.strip() for name in must.split("$")} - {"Hostname"}  # Hostname is the entry's RDN
    assert set(update_stats(PublishReport())) == required
