"""Reading LDIF (core.ldif.parse_ldif) as RFC 2849 writes it and as LDAP names attributes: a
static LDIF file and a pushed federation document are read by it."""

from __future__ import annotations

import base64

import pytest

from glueinfo.core.ldif import LDIFError, parse_ldif


def test_an_attribute_named_in_another_case_is_the_same_attribute():
    # RFC 4512 2.5: attribute descriptions are case-insensitive; the first spelling is kept.
    (entry,) = parse_ldif("dn: o=grid\nobjectClass: organization\nObjectclass: top\no: grid\nO: second\n")
    assert entry.attributes == {"objectClass": ["organization", "top"], "o": ["grid", "second"]}
    assert entry.get("OBJECTCLASS") == ["organization", "top"]


def test_folded_lines_base64_values_comments_and_the_version_line():
    encoded = base64.b64encode("Grüße ☃".encode()).decode()
    text = (f"version: 1\n# a comment\n#  folded comment\ndn: ou=units,o=grid\nou: un\n its\n"
            f"description:: {encoded}\n\ndn: ou=b,ou=units,o=grid\r\nou: b\r\n")
    first, second = parse_ldif(text)
    assert (first.dn, first.attributes) == ("ou=units,o=grid", {"ou": ["units"], "description": ["Grüße ☃"]})
    assert (second.dn, second.attributes) == ("ou=b,ou=units,o=grid", {"ou": ["b"]})


@pytest.mark.parametrize("text, says", [
    ("dn: o=grid\no: grid\ndn: o=glue\n", "line 3: a second 'dn:' without a blank line before it"),
    ("dn: o=grid\nchangetype: delete\n", "line 2: change records (changetype: delete) are not supported"),
    ("o: grid\n", "line 1: a record must start with 'dn:'"),
    ("dn: o=grid\no grid\n", "line 2: expected 'attribute: value'"),
])
def test_what_is_not_an_entry_is_refused_naming_its_line(text, says):
    with pytest.raises(LDIFError, match="^" + says.replace("(", r"\(").replace(")", r"\)")):
        parse_ldif(text)
