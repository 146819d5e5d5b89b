"""The one LDIF writer and reader of glueinfo, and the DN helpers it needs.

Writing (RFC 2849):

* ``Entry`` holds a DN and an ordered mapping attribute -> values.  Values are
  ``str``, ``int`` or ``bool``: ``bool`` is written TRUE/FALSE (the LDAP
  BOOLEAN syntax), ``int`` in decimal.  ``None`` values are dropped when the
  entry is built, so "unknown" is simply left out.  Anything else (a float)
  is a TypeError: GLUE has no floating point syntax, the renderer decides.
* A value (or DN) that is not an RFC 2849 SAFE-STRING -- non-ASCII, NUL, CR,
  LF, a leading space, colon or '<', or a trailing space, which many tools
  strip -- is written base64-encoded (``attr:: ...``, ``dn:: ...``).
* Lines longer than 76 characters are folded (continuation lines start with
  one space).
* Order, so that successive runs diff minimally: entries are written as a
  tree, depth first, each parent before its children, siblings sorted by
  their normalised DN (see ``normalise_dn``); entries whose parent is not in
  the set are roots, sorted the same way.  The caller's entry order therefore
  does not matter.  Within an entry objectClass comes first, then the other
  attributes in the order the caller added them.
* No ``version: 1`` line: BDII concatenates providers' outputs and would take
  it for part of an entry.

DNs (RFC 4514): ``dn_escape`` escapes one attribute value, ``make_dn``
builds a child DN, ``parse_dn`` splits a DN into RDNs of (type, value) pairs
with escapes undone, ``normalise_dn`` gives a comparison key (types and
values case-folded, as the GLUE naming attributes are caseIgnoreIA5Match and
as BDII compares DNs), and ``dn_key`` the same key for any string, fast for
plain DNs.

Reading: ``parse_ldif`` reads what ``ldapsearch -LLL`` and other providers
print (folding, base64, comments); change records are refused.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Optional, Union

from glueinfo.core.errors import InputError

Value = Union[str, int, bool]

LINE_WIDTH = 76

# RFC 2849 SAFE-STRING, made stricter: no trailing space either.
_SAFE_STRING = re.compile(r"(?:[\x01-\x09\x0b\x0c\x0e-\x1f\x21-\x39\x3b\x3d-\x7f][\x01-\x09\x0b\x0c\x0e-\x7f]*)?")


class LDIFError(InputError, ValueError):
    """Malformed LDIF; the message names the line."""


class DNError(InputError, ValueError):
    """A malformed distinguished name."""


def value_text(value: Value) -> str:
    """The LDAP string form of one value: TRUE/FALSE, decimal, or the text."""
    if type(value) is str:
        return value
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(int(value))  # int(): an IntEnum prints its name otherwise
    if isinstance(value, str):
        return str(value)
    raise TypeError(f"LDAP values must be str, int or bool, not {type(value).__name__} ({value!r})")


class Entry:
    """One directory entry: a DN and attribute name -> list of values.

    Attribute names are matched case-insensitively (``get``, ``add``,
    ``__contains__``) but written in the spelling first used.
    """

    # _index_shared: ``_index`` is another entry's too (from_lists shares one per entry shape: at
    # 80,000 host entries a copy each held 17 MB); the first change copies it.
    __slots__ = ("dn", "attributes", "_index", "_index_shared")

    def __init__(self, dn: str, attributes: Optional[Mapping[str, Union[Value, None, Sequence[Optional[Value]]]]] = None) -> None:
        self.dn = dn
        self.attributes: dict[str, list[Value]] = {}
        self._index: dict[str, str] = {}  # lower-case name -> spelling used
        self._index_shared = False
        if attributes:
            add = self.add
            index = self._index
            own = self.attributes
            for name, values in attributes.items():
                # Fast path for the usual case: a new name with one plain value.
                if isinstance(values, (str, int)) and name.lower() not in index:
                    index[name.lower()] = name
                    own[name] = [values]
                else:
                    add(name, values)

    def add(self, name: str, values: Union[Value, None, Sequence[Optional[Value]]]) -> None:
        """Append value(s) to an attribute; None (and an empty list) adds nothing."""
        if values is None:
            return
        if isinstance(values, (str, int)):  # bool is an int
            kept: list[Value] = [values]
        else:
            kept = [v for v in values if v is not None]
            for v in kept:
                kind = type(v)
                if kind is not str and kind is not int and kind is not bool and not isinstance(v, (str, int)):
                    raise TypeError(f"{self.dn}: {name}: LDAP values must be str, int or bool, not {type(v).__name__} ({v!r})")
            if not kept:
                return
        key = name.lower()
        spelling = self._index.get(key)
        if spelling is None:
            self.own_index()[key] = name
            self.attributes[name] = kept
        else:
            self.attributes[spelling].extend(kept)

    def set(self, name: str, values: Union[Value, None, Sequence[Optional[Value]]]) -> None:
        """Replace an attribute's values (None or [] removes it)."""
        self.remove(name)
        self.add(name, values)

    def own_index(self) -> dict[str, str]:
        """The name index, this entry's own (copied first if shared): for code about to change it."""
        if self._index_shared:
            self._index = dict(self._index)
            self._index_shared = False
        return self._index

    def remove(self, name: str) -> None:
        spelling = self.own_index().pop(name.lower(), None)
        if spelling is not None:
            del self.attributes[spelling]

    def get(self, name: str) -> list[Value]:
        """The values of an attribute (any case), [] when absent."""
        spelling = self._index.get(name.lower())
        return self.attributes[spelling] if spelling is not None else []

    def first(self, name: str, default: Optional[Value] = None) -> Optional[Value]:
        values = self.get(name)
        return values[0] if values else default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    @property
    def object_classes(self) -> list[str]:
        return [value_text(v) for v in self.get("objectClass")]

    def copy(self) -> Entry:
        return Entry(self.dn, {name: list(values) for name, values in self.attributes.items()})

    @classmethod
    def from_lists(cls, dn: str, attributes: dict[str, list[Value]], index: Optional[dict[str, str]] = None) -> Entry:
        """An entry that takes ``attributes`` as it is (no copy, no checks): for
        renderers producing 100,000s of entries.  The caller guarantees what
        ``add`` would: non-empty lists of str/int/bool, names distinct ignoring
        case.  ``index`` (lower-case name -> name, for exactly these names) is
        shared instead of being rebuilt (copied on the entry's first change): a renderer keeps one per entry shape."""
        entry = cls.__new__(cls)
        entry.dn = dn
        entry.attributes = attributes
        if index is not None:
            entry._index = index
            entry._index_shared = True
        else:
            entry._index = {name.lower(): name for name in attributes}
            entry._index_shared = False
        return entry

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return self.dn == other.dn and self.attributes == other.attributes

    def __repr__(self) -> str:
        return f"Entry({self.dn!r}, {self.attributes!r})"


