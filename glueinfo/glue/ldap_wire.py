"""LDAP messages in BER (RFC 4511) on a bound ldap3 connection's own socket: the writer of
the sync's adds, modifies and deletes, and the reader of a subtree search.

ldap3 spends about 1.4 ms of CPU encoding one add through pyasn1 (slapd needs about 0.2 ms to
store it), and about 30 µs decoding each entry a search returns (listing 80,000 DNs took over
2 s of a no-change publish).  So both are done here, on the socket of the connection ldap3
opened and bound; the bind and BASE searches stay with ldap3.

* :class:`Pipeline` sends writes (:func:`encode_add`, :func:`encode_modify`,
  :func:`encode_delete`) with at most ``window`` unanswered, and matches each answer to its
  request by message id (RFC 4511 4.6 to 4.8).
* :func:`search_subtree` reads the entries below a base page by page (RFC 4511 4.5 with the
  paged results control of RFC 2696), keeping only DNs and raw values.

Whatever the server sends that is not the awaited answer, its closing of the connection and
its silence past the timeout are :class:`~glueinfo.glue.ldap_connection.ConnectionLost`; a
search it refuses is a :class:`~glueinfo.glue.ldap_connection.PublishError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from glueinfo.glue.ldap_connection import ConnectionLost, PublishError

# Far above ldap3's own message ids (it counts up from 1 on the same connection).
_FIRST_MESSAGE_ID = 0x40000000

Changes = dict[str, list[tuple[str, list[str]]]]  # ldap3 modify changes: attribute -> [(MODIFY_REPLACE, values)]


# -- writing ------------------------------------------------------------------------------

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
class Answer:
    """The server's answer to one request of a :class:`Pipeline`: its resultCode and diagnosticMessage."""

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

    def answers(self) -> list[Answer]:
        try:
            if self.queued:
                self.sock.sendall(b"".join(self.queued))
                self.queued.clear()
            if not self.unanswered:
                return []
            self.sock.settimeout(self.timeout_s)
            found: list[Answer] = []
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

    def _parse(self) -> list[Answer]:
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
            found.append(Answer(self.unanswered.pop(message_id), code, message))
        del self.buffer[:pos]
        return found


# -- reading a subtree ------------------------------------------------------------------

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
                raise PublishError(f"cannot read {base}: {result_name(code)} ({code}) {' '.join(message.split())}".strip())
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


def result_name(code: int) -> str:
    """The name of an LDAP resultCode (e.g. 32: noSuchObject); "other" for one ldap3 does not know."""
    from ldap3.core.results import RESULT_CODES

    return str(RESULT_CODES.get(code, "other"))
