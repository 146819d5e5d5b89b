"""One message from the broker judged: accepted as a site's document, or refused with one line.

A message is accepted only when all of these hold, checked in this order
(the cheap ones first, so a flood of junk costs little):

1. its body is at most ``max_message_bytes`` (default 8 MB);
2. its routing key is ``KIND.SITE`` for a kind this view keeps
   (``glue21.json``, ``glue.ldif``, ``crr.json``) and its ``site_id``
   header is the site the key names (glueinfo's amqp output writes both);
3. it carries a ``user_id`` (checked by RabbitMQ against the login) and the
   senders file binds that sender to the site (glueinfo.federate.trust);
4. its body parses: JSON for the JSON kinds (an object; every
   ``AdminDomain`` in a GLUE 2 document is this site's), LDIF for
   ``glue.ldif`` (gzip as ``content_encoding`` says, at most
   ``max_unpacked_bytes`` once unpacked; every entry below the site's own
   containers: ``mds-vo-name=resource`` or ``mds-vo-name=SITE`` under
   o=grid, ``GLUE2GroupID=resource`` or ``GLUE2DomainID=SITE`` under
   o=glue; every AdminDomain and GlueSite entry this site's, and the
   site's own AdminDomain there when it sends GLUE 2 entries).

Anything else is a :class:`Refusal`: its reason is one line that names the
routing key, the sender and what was wrong; the caller logs it, counts it
and drops the message, which is never loaded.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union
from urllib.parse import unquote_to_bytes

import msgspec

from glueinfo.core.ldif import Entry, LDIFError, parse_dn, parse_ldif
from glueinfo.core.text import one_line
from glueinfo.federate.trust import Senders

KINDS = ("glue21.json", "glue.ldif", "crr.json")  # the routing key's first words, as glueinfo's amqp output sends them
JSON_KINDS = {"glue21.json", "crr.json"}
DEFAULT_MAX_MESSAGE = 8 << 20
DEFAULT_MAX_UNPACKED = 256 << 20


@dataclass(frozen=True)
class Limits:
    max_message_bytes: int = DEFAULT_MAX_MESSAGE
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED


@dataclass(frozen=True)
class Received:
    """An accepted document: ``body`` as it came (still compressed for glue.ldif), ``entries``
    parsed for glue.ldif (None for JSON kinds)."""

    site_id: str
    kind: str
    body: bytes
    sender: str
    message_id: str
    sent_at: Optional[float]
    content_encoding: str
    entries: Optional[list[Entry]] = None
    blocks: Optional[dict[bytes, list[Entry]]] = None  # glue.ldif: each record's digest -> its entries


@dataclass(frozen=True)
class Refusal:
    routing_key: str
    sender: str
    reason: str
    kind: str = "invalid"  # oversized, untrusted, invalid: the /metrics label

    def __str__(self) -> str:
        return f"refused {self.routing_key!r} from {self.sender or 'an unnamed sender'}: {self.reason}"


def split_routing_key(routing_key: str) -> Optional[tuple[str, str]]:
    """(kind, site word) of ``KIND.SITE``, or None when the kind is not one this view keeps."""
    kind, _dot, word = routing_key.rpartition(".")
    return (kind, word) if kind in KINDS and word else None


def site_of_word(word: str) -> Optional[str]:
    """The site id a routing key's site word stands for (``%XX`` unescaped), None if not UTF-8."""
    try:
        return unquote_to_bytes(word).decode("utf-8")
    except UnicodeDecodeError:
        return None


def unpack(body: bytes, encoding: str, limit: int) -> bytes:
    """The body without its ``content_encoding`` (gzip or none), at most ``limit`` bytes; ValueError."""
    if not encoding or encoding == "identity":
        return body
    if encoding != "gzip":
        raise ValueError(f"content_encoding {encoding!r} is not gzip")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"not gzip: {exc}") from None
    if len(data) > limit:
        raise ValueError(f"over {limit} bytes once unpacked")
    if not inflater.eof:
        raise ValueError("gzip data cut short")
    return data


def _last_rdn(dn: str) -> Optional[tuple[str, str]]:
    rdns = parse_dn(dn)
    return (rdns[0][0][0].lower(), rdns[0][0][1]) if rdns else None


Blocks = Mapping[bytes, list[Entry]]  # an LDIF record's digest -> the entries parsed from it


def parse_blocks(data: bytes, known: Blocks) -> tuple[list[Entry], dict[bytes, list[Entry]], list[Entry]]:
    """The LDIF's entries in order, its records by digest, and the entries of the records ``known``
    (the site's last document) does not hold: only those are parsed and judged again, so a site
    whose three entries of two thousand changed costs three parses, not two thousand.  LDIFError
    (one line) for a record that does not parse."""
    entries: list[Entry] = []
    blocks: dict[bytes, list[Entry]] = {}
    new: list[Entry] = []
    for record in data.split(b"\n\n"):
        if not record.strip():
            continue
        key = hashlib.blake2b(record, digest_size=16).digest()
        parsed = blocks.get(key) or known.get(key)
        if parsed is None:
            parsed = parse_ldif(record.decode("utf-8"))
            new.extend(parsed)
        blocks[key] = parsed
        entries.extend(parsed)
    return entries, blocks, new


