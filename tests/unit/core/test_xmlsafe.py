"""The locked-down XML reader every untrusted document goes through: no DTD, no entity, no
network, a size cap, and one-line errors naming the document."""

from __future__ import annotations

import pytest

from glueinfo.core.xmlsafe import XMLInputError, parse_xml


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
