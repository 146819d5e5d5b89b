"""Publish stage: make an LDAP server's trees under one or more bases equal to ours.

``sync_tree(entries, LdapTarget(...))`` reads what the server has under each
base (``base_dn`` and ``extra_bases``, e.g. mds-vo-name=resource,o=grid and
GLUE2GroupID=resource,o=glue), then adds what is missing (parents first),
modifies only the attributes that differ (one modify per entry) and deletes
what is no longer published (children first).  A second run with nothing
changed sends no write at all.

Reading 40,000 entries in full takes far longer than the run's budget, so
the comparison is done in steps:

1. one search per base lists the server's DNs with their ``entryCSN`` (a
   deletion by someone else must be seen; slapd changes an entry's entryCSN
   on every write, whoever makes it), read off the connection's socket
   (:func:`search_subtree`: ldap3's decoding took 2 s for 80,000 entries);
2. a state file remembers, for each entry glueinfo wrote or confirmed, the
   entryCSN it had then and a digest of the entry glueinfo published;
3. an entry whose entryCSN and digest both still match needs no further
   look; every other entry that exists on both sides is read in full and
   compared attribute by attribute.

The state file is only a cache: missing, unreadable or for another server or
other bases, it is ignored (everything is read in full) and rewritten
atomically at the end.  A server that does not keep entryCSN is always read
in full.

Writes are pipelined: up to ``window`` requests are on the wire before their
answers are read (each answer is matched to its request by message id).  An
add is sent only once the server has confirmed its parent (or the parent was
already there); a delete only once every child being deleted was answered.
Every write the server refuses is reported with the DN, the server's result
code and message (``PublishReport.rejected``); the other writes still go
ahead, and the descendants of a refused add are not sent and are reported as
such, after it.  An unreachable server or a failed bind is a
``PublishError`` with a one-line message, before anything is sent; a
connection lost during the writes is one too (what the server confirmed by
then stays; the next run compares and completes it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import math
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Optional, Union

from glueinfo.core.errors import PublicationError
from glueinfo.core.ldif import Entry, dn_key, parent_dn, parse_dn, value_text

if TYPE_CHECKING:  # ldap3 is imported when a publish talks to a server, not when this module loads
    from ldap3 import Connection

log = logging.getLogger(__name__)

STATE_VERSION = 3  # 3: several bases, the newest entryCSN per base
# Above this many entries to compare in full, one subtree search beats one base search each.
FULL_READ_THRESHOLD = 200
# Writes in flight on the connection.  slapd answers in about 0.2 ms each; at 64 its
# worker threads stay busy while we encode the next ones (benchmarks/ldap_bulk.py).
DEFAULT_WINDOW = 64
# Far above ldap3's own message ids (it counts up from 1 on the same connection).
_FIRST_MESSAGE_ID = 0x40000000


class PublishError(PublicationError):
    """The server cannot be used at all (unreachable, bind refused, base missing); one line."""


@dataclass(frozen=True)
class LdapTarget:
    url: str
    bind_dn: str
    password: str
    base_dn: str
    timeout_s: float = 10.0
    state_file: Optional[str] = None  # None: no state file, every common entry is compared in full
    extra_bases: tuple[str, ...] = ()  # further subtrees kept equal to ours, e.g. GLUE2GroupID=resource,o=glue
    window: int = DEFAULT_WINDOW  # writes sent before their answers are read (1: one at a time)

    @property
    def bases(self) -> tuple[str, ...]:
        """base_dn then the extra bases, each once."""
        seen: dict[str, str] = {}
        for base in (self.base_dn, *self.extra_bases):
            seen.setdefault(dn_key(base), base)
        return tuple(seen.values())


@dataclass(frozen=True)
class Rejection:
    dn: str
    operation: str  # add, modify, delete
    code: int
    result: str  # the result's name, e.g. objectClassViolation
    message: str  # the server's diagnostic message

    def __str__(self) -> str:
        message = f": {self.message}" if self.message else ""
        return f"{self.dn}: {self.operation} refused: {self.result} ({self.code}){message}"


@dataclass
class PublishReport:
    added: int = 0
    modified: int = 0
    deleted: int = 0
    unchanged: int = 0
    compared_in_full: int = 0  # entries read attribute by attribute (the rest matched by entryCSN + digest)
    writes: int = 0  # add/modify/delete operations sent
    rejected: list[Rejection] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.rejected

    def summary(self) -> str:
        return (f"{self.added} added, {self.modified} modified, {self.deleted} deleted, {self.unchanged} unchanged "
                f"({self.writes} writes); {len(self.rejected)} refused")

    def as_dict(self) -> dict[str, Any]:
        return {"added": self.added, "modified": self.modified, "deleted": self.deleted, "unchanged": self.unchanged,
                "compared_in_full": self.compared_in_full, "writes": self.writes, "rejected": len(self.rejected),
                "seconds": round(self.seconds, 3)}


# -- helpers ------------------------------------------------------------------------------

def split_bases(text: str) -> tuple[str, ...]:
    """[ldap] extra_bases / --extra-base text: DNs separated by ';' (a DN has commas)."""
    return tuple(part.strip() for part in text.split(";") if part.strip())


def entry_digest(entry: Entry) -> str:
    """What we published, as a short digest of its DN and attributes (in glueinfo's stable order).
    marshal is three times faster than repr here; a value it cannot take falls back to repr."""
    try:
        data = marshal.dumps((entry.dn, entry.attributes), 2)  # version 2: no back-references, so no refcount dependence
    except ValueError:
        data = f"{entry.dn}\n{entry.attributes!r}".encode()
    return hashlib.blake2b(data, digest_size=10).hexdigest()


def _values(values: Iterable[Any]) -> list[str]:
    return [value_text(v) for v in values]


def _attribute_map(entry: Entry) -> dict[str, tuple[str, list[str]]]:
    """lower-case name -> (spelling, values as LDAP strings)."""
    return {name.lower(): (name, _values(values)) for name, values in entry.attributes.items()}


def _server_map(raw: dict[str, list[bytes]]) -> dict[str, tuple[str, list[str]]]:
    out: dict[str, tuple[str, list[str]]] = {}
    for name, values in raw.items():
        texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values]
        key = name.lower()
        if key in out:
            out[key][1].extend(texts)
        else:
            out[key] = (name, texts)
    return out


def _structural(classes: Sequence[str]) -> str:
    """Our entries list the abstract top class first and the structural class second."""
    names = [c.lower() for c in classes]
    return names[1] if len(names) > 1 else (names[0] if names else "")


Changes = dict[str, list[tuple[str, list[str]]]]  # ldap3 modify changes: attribute -> [(MODIFY_REPLACE, values)]


def changes_for(new: Entry, server_attributes: dict[str, list[bytes]]) -> Optional[Changes]:
    """ldap3 modify changes turning the server's entry into ``new`` (only the
    attributes that differ); {} when equal; None when only delete + add can do
    it (the structural object class changed)."""
    import ldap3

    ours = _attribute_map(new)
    theirs = _server_map(server_attributes)
    ours_classes = ours.get("objectclass", ("objectClass", []))[1]
    theirs_classes = theirs.get("objectclass", ("objectClass", []))[1]
    if {c.lower() for c in ours_classes} != {c.lower() for c in theirs_classes}:
        if _structural(ours_classes) != _structural(theirs_classes) and theirs_classes:
            return None
    rdn_attrs = {attr.lower(): value for attr, value in (parse_dn(new.dn)[0] if new.dn else [])}
    changes: Changes = {}
    for key, (name, values) in ours.items():
        server = theirs.get(key)
        if server is not None and sorted(server[1]) == sorted(values):
            continue
        if server is not None and key == "objectclass" and \
                sorted(v.casefold() for v in server[1]) == sorted(v.casefold() for v in values):
            continue  # object class names match case-insensitively: MDS is the schema's Mds, nothing to write
        if server is not None and key in rdn_attrs and sorted(v.casefold() for v in server[1]) == sorted(v.casefold() for v in values):
            continue  # the naming value differs only in case: slapd would refuse to change it, and matches it anyway
        changes[name] = [(ldap3.MODIFY_REPLACE, values)]
    for key, (name, _server_values) in theirs.items():
        if key not in ours:
            changes[name] = [(ldap3.MODIFY_REPLACE, [])]
    return changes


# -- the state file ----------------------------------------------------------------------

def default_state_file(url: str, base_dn: str) -> str:
    """$XDG_CACHE_HOME/glueinfo (or ~/.cache/glueinfo) / publish-<hash of url and base>.json"""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha1(f"{url}\n{dn_key(base_dn)}".encode()).hexdigest()[:12]
    return os.path.join(cache, "glueinfo", f"publish-{digest}.json")


@dataclass
class PublishState:
    """What the state file remembers: dn key -> [entryCSN, digest], and per base (its
    key) the newest entryCSN seen below it (read only by the glueinfo versions that listed DNs
    and entryCSNs in two searches; still written, so that going back to one finds the file good)."""

    entries: dict[str, list[str]] = field(default_factory=dict)
    max_csn: dict[str, str] = field(default_factory=dict)


def _bases_key(bases: Sequence[str]) -> list[str]:
    return sorted(dn_key(b) for b in bases)


def load_state(path: Optional[str], url: str, bases: Sequence[str]) -> PublishState:
    """The state file's content; empty when absent, unreadable or for another server/bases."""
    if not path:
        return PublishState()
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("version") != STATE_VERSION or data.get("url") != url or data.get("bases") != _bases_key(bases):
            return PublishState()
        entries, max_csn = data.get("entries"), data.get("max_csn")
        if not isinstance(entries, dict) or not isinstance(max_csn, dict):
            return PublishState()
        return PublishState(entries=entries, max_csn={str(k): str(v) for k, v in max_csn.items()})
    except FileNotFoundError:
        return PublishState()
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("publish state file %s unreadable (%s): comparing every entry in full", path, exc)
        return PublishState()


