"""The one XML parser setup of glueinfo: every XML document we read goes through here.

Input comes from the network (SSSRMAP requests, agents' /node.xml), so the
parser is locked down: no entity substitution, no DTD loading, no network
access, libxml2's default size and depth limits (``huge_tree`` off), and a
byte limit checked before libxml2 sees anything.  Documents that declare a
DTD or entities are refused outright: nothing glueinfo reads needs them, and
refusing them is simpler to reason about than expanding them safely (no XXE,
no billion laughs).

lxml parser objects are not thread-safe, so each call makes its own (a few
microseconds).
"""

from __future__ import annotations

import re
from typing import Union

from lxml import etree

from glueinfo.core.errors import GlueinfoError

DEFAULT_MAX_BYTES = 16 * 2**20

# A quick byte-level look before parsing; the check after parsing catches
# what this misses (UTF-16 documents, odd spacing).
_DTD_BYTES = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)


class XMLInputError(GlueinfoError, ValueError):
    """XML we refuse to read; the message is one line naming what was wrong."""


def make_parser() -> etree.XMLParser:
    """A fresh, locked-down lxml parser (for callers that need the object itself)."""
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        collect_ids=False,
    )


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def parse_xml(data: Union[bytes, str], *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "XML document") -> etree._Element:
    """Parse ``data`` and return its root element, or raise :class:`XMLInputError`.

    ``what`` names the document in error messages ("SSSRMAP request", "Node XML from wn01").
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise XMLInputError(f"{what}: expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise XMLInputError(f"{what}: {len(data)} bytes is over the limit of {max_bytes} bytes")
    if not data or data.isspace():  # not strip(): that copies a 50 MB batch-system document to look at it
        raise XMLInputError(f"{what}: empty document")
    if b"!" in data and _DTD_BYTES.search(data):  # no "!", no "<!": one memchr instead of a regex over 50 MB
        raise XMLInputError(f"{what}: DTDs and entity declarations are not accepted")
    try:
        root = etree.fromstring(data, make_parser())
    except etree.XMLSyntaxError as exc:
        raise XMLInputError(f"{what}: not well-formed XML: {_one_line(exc.msg or exc)}") from None
    except (ValueError, TypeError) as exc:  # lxml's own refusals, e.g. an unsupported encoding
        raise XMLInputError(f"{what}: cannot parse: {_one_line(exc)}") from None
    if root is None:
        raise XMLInputError(f"{what}: no root element")
    docinfo = root.getroottree().docinfo
    if docinfo.internalDTD is not None or docinfo.doctype:
        raise XMLInputError(f"{what}: DTDs and entity declarations are not accepted")
    # No walk for entity reference nodes: with no DTD (both checks above) an entity other than the five
    # predefined ones and character references is undeclared, which libxml2 refuses as not well-formed
    # (WFC: Entity Declared), so the tree cannot hold one (tests/unit: entity references are refused).
    return root


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
