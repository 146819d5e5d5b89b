"""The LDIF writer and reader, and the DN helpers.

The independent judge is the real slapd: what the writer produces is loaded
with ``ldapadd -c`` and read back with ``ldapsearch``, and must come back
value for value.  The unit tests check the RFC 2849 / RFC 4514 rules with
expected text written out by hand.
"""

from __future__ import annotations

import base64
import io
import random

import pytest

from glueinfo.core.ldif import (
    DNError,
    Entry,
    LDIFError,
    dn_escape,
    format_ldif,
    make_dn,
    normalise_dn,
    parent_dn,
    parse_dn,
    parse_ldif,
    same_dn,
    write_ldif,
)

BASE = "mds-vo-name=resource,o=grid"

# ---------------------------------------------------------------- DNs


@pytest.mark.parametrize("value,escaped", [
    ("plain", "plain"),
    ("a,b", "a\\,b"),
    ("a=b+c", "a\\=b\\+c"),
    ('say "hi"; <x>', 'say \\"hi\\"\\; \\<x\\>'),
    ("back\\slash", "back\\\\slash"),
    ("#hash", "\\23hash"),
    ("mid#hash", "mid#hash"),
    (" lead", "\\20lead"),
    ("trail ", "trail\\20"),
    (" ", "\\20"),
    ("line\nbreak", "line\\0Abreak"),
    ("nul\x00", "nul\\00"),
    ("Zürich™", "Zürich™"),
    (42, "42"),
])
def test_dn_escape(value, escaped):
    assert dn_escape(value) == escaped


def test_make_dn_and_parent():
    dn = make_dn("GlueHostLocalFileSystemName", "/data, the big one", make_dn("GlueHostUniqueID", "wn01", BASE))
    assert dn == "GlueHostLocalFileSystemName=/data\\, the big one,GlueHostUniqueID=wn01,mds-vo-name=resource,o=grid"
    assert parent_dn(dn) == f"GlueHostUniqueID=wn01,{BASE}"
    assert make_dn("o", "grid") == "o=grid"


def test_parse_dn_rfc4514_examples():
    # The examples of RFC 4514 section 4.
    assert parse_dn('CN=James \\"Jim\\" Smith\\, III,DC=example,DC=net') == [
        [("CN", 'James "Jim" Smith, III')], [("DC", "example")], [("DC", "net")]]
    assert parse_dn("CN=Before\\0dAfter,DC=example,DC=net")[0] == [("CN", "Before\rAfter")]
    assert parse_dn("CN=Lu\\C4\\8Di\\C4\\87")[0] == [("CN", "Lučić")]
    assert parse_dn("OU=Sales+CN=J.  Smith,DC=example,DC=net")[0] == [("OU", "Sales"), ("CN", "J.  Smith")]
    # Spaces after separators (BDII's own default.ldif writes them) and escaped trailing spaces.
    assert parse_dn("GLUE2GroupID=resource, o=glue") == [[("GLUE2GroupID", "resource")], [("o", "glue")]]
    assert parse_dn("cn=a\\ ,o=x") == [[("cn", "a ")], [("o", "x")]]
    assert parse_dn("") == []


@pytest.mark.parametrize("bad", ["noequals", "cn=a,", "=value", "cn=a\\", "cn=\\ff\\fe"])
def test_parse_dn_rejects_malformed(bad):
    with pytest.raises(DNError):
        parse_dn(bad)


def test_normalise_dn_compares_like_slapd():
    assert same_dn("GlueClusterUniqueID=CE01,Mds-Vo-name=resource,o=grid", "glueclusteruniqueid=ce01, mds-vo-name=resource,O=Grid")
    assert same_dn("cn=a\\2cb,o=x", "cn=a\\,b,o=x")
    assert same_dn("ou=Sales+cn=J,o=x", "cn=J+ou=Sales,o=x")
    assert not same_dn("cn=a\\ ,o=x", "cn=a,o=x")  # an escaped trailing space is part of the value
    assert normalise_dn("cn=A,o=X") == "cn=a,o=x"


# ---------------------------------------------------------------- writing


def test_entry_drops_none_and_formats_ints_and_bools():
    entry = Entry(f"GlueHostUniqueID=wn01,{BASE}", {
        "GlueHostUniqueID": "wn01",
        "GlueHostMainMemoryRAMSize": 2048,
        "GlueHostNetworkAdapterInboundIP": False,
        "GlueHostNetworkAdapterOutboundIP": True,
        "GlueHostProcessorClockSpeed": None,
        "GlueHostApplicationSoftwareRunTimeEnvironment": ["A", None, "B"],
        "objectClass": ["GlueHost", "GlueTop"],
    })
    assert format_ldif([entry]) == (
        f"dn: GlueHostUniqueID=wn01,{BASE}\n"
        "objectClass: GlueHost\n"
        "objectClass: GlueTop\n"
        "GlueHostUniqueID: wn01\n"
        "GlueHostMainMemoryRAMSize: 2048\n"
        "GlueHostNetworkAdapterInboundIP: FALSE\n"
        "GlueHostNetworkAdapterOutboundIP: TRUE\n"
        "GlueHostApplicationSoftwareRunTimeEnvironment: A\n"
        "GlueHostApplicationSoftwareRunTimeEnvironment: B\n"
        "\n"
    )