def save_state(path: Optional[str], url: str, bases: Sequence[str], state: PublishState) -> None:
    """Write the state file atomically (temporary file + rename); a failure is a warning, not an error."""
    if not path:
        return
    try:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".publish-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"version": STATE_VERSION, "url": url, "bases": _bases_key(bases), "max_csn": state.max_csn,
                           "entries": state.entries}, handle, separators=(",", ":"))
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        log.warning("cannot write publish state file %s: %s (the next run compares every entry in full)", path, exc)


# -- talking to the server ---------------------------------------------------------------

def connect(target: LdapTarget) -> Connection:
    """A bound ldap3 connection, or PublishError with one line."""
    import ldap3
    from ldap3.core.exceptions import LDAPException

    try:
        server = ldap3.Server(target.url, get_info=ldap3.NONE, connect_timeout=target.timeout_s)
        conn = ldap3.Connection(server, target.bind_dn or None, target.password or None, auto_bind=ldap3.AUTO_BIND_NONE,
                                check_names=False, auto_escape=False, raise_exceptions=False,
                                receive_timeout=max(1, math.ceil(target.timeout_s)),  # ldap3 packs it as an int
                                return_empty_attributes=False)
        conn.open()
        if not conn.bind():
            result = conn.result or {}
            raise PublishError(f"{target.url}: bind as {target.bind_dn or 'anonymous'} refused: "
                               f"{result.get('description', 'error')} ({result.get('result')}) {result.get('message', '')}".strip())
    except (LDAPException, OSError) as exc:
        raise PublishError(f"{target.url}: cannot reach the LDAP server: {' '.join(str(exc).split()) or type(exc).__name__}") from None
    except ValueError as exc:  # a malformed URL
        raise PublishError(f"{target.url}: {exc}") from None
    return conn