def has_own_domain(entries: list[Entry], site_id: str) -> bool:
    """Whether the site's AdminDomain entry is among them, or they hold no GLUE 2 entry at all."""
    glue2 = False
    for entry in entries:
        if entry.dn[-6:].lower() == "o=glue":
            glue2 = True
            if entry.get("GLUE2DomainID") == [site_id] and _is_domain_entry(entry, "GLUE2DomainID"):  # cheap test first
                return True
    return not glue2


def check_ldif_entries(entries: list[Entry], site_id: str) -> Optional[str]:
    """Why these entries are not all this site's own (module docstring, item 4), or None."""
    for entry in entries:
        try:
            rdns = parse_dn(entry.dn)
        except LDIFError as exc:
            return f"entry {entry.dn!r}: {one_line(exc)}"
        if len(rdns) < 2:
            return f"entry {entry.dn!r}: a suffix itself, not a site's entry"
        suffix = [(name.lower(), value.lower()) for name, value in rdns[-1]]
        top = [(name.lower(), value) for name, value in rdns[-2]]
        if suffix == [("o", "grid")]:
            allowed = top in ([("mds-vo-name", "resource")], [("mds-vo-name", site_id)])
        elif suffix == [("o", "glue")]:
            allowed = top in ([("glue2groupid", "resource")], [("glue2domainid", site_id)])
        else:
            return f"entry {entry.dn!r}: neither below o=grid nor below o=glue"
        if not allowed:
            return f"entry {entry.dn!r}: not below this site's own tree (mds-vo-name=resource or {site_id}, " \
                   f"GLUE2GroupID=resource or GLUE2DomainID={site_id})"
        for attribute in ("GLUE2DomainID", "GlueSiteUniqueID"):
            if attribute in entry and any(str(v) != site_id for v in entry.get(attribute)) and \
                    _is_domain_entry(entry, attribute):
                return f"entry {entry.dn!r}: {attribute} {entry.get(attribute)[0]} is another site's"
    return None


def _is_domain_entry(entry: Entry, attribute: str) -> bool:
    """The entry that *is* the site (AdminDomain, GlueSite), not one pointing at it."""
    classes = {str(c).lower() for c in entry.get("objectClass")}
    return ("glue2admindomain" in classes) if attribute == "GLUE2DomainID" else ("gluesite" in classes)


def _check_json(kind: str, data: bytes, site_id: str) -> Optional[str]:
    try:
        document = msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # a string not UTF-8 is not JSON either
        return f"not JSON: {one_line(exc)}"
    if not isinstance(document, dict):
        return "not a JSON object"
    if kind == "glue21.json":
        domains = document.get("AdminDomain", [])
        if not isinstance(domains, list):
            return "AdminDomain is not a list"
        for domain in domains:
            if not isinstance(domain, dict) or domain.get("ID") != site_id:
                claimed = domain.get("ID") if isinstance(domain, dict) else domain
                return f"AdminDomain {claimed!r} is another site's"
    return None


def judge(routing_key: str, headers: Optional[Mapping[str, Any]], user_id: Optional[str], body: bytes,
          content_encoding: Optional[str], message_id: Optional[str], timestamp: Optional[int],
          senders: Senders, limits: Limits, known: Optional[Blocks] = None) -> Union[Received, Refusal]:
    """Accept or refuse one message (module docstring).  ``known``: the records of the site's LDIF
    held now (:func:`parse_blocks`), judged when they came.  Never raises."""
    sender = str(user_id or "")
    if len(body) > limits.max_message_bytes:
        return Refusal(routing_key, sender, f"{len(body)} bytes, over the limit of {limits.max_message_bytes}",
                       "oversized")
    split = split_routing_key(routing_key)
    if split is None:
        return Refusal(routing_key, sender, f"not KIND.SITE with a kind this view keeps ({', '.join(KINDS)})")
    kind, word = split
    site_id = site_of_word(word)
    claimed = (headers or {}).get("site_id")
    if isinstance(claimed, bytes):
        claimed = claimed.decode("utf-8", "replace")
    if site_id is None or claimed != site_id:
        return Refusal(routing_key, sender, f"its site_id header {claimed!r} is not the site its routing key names")
    if not sender:
        return Refusal(routing_key, sender, "no user_id: the sender is unknown", "untrusted")
    if not senders.may_send(sender, site_id):
        return Refusal(routing_key, sender, f"{sender!r} may not publish for site {site_id!r} "
                       f"(not bound to it in {senders.path})", "untrusted")
    encoding = str(content_encoding or "")
    try:
        data = unpack(body, encoding, limits.max_unpacked_bytes)
    except ValueError as exc:
        return Refusal(routing_key, sender, one_line(exc), "oversized" if "once unpacked" in str(exc) else "invalid")
    entries = blocks = None
    if kind in JSON_KINDS:
        problem = _check_json(kind, data, site_id)
    else:
        try:
            entries, blocks, new = parse_blocks(data, known or {})
            problem = check_ldif_entries(new, site_id)
            if problem is None and not has_own_domain(entries, site_id):  # its GLUE 2 entries go below it
                problem = f"no AdminDomain entry GLUE2DomainID={site_id} among the GLUE 2 entries"
        except (LDIFError, UnicodeDecodeError, ValueError) as exc:
            problem = f"not LDIF: {one_line(exc)}"
    if problem is not None:
        return Refusal(routing_key, sender, problem, "untrusted" if "another site" in problem or "own tree" in problem
                       else "invalid")
    return Received(site_id, kind, body, sender, str(message_id or ""),
                    float(timestamp) if isinstance(timestamp, int) else None, encoding, entries, blocks)