# ---------------------------------------------------------------- DNs

_DN_SPECIAL = {",": "\\,", "+": "\\+", '"': '\\"', "\\": "\\\\", "<": "\\<", ">": "\\>", ";": "\\;", "=": "\\="}


def dn_escape(value: Value) -> str:
    """Escape one attribute value for use in a DN string (RFC 4514).

    , + " \\ < > ; = are backslash-escaped; a leading '#' or space and a
    trailing space become \\23 / \\20, and NUL and other control characters
    (newline, tab, DEL ...) \\XX hex pairs.  Non-ASCII text is kept as it is
    (UTF-8; the LDIF writer base64-encodes such a DN).

    Why these forms: they are the ones slapd hands back (or the ones BDII
    6.0.0 maps slapd's hex forms to before it compares DNs as strings), so
    BDII does not see a changed DN on every cycle; and slapd refuses the
    RFC's own ``\\ `` for a value that is a single space.
    """
    text = value_text(value)
    out = []
    for ch in text:
        if ch in _DN_SPECIAL:
            out.append(_DN_SPECIAL[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\{ord(ch):02X}")
        else:
            out.append(ch)
    if out:
        if text[0] == "#":
            out[0] = "\\23"
        elif text[0] == " ":
            out[0] = "\\20"
        if text[-1] == " ":
            out[-1] = "\\20"
    return "".join(out)


def make_dn(rdn_attr: str, rdn_value: Value, parent_dn: str = "") -> str:
    """``rdn_attr=<escaped rdn_value>,parent_dn`` (no comma when parent_dn is empty)."""
    rdn = f"{rdn_attr}={dn_escape(rdn_value)}"
    return f"{rdn},{parent_dn}" if parent_dn else rdn


RDN = list[tuple[str, str]]

_HEX = "0123456789abcdefABCDEF"


def _parse_value(dn: str, i: int) -> tuple[str, int]:
    """Parse an attribute value starting at dn[i]; return (value, index of the
    terminating ',' '+' ';' or len)."""
    n = len(dn)
    while i < n and dn[i] == " ":  # RFC 2253 readers tolerate spaces after '='
        i += 1
    if i < n and dn[i] == '"':  # RFC 1779 quoted value
        j = i + 1
        buf = []
        while j < n and dn[j] != '"':
            if dn[j] == "\\" and j + 1 < n:
                j += 1
            buf.append(dn[j])
            j += 1
        if j >= n:
            raise DNError(f"unterminated quoted value in DN {dn!r}")
        j += 1
        while j < n and dn[j] == " ":
            j += 1
        return "".join(buf), j
    raw = bytearray()
    last_significant = 0  # length of raw up to the last escaped or non-space char
    while i < n:
        ch = dn[i]
        if ch in ",+;":
            break
        if ch == "\\":
            if i + 1 >= n:
                raise DNError(f"DN {dn!r} ends in a lone backslash")
            nxt = dn[i + 1]
            if nxt in _HEX and i + 2 < n and dn[i + 2] in _HEX:
                raw.append(int(dn[i + 1:i + 3], 16))
                i += 3
            else:
                raw.extend(nxt.encode("utf-8"))
                i += 2
            last_significant = len(raw)
            continue
        raw.extend(ch.encode("utf-8"))
        if ch != " ":
            last_significant = len(raw)
        i += 1
    try:
        return bytes(raw[:last_significant]).decode("utf-8"), i
    except UnicodeDecodeError:
        raise DNError(f"DN {dn!r} has escapes that are not UTF-8") from None


# A DN with nothing to unescape: type=value pairs whose values need no escaping.
_SIMPLE_DN = re.compile(r" *[A-Za-z][A-Za-z0-9-]* *= *[A-Za-z0-9._:/@ -]*(?:, *[A-Za-z][A-Za-z0-9-]* *= *[A-Za-z0-9._:/@ -]*)*")


def parse_dn(dn: str) -> list[RDN]:
    """Split a DN into RDNs, each a list of (attribute type, value) with
    escapes undone.  The empty DN gives [].  Raises DNError."""
    if _SIMPLE_DN.fullmatch(dn):
        out: list[RDN] = []
        for rdn in dn.split(","):
            attr, _, value = rdn.partition("=")
            out.append([(attr.strip(" "), value.strip(" "))])
        return out
    rdns: list[RDN] = []
    if not dn.strip():
        return rdns
    n = len(dn)
    i = 0
    current: RDN = []
    while True:
        eq = dn.find("=", i)
        if eq < 0:
            raise DNError(f"DN {dn!r}: {dn[i:].strip()!r} has no '='")
        attr = dn[i:eq].strip()
        if not attr or not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*(;[A-Za-z0-9-]+)*|[0-9]+(\.[0-9]+)*", attr):
            raise DNError(f"DN {dn!r}: bad attribute type {attr!r}")
        value, i = _parse_value(dn, eq + 1)
        current.append((attr, value))
        if i >= n:
            rdns.append(current)
            return rdns
        sep = dn[i]
        i += 1
        if sep != "+":
            rdns.append(current)
            current = []


def format_dn(rdns: Sequence[RDN]) -> str:
    """The string form of parsed RDNs (the inverse of parse_dn)."""
    return ",".join("+".join(f"{attr}={dn_escape(value)}" for attr, value in rdn) for rdn in rdns)


_SPACED_SEPARATOR_PATTERN = r" *([,=]) *"  # compiled if a DN has spaces (re caches it)


def _group1(match: re.Match[str]) -> str:
    return match.group(1)


def normalise_dn(dn: str) -> str:
    """A comparison key for a DN: attribute types and values case-folded,
    escapes undone and redone one way, spaces around separators removed,
    multi-valued RDNs sorted.  Equal keys mean the same entry to slapd and BDII
    for the GLUE naming attributes (all case-insensitive)."""
    if _SIMPLE_DN.fullmatch(dn):  # nothing to unescape or escape: ASCII, so lower() is casefold()
        lowered = dn.lower()
        return re.sub(_SPACED_SEPARATOR_PATTERN, _group1, lowered).strip(" ") if " " in lowered else lowered
    rdns = parse_dn(dn)
    return ",".join(
        "+".join(sorted(f"{attr.lower()}={dn_escape(value.casefold())}" for attr, value in rdn)) for rdn in rdns
    )


def dn_key(dn: str) -> str:
    """The comparison key of a DN, for any string: :func:`normalise_dn`'s key when the DN
    parses; a DN that does not parse (which the schema check reports) is compared by its
    case-folded text instead of raising, so a tree holding one can still be keyed.

    Plain DNs, as the renderer writes them, take a shortcut that gives the same key: printable,
    none of ``\\ " + ; # < >`` or a space (escapes, quotes, multi-valued RDNs, the other
    separator, trimmed spaces, what dn_escape escapes) and one ``=`` per RDN (no value holds
    one) -- then every type and value is as normalise_dn writes it, case-folded."""
    if not ("\\" in dn or '"' in dn or "+" in dn or ";" in dn or " " in dn or "#" in dn or "<" in dn or ">" in dn) \
            and dn.count("=") == dn.count(",") + 1 and dn.isprintable():
        return dn.casefold()
    try:
        return normalise_dn(dn)
    except DNError:
        return dn.casefold()


def same_dn(a: str, b: str) -> bool:
    return normalise_dn(a) == normalise_dn(b)


def split_dn(dn: str) -> tuple[str, str]:
    """(first RDN as written, parent DN as written); parent is '' for a one-RDN DN."""
    if "\\" not in dn and '"' not in dn:
        rdn, _, parent = dn.partition(",")
        if ";" not in rdn:
            return rdn, parent.lstrip()
    i, n = 0, len(dn)
    quoted = False
    while i < n:
        ch = dn[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif (ch == "," or ch == ";") and not quoted:
            return dn[:i], dn[i + 1:].lstrip()
        i += 1
    return dn, ""


def parent_dn(dn: str) -> str:
    return split_dn(dn)[1]


# ---------------------------------------------------------------- writing

def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _fold(line: str) -> str:
    if len(line) <= LINE_WIDTH:
        return line
    parts = [line[:LINE_WIDTH]]
    for start in range(LINE_WIDTH, len(line), LINE_WIDTH - 1):
        parts.append(" " + line[start:start + LINE_WIDTH - 1])
    return "\n".join(parts)


def _line(name: str, text: str) -> str:
    if not text:
        return name + ":"
    if _SAFE_STRING.fullmatch(text) and not text.endswith(" "):
        line = f"{name}: {text}"
    else:
        line = f"{name}:: {_b64(text)}"
    return line if len(line) <= LINE_WIDTH else _fold(line)


LineCache = dict[tuple[str, Value, type], str]  # (attribute, value, its type) -> formatted line


def format_entry(entry: Entry, _cache: Optional[LineCache] = None) -> str:
    """One entry as LDIF text, ending with a blank line."""
    cache = _cache if _cache is not None else {}
    lines = [_line("dn", entry.dn)]
    attributes = entry.attributes
    object_class = entry._index.get("objectclass")
    names = attributes if object_class is None else [object_class, *(n for n in attributes if n is not object_class)]
    for name in names:
        for v in attributes[name]:
            # Attribute lines repeat across entries (classes, platform, OS...): format each once per run.
            key = (name, v, type(v))
            line = cache.get(key)
            if line is None:
                line = _line(name, v if type(v) is str else value_text(v))
                if len(cache) < 100_000:
                    cache[key] = line
            lines.append(line)
    lines.append("\n")
    return "\n".join(lines)


def tree_order(entries: Iterable[Entry]) -> list[Entry]:
    """Entries depth first, parents before children, siblings (and roots)
    sorted by normalised DN.  Two entries with the same DN keep their
    relative order (the schema check reports the duplicate)."""
    keyed: list[tuple[str, Entry]] = [(normalise_dn(e.dn), e) for e in entries]
    present = {key for key, _ in keyed}
    children: dict[str, list[tuple[str, Entry]]] = {}
    roots: list[tuple[str, Entry]] = []
    for key, entry in keyed:
        parent = parent_dn(key)
        if parent and parent in present:
            children.setdefault(parent, []).append((key, entry))
        else:
            roots.append((key, entry))
    ordered: list[Entry] = []
    stack = sorted(roots, key=lambda item: item[0], reverse=True)
    emitted: set[str] = set()
    while stack:
        key, entry = stack.pop()
        ordered.append(entry)
        if key in emitted:  # a duplicate DN: children already queued once
            continue
        emitted.add(key)
        kids = children.get(key)
        if kids:
            stack.extend(sorted(kids, key=lambda item: item[0], reverse=True))
    return ordered


def iter_ldif(entries: Iterable[Entry], sort: bool = True) -> Iterator[str]:
    """LDIF text entry by entry (see the module docstring for the order);
    with sort=False the caller's order is kept as it is."""
    ordered = tree_order(entries) if sort else entries
    cache: LineCache = {}
    for entry in ordered:
        yield format_entry(entry, cache)


def write_ldif(entries: Iterable[Entry], stream: IO[str], sort: bool = True) -> int:
    """Write entries to a text stream; return how many were written."""
    count = 0
    batch: list[str] = []
    for chunk in iter_ldif(entries, sort):
        batch.append(chunk)
        count += 1
        if len(batch) >= 512:
            stream.write("".join(batch))
            batch.clear()
    if batch:
        stream.write("".join(batch))
    return count


def format_ldif(entries: Iterable[Entry], sort: bool = True) -> str:
    return "".join(iter_ldif(entries, sort))


# ---------------------------------------------------------------- reading

# Compiled by parse_ldif (re caches it): `glueinfo ldif` writes LDIF and never reads any.
_ATTR_LINE_PATTERN = r"([A-Za-z0-9][A-Za-z0-9.;-]*)(::|:<|:)[ ]*(.*)"


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, unfolded line); blank lines come out as ''; comments dropped."""
    current: Optional[str] = None
    start = 0
    comment = False
    for number, raw in enumerate(text.split("\n"), 1):
        if raw.endswith("\r"):
            raw = raw[:-1]
        if raw.startswith(" "):
            if comment:
                continue
            if current is None:
                raise LDIFError(f"line {number}: continuation line with nothing to continue")
            current += raw[1:]
            continue
        if current is not None:
            yield start, current
            current = None
        comment = raw.startswith("#")
        if comment:
            continue
        if raw == "":
            yield number, ""
            continue
        current, start = raw, number
    if current is not None:
        yield start, current


def parse_ldif(text: str) -> list[Entry]:
    """Parse LDIF content records (what ldapsearch -LLL prints) into Entries.

    Values come back as str.  Raises LDIFError naming the line for anything
    malformed, for change records and for ``attr:<`` URL values.
    """
    attr_line = re.compile(_ATTR_LINE_PATTERN, re.S).fullmatch
    entries: list[Entry] = []
    entry: Optional[Entry] = None
    index: dict[str, str] = {}
    attributes: dict[str, list[Value]] = {}
    first_record = True
    for number, line in _logical_lines(text):
        if line == "":
            entry = None
            continue
        match = attr_line(line)
        if not match:
            raise LDIFError(f"line {number}: expected 'attribute: value', got {line[:60]!r}")
        name, sep, raw = match.groups()
        if sep == "::":
            try:
                value = base64.b64decode(raw.strip(), validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                raise LDIFError(f"line {number}: {name}: bad base64 or not UTF-8") from None
        elif sep == ":<":
            raise LDIFError(f"line {number}: {name}: URL values (':<') are not supported")
        else:
            value = raw
        lowered = name.lower()
        if entry is None:
            if first_record and lowered == "version":
                first_record = False
                continue
            if lowered != "dn":
                raise LDIFError(f"line {number}: a record must start with 'dn:', got {name!r}")
            entry = Entry(value)
            index, attributes = entry._index, entry.attributes  # its own: Entry.add's work, done here per line
            entries.append(entry)
            first_record = False
            continue
        if lowered == "changetype":
            raise LDIFError(f"line {number}: change records (changetype: {value}) are not supported, only entries")
        if lowered == "dn":
            raise LDIFError(f"line {number}: a second 'dn:' without a blank line before it")
        spelling = index.get(lowered)
        if spelling is None:
            index[lowered] = name
            attributes[name] = [value]
        else:
            attributes[spelling].append(value)
    return entries
