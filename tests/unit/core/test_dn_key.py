"""core.ldif.dn_key: the one comparison key of a DN (what decides that two entries are the same
entry for glue.build and for slapd/BDII).  Expected keys are written by hand."""

from __future__ import annotations

import pytest

from glueinfo.core import ldif
from glueinfo.core.ldif import dn_key, normalise_dn
from glueinfo.glue import build


@pytest.mark.parametrize(("dn", "key"), [
    ("GlueCEUniqueID=ce01.example.org:8443/cream-pbs-atlas,Mds-Vo-name=resource,o=grid",
     "glueceuniqueid=ce01.example.org:8443/cream-pbs-atlas,mds-vo-name=resource,o=grid"),
    ("GlueClusterUniqueID=CE01 , Mds-Vo-name=resource,O=Grid", "glueclusteruniqueid=ce01,mds-vo-name=resource,o=grid"),
    ("cn=Straße,o=grid", "cn=strasse,o=grid"),
    ("ou=Sales+cn=J,o=x", "cn=j+ou=sales,o=x"),
    ("cn=a\\2cb,o=x", "cn=a\\,b,o=x"),
])
def test_the_key_of_a_dn(dn, key):
    assert dn_key(dn) == key == normalise_dn(dn)


@pytest.mark.parametrize(("dn", "key"), [
    # a value holding '=', '<', '>' or a leading '#': the same entry as the escaped form, as slapd sees it
    ("cn=a=b,o=x", "cn=a\\=b,o=x"),
    ("cn=a<b>,o=x", "cn=a\\<b\\>,o=x"),
    ("cn=#x,o=x", "cn=\\23x,o=x"),
    # a raw control character is the entry its hex escape names
    ("cn=a\nb,o=x", "cn=a\\0Ab,o=x"),
])
def test_plain_looking_dns_whose_values_need_escaping_get_the_escaped_key(dn, key):
    """glue.build's own key once case-folded these as written, so ``cn=a=b`` and ``cn=a\\=b``
    were two entries there and one entry to slapd."""
    assert dn_key(dn) == key == normalise_dn(dn)
    assert dn_key(dn) == dn_key(key)


def test_a_dn_that_does_not_parse_is_keyed_by_its_case_folded_text():
    assert dn_key("CN=a,,o=X") == "cn=a,,o=x"
    assert dn_key("cn=a\\") == "cn=a\\"  # a lone backslash: normalise_dn raises; the key does not


def test_glue_build_uses_the_one_key():
    assert build.dn_key is ldif.dn_key
