"""The GLUE schema checker against the real thing.

Every case below is an entry with a verdict written by hand from the
glue-schema files; the test loads them all into a real slapd (with the same
schema files) with ``ldapadd -c`` and asserts that slapd's verdict is the
expected one AND that ``Schema.check`` flags exactly the entries slapd
rejects.  Then normalise() is shown to turn hostile values into entries slapd
accepts, and check_ldif_text is run on good and bad LDIF.
"""

from __future__ import annotations

import logging
import os

import pytest
from servers import Slapd, missing_slapd_tools

from glueinfo.core.ldif import Entry, format_ldif, parse_ldif
from glueinfo.glue.schema import (
    DEFAULT_SCHEMA_DIR,
    SchemaUnavailable,
    check_ldif_text,
    load_schema,
    load_schema_or_warn,
    normalise_entries,
    normalise_unchecked,
    to_ascii,
)

BASE = "mds-vo-name=resource,o=grid"

needs_schema = pytest.mark.skipif(not os.path.isfile(os.path.join(DEFAULT_SCHEMA_DIR, "Glue-CORE.schema")),
                                  reason="glue-schema files not installed in /etc/ldap/schema (Debian package glue-schema)")


def host(name: str, *lines: str, classes: tuple[str, ...] = ("GlueHostArchitecture",)) -> str:
    class_lines = "".join(f"objectClass: {c}\n" for c in classes)
    body = "".join(line + "\n" for line in lines)
    return f"dn: GlueHostUniqueID={name},{BASE}\nobjectClass: GlueClusterTop\nobjectClass: GlueHost\n{class_lines}" \
           f"GlueHostUniqueID: {name}\n{body}"


CE_OK = """dn: GlueCEUniqueID=ce.example.org:2119/jobmanager-pbs-long,{base}
objectClass: GlueCETop
objectClass: GlueCE
objectClass: GlueCEInfo
objectClass: GlueCEState
objectClass: GlueCEPolicy
objectClass: GlueCEAccessControlBase
objectClass: GlueInformationService
objectClass: GlueKey
objectClass: GlueSchemaVersion
GlueCEUniqueID: ce.example.org:2119/jobmanager-pbs-long
GlueCEName: long
GlueCEInfoTotalCPUs: 64
GlueCEInfoLRMSType: pbs
GlueCEStateFreeCPUs: 3
GlueCEStateStatus: Production
GlueCEPolicyMaxWallClockTime: 2880
GlueCEAccessControlBaseRule: VO:atlas
GlueCEAccessControlBaseRule: VO:cms
GlueForeignKey: GlueClusterUniqueID=ce.example.org
GlueSchemaVersionMajor: 1
GlueSchemaVersionMinor: 3
""".replace("{base}", BASE)

SUBCLUSTER_OK = f"""dn: GlueClusterUniqueID=cluster-a,{BASE}
objectClass: GlueClusterTop
objectClass: GlueCluster
GlueClusterUniqueID: cluster-a
GlueClusterName: Cluster A

dn: GlueSubClusterUniqueID=sc-1,GlueClusterUniqueID=cluster-a,{BASE}
objectClass: GlueClusterTop
objectClass: GlueSubCluster
objectClass: GlueHostArchitecture
objectClass: GlueHostMainMemory
objectClass: GlueHostApplicationSoftware
objectClass: GlueKey
objectClass: GlueSchemaVersion
GlueSubClusterUniqueID: sc-1
GlueSubClusterPhysicalCPUs: 8
GlueHostArchitecturePlatformType: x86_64
GlueHostArchitectureSMPSize: 16
GlueHostMainMemoryRAMSize: 32768
GlueHostApplicationSoftwareRunTimeEnvironment: GLITE-3_2_0
GlueHostApplicationSoftwareRunTimeEnvironment: R-GMA
GlueChunkKey: GlueClusterUniqueID=cluster-a
GlueSchemaVersionMajor: 1
GlueSchemaVersionMinor: 3

dn: GlueHostUniqueID=wn01,GlueSubClusterUniqueID=sc-1,GlueClusterUniqueID=cluster-a,{BASE}
objectClass: GlueHost
objectClass: GlueHostNetworkAdapter
GlueHostUniqueID: wn01
GlueHostNetworkAdapterInboundIP: FALSE
GlueHostNetworkAdapterOutboundIP: TRUE

dn: GlueHostLocalFileSystemName=/scratch,GlueHostUniqueID=wn01,GlueSubClusterUniqueID=sc-1,GlueClusterUniqueID=cluster-a,{BASE}
objectClass: GlueClusterTop
objectClass: GlueHostLocalFileSystem
GlueHostLocalFileSystemName: /scratch
GlueHostLocalFileSystemSize: 1000
GlueHostLocalFileSystemReadOnly: FALSE
"""

