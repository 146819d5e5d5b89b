"""glueinfo/sss/xsd/sss-job.xsd describes the SSS Job object of the spec, not only glueinfo's part of it.

The spec's own examples (tests/fixtures/sss-job/spec-*.xml: section 1.3's three Job documents and the
element examples of sections 4-8, quotes made straight; each file's comment says what else, if anything,
was changed) validate; hand-written documents with one mistake each (bad-*.xml, the comment says which)
are refused for that mistake, so the schema is no catch-all.  What glueinfo itself writes is held to it
in test_job_xml.py and test_job_xml_lrms.py.
"""

from __future__ import annotations

import pytest
from lxml import etree
from paths import FIXTURES, REPO

XSD_PATH = REPO / "glueinfo" / "sss" / "xsd" / "sss-job.xsd"
SPEC = FIXTURES / "sss-job"
XS = "{http://www.w3.org/2001/XMLSchema}"


@pytest.fixture(scope="module")
def schema():
    return etree.XMLSchema(etree.parse(str(XSD_PATH)))


def test_the_fixtures_are_all_there():
    assert sorted(p.name for p in SPEC.glob("spec-*.xml")) == [
        "spec-elaborate.xml", "spec-moderate.xml", "spec-property-examples.xml", "spec-references.xml", "spec-simple.xml"]
    assert len(list(SPEC.glob("bad-*.xml"))) == len(REFUSED)


@pytest.mark.parametrize("name", ["spec-simple.xml", "spec-moderate.xml", "spec-elaborate.xml",
                                  "spec-property-examples.xml", "spec-references.xml"])
def test_the_specs_examples_validate(schema, name):
    document = etree.parse(str(SPEC / name))
    assert schema.validate(document), schema.error_log


def test_the_examples_are_the_specs_text_with_straight_quotes():
    # Each fixture's comment names the section it comes from; no curly quote is left in any.
    for path in SPEC.glob("spec-*.xml"):
        text = path.read_text(encoding="utf-8")
        assert "\u201c" not in text and "\u201d" not in text, path.name
        assert "section" in text.split("-->", 1)[0], path.name


def test_the_elaborate_example_is_read_as_the_spec_means_it(schema):
    root = etree.parse(str(SPEC / "spec-elaborate.xml")).getroot()
    assert root.tag == "JobGroup" and [job.findtext("Id") for job in root.iter("Job")] == ["fr15n05.1234.0",
                                                                                              "fr15n05.1234.1"]
    assert [task.findtext("Node") for task in root.iter("Task")] == ["node1", "node12"]
    assert root.find("JobDefaults/Environment/Variable[@name='PATH']").text == "/usr/bin:~/bin:"