def test_entry_refuses_floats():
    with pytest.raises(TypeError, match="float"):
        Entry("o=grid", {"GlueHostMainMemoryRAMSize": 12.5})


def test_entry_attribute_names_are_case_insensitive():
    entry = Entry("o=grid", {"objectClass": "organization"})
    entry.add("objectclass", "top")
    entry.add("O", "grid")
    assert entry.attributes == {"objectClass": ["organization", "top"], "O": ["grid"]}
    assert entry.get("OBJECTCLASS") == ["organization", "top"] and "o" in entry
    entry.set("o", "glue")
    assert entry.first("o") == "glue"


@pytest.mark.parametrize("value,base64_expected", [
    ("plain value", False),
    ("", False),
    (" leading space", True),
    (":leading colon", True),
    ("<leading less-than", True),
    ("trailing space ", True),
    ("new\nline", True),
    ("carriage\rreturn", True),
    ("nul\x00", True),
    ("Xeon™", True),
    ("Процессор", True),
    ("mid: colon < and space", False),
    ("#leading hash", False),
])
def test_unsafe_values_are_base64(value, base64_expected):
    text = format_ldif([Entry("o=grid", {"description": value})])
    line = text.splitlines()[1]
    if base64_expected:
        assert line == "description:: " + base64.b64encode(value.encode()).decode()
    else:
        assert line == (f"description: {value}" if value else "description:")


def test_unsafe_dn_is_base64():
    dn = "ou=Zürich,o=grid"
    assert format_ldif([Entry(dn)]).splitlines()[0] == "dn:: " + base64.b64encode(dn.encode()).decode()


def test_long_lines_fold_at_76_columns():
    value = "".join(chr(ord("a") + i % 26) for i in range(200))
    text = format_ldif([Entry("o=grid", {"description": value})])
    lines = text.splitlines()
    assert all(len(line) <= 76 for line in lines)
    assert lines[1] == "description: " + value[:63]
    assert lines[2] == " " + value[63:138]
    assert lines[3] == " " + value[138:]
    assert parse_ldif(text)[0].get("description") == [value]


def test_parents_first_and_order_independent_of_input():
    dns = [
        BASE,
        f"GlueClusterUniqueID=c2,{BASE}",
        f"GlueSubClusterUniqueID=s1,GlueClusterUniqueID=c2,{BASE}",
        f"GlueHostUniqueID=wn02,GlueSubClusterUniqueID=s1,GlueClusterUniqueID=c2,{BASE}",
        f"GlueHostUniqueID=wn10,GlueSubClusterUniqueID=s1,GlueClusterUniqueID=c2,{BASE}",
        f"GlueClusterUniqueID=C1,{BASE}",
        f"GlueCEUniqueID=ce:2119/jobmanager-pbs-long,{BASE}",
    ]
    expected = [
        BASE,
        f"GlueCEUniqueID=ce:2119/jobmanager-pbs-long,{BASE}",
        f"GlueClusterUniqueID=C1,{BASE}",
        f"GlueClusterUniqueID=c2,{BASE}",
        f"GlueSubClusterUniqueID=s1,GlueClusterUniqueID=c2,{BASE}",
        f"GlueHostUniqueID=wn02,GlueSubClusterUniqueID=s1,GlueClusterUniqueID=c2,{BASE}",
        f"GlueHostUniqueID=wn10,GlueSubClusterUniqueID=s1,GlueClusterUniqueID=c2,{BASE}",
    ]
    outputs = set()
    for seed in range(5):
        shuffled = [Entry(dn) for dn in dns]
        random.Random(seed).shuffle(shuffled)
        text = format_ldif(shuffled)
        assert [e.dn for e in parse_ldif(text)] == expected
        outputs.add(text)
    assert len(outputs) == 1


def test_write_ldif_to_a_stream():
    stream = io.StringIO()
    assert write_ldif([Entry("o=grid", {"o": "grid"}), Entry("o=glue", {"o": "glue"})], stream) == 2
    assert stream.getvalue() == "dn: o=glue\no: glue\n\ndn: o=grid\no: grid\n\n"


# ---------------------------------------------------------------- reading