# (case id, LDIF of one or more entries, slapd accepts them)
CASES = [
    ("ce-complete", CE_OK, True),
    ("subcluster-tree", SUBCLUSTER_OK, True),
    ("integer-ok", host("int-ok", "GlueHostArchitectureSMPSize: 16"), True),
    ("integer-negative", host("int-neg", "GlueHostArchitectureSMPSize: -3"), True),
    ("integer-zero", host("int-zero", "GlueHostArchitectureSMPSize: 0"), True),
    ("integer-huge", host("int-huge", "GlueHostArchitectureSMPSize: 123456789012345678901234567890"), True),
    ("ia5-empty", host("ia5-empty", "GlueHostArchitecturePlatformType:"), True),
    ("ia5-newline", host("ia5-nl", "GlueHostArchitecturePlatformType:: eDg2CjY0"), True),
    ("rdn-value-other-case", f"dn: GlueClusterUniqueID=Cluster-B,{BASE}\nobjectClass: GlueCluster\n"
                             "GlueClusterUniqueID: cluster-b\n", True),
    ("lower-case-names", f"dn: glueclusteruniqueid=cluster-c,{BASE}\nobjectclass: gluecluster\n"
                         "glueclusteruniqueid: cluster-c\ngluecLustername: c\n", True),
    ("multi-valued-distinct", host("rte", "GlueHostApplicationSoftwareRunTimeEnvironment: A",
                                   "GlueHostApplicationSoftwareRunTimeEnvironment: B",
                                   classes=("GlueHostApplicationSoftware",)), True),
    ("escaped-dn", f"dn: GlueClusterUniqueID=\\#a\\,b\\=c\\+d\\ ,{BASE}\nobjectClass: GlueCluster\n"
                   "GlueClusterUniqueID:: I2EsYj1jK2Qg\n", True),
    # --- what slapd rejects
    ("missing-must", CE_OK.replace("ce.example.org:2119", "ce2.example.org:2119")
                           .replace("GlueCEAccessControlBaseRule: VO:atlas\nGlueCEAccessControlBaseRule: VO:cms\n", ""), False),
    ("unknown-attribute", host("unknown-attr", "GlueHostColour: blue"), False),
    ("attribute-not-allowed", host("not-allowed", "GlueHostMainMemoryRAMSize: 1024"), False),
    ("unknown-class", host("unknown-class", classes=("GlueHostTeleporter",)), False),
    ("integer-fraction", host("int-frac", "GlueHostArchitectureSMPSize: 12.5"), False),
    ("integer-leading-zero", host("int-007", "GlueHostArchitectureSMPSize: 007"), False),
    ("integer-plus", host("int-plus", "GlueHostArchitectureSMPSize: +5"), False),
    ("integer-minus-zero", host("int-m0", "GlueHostArchitectureSMPSize: -0"), False),
    ("integer-space", host("int-space", "GlueHostArchitectureSMPSize:: IDU="), False),
    ("integer-empty", host("int-empty", "GlueHostArchitectureSMPSize:"), False),
    ("boolean-lower-case", host("bool-lc", "GlueHostNetworkAdapterInboundIP: true", classes=("GlueHostNetworkAdapter",)), False),
    ("boolean-yes", host("bool-yes", "GlueHostNetworkAdapterInboundIP: yes", classes=("GlueHostNetworkAdapter",)), False),
    ("single-valued-twice", host("two-values", "GlueHostArchitectureSMPSize: 4", "GlueHostArchitectureSMPSize: 8"), False),
    ("single-valued-two-spellings", host("two-spellings", "GlueHostArchitectureSMPSize: 4", "gluehostarchitecturesmpsize: 8"),
     False),
    ("ia5-non-ascii", host("non-ascii", "GlueHostArchitecturePlatformType:: eDg24oSi"), False),
    ("ia5-cyrillic", host("cyrillic", "GlueHostProcessorModel:: 0J/RgNC+0YbQtdGB0YHQvtGA", classes=("GlueHostProcessor",)), False),
    ("duplicate-values-case", host("dup-case", "GlueHostApplicationSoftwareRunTimeEnvironment: abc",
                                   "GlueHostApplicationSoftwareRunTimeEnvironment: ABC",
                                   classes=("GlueHostApplicationSoftware",)), False),
    ("duplicate-object-class", host("dup-class", classes=("GlueHost",)), False),
    ("two-structural-chains", host("two-structural", "GlueClusterUniqueID: x", classes=("GlueCluster",)), False),
    ("no-structural", f"dn: GlueChunkKey=x,{BASE}\nobjectClass: GlueKey\nobjectClass: GlueTop\nGlueChunkKey: x\n", False),
    ("naming-value-missing", f"dn: GlueClusterUniqueID=cluster-d,{BASE}\nobjectClass: GlueCluster\n"
                             "GlueClusterUniqueID: cluster-e\n", False),
    ("rdn-all-spaces", f"dn: GlueHostUniqueID=\\20\\20,{BASE}\nobjectClass: GlueHost\nGlueHostUniqueID:: ICA=\n", False),
    ("rdn-empty", f"dn: GlueHostUniqueID=,{BASE}\nobjectClass: GlueHost\nGlueHostUniqueID:\n", False),
    ("operational-attribute", host("operational", "createTimestamp: 20240101000000Z"), False),
    ("filesystem-on-subcluster", f"dn: GlueSubClusterUniqueID=sc-fs,{BASE}\nobjectClass: GlueSubCluster\n"
                                 "objectClass: GlueHostLocalFileSystem\nGlueSubClusterUniqueID: sc-fs\n"
                                 "GlueHostLocalFileSystemName: /tmp\n", False),
]


