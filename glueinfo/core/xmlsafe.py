"""The one XML parser setup of glueinfo: every XML document we read goes through here.

Input comes from the network (SSSRMAP requests, agents' /node.xml), so the
parser is locked down: no entity substitution, no DTD loading, no network
access, libxml2's default size and depth limits (``huge_tree`` off), and a
byte limit checked before libxml2 sees anything.  Documents that declare a
DTD or entities are refused outright: nothing glueinfo reads needs them, and
refusing them is simpler to reason about than expanding them safely (no XXE,
no billion laughs).

Batch systems' big plain documents (Torque's job list) can be read without a
tree: :func:`plain_elements` lets the same parser check them, building
nothing, and finds the elements it is asked for with a pattern, which is
exact only in the plain documents it accepts.

lxml parser objects are not thread-safe, so each call makes its own (a few
microseconds).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union

from lxml import etree

from glueinfo.core.errors import InputError
from glueinfo.core.text import one_line

DEFAULT_MAX_BYTES = 16 * 2**20

# A quick byte-level look before parsing; the check after parsing catches
# what this misses (UTF-16 documents, odd spacing).
_DTD_BYTES = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)


class XMLInputError(InputError, ValueError):
    """XML we refuse to read; the message is one line naming what was wrong."""


def make_parser(target: Optional[object] = None, remove_blank_text: bool = False) -> etree.XMLParser:
    """A fresh, locked-down lxml parser (for callers that need the object itself); ``target``: a
    parser target that takes the events instead of a tree (lxml calls only the methods it has);
    ``remove_blank_text``: no whitespace-only text between elements (a pretty-printed document
    read back as the tree it was printed from)."""
    return etree.XMLParser(
        remove_blank_text=remove_blank_text,
        target=target,  # type: ignore[arg-type]  # the stubs' ParserTarget protocol asks for all five methods
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        collect_ids=False,
    )


def parse_xml(data: Union[bytes, str], *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "XML document",
              remove_blank_text: bool = False) -> etree._Element:
    """Parse ``data`` and return its root element, or raise :class:`XMLInputError`.

    ``what`` names the document in error messages ("SSSRMAP request", "Node XML from wn01");
    ``remove_blank_text`` as for :func:`make_parser`.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise XMLInputError(f"{what}: expected bytes, got {type(data).__name__}")
    data = bytes(data)
    _refuse_oversized_or_empty(data, max_bytes, what)
    if b"!" in data and _DTD_BYTES.search(data):  # no "!", no "<!": one memchr instead of a regex over 50 MB
        raise XMLInputError(f"{what}: DTDs and entity declarations are not accepted")
    root: Optional[etree._Element] = _read(data, None, what, remove_blank_text)
    if root is None:
        raise XMLInputError(f"{what}: no root element")
    docinfo = root.getroottree().docinfo
    if docinfo.internalDTD is not None or docinfo.doctype:
        raise XMLInputError(f"{what}: DTDs and entity declarations are not accepted")
    # No walk for entity reference nodes: with no DTD (both checks above) an entity other than the five
    # predefined ones and character references is undeclared, which libxml2 refuses as not well-formed
    # (WFC: Entity Declared), so the tree cannot hold one (tests/unit: entity references are refused).
    return root


class _NoEvents:
    """A parser target that takes no event: libxml2 checks the document and builds nothing."""

    def close(self) -> None:
        return None


def check_well_formed(data: Union[bytes, str], *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "XML document") -> None:
    """Let libxml2 read ``data`` with the locked-down parser and build nothing: XMLInputError (one line)
    when it is not well-formed, empty or over ``max_bytes`` (characters, for a str), as :func:`parse_xml`
    words it.  A str is read as the characters it holds (lxml refuses one that declares an encoding).

    It does not refuse a DTD; callers refuse one before (:func:`plain_elements` refuses any ``<!``)."""
    _refuse_oversized_or_empty(data, max_bytes, what)
    _read(data, _NoEvents(), what)


def _refuse_oversized_or_empty(data: Union[bytes, str], max_bytes: int, what: str) -> None:
    if len(data) > max_bytes:
        raise XMLInputError(f"{what}: {len(data)} bytes is over the limit of {max_bytes} bytes")
    if not data or data.isspace():  # not strip(): that copies a 50 MB batch-system document to look at it
        raise XMLInputError(f"{what}: empty document")


def _read(data: Union[bytes, str], target: Optional[object], what: str, remove_blank_text: bool = False) -> Any:
    """libxml2's reading of ``data`` with the locked-down parser (a tree's root, or what ``target``'s
    close() returns); XMLInputError naming ``what`` in one line when it refuses the document."""
    try:
        return etree.fromstring(data, make_parser(target, remove_blank_text))
    except etree.XMLSyntaxError as exc:
        raise XMLInputError(f"{what}: not well-formed XML: {one_line(exc.msg or exc)}") from None
    except (ValueError, TypeError) as exc:  # lxml's own refusals, e.g. an unsupported encoding
        raise XMLInputError(f"{what}: cannot parse: {one_line(exc)}") from None