def _result(conn: Connection) -> tuple[int, str, str]:
    result = conn.result or {}
    return int(result.get("result", 80)), str(result.get("description", "other")), " ".join(str(result.get("message", "")).split())


_CREATE_BASE = {
    "o": (["organization"], "o"),
    "mds-vo-name": (["Mds"], "Mds-Vo-name"),
    "glue2groupid": (["GLUE2Group"], "GLUE2GroupID"),
}


def ensure_base(conn: Connection, base_dn: str) -> None:
    """Create the base DN (and missing parents) when it is absent: o=..., mds-vo-name=..., GLUE2GroupID=..."""
    missing = []
    dn = base_dn
    while dn:
        conn.search(dn, "(objectClass=*)", search_scope="BASE", attributes=["1.1"])
        code = _result(conn)[0]
        if code == 0:
            break
        if code != 32:  # anything but noSuchObject: the server cannot tell us
            raise PublishError(f"cannot read the base {base_dn}: {_result(conn)[1]} ({code}) {_result(conn)[2]}".strip())
        missing.append(dn)
        dn = parent_dn(dn)
    for dn in reversed(missing):
        attr, value = parse_dn(dn)[0][0]
        known = _CREATE_BASE.get(attr.lower())
        if known is None:
            raise PublishError(f"the base {base_dn} does not exist and glueinfo cannot create {dn}")
        classes, name = known
        conn.add(dn, attributes={"objectClass": classes, name: [value]})  # type: ignore[no-untyped-call]  # types-ldap3 leaves add/modify/delete unannotated
        code, description, message = _result(conn)
        if code not in (0, 68):  # 68: someone else created it meanwhile
            raise PublishError(f"cannot create the base entry {dn}: {description} ({code}) {message}".strip())


def _search(conn: Connection, base: str, attributes: list[str], scope: str = "SUBTREE",
            filter: Optional[bytes] = None) -> Iterable[tuple[str, dict[str, list[bytes]]]]:
    """(DN, raw attributes) of each entry the search finds (``filter``: an encoded filter, by
    default every entry).  A subtree is read by :func:`search_subtree` on the connection's own
    socket; a BASE search of one DN through ldap3 (nothing when it fails: the entry is gone)."""
    if scope == "BASE":
        conn.search(base, "(objectClass=*)", search_scope="BASE", attributes=attributes)
        if _result(conn)[0] == 0:
            yield from ((r["dn"], r.get("raw_attributes", {})) for r in conn.response or ()
                        if r.get("type") == "searchResEntry")
        return
    yield from search_subtree(conn.socket, base, attributes, filter or ANY_ENTRY,
                              max(1, math.ceil(conn.receive_timeout or 10)))


def _csn(attributes: dict[str, list[bytes]]) -> Optional[str]:
    csn = attributes.get("entryCSN")
    return csn[0].decode("ascii", "replace") if csn else None


def _changed_since(conn: Connection, base: str, csn: str) -> dict[str, str]:
    """dn key -> entryCSN of the entries written at or after ``csn`` (slapd orders CSNs: csnOrderingMatch)."""
    return {dn_key(dn): _csn(attributes) or "" for dn, attributes
            in _search(conn, base, ["entryCSN"], filter=greater_or_equal("entryCSN", csn))}


# -- pipelined writes --------------------------------------------------------------------
#
# ldap3 spends about 1.4 ms of CPU encoding one add through pyasn1 (slapd needs about
# 0.2 ms to store it), so writes are encoded here (BER, RFC 4511 section 4.7 to 4.9) and
# sent on the bound ldap3 connection's own socket, many at a time; each answer is
# matched to its request by message id.  Searches and the bind stay with ldap3.

_MODIFY_OPERATIONS = {"MODIFY_ADD": 0, "MODIFY_DELETE": 1, "MODIFY_REPLACE": 2, "MODIFY_INCREMENT": 3}
_ADD_REQUEST, _DELETE_REQUEST, _MODIFY_REQUEST = 0x68, 0x4A, 0x66
_RESPONSES = {0x67: "modify", 0x69: "add", 0x6B: "delete"}
_EXTENDED_RESPONSE = 0x78


def _ber_length(length: int) -> bytes:
    if length < 0x80:
        return bytes((length,))
    body = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes((0x80 | len(body),)) + body