def test_parse_ldif_folding_comments_base64_and_version():
    text = (
        "version: 1\n"
        "# a comment that is\n"
        "  folded\n"
        "dn: cn=a,\n"
        " o=grid\n"
        "objectClass: top\n"
        "description:: WsO8cmljaA==\n"
        "description: two\r\n"
        "\n"
        "\n"
        "dn: cn=b,o=grid\n"
        "cn: b\n"
    )
    entries = parse_ldif(text)
    assert [e.dn for e in entries] == ["cn=a,o=grid", "cn=b,o=grid"]
    assert entries[0].get("description") == ["Zürich", "two"]


@pytest.mark.parametrize("text,where", [
    ("dn: o=grid\nchangetype: modify\nreplace: o\n", "line 2"),
    ("objectClass: top\n", "line 1"),
    ("dn: o=grid\nnot a line\n", "line 2"),
    ("dn: o=grid\ndescription:: !!!\n", "line 2"),
    (" dangling\n", "line 1"),
    ("dn: o=grid\njpegPhoto:< file:///etc/passwd\n", "line 2"),
])
def test_parse_ldif_errors_name_the_line(text, where):
    with pytest.raises(LDIFError, match=where):
        parse_ldif(text)


# ---------------------------------------------------------------- against slapd

HOSTILE_ASCII = [
    "#leading hash",
    "trailing spaces  ",
    " leading space",
    "commas, and = and + and ;",
    "quotes \" and \\ backslash <tag>",
    "line one\nline two\r\nline three",
    ":colon first",
    "<less-than first",
    "x" * 10240,
]


def hostile_entries() -> list[Entry]:
    entries = []
    for i, value in enumerate(HOSTILE_ASCII):
        host_id = f"wn{i:02d}-{value[:40]}"
        host_dn = make_dn("GlueHostUniqueID", host_id, BASE)
        entries.append(Entry(host_dn, {
            "objectClass": ["GlueClusterTop", "GlueHost", "GlueHostProcessor", "GlueHostApplicationSoftware"],
            "GlueHostUniqueID": host_id,
            "GlueHostProcessorOtherDescription": value,
            "GlueHostProcessorClockSpeed": 2400 + i,
            "GlueHostApplicationSoftwareRunTimeEnvironment": [value, f"tag-{i}"],
        }))
        mount = f"/mnt/{value[:60]}"
        entries.append(Entry(make_dn("GlueHostLocalFileSystemName", mount, host_dn), {
            "objectClass": ["GlueClusterTop", "GlueHostLocalFileSystem"],
            "GlueHostLocalFileSystemName": mount,
            "GlueHostLocalFileSystemReadOnly": i % 2 == 0,
        }))
    # UTF-8 goes in DirectoryString attributes (the GLUE 1 ones are IA5, ASCII only).
    for value in ["Zürich™", "Кластер", "中文 ", " #ü,=+\n", " "]:
        entries.append(Entry(make_dn("ou", value, "o=grid"), {
            "objectClass": "organizationalUnit", "ou": value, "description": [value, "x" * 10240 + value]}))
    return entries


def comparable(entry: Entry):
    """(parsed DN with attribute types lower-cased, {attr lower: sorted values as text})."""
    dn = [[(attr.lower(), value) for attr, value in rdn] for rdn in parse_dn(entry.dn)]
    attributes = {name.lower(): sorted(str(v) if not isinstance(v, bool) else ("TRUE" if v else "FALSE") for v in values)
                  for name, values in entry.attributes.items()}
    return dn, attributes


@pytest.mark.integration
def test_hostile_values_round_trip_through_real_slapd(slapd):
    written = hostile_entries()
    text = format_ldif(list(reversed(written)))  # input order must not matter: parents still come first
    assert all(len(line) <= 76 for line in text.splitlines())
    result = slapd.ldapadd(text)
    assert result.ok, str(result)
    assert len(result.added) == len(written)

    read = slapd.ldapsearch(BASE, "(|(objectClass=GlueHost)(objectClass=GlueHostLocalFileSystem))")
    read += slapd.ldapsearch("o=grid", "(objectClass=organizationalUnit)")
    assert sorted(map(comparable, read), key=repr) == sorted(map(comparable, written), key=repr)


@pytest.mark.integration
def test_slapd_answers_filters_on_values_it_was_given(slapd):
    assert slapd.ldapadd(format_ldif(hostile_entries())).ok
    [entry] = slapd.ldapsearch(BASE, r"(GlueHostProcessorOtherDescription=#leading hash)", ["GlueHostUniqueID"])
    assert entry.get("GlueHostUniqueID") == ["wn00-#leading hash"]
    [fs] = slapd.ldapsearch(entry.dn, "(objectClass=GlueHostLocalFileSystem)", ["GlueHostLocalFileSystemReadOnly"], scope="one")
    assert fs.get("GlueHostLocalFileSystemReadOnly") == ["TRUE"]