@pytest.fixture(scope="module")
def schema():
    try:
        return load_schema()
    except SchemaUnavailable as exc:
        pytest.skip(f"{exc}")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """All cases loaded into one real slapd: (entries by case, ldapadd result)."""
    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    with Slapd(tmp_path_factory.mktemp("slapd")) as server:
        text = "\n".join(ldif.rstrip("\n") + "\n" for _, ldif, _ in CASES)
        result = server.ldapadd(text)
        yield {case: parse_ldif(ldif) for case, ldif, _ in CASES}, result


def rejected_by_slapd(entries, result) -> list[str]:
    rejected = {" ".join(dn.lower().split()) for dn in result.rejected}
    return [e.dn for e in entries if " ".join(e.dn.lower().split()) in rejected]


@pytest.mark.integration
@pytest.mark.parametrize("case,ldif,accepted", CASES, ids=[c[0] for c in CASES])
def test_checker_agrees_with_real_slapd(loaded, schema, case, ldif, accepted):
    by_case, result = loaded
    entries = by_case[case]
    slapd_rejects = rejected_by_slapd(entries, result)
    # The hand-written verdict is slapd's ...
    assert (not slapd_rejects) == accepted, f"slapd: {result}"
    # ... and the checker flags exactly the entries slapd rejected.
    flagged = {p.dn for p in schema.check_entries(entries)}
    assert sorted(flagged) == sorted(slapd_rejects), [str(p) for p in schema.check_entries(entries)]