def _tlv(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + _ber_length(len(body)) + body


def _octets(text: str) -> bytes:
    return _tlv(0x04, text.encode("utf-8"))


def _message(message_id: int, operation: bytes) -> bytes:
    return _tlv(0x30, _tlv(0x02, message_id.to_bytes((message_id.bit_length() + 8) // 8, "big")) + operation)


def _attribute(name: str, values: Sequence[str]) -> bytes:
    return _tlv(0x30, _octets(name) + _tlv(0x31, b"".join(_octets(v) for v in values)))


def encode_add(message_id: int, dn: str, attributes: dict[str, list[str]]) -> bytes:
    """An LDAPMessage with an AddRequest."""
    body = b"".join(_attribute(name, values) for name, values in attributes.items())
    return _message(message_id, _tlv(_ADD_REQUEST, _octets(dn) + _tlv(0x30, body)))


def encode_delete(message_id: int, dn: str) -> bytes:
    """An LDAPMessage with a DelRequest."""
    return _message(message_id, _tlv(_DELETE_REQUEST, dn.encode("utf-8")))


def encode_modify(message_id: int, dn: str, changes: Changes) -> bytes:
    """An LDAPMessage with a ModifyRequest (ldap3's change format, as changes_for gives it)."""
    body = b"".join(_tlv(0x30, _tlv(0x0A, bytes((_MODIFY_OPERATIONS[operation],))) + _attribute(name, values))
                    for name, operations in changes.items() for operation, values in operations)
    return _message(message_id, _tlv(_MODIFY_REQUEST, _octets(dn) + _tlv(0x30, body)))


def _read_header(data: bytes | bytearray, pos: int, end: int) -> Optional[tuple[int, int, int]]:
    """(tag, start of the value, its end) of the TLV at pos; None when data ends before the value does."""
    if pos + 2 > end:
        return None
    tag, first = data[pos], data[pos + 1]
    pos += 2
    if first & 0x80:
        count = first & 0x7F
        if pos + count > end:
            return None
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    else:
        length = first
    return (tag, pos, pos + length) if pos + length <= end else None


class ConnectionLost(PublishError):
    """The server closed the connection or stopped answering in the middle of the writes."""


def decode_result(data: bytes | bytearray, start: int, end: int) -> tuple[int, int, int, str]:
    """(message id, protocolOp tag, resultCode, diagnosticMessage) of one LDAPMessage whose
    body is data[start:end]; ConnectionLost on anything that is not an LDAPResult."""
    try:
        header = _read_header(data, start, end)
        if header is None or header[0] != 0x02:
            raise ValueError("no message id")
        message_id = int.from_bytes(data[header[1]:header[2]], "big")
        op = _read_header(data, header[2], end)
        if op is None:
            raise ValueError("no operation")
        code = _read_header(data, op[1], op[2])
        matched = _read_header(data, code[2], op[2]) if code else None
        diagnostic = _read_header(data, matched[2], op[2]) if matched else None
        if code is None or diagnostic is None or code[0] != 0x0A:
            raise ValueError("not an LDAPResult")
        message = bytes(data[diagnostic[1]:diagnostic[2]]).decode("utf-8", "replace")
        return message_id, op[0], int.from_bytes(data[code[1]:code[2]], "big"), message
    except (ValueError, TypeError) as exc:
        raise ConnectionLost(f"unreadable answer from the server ({exc})") from None


@dataclass
class _Answer:
    tag: Any  # what the caller attached to the request
    code: int
    message: str


class Pipeline:
    """Requests on a bound connection's socket with at most ``window`` unanswered.

    ``send`` queues a request (encoded with the message id it is given); ``answers``
    sends what is queued and returns the answers read so far (at least one while any
    request is unanswered).  ConnectionLost (a PublishError) when the server closes the
    connection, sends something that is not an answer, or is silent for ``timeout_s``.
    """

    def __init__(self, sock: Any, window: int, timeout_s: float) -> None:
        self.sock = sock
        self.window = max(1, window)
        self.timeout_s = timeout_s
        self.next_id = _FIRST_MESSAGE_ID
        self.unanswered: dict[int, Any] = {}
        self.queued: list[bytes] = []
        self.buffer = bytearray()

    def room(self) -> int:
        return self.window - len(self.unanswered) - len(self.queued)

    def send(self, encode: Callable[[int], bytes], tag: Any) -> None:
        message_id = self.next_id
        self.next_id = self.next_id + 1 if self.next_id < 0x7FFFFFFF else _FIRST_MESSAGE_ID
        self.queued.append(encode(message_id))
        self.unanswered[message_id] = tag

    def answers(self) -> list[_Answer]:
        try:
            if self.queued:
                self.sock.sendall(b"".join(self.queued))
                self.queued.clear()
            if not self.unanswered:
                return []
            self.sock.settimeout(self.timeout_s)
            found: list[_Answer] = []
            while not found:
                chunk = self.sock.recv(262144)
                if not chunk:
                    hint = ("; slapd closes a connection with more than conn_max_pending_auth (1000) unanswered: "
                            "lower [ldap] window") if len(self.unanswered) > 100 else ""
                    raise ConnectionLost(f"the server closed the connection with {len(self.unanswered)} writes "
                                         f"unanswered{hint}")
                self.buffer += chunk
                found = self._parse()
            return found
        except TimeoutError:
            raise ConnectionLost(f"no answer from the server within {self.timeout_s:g} s "
                                 f"({len(self.unanswered)} writes unanswered)") from None
        except OSError as exc:
            raise ConnectionLost(f"connection lost during the writes: {exc.strerror or exc}") from None

    def _parse(self) -> list[_Answer]:
        found = []
        data, pos, end = self.buffer, 0, len(self.buffer)
        while True:
            header = _read_header(data, pos, end)
            if header is None:
                break
            message_id, op, code, message = decode_result(data, header[1], header[2])
            pos = header[2]
            if message_id == 0 and op == _EXTENDED_RESPONSE:  # notice of disconnection (RFC 4511 4.4.1)
                raise ConnectionLost(f"the server ended the connection: {message or code}")
            if op not in _RESPONSES or message_id not in self.unanswered:
                raise ConnectionLost(f"unexpected answer from the server (message {message_id}, operation {op:#x})")
            found.append(_Answer(self.unanswered.pop(message_id), code, message))
        del self.buffer[:pos]
        return found


# -- reading a subtree ------------------------------------------------------------------
#
# ldap3 decodes each entry of a search through its generic BER reader into dictionaries of
# its own (about 30 µs an entry): listing 80,000 DNs took over 2 s of a no-change publish.
# A subtree is read here instead (RFC 4511 4.5, with the paged results control of RFC 2696),
# on the bound connection's socket as the writes are; only DNs and raw values are kept.

_SEARCH_REQUEST, _SEARCH_ENTRY, _SEARCH_DONE, _SEARCH_REFERENCE = 0x63, 0x64, 0x65, 0x73
_INTERMEDIATE_RESPONSE = 0x79
_PAGED_RESULTS = "1.2.840.113556.1.4.319"
_PAGED_RESULTS_OID = _PAGED_RESULTS.encode("ascii")
PAGE_SIZE = 1000  # as ldap3's paged search was asked: under any size.pr limit a server is likely to set


def _integer(value: int) -> bytes:
    return _tlv(0x02, value.to_bytes((value.bit_length() + 8) // 8, "big"))


def present(attribute: str) -> bytes:
    """The filter ``(attribute=*)``."""
    return _tlv(0x87, attribute.encode("utf-8"))


def greater_or_equal(attribute: str, value: str) -> bytes:
    """The filter ``(attribute>=value)``."""
    return _tlv(0xA5, _octets(attribute) + _octets(value))


ANY_ENTRY = present("objectClass")


def encode_search(message_id: int, base: str, attributes: Sequence[str], filter: bytes, page_size: int,
                  cookie: bytes) -> bytes:
    """An LDAPMessage with a subtree SearchRequest (aliases never dereferenced: an alias below a
    base is an entry like any other, no size or time limit of its own) and the paged results
    control asking ``page_size`` entries after ``cookie``."""
    request = _tlv(_SEARCH_REQUEST, _octets(base) + b"\x0a\x01\x02" + b"\x0a\x01\x00" + _integer(0) + _integer(0)
                   + b"\x01\x01\x00" + filter + _tlv(0x30, b"".join(_octets(name) for name in attributes)))
    paging = _tlv(0x30, _integer(page_size) + _tlv(0x04, cookie))
    control = _tlv(0x30, _octets(_PAGED_RESULTS) + _tlv(0x04, paging))
    return _tlv(0x30, _integer(message_id) + request + _tlv(0xA0, control))


def search_subtree(sock: Any, base: str, attributes: Sequence[str], filter: bytes, timeout_s: float,
                   page_size: int = PAGE_SIZE) -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    """(DN, attribute name -> raw values) of every entry below and at ``base`` matching ``filter``
    (:func:`present`, :func:`greater_or_equal`), read page by page on a bound connection's
    socket with nothing else in flight on it; read it to its end before the connection is
    used again.  PublishError (one line) when the server refuses the search;
    ConnectionLost when it closes the connection, answers something else or is silent for
    ``timeout_s``."""
    cookie = b""
    message_id = _FIRST_MESSAGE_ID
    buffer = b""
    try:
        sock.settimeout(timeout_s)
        while True:
            sock.sendall(encode_search(message_id, base, attributes, filter, page_size, cookie))
            done: Optional[tuple[int, str, bytes]] = None
            while done is None:
                chunk = sock.recv(262144)
                if not chunk:
                    raise ConnectionLost(f"the server closed the connection while {base} was read")
                buffer = buffer + chunk if buffer else chunk
                found, done, used = _search_answers(buffer, message_id)
                buffer = buffer[used:]
                yield from found
            code, message, cookie = done
            if code != 0:
                raise PublishError(f"cannot read {base}: {_result_name(code)} ({code}) {' '.join(message.split())}".strip())
            if not cookie:
                return
            message_id += 1
    except TimeoutError:
        raise ConnectionLost(f"no answer from the server within {timeout_s:g} s while {base} was read") from None
    except OSError as exc:
        raise ConnectionLost(f"connection lost while {base} was read: {exc.strerror or exc}") from None


def _search_answers(data: bytes, message_id: int) -> tuple[list[tuple[str, dict[str, list[bytes]]]],
                                                             Optional[tuple[int, str, bytes]], int]:
    """The entries of the whole LDAPMessages at the start of ``data``, the (resultCode,
    diagnosticMessage, paging cookie) of the SearchResultDone when it is among them, and how
    many bytes were read.  ConnectionLost on anything but an answer to ``message_id``."""
    found: list[tuple[str, dict[str, list[bytes]]]] = []
    pos, end = 0, len(data)
    try:
        while True:
            message = _read_header(data, pos, end)
            if message is None:
                return found, None, pos
            stop = message[2]
            kind, number_at, number_end = _need(data, message[1], stop)
            if kind != 0x02:
                raise ValueError("no message id")
            op = _need(data, number_end, stop)
            tag, got = op[0], int.from_bytes(data[number_at:number_end], "big")
            if got == 0 and tag == _EXTENDED_RESPONSE:  # notice of disconnection (RFC 4511 4.4.1)
                raise ConnectionLost(f"the server ended the connection: {decode_result(data, message[1], stop)[3]}")
            if got != message_id:
                raise ValueError(f"an answer to message {got}")
            if tag == _SEARCH_ENTRY:
                found.append(_entry_of(data, op[1], op[2]))
            elif tag == _SEARCH_DONE:
                _, _, code, text = decode_result(data, message[1], stop)
                return found, (code, text, _paging_cookie(data, op[2], stop)), stop
            elif tag not in (_SEARCH_REFERENCE, _INTERMEDIATE_RESPONSE):  # a referral is not ours to follow
                raise ValueError(f"operation {tag:#x}")
            pos = stop
    except ValueError as exc:
        raise ConnectionLost(f"unreadable answer from the server to a search ({exc})") from None


def _need(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """:func:`_read_header` inside a message already read whole (ValueError when the TLV runs
    past ``end``), written out: it is called for every value of every entry listed."""
    if pos + 2 > end:
        raise ValueError("a value runs past its message")
    first = data[pos + 1]
    if first < 0x80:
        at = pos + 2
        stop = at + first
    else:
        at = pos + 2 + (first & 0x7F)
        stop = at + int.from_bytes(data[pos + 2:at], "big")
    if stop > end:
        raise ValueError("a value runs past its message")
    return data[pos], at, stop


def _entry_of(data: bytes, start: int, end: int) -> tuple[str, dict[str, list[bytes]]]:
    """The DN and attributes of a SearchResultEntry whose body is data[start:end]."""
    _, dn_at, dn_end = _need(data, start, end)
    _, pos, stop = _need(data, dn_end, end)
    attributes: dict[str, list[bytes]] = {}
    while pos < stop:
        _, at, partial_end = _need(data, pos, stop)
        _, name_at, name_end = _need(data, at, partial_end)
        _, at, last = _need(data, name_end, partial_end)
        values = attributes.setdefault(data[name_at:name_end].decode("utf-8", "replace"), [])
        while at < last:
            _, value_at, at = _need(data, at, last)
            values.append(data[value_at:at])
        pos = partial_end
    return data[dn_at:dn_end].decode("utf-8", "replace"), attributes


def _paging_cookie(data: bytes, pos: int, end: int) -> bytes:
    """The cookie of the paged results control among an LDAPMessage's controls (from ``pos`` to
    ``end``); b"" when there is none: the last page."""
    controls = _read_header(data, pos, end)
    if controls is None or controls[0] != 0xA0:
        return b""
    at = controls[1]
    while at < controls[2]:
        _, inside, control_end = _need(data, at, controls[2])
        _, oid_at, oid_end = _need(data, inside, control_end)
        at = oid_end
        if data[oid_at:oid_end] == _PAGED_RESULTS_OID:
            while at < control_end:  # the criticality, then the value
                tag, value_at, value_end = _need(data, at, control_end)
                if tag == 0x04:
                    _, paging_at, paging_end = _need(data, value_at, value_end)
                    _, _, size_end = _need(data, paging_at, paging_end)
                    _, cookie_at, cookie_end = _need(data, size_end, paging_end)
                    return data[cookie_at:cookie_end]
                at = value_end
            return b""
        at = control_end
    return b""


def _result_name(code: int) -> str:
    from ldap3.core.results import RESULT_CODES

    return str(RESULT_CODES.get(code, "other"))


# -- the sync ------------------------------------------------------------------------------

Progress = Callable[[int, int], None]  # (writes answered, writes planned), called as answers arrive


def below(key: str, base_keys: Sequence[str]) -> Optional[str]:
    """The first of the base keys the DN key ``key`` lies below (not the base itself), else None."""
    return next((b for b in base_keys if key.endswith("," + b)), None)


def sync_tree(entries: Sequence[Entry], target: LdapTarget, clock: Callable[[], float] = time.monotonic,
              progress: Optional[Progress] = None) -> PublishReport:
    """Make the server's trees under target.bases equal to ``entries`` (see the module docstring).

    ``entries`` must be parents first (as pipeline.build_site gives them);
    entries below none of the bases are not sent and are reported as refused.
    ``progress`` is called with (writes answered, writes planned) as the
    server answers.  Raises PublishError when the server cannot be used at
    all (or the connection is lost during the writes: what was answered by
    then stays written); refused writes are in the report.
    """
    return sync_keyed([(dn_key(entry.dn), entry) for entry in entries], target, clock, progress)


def sync_keyed(keyed: Sequence[tuple[str, Entry]], target: LdapTarget, clock: Callable[[], float] = time.monotonic,
               progress: Optional[Progress] = None) -> PublishReport:
    """:func:`sync_tree` of (dn_key of its DN, entry) pairs: for a caller that keyed them already."""
    start = clock()
    report = PublishReport()
    bases = target.bases
    base_keys = [dn_key(b) for b in bases]
    for key in base_keys:
        inner = below(key, base_keys)
        if inner is not None:
            raise PublishError(f"the bases overlap: {key} is below {inner}; give only one of them")
    suffixes = tuple("," + key for key in base_keys)
    where = f"the base {bases[0]}" if len(bases) == 1 else f"any of the bases {', '.join(bases)}"
    ours: dict[str, Entry] = {}
    for key, entry in keyed:
        if not key.endswith(suffixes):  # e.g. a static GLUE 2 file under o=glue, not published there
            report.rejected.append(Rejection(entry.dn, "add", 0, "notSent", f"not below {where}"))
            continue
        if key not in ours:
            ours[key] = entry
    order = list(ours)  # parents first, as given
    digests = {key: entry_digest(entry) for key, entry in ours.items()}
    # The server spells a DN as it was written, mostly as we wrote it: its key is then known.
    known_keys = {entry.dn: key for key, entry in ours.items()}

    conn = connect(target)
    try:
        for base in bases:
            ensure_base(conn, base)
        state = load_state(target.state_file, target.url, bases)

        # 1. What is there: every DN with its entryCSN, one search per base read off the
        #    socket (search_subtree).  slapd changes an entry's entryCSN on every write,
        #    whoever makes it: one that still has the entryCSN recorded is as we left it.
        server_dn: dict[str, str] = {}
        server_csn: dict[str, Optional[str]] = {}
        csn_below: dict[str, dict[str, Optional[str]]] = {}  # the same, per base (bases do not overlap)
        for base, base_key in zip(bases, base_keys, strict=True):
            found = csn_below[base_key] = {}
            for dn, attributes in _search(conn, base, ["entryCSN"]):
                key = known_keys.get(dn) or dn_key(dn)
                if key != base_key:
                    server_dn[key] = dn
                    found[key] = _csn(attributes)
            server_csn.update(found)

        # 2. Which common entries need a full comparison.
        to_compare = []
        recorded = state.entries
        unchanged = 0
        for key in order:
            if key not in server_dn:
                continue
            known = recorded.get(key)
            csn = server_csn[key]
            if known and csn and known[0] == csn and known[1] == digests[key]:
                unchanged += 1
            else:
                to_compare.append(key)
        report.unchanged += unchanged
        report.compared_in_full = len(to_compare)
        server_attrs: dict[str, dict[str, list[bytes]]] = {}
        if len(to_compare) > FULL_READ_THRESHOLD:
            wanted = set(to_compare)
            for base, base_key in zip(bases, base_keys, strict=True):
                if any(below(key, (base_key,)) for key in wanted):
                    for dn, attributes in _search(conn, base, ["*"]):
                        key = dn_key(dn)
                        if key in wanted:
                            server_attrs[key] = attributes
        else:
            for key in to_compare:
                for _dn, attributes in _search(conn, server_dn[key], ["*"], scope="BASE"):
                    server_attrs[key] = attributes

        # 3. Writes: modifications, deletions (children first), additions (parents first).
        written: set[str] = set()
        replace: list[str] = []
        modifies: list[tuple[str, Changes]] = []
        for key in to_compare:
            changes = changes_for(ours[key], server_attrs.get(key, {}))
            if changes is None:
                replace.append(key)
            elif not changes:
                report.unchanged += 1
                written.add(key)
            else:
                modifies.append((key, changes))
        stale = [key for key in server_dn if key not in ours] + replace
        adds = [key for key in order if key not in server_dn or key in replace]
        writer = _Writes(Pipeline(conn.socket, target.window, target.timeout_s), report, progress,
                         len(modifies) + len(stale) + len(adds))
        writer.modify([(key, server_dn[key], ours[key].dn, changes) for key, changes in modifies], written)
        writer.delete({key: server_dn[key] for key in stale}, set(replace))
        writer.add(adds, ours, set(replace), written)

        # 4. Remember what we know to be equal, with the entryCSN it has now: our
        #    writes have entryCSNs newer than anything read in step 1.
        if target.state_file:
            for key in stale:
                server_csn.pop(key, None)
                for mine in csn_below.values():
                    mine.pop(key, None)
            new_state = PublishState()
            for base, base_key in zip(bases, base_keys, strict=True):
                mine = csn_below[base_key]
                if base_key in writer.bases_written:
                    since = max(filter(None, mine.values()), default=None)
                    if since is None:
                        mine = {dn_key(dn): _csn(attributes) for dn, attributes in _search(conn, base, ["entryCSN"])}
                        mine.pop(base_key, None)
                    else:
                        mine.update(_changed_since(conn, base, since))
                    server_csn.update(mine)
                # Not read by this version; kept so that a state file stays good for one before it.
                newest = max(filter(None, mine.values()), default=None)
                if newest:
                    new_state.max_csn[base_key] = newest
            remembered = new_state.entries
            for key in order:
                csn = server_csn.get(key)
                if not csn:
                    continue
                previous = state.entries.get(key)
                if previous and previous[0] == csn and previous[1] == digests[key]:
                    remembered[key] = previous
                elif key in written:
                    remembered[key] = [csn, digests[key]]
            if new_state != state or not os.path.exists(target.state_file):  # nothing new: no 40,000-entry rewrite
                save_state(target.state_file, target.url, bases, new_state)
    finally:
        try:
            conn.unbind()
        except Exception:  # the connection may already be gone; nothing to clean up
            pass
    report.seconds = clock() - start
    return report


class _Writes:
    """Step 3 of sync_tree through a Pipeline, counting into the report."""

    def __init__(self, pipeline: Pipeline, report: PublishReport, progress: Optional[Progress], planned: int) -> None:
        self.pipeline, self.report, self.progress, self.planned = pipeline, report, progress, planned
        self.answered = 0
        self.bases_written: set[str] = set()  # ancestors of what was sent: the bases whose entryCSNs moved

    def _sent(self, key: str) -> None:
        self.report.writes += 1
        parent = key
        while parent:  # the base it is below: every ancestor but the root could be one
            parent = parent_dn(parent)
            self.bases_written.add(parent)

    def _answers(self) -> list[_Answer]:
        found = self.pipeline.answers()
        if not found:  # nothing in flight although writes are left: a bug here, never a wait forever
            raise PublishError(f"internal error: {self.planned - self.answered} writes left but none sent")
        self.answered += len(found)
        if self.progress is not None and found:
            self.progress(self.answered, self.planned)
        return found

    def _refused(self, answer: _Answer, dn: str, operation: str) -> bool:
        if answer.code == 0:
            return False
        self.report.rejected.append(Rejection(dn, operation, answer.code, _result_name(answer.code),
                                              " ".join(answer.message.split())))
        return True

    def modify(self, modifies: list[tuple[str, str, str, Changes]], written: set[str]) -> None:
        """Each (key, server's DN, our DN, changes): independent of each other."""
        pending = deque(modifies)
        left = len(modifies)
        while left:
            while pending and self.pipeline.room() > 0:
                key, server_dn, dn, changes = pending.popleft()
                self.pipeline.send(partial(encode_modify, dn=server_dn, changes=changes), (key, dn))
                self._sent(key)
            for answer in self._answers():
                left -= 1
                key, dn = answer.tag
                if not self._refused(answer, dn, "modify"):
                    self.report.modified += 1
                    written.add(key)

    def delete(self, stale: dict[str, str], replaced: set[str]) -> None:
        """Children before their parents: a parent is sent once all its children here were answered."""
        children_left: dict[str, int] = {}
        for key in stale:
            parent = parent_dn(key)
            if parent in stale:
                children_left[parent] = children_left.get(parent, 0) + 1
        ready = deque(sorted((k for k in stale if k not in children_left), key=lambda k: (-k.count(","), k)))
        left = len(stale)
        while left:
            while ready and self.pipeline.room() > 0:
                key = ready.popleft()
                self.pipeline.send(partial(encode_delete, dn=stale[key]), key)
                self._sent(key)
            for answer in self._answers():
                left -= 1
                key = answer.tag
                if not self._refused(answer, stale[key], "delete") and key not in replaced:
                    self.report.deleted += 1
                parent = parent_dn(key)
                if parent in children_left:
                    children_left[parent] -= 1
                    if not children_left[parent]:
                        ready.append(parent)

    def add(self, adds: list[str], ours: dict[str, Entry], replaced: set[str], written: set[str]) -> None:
        """Parents before children: a child is sent once the server confirmed its parent;
        the children of a refused entry are not sent and are reported as such."""
        to_add = set(adds)
        waiting: dict[str, list[str]] = {}
        ready: deque[str] = deque()
        for key in adds:
            parent = parent_dn(key)
            if parent in to_add:
                waiting.setdefault(parent, []).append(key)
            else:
                ready.append(key)
        left = len(adds)
        while left:
            while ready and self.pipeline.room() > 0:
                key = ready.popleft()
                entry = ours[key]
                attributes = {name: _values(values) for name, values in entry.attributes.items()}
                self.pipeline.send(partial(encode_add, dn=entry.dn, attributes=attributes), key)
                self._sent(key)
            for answer in self._answers():
                left -= 1
                key = answer.tag
                if self._refused(answer, ours[key].dn, "add"):
                    below = list(waiting.pop(key, ()))
                    while below:  # the whole subtree, parents first
                        child = below.pop(0)
                        left -= 1
                        self.answered += 1
                        self.report.rejected.append(Rejection(ours[child].dn, "add", 0, "notSent",
                                                              "its parent entry was refused"))
                        below[0:0] = waiting.pop(child, ())
                    continue
                if key in replaced:
                    self.report.modified += 1
                else:
                    self.report.added += 1
                written.add(key)
                ready.extend(waiting.pop(key, ()))


def write_delta(target: LdapTarget, old: Mapping[str, Entry], new: Union[Sequence[Entry], Mapping[str, Entry]],
                connection: Optional[Callable[[], Connection]] = None) -> PublishReport:
    """Write to the server only what differs between ``old`` (DN key -> entry: what it holds of
    these DNs, as this process last wrote or confirmed them) and ``new`` (parents first), without
    reading the server first: modifications, deletions (children first), additions (parents
    first), pipelined as :func:`sync_tree` writes.  For a writer that is the only one writing its
    subtrees and reconciles them with :func:`sync_tree` at its start and after any refusal (the
    federation view).  No connection is made when nothing differs; ``connection`` gives a bound
    one the caller keeps open between calls (default: one made for this call and closed after it).
    Refused writes are in the report; PublishError when the server cannot be used at all (the
    caller then drops a connection it keeps)."""
    start = time.monotonic()
    report = PublishReport()
    ours: dict[str, Entry] = {}
    if isinstance(new, Mapping):  # already keyed by dn_key, parents first
        ours = dict(new)
    else:
        for entry in new:
            ours.setdefault(dn_key(entry.dn), entry)
    modifies: list[tuple[str, Changes]] = []
    replace: list[str] = []
    for key, entry in ours.items():
        before = old.get(key)
        if before is None:
            continue
        if before is entry or before.attributes == entry.attributes:
            report.unchanged += 1
            continue
        held = {name: [value_text(v).encode() for v in values] for name, values in before.attributes.items()}
        changes = changes_for(entry, held)
        if changes is None:
            replace.append(key)
        elif changes:
            modifies.append((key, changes))
        else:
            report.unchanged += 1
    stale = [key for key in old if key not in ours] + replace
    adds = [key for key in ours if key not in old or key in replace]
    if not (modifies or stale or adds):
        report.seconds = time.monotonic() - start
        return report
    conn = connection() if connection is not None else connect(target)
    try:
        writer = _Writes(Pipeline(conn.socket, target.window, target.timeout_s), report, None,
                         len(modifies) + len(stale) + len(adds))
        written: set[str] = set()
        writer.modify([(key, old[key].dn, ours[key].dn, changes) for key, changes in modifies], written)
        writer.delete({key: old[key].dn for key in stale}, set(replace))
        writer.add(adds, ours, set(replace), written)
    finally:
        if connection is None:
            try:
                conn.unbind()
            except Exception:  # the connection may already be gone; nothing to clean up
                pass
    report.seconds = time.monotonic() - start
    return report