# file -> (line the error is reported on, what the message must say)
REFUSED = {
    "bad-misspelled-element.xml": (5, "Element 'Excutable': This element is not expected"),
    "bad-state.xml": (5, "Element 'State': [facet 'enumeration'] The value 'Pending'"),
    "bad-non-numeric-count.xml": (6, "Element 'Processors': 'four' is not a valid value"),
    "bad-no-id.xml": (3, "Element 'Job': Missing child element(s)"),
    "bad-two-ids.xml": (6, "Element 'Id': This element is not expected"),
    "bad-units.xml": (6, "Element 'Memory', attribute 'units': [facet 'enumeration'] The value 'GiB'"),
    "bad-op.xml": (6, "Element 'Processors', attribute 'op': [facet 'enumeration'] The value 'AtLeast'"),
    "bad-op-outside-requested.xml": (5, "Element 'Processors', attribute 'op': The attribute 'op' is not allowed"),
    "bad-property-after-taskgroup.xml": (8, "Element 'Queue': This element is not expected"),
    "bad-property-after-task.xml": (10, "Element 'TaskCount': This element is not expected"),
    "bad-variable-without-name.xml": (6, "Element 'Variable': The attribute 'name' is required but missing"),
    "bad-dependency-condition.xml": (5, "Element 'Dependency', attribute 'condition': [facet 'enumeration']"),
    "bad-negative-memory.xml": (6, "Element 'Memory': [facet 'minInclusive'] The value '-1'"),
    "bad-fractional-time.xml": (5, "Element 'StartTime': '1051557713.5' is not a valid value"),
    "bad-jobgroup-without-job.xml": (3, "Element 'JobGroup': Missing child element(s)"),
    "bad-jobgroup-state.xml": (5, "Element 'State': [facet 'enumeration'] The value 'Running'"),
    "bad-resource-without-name.xml": (5, "Element 'Resource': The attribute 'name' is required but missing"),
    "bad-not-requestable.xml": (6, "Element 'Executable': This element is not expected"),
    "bad-feature-range.xml": (5, "Element 'Feature', attribute 'aggregation': [facet 'enumeration'] The value 'Range'"),
    "bad-empty-requested.xml": (5, "Element 'Requested': Missing child element(s)"),
    "bad-nan-memory.xml": (5, "Element 'Memory': [facet 'maxExclusive'] The value 'NaN'"),
    "bad-exit-code-text.xml": (5, "Element 'ExitCode': 'failed' is not a valid value"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_document_with_one_mistake_is_refused_for_it(schema, name):
    line, message = REFUSED[name]
    assert not schema.validate(etree.parse(str(SPEC / name)))
    errors = [(e.line, e.message) for e in schema.error_log]
    assert any(at == line and message in text for at, text in errors), errors


def test_the_same_mistakes_inside_a_jobgroup_or_data_are_refused_too(schema):
    for name in ("bad-state.xml", "bad-non-numeric-count.xml", "bad-misspelled-element.xml", "bad-no-id.xml"):
        job = etree.parse(str(SPEC / name)).getroot()
        group = etree.fromstring(b"<JobGroup><Id>g</Id></JobGroup>")
        group.append(job)
        assert not schema.validate(etree.ElementTree(group)), name
        data = etree.fromstring(b"<Data/>")
        data.append(etree.parse(str(SPEC / name)).getroot())
        assert not schema.validate(etree.ElementTree(data)), name


def test_a_job_elsewhere_than_at_the_root_still_needs_its_id(schema):
    tasks = etree.fromstring(b"<JobGroup><Id>g</Id><Job><Name>no id</Name></Job></JobGroup>")
    assert not schema.validate(etree.ElementTree(tasks))
    assert schema.validate(etree.ElementTree(etree.fromstring(b"<JobGroup><Id>g</Id><JobDefaults><Queue>q</Queue>"
                                                              b"</JobDefaults><Job><Id>1</Id></Job></JobGroup>")))


def test_jobtype_lists_the_job_properties_before_and_after_its_id():
    # JobType writes the JobProperty group out twice (for the SSSRMAP vocabulary, which is held to JobType's
    # elements): the three lists must be the same elements with the same types.
    root = etree.parse(str(XSD_PATH)).getroot()
    (group,) = root.iterfind(f"{XS}group[@name='JobProperty']")
    (job_type,) = root.iterfind(f"{XS}complexType[@name='JobType']")
    expected = [(e.get("name"), e.get("type")) for e in group.iter(f"{XS}element")]
    before, after = job_type.iterfind(f"{XS}sequence/{XS}choice[@maxOccurs='unbounded']")
    assert [(e.get("name"), e.get("type")) for e in before.iter(f"{XS}element")] == expected
    assert [(e.get("name"), e.get("type")) for e in after.iter(f"{XS}element")] == expected
    # Table 2's 43 rows but Id, the six elements after it, Table 3's four credentials and Account, Environment,
    # Node, TaskDistribution, Dependency, Table 4's five consumables and Resource, Extension, Requested, Delivered
    assert len(expected) == len({name for name, _ in expected}) == 42 + 6 + 5 + 4 + 6 + 1 + 2