# A declaration naming an encoding other than UTF-8: libxml2 would decode the UTF-8 we give it by that one.
_FOREIGN_ENCODING = re.compile(r"""<\?xml[^>]*encoding\s*=\s*["'](?!utf-?8["'])""", re.IGNORECASE)
_REFERENCE = re.compile(r"&(?:(amp|lt|gt|quot|apos)|#([0-9]+)|#x([0-9A-Fa-f]+));")
_PREDEFINED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
# After a named start tag: its attributes as XML writes them (a quoted value may hold ">"), then the
# end of the tag and the text up to the next "<"; an empty-element tag ("/>") has none.
_ATTRIBUTES_AND_TEXT = r"""(?:\s+[^\s=]+\s*=\s*(?:"[^"]*"|'[^']*'))*\s*(?:>([^<]*)|/>)"""


def _referenced(match: re.Match[str]) -> str:
    name, decimal, hexadecimal = match.groups()
    return _PREDEFINED[name] if name else chr(int(decimal) if decimal else int(hexadecimal, 16))


def _character_data(raw: str) -> str:
    """Raw character data as a parser reports it: line ends normalised first (XML 1.0 §2.11), then the
    references replaced (a well-formed document without a DTD has only these)."""
    if "\r" in raw:
        raw = raw.replace("\r\n", "\n").replace("\r", "\n")
    return _REFERENCE.sub(_referenced, raw) if "&" in raw else raw


def alternation(words: Iterable[str]) -> str:
    """A pattern that matches exactly the strings ``words``, factored by common prefix
    (``Job(?:_(?:Id|Name))?`` for Job, Job_Id, Job_Name).  Python's ``re`` tries the branches of
    ``a|b|c`` one after the other at each place it looks, so a flat list of 30 names costs up to
    30 tries at each of millions of ``<``; factored, it costs a few."""
    ordered = sorted(set(words))
    by_first: dict[str, list[str]] = {}
    for word in ordered:
        if word:
            by_first.setdefault(word[0], []).append(word[1:])
    if not by_first:
        return ""
    branches = [re.escape(first) + alternation(rests) for first, rests in by_first.items()]
    optional = "" in ordered  # a word ends here and longer ones go on
    if len(branches) == 1 and not optional:
        return branches[0]
    return "(?:" + "|".join(branches) + ")" + ("?" if optional else "")


def plain_elements(text: str, tags: Sequence[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                   what: str = "XML document") -> Optional[list[tuple[str, str]]]:
    """The elements named in ``tags`` of a plain XML document, as (tag, text) in document order, with
    no tree built: ``text`` is the element's character data before its first child, "" when it has
    none (lxml's ``element.text or ""``); attributes are not read.  For batch-system documents of
    50,000 jobs, where a tree costs twice the reading and most of its nodes are never looked at.

    libxml2 first reads the document with the locked-down parser (:func:`check_well_formed`):
    XMLInputError, as :func:`parse_xml` words it, when it is not well-formed.  Returns None, without
    parsing, for a document that is not plain, which the caller reads as a tree: plain is a document
    with no comment, CDATA section, DTD or processing instruction (no ``<!``, and ``<?`` only at the
    start), no namespace declaration (no ``xmlns``: it would change the names a tree reports), and
    no XML declaration naming an encoding other than UTF-8.  In a well-formed plain document every
    ``<`` opens or closes an element and character data holds none, so the pattern below finds
    exactly the elements, and the text, that a tree would hold."""
    # One memchr for "!" and "?" first: looking for "<!" itself costs a compare at each of millions of "<".
    if (("!" in text and "<!" in text) or ("?" in text and text.find("<?", 1) >= 0) or "xmlns" in text
            or _FOREIGN_ENCODING.match(text)):
        return None
    # The str as it is (no 65 MB copy to encode it), but lxml refuses a str that declares an encoding.
    check_well_formed(text.encode("utf-8") if text.startswith("<?") else text, max_bytes=max_bytes, what=what)
    found: list[tuple[str, str]] = re.findall(f"<({alternation(tags)}){_ATTRIBUTES_AND_TEXT}", text)
    if "\r" in text or "&" in text:
        return [(tag, _character_data(raw)) for tag, raw in found]
    return found


def strip_namespaces(root: etree._Element) -> etree._Element:
    """Drop namespace URIs from element tags in place (peers differ on whether they send one)."""
    for element in root.iter(etree.Element):
        tag = element.tag
        if isinstance(tag, str) and tag.startswith("{"):
            element.tag = tag.split("}", 1)[1]
    etree.cleanup_namespaces(root)
    return root


def escape_text(text: str) -> str:
    """``text`` as XML character data, for XML written by hand (SSSRMAP records and responses); CR kept as ``&#13;``."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def escape_attribute(text: str) -> str:
    """``text`` as a double-quoted XML attribute value; newlines and tabs kept as character references."""
    return escape_text(text).replace('"', "&quot;").replace("\n", "&#10;").replace("\t", "&#9;")