def test_problem_messages_name_dn_and_cause(schema):
    entries = parse_ldif(host("wn9", "GlueHostArchitectureSMPSize: 12.5", "GlueHostColour: blue"))
    messages = [str(p) for p in schema.check_entries(entries)]
    dn = f"GlueHostUniqueID=wn9,{BASE}"
    assert f"{dn}: GlueHostArchitectureSMPSize: '12.5' is not an INTEGER" in messages
    assert f"{dn}: attribute GlueHostColour is not in the schema" in messages
    ce = parse_ldif(next(ldif for case, ldif, _ in CASES if case == "missing-must"))
    assert [str(p) for p in schema.check_entries(ce)] == [
        f"{ce[0].dn}: required attribute GlueCEAccessControlBaseRule is missing (MUST of GlueCEAccessControlBase)"]


def test_canonical_names_follow_the_schema_files(schema):
    assert schema.canonical_name("gluesubclusteruniqueid") == "GlueSubClusterUniqueID"
    assert schema.canonical_name("GLUECESTATEFREECPUS") == "GlueCEStateFreeCPUs"
    assert schema.canonical_name("OBJECTCLASS") == "objectClass"
    assert schema.canonical_name("NoSuchAttribute") == "NoSuchAttribute"
    assert schema.canonical_class("mdsvo") == "Mds"  # NAME ( 'Mds' 'MdsVo' ) in Glue-MDS.schema


HOSTILE = [
    ("GlueHostProcessorModel", "Intel(R) Xeon(R) Gold 6130™ CPU @ 2.10GHz", "Intel(R) Xeon(R) Gold 6130(TM) CPU @ 2.10GHz"),
    ("GlueHostProcessorVendor", "Pénélope Čtvrtek", "Penelope Ctvrtek"),
    ("GlueHostProcessorOtherDescription", "Процессор 8", " 8"),
]


@pytest.mark.integration
def test_normalised_hostile_entries_load_into_slapd(schema, slapd):
    entries = [
        Entry(f"GlueHostUniqueID=wn-é™,{BASE}", {
            "objectClass": ["GlueClusterTop", "GlueHost", "GlueHostProcessor", "GlueHostArchitecture", "GlueHostNetworkAdapter"],
            "gluehostuniqueid": "wn-é™",
            **{attr: value for attr, value, _ in HOSTILE},
            "GlueHostArchitectureSMPSize": "12.5",  # not an integer: dropped, with a warning
            "GlueHostProcessorClockSpeed": " 2100",  # made an integer
            "GlueHostNetworkAdapterInboundIP": "true",  # made TRUE
            "GlueHostNetworkAdapterOutboundIP": False,
            "GlueHostArchitecturePlatformType": "Архитектура",  # nothing ASCII left: dropped
        }),
        Entry(f"GlueHostLocalFileSystemName=/мнт,GlueHostUniqueID=wn-é™,{BASE}", {
            "objectClass": ["GlueHostLocalFileSystem"], "GlueHostLocalFileSystemName": "/мнт",
        }),
    ]
    assert all(schema.check(e) for e in entries[:1])
    fixed, warnings = normalise_entries(entries, schema)
    assert [p for e in fixed for p in schema.check(e)] == []
    text = "\n".join(str(w) for w in warnings)
    assert "GlueHostArchitectureSMPSize: dropped '12.5'" in text
    assert "'Gold 6130™" not in text and "published as 'Intel(R) Xeon(R) Gold 6130(TM) CPU @ 2.10GHz'" in text
    assert "GlueHostArchitecturePlatformType: dropped 'Архитектура'" in text
    assert f"GlueHostUniqueID=wn-e(TM),{BASE}" in [w.dn for w in warnings]

    result = slapd.ldapadd(format_ldif(fixed))
    assert result.ok, str(result)
    [host_entry] = slapd.ldapsearch(BASE, r"(GlueHostUniqueID=wn-e\28TM\29)")
    for attr, _, expected in HOSTILE:
        assert host_entry.get(attr) == [expected]
    assert host_entry.get("GlueHostProcessorClockSpeed") == ["2100"]
    assert host_entry.get("GlueHostNetworkAdapterInboundIP") == ["TRUE"]
    assert host_entry.get("GlueHostNetworkAdapterOutboundIP") == ["FALSE"]
    assert "GlueHostArchitectureSMPSize" not in host_entry
    [fs] = slapd.ldapsearch(BASE, "(objectClass=GlueHostLocalFileSystem)")
    assert fs.get("GlueHostLocalFileSystemName") == ["/"]


