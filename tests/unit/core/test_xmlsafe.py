"""The locked-down XML reader every untrusted document goes through: no DTD, no entity, no
network, a size cap, and one-line errors naming the document."""

from __future__ import annotations

import pytest

from glueinfo.core.xmlsafe import XMLInputError, parse_xml, plain_elements


@pytest.mark.parametrize("document, said", [
    (b"<a>&foo;</a>", "Entity 'foo' not defined"),  # undeclared without a DTD: not well-formed
    (b'<a b="&x;"/>', "Entity 'x' not defined"),
    (b'<!DOCTYPE a [<!ENTITY x "y">]><a>&x;</a>', "DTDs and entity declarations are not accepted"),
    (b'<!DOCTYPE a SYSTEM "http://example.org/a.dtd"><a/>', "DTDs and entity declarations are not accepted"),
    (b"   \n\t ", "empty document"),
    (b"", "empty document"),
    (b"<a>" + b"x" * 2000 + b"</a>", "over the limit of 1024 bytes"),
])
def test_entities_dtds_empty_and_oversized_documents_are_refused_in_one_line(document, said):
    with pytest.raises(XMLInputError) as refused:
        parse_xml(document, max_bytes=1024, what="test document")
    message = str(refused.value)
    assert message.startswith("test document: ") and said in message and "\n" not in message


def test_predefined_entities_and_character_references_are_text():
    root = parse_xml(b"<a>&lt;&amp;&#65;&#x42;</a>")
    assert root.text == "<&AB"


# -- plain_elements: a plain document's named elements without a tree -----------------------------

NAMES = ("Job", "Job_Id", "euser", "walltime", "Resource_List")


def tree_reading(document: str) -> list[tuple[str, str]]:
    """What a tree gives for the same names: the reading plain_elements must match."""
    return [(element.tag, element.text or "") for element in parse_xml(document.encode()).iter(*NAMES)]


@pytest.mark.parametrize("document", [
    "<Data><Job><Job_Id>1.srv</Job_Id><euser>ann</euser><Resource_List><walltime>01:00:00</walltime>"
    "</Resource_List></Job><Job><Job_Id>2.srv</Job_Id></Job></Data>",
    # names that start another name (Job / Job_Id / Job_Name), and names not asked for
    "<Data><Job><Job_Name>Job_Id</Job_Name><Job_Id>3</Job_Id><Jobs>x</Jobs></Job></Data>",
    # empty, self-closing and spaced tags; attributes whose quoted values hold ">" and "/>"
    '<Data><Job><euser/><euser></euser><euser >b</euser><Job_Id a="1>2" b = \'/>\' >4</Job_Id>'
    '<walltime\n/>tail</Job></Data>',
    # references and line ends as a parser reports them; ">" is allowed in text
    "<Data><euser>a&amp;b &lt;c&gt; &quot;&apos; &#65;&#x42; x > y</euser><Job_Id>l1\r\nl2\rl3&#13;</Job_Id></Data>",
    # an element's text is what comes before its first child; text after a child is not its text
    "<Data><Job>head<Job_Id>5</Job_Id>tail</Job><Resource_List>r<walltime>w</walltime>s</Resource_List></Data>",
    # an XML declaration at the start, and non-ASCII text
    '<?xml version="1.0" encoding="UTF-8"?><Data><euser>jérôme ✓</euser></Data>',
])
def test_plain_elements_are_the_elements_a_tree_holds(document):
    found = plain_elements(document, NAMES)
    assert found == tree_reading(document) and found  # and the corpus reads something


def test_plain_elements_by_hand():
    document = '<Data><Job><Job_Id a=">">7.srv</Job_Id><euser>b&amp;c</euser><euser/></Job></Data>'
    assert plain_elements(document, NAMES) == [("Job", ""), ("Job_Id", "7.srv"), ("euser", "b&c"), ("euser", "")]


@pytest.mark.parametrize("document", [
    "<Data><!-- <euser>mallory</euser> --><euser>ann</euser></Data>",   # a comment may hold "<"
    "<Data><euser><![CDATA[<euser>x</euser>]]></euser></Data>",          # so may CDATA
    "<Data><?pi <euser>x</euser> ?><euser>ann</euser></Data>",          # and a processing instruction
    '<!DOCTYPE Data [<!ENTITY e "x">]><Data><euser>&e;</euser></Data>',
    '<Data xmlns="urn:x"><euser>ann</euser></Data>',                     # a tree says {urn:x}euser
    '<?xml version="1.0" encoding="ISO-8859-1"?><Data><euser>ann</euser></Data>',
])
def test_documents_that_are_not_plain_are_left_to_the_tree(document):
    assert plain_elements(document, NAMES) is None


@pytest.mark.parametrize("document, said", [
    ("<Data><euser>a & b</euser></Data>", "not well-formed XML"),
    ("<Data><euser>\x01</euser></Data>", "not well-formed XML"),
    ("<Data><euser>&nbsp;</euser></Data>", "Entity 'nbsp' not defined"),
    ("<Data><euser>ann</Data>", "not well-formed XML"),
    ("<Data></Data><euser>x</euser>", "not well-formed XML"),
    ("<Job>" * 300 + "</Job>" * 300, "depth"),
    ("", "empty document"),
    ("<Data>" + "x" * 5000 + "</Data>", "over the limit of 4096 bytes"),
])
def test_plain_elements_refuse_what_is_not_well_formed_in_one_line(document, said):
    with pytest.raises(XMLInputError) as refused:
        plain_elements(document, NAMES, max_bytes=4096, what="qstat -f -x")
    message = str(refused.value)
    assert message.startswith("qstat -f -x: ") and said in message and "\n" not in message


def test_the_factored_name_pattern_matches_exactly_the_names_given():
    import random
    import re

    from glueinfo.core.xmlsafe import alternation

    rng = random.Random(7)
    for _ in range(300):
        # Short names over a small alphabet share prefixes and are prefixes of each other; "." and
        # "-" are pattern characters that must be taken literally.
        names = {"".join(rng.choice("ab_.-") for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 8))}
        pattern = re.compile(alternation(names))
        candidates = {"".join(rng.choice("ab_.-x") for _ in range(rng.randint(0, 6))) for _ in range(60)}
        for candidate in candidates | names | {n[:-1] for n in names} | {n + "a" for n in names}:
            assert bool(pattern.fullmatch(candidate)) == (candidate in names), (sorted(names), candidate)


def test_an_element_name_that_extends_a_wanted_name_is_not_read_as_it():
    # Job is asked for and Job_Id is not: <Job_Id> must not be read as a <Job> (nor <Jobs>).
    document = "<Data><Job><Job_Id>1</Job_Id><Jobs>2</Jobs><Job_Name>n</Job_Name></Job></Data>"
    assert plain_elements(document, ("Job", "Job_Name")) == [("Job", ""), ("Job_Name", "n")]