def test_transliteration_is_per_character_so_dn_and_keys_agree():
    cluster = "Кластер-Zürich™"
    assert to_ascii(cluster) == "-Zurich(TM)"
    assert to_ascii(f"GlueClusterUniqueID={cluster}") == "GlueClusterUniqueID=" + to_ascii(cluster)
    assert to_ascii("plain ascii, untouched ") == "plain ascii, untouched "


def test_without_schema_files_glue1_strings_still_become_ascii(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert load_schema_or_warn(str(tmp_path / "nowhere")) is None
    assert len(caplog.records) == 1 and "publishing without a schema check" in caplog.records[0].getMessage()
    with pytest.raises(SchemaUnavailable):
        load_schema(str(tmp_path))  # exists, but no Glue-CORE.schema

    entry = Entry(f"GlueHostUniqueID=wn-ü,{BASE}", {
        "objectClass": "GlueHost", "GlueHostUniqueID": "wn-ü", "GlueHostProcessorModel": "Xeon™",
        "GlueHostArchitectureSMPSize": 8, "GLUE2EntityName": "Zürich", "description": "Zürich",
    })
    fixed, warnings = normalise_unchecked(entry)
    assert fixed.dn == f"GlueHostUniqueID=wn-u,{BASE}"
    assert fixed.get("GlueHostUniqueID") == ["wn-u"]
    assert fixed.get("GlueHostProcessorModel") == ["Xeon(TM)"]
    assert fixed.get("GlueHostArchitectureSMPSize") == [8]
    assert fixed.get("GLUE2EntityName") == ["Zürich"]  # GLUE 2 strings are DirectoryString: UTF-8 is fine
    assert fixed.get("description") == ["Zürich"]
    assert len(warnings) == 3


def test_check_ldif_text_on_good_and_bad_files(schema):
    assert check_ldif_text(SUBCLUSTER_OK + "\n" + CE_OK, schema) == []

    bad = "\n".join(ldif for case, ldif, ok in CASES if case in ("integer-fraction", "unknown-class", "ia5-non-ascii"))
    problems = check_ldif_text(bad, schema)
    assert {p.dn.split(",")[0] for p in problems} == {"GlueHostUniqueID=int-frac", "GlueHostUniqueID=unknown-class",
                                                      "GlueHostUniqueID=non-ascii"}

    child_first = SUBCLUSTER_OK.split("\n\n")
    problems = check_ldif_text("\n\n".join([child_first[1], child_first[0]]), schema)
    assert [p.message for p in problems] == ["comes before its parent entry; add the parent first"]

    twice = check_ldif_text(CE_OK + "\n" + CE_OK, schema)
    assert [p.message for p in twice] == ["the same DN appears twice; the second add fails"]

    [broken] = check_ldif_text("dn: o=grid\nobjectClass organization\n", schema)
    assert broken.message.startswith("not valid LDIF: line 2:")
