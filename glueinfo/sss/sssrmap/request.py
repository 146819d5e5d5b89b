"""SSSRMAP requests: a ``<Request>`` element parsed into a :class:`QueryRequest`.

The shape accepted (message format 3.0.3 + NOTES.md)::

    <Envelope><Body><Request action="Query" actor=".."><Object>Node</Object>
    <Get name=".." op=".." units=".."/>*<Where name=".." op=".." conj=".."
    group="..">value</Where>*</Request></Body><Signature>..</Signature></Envelope>

- Get/Where names are modified XPATH relative to the object: element names
  separated by ``/``, each optionally with ``[@attr='value']`` predicates,
  e.g. ``Configured/Memory``, ``Feature``, ``Extension[@name='CpuModel']``
  (:class:`Path`).
- Where ops EQ (default) NE GT GE LT LE Match; conj And (default) Or AndNot
  OrNot; group ``+N`` opens N parentheses before the condition, ``-N``
  closes N after it.
- Get ops Sort/Tros order; Count/Sum/Average/Min/Max aggregate, per group
  when some Get has op GroupBy (every other Get must then be aggregated or
  grouped).
- Get ``alias`` (Gold's attribute): the result is returned under that name,
  at the top level of the record, instead of under the Get's path.
- ``chunking="True"`` with ``chunkSize`` (objects per chunk, default 1000,
  from 1 to MAX_CHUNK_SIZE).
- ``<Option name="..">value</Option>``: Unique, Limit and Offset are honoured
  (as Gold does: distinct records, at most Limit records after skipping
  Offset); Time (Gold's time travel), ShowHidden, ShowUsage and unknown
  options are ignored, as are Count, Data and File elements and elements of
  other namespaces (the schema's ``##other``): each one ignored is named in
  :attr:`QueryRequest.ignored`, which the service answers with a Warning.
- An action other than Query is not refused here: the request is returned
  with only its action and object, and the service answers it with Gold's
  "not a valid action" Failure naming both.
- Match patterns are RE2 syntax, run by RE2 (google-re2), which never
  backtracks: time linear in the text for a given pattern.  What RE2 does
  not support (backreferences, lookaround, possessive quantifiers, ``\\Z``)
  is refused with the pattern and RE2's reason, never handed to Python's
  ``re``; so is a pattern over MAX_PATTERN characters or whose compiled
  program is over MAX_PROGRAM instructions (or RE2's MATCHER_MEMORY).

Everything the request alone decides is checked here, before the engine
sees it: op and conj names, balanced groups no deeper than MAX_GROUP_DEPTH,
Where values up to MAX_VALUE characters, Match patterns, aggregation rules
and limits.  :func:`parse_request` raises :class:`SSSRMAPError` with a 3xx
code for anything malformed or unsupported, its message naming the
attribute, the value and what is allowed; it never looks at objects (the
engine checks names and values against the object class's fields).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import re2
from lxml import etree

from glueinfo.sss.sssrmap.status import (
    BAD_ATTRIBUTE,
    BAD_GET,
    BAD_WHERE,
    NO_ACTION_OR_ACTOR,
    NO_OBJECT,
    NO_REQUEST,
    UNSUPPORTED_FEATURE,
    SSSRMAPError,
)

DEFAULT_CHUNK_SIZE = 1000
MAX_CONDITIONS = 256  # Get + Where elements in one request
MAX_PATTERN = 256  # characters in a Match regular expression
MAX_PROGRAM = 10_000  # RE2 instructions in a compiled Match pattern ('.{1000}' is 8,004)
MATCHER_MEMORY = 1 << 20  # bytes RE2 may use for one pattern's program and matching caches
MAX_VALUE = 1024  # characters in a Where value
MAX_GROUP_DEPTH = 32  # nested Where parentheses
MAX_CHUNK_SIZE = 1_000_000_000  # objects per chunk (any size over the answer's is one chunk)

_STEP = r"[A-Z][A-Za-z0-9]*(?:\[@[a-z][A-Za-z0-9]*=(?:'[^'\[\]]*'|\"[^\"\[\]]*\")\])*"
_PATH = re.compile(rf"^{_STEP}(?:/{_STEP})*$")
_STEP_PARTS = re.compile(r"\[@([a-z][A-Za-z0-9]*)=(?:'([^']*)'|\"([^\"]*)\")\]")

WHERE_OPS = {"eq": "EQ", "ne": "NE", "gt": "GT", "ge": "GE", "lt": "LT", "le": "LE", "match": "Match"}
CONJUNCTIONS = {"and": "And", "or": "Or", "andnot": "AndNot", "ornot": "OrNot"}
GET_OPS = {"sort": "Sort", "tros": "Tros", "count": "Count", "sum": "Sum", "average": "Average",
           "min": "Min", "max": "Max", "groupby": "GroupBy"}
AGGREGATES = ("Count", "Sum", "Average", "Min", "Max")


# -- paths ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Path:
    """A modified XPATH name relative to the object: ``Configured/Memory``, ``Extension[@name='X']``."""

    text: str
    steps: tuple[str, ...]

    @classmethod
    def parse(cls, text: Optional[str], code: str, what: str) -> Path:
        if text is None or not text.strip():
            raise SSSRMAPError(code, f"{what} needs a name attribute")
        text = text.strip()
        if len(text) > 512 or not _PATH.match(text):
            raise SSSRMAPError(code, f"{what} name {text[:80]!r} is not a supported modified XPATH expression "
                                     "(element names separated by /, optionally with [@attr='value'])")
        steps: list[str] = []
        depth, current = 0, ""
        for char in text:  # split on / outside predicates
            if char == "/" and depth == 0:
                steps.append(current)
                current = ""
                continue
            depth += char == "["
            depth -= char == "]"
            current += char
        steps.append(current)
        return cls(text, tuple(steps))

    @property
    def compiled(self) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
        """((tag, ((attribute, value), ...)), ...) for each step."""
        return tuple(split_step(step) for step in self.steps)

    @property
    def leaf_tag(self) -> str:
        return self.steps[-1].split("[", 1)[0]

    @property
    def leaf_attributes(self) -> list[tuple[str, str]]:
        return list(split_step(self.steps[-1])[1])


def split_step(step: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """One step of a parsed Path -> (tag, ((attribute, value), ...)): ``Extension[@name='X']`` -> ("Extension", (("name", "X"),))."""
    return (step.split("[", 1)[0],
            tuple((m.group(1), m.group(2) if m.group(2) is not None else m.group(3)) for m in _STEP_PARTS.finditer(step)))

# -- requests -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GetField:
    """One ``<Get>``: the path to return, its op (canonical spelling, None for a plain Get) and units to convert to."""

    path: Path
    op: Optional[str] = None
    units: Optional[str] = None
    alias: Optional[str] = None

    @property
    def label(self) -> str:
        """The Get as a peer wrote it, for messages: ``Configured/Processors`` or ``Sum of Configured/Processors``."""
        return f"{self.op} of {self.path.text}" if self.op in AGGREGATES else self.path.text


@dataclass(frozen=True)
class WhereCondition:
    """One ``<Where>``: canonical op and conj, value None for a truth test, group +N/-N parentheses."""

    path: Path
    op: str = "EQ"
    value: Optional[str] = None
    conj: str = "And"
    group: int = 0
    units: Optional[str] = None


@dataclass(frozen=True)
class QueryRequest:
    """A checked Query request: what the engine runs and the service answers (``request_id`` echoed back)."""

    action: str
    actor: str
    object_name: str
    gets: tuple[GetField, ...] = ()
    wheres: tuple[WhereCondition, ...] = ()
    request_id: Optional[str] = None
    chunking: bool = False
    chunk_size: int = DEFAULT_CHUNK_SIZE
    unique: bool = False  # Option Unique: identical records returned once
    limit: Optional[int] = None  # Option Limit: at most this many records (after Offset)
    offset: int = 0  # Option Offset: records skipped first
    ignored: tuple[str, ...] = ()  # parts of the request not acted on, each described for the Warning


def _canonical_op(table: Mapping[str, str], raw: Optional[str], code: str, what: str) -> Optional[str]:
    """The table's spelling of an op or conj name (any case), None when not given; SSSRMAPError(code) when unknown."""
    if raw is None or raw.strip() == "":
        return None
    found = table.get(raw.strip().lower())
    if found is None:
        raise SSSRMAPError(code, f"{what} {raw.strip()[:40]!r} is not one of {', '.join(dict.fromkeys(table.values()))}")
    return found


def _truthy(raw: Optional[str], what: str) -> bool:
    if raw is None:
        return False
    word = raw.strip().lower()
    if word in ("true", "1", "yes"):
        return True
    if word in ("false", "0", "no", ""):
        return False
    raise SSSRMAPError(BAD_ATTRIBUTE, f"{what}={raw[:20]!r} must be True or False")


def _group(raw: Optional[str], path: Path) -> int:
    """The group attribute as a signed number of parentheses; SSSRMAPError(316) naming the value otherwise."""
    if raw is None or raw.strip() == "":
        return 0
    text = raw.strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        raise SSSRMAPError(BAD_WHERE, f"Where {path.text} group={text[:20]!r} is not +N or -N: group is a whole number of "
                                      f"parentheses to open (+N) or close (-N), N from 0 to {MAX_GROUP_DEPTH}")
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > len(str(MAX_GROUP_DEPTH)) or int(digits) > MAX_GROUP_DEPTH:
        raise SSSRMAPError(BAD_WHERE, f"Where {path.text} group={text[:20]!r} is out of range: N in +N/-N must be from 0 to "
                                      f"{MAX_GROUP_DEPTH} (parentheses nest at most {MAX_GROUP_DEPTH} deep)")
    return int(text)


def _chunk_size(raw: Optional[str]) -> int:
    """The chunkSize attribute: a whole number of objects per chunk, 1..MAX_CHUNK_SIZE; SSSRMAPError(317) naming it otherwise."""
    if raw is None:
        return DEFAULT_CHUNK_SIZE
    text = raw.strip()
    allowed = f"chunkSize must be a whole number of objects per chunk from 1 to {MAX_CHUNK_SIZE}"
    if not re.fullmatch(r"\+?\d+", text):
        raise SSSRMAPError(BAD_ATTRIBUTE, f"chunkSize={text[:20]!r} is not written as a whole number in decimal digits: {allowed}")
    digits = text.lstrip("+").lstrip("0") or "0"
    if len(digits) > len(str(MAX_CHUNK_SIZE)) or not 1 <= int(digits) <= MAX_CHUNK_SIZE:
        raise SSSRMAPError(BAD_ATTRIBUTE, f"chunkSize={text[:20]!r} is out of range: {allowed}")
    return int(digits)


# Options a Query honours (Gold's select) and those it answers with a Warning: why each is ignored.
HONOURED_OPTIONS = ("Unique", "Limit", "Offset")
IGNORED_OPTIONS = {
    "time": "glueinfo keeps no history: the answer is the current state",
    "showhidden": "glueinfo objects have no hidden fields",
    "showusage": "no usage text is served: see docs/sss.md",
}
_ALIAS = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,63}$")
SSSRMAP_NAMESPACE = "http://www.scidac.org/ScalableSystems/SSSRMAP"


def _whole(raw: Optional[str], what: str) -> int:
    """A whole number >= 0 in decimal digits (Limit, Offset); SSSRMAPError(317) naming it otherwise."""
    text = (raw or "").strip()
    if not re.fullmatch(r"\+?\d{1,12}", text):
        raise SSSRMAPError(BAD_ATTRIBUTE, f"{what}={text[:20]!r} is not a whole number of records (0 to 999999999999)")
    return int(text)


def _option(child: etree._Element, honoured: dict[str, str], ignored: list[str]) -> None:
    """One ``<Option name="..">value</Option>``: kept in ``honoured`` (canonical name -> value) or described in ``ignored``."""
    name = (child.get("name") or "").strip()
    if not name:
        raise SSSRMAPError(BAD_ATTRIBUTE, "Option needs a name attribute (e.g. <Option name=\"Limit\">10</Option>)")
    value = (child.text or "").strip()
    key = name.lower()
    canonical = next((o for o in HONOURED_OPTIONS if o.lower() == key), None)
    if canonical is not None:
        if canonical in honoured:
            raise SSSRMAPError(BAD_ATTRIBUTE, f"Option {canonical} is given twice")
        honoured[canonical] = value
        return
    if key.endswith("time") and value and not value.isdigit():  # Gold refuses a time stamp that is not epoch seconds
        raise SSSRMAPError(BAD_ATTRIBUTE, f"Option {name[:40]} value {value[:40]!r} is not a time stamp (seconds since the epoch)")
    why = IGNORED_OPTIONS.get(key, "not an option glueinfo knows (it honours Unique, Limit and Offset)")
    ignored.append(f"Option {name[:40]} ({why})")


def parse_request(request: etree._Element, foreign: Optional[Mapping[int, str]] = None) -> QueryRequest:
    """A ``<Request>`` element -> QueryRequest; SSSRMAPError (3xx) for anything malformed or unsupported.

    ``foreign`` maps the position of each child element (among element
    children) that was in a namespace other than SSSRMAP's to its qualified
    name; the caller reads it before namespaces are stripped.  Such elements
    are the schema's ``##other`` extensions: ignored, and named in
    :attr:`QueryRequest.ignored`.  A request whose action is not Query comes
    back with only action, actor and object (the service refuses it naming
    both); nothing else of it is checked.
    """
    foreign = foreign or {}
    action = (request.get("action") or "").strip()
    actor = (request.get("actor") or "").strip()
    if not action:
        raise SSSRMAPError(NO_ACTION_OR_ACTOR, "Request has no action attribute")
    if not actor:
        raise SSSRMAPError(NO_ACTION_OR_ACTOR, "Request has no actor attribute")
    children = [c for c in request if isinstance(c.tag, str)]
    if len(children) > MAX_CONDITIONS:
        raise SSSRMAPError(UNSUPPORTED_FEATURE, f"Request has {len(children)} elements, more than the {MAX_CONDITIONS} accepted")
    objects = [(c.text or "").strip() for i, c in enumerate(children) if c.tag == "Object" and i not in foreign]
    if not objects or not objects[0]:
        raise SSSRMAPError(NO_OBJECT, "Request names no Object")
    if len(objects) > 1:
        raise SSSRMAPError(UNSUPPORTED_FEATURE, "multi-object queries (joins) are not supported: send one Object per Request")
    object_name = objects[0]
    if action.lower() != "query":
        return QueryRequest(action=action[:40], actor=actor, object_name=object_name, request_id=request.get("id"))
    gets: list[GetField] = []
    wheres: list[WhereCondition] = []
    honoured: dict[str, str] = {}
    ignored: list[str] = []
    for index, child in enumerate(children):
        if index in foreign:
            ignored.append(f"element {foreign[index][:120]} (another namespace's extension)")
            continue
        if child.get("object") not in (None, "", object_name):
            raise SSSRMAPError(UNSUPPORTED_FEATURE, f"{child.tag} names object {child.get('object')!r}, not {object_name!r}")
        if child.tag == "Get":
            path = Path.parse(child.get("name"), BAD_GET, "Get")
            op = _canonical_op(GET_OPS, child.get("op"), BAD_GET, f"Get {path.text} op")
            alias = (child.get("alias") or "").strip() or None
            if alias is not None and not _ALIAS.match(alias):
                raise SSSRMAPError(BAD_GET, f"Get {path.text} alias={alias[:40]!r} is not an element name (a letter, then "
                                            "letters and digits, at most 64)")
            gets.append(GetField(path, op, (child.get("units") or "").strip() or None, alias))
        elif child.tag == "Where":
            path = Path.parse(child.get("name"), BAD_WHERE, "Where")
            where_op = _canonical_op(WHERE_OPS, child.get("op"), BAD_WHERE, f"Where {path.text} op") or "EQ"
            conj = _canonical_op(CONJUNCTIONS, child.get("conj"), BAD_WHERE, f"Where {path.text} conj") or "And"
            value = child.text
            if value is not None and value.strip() == "":
                value = None
            if value is None:
                if where_op not in ("EQ", "NE"):
                    raise SSSRMAPError(BAD_WHERE, f"Where {path.text} op {where_op} needs a value")
            elif where_op == "Match":
                matcher(value.strip(), path)
            elif len(value.strip()) > MAX_VALUE:
                raise SSSRMAPError(BAD_WHERE, f"Where {path.text} value {value.strip()[:40]!r}... is {len(value.strip())} characters, "
                                              f"over the {MAX_VALUE} accepted")
            wheres.append(WhereCondition(path, where_op, value.strip() if value is not None else None, conj,
                                         _group(child.get("group"), path), (child.get("units") or "").strip() or None))
        elif child.tag == "Set":
            raise SSSRMAPError(UNSUPPORTED_FEATURE, "Set belongs in Create or Modify requests, not in a Query")
        elif child.tag == "Option":
            _option(child, honoured, ignored)
        elif child.tag == "Count":
            ignored.append("Count (a Query's answer counts its own records)")
        elif child.tag == "Data":
            ignored.append("Data (a Query takes its objects from the server, not from the request)")
        elif child.tag == "File":
            ignored.append("File (a Query takes no file)")
        elif child.tag != "Object":
            raise SSSRMAPError(NO_REQUEST, f"unexpected element {child.tag!r} in Request: an SSSRMAP Request holds Object, Get, "
                                           "Set, Where, Option, Data, Count and File (extensions go in another namespace)")
    chunking = _truthy(request.get("chunking"), "chunking")
    chunk_size = _chunk_size(request.get("chunkSize"))
    unique = _truthy(honoured["Unique"], "Option Unique") if "Unique" in honoured else False
    limit = _whole(honoured["Limit"], "Option Limit") if "Limit" in honoured else None
    offset = _whole(honoured["Offset"], "Option Offset") if "Offset" in honoured else 0
    _check_groups(wheres)
    _check_aggregation(gets)
    return QueryRequest(action="Query", actor=actor, object_name=object_name, gets=tuple(gets), wheres=tuple(wheres),
                        request_id=request.get("id"), chunking=chunking, chunk_size=chunk_size, unique=unique,
                        limit=limit or None, offset=offset, ignored=tuple(ignored))


def _matcher_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # refusals are answered to the client, not printed on the server's stderr
    options.never_capture = True  # only "does it match" is asked
    options.max_mem = MATCHER_MEMORY
    return options


def matcher(pattern: str, path: Path) -> Any:
    """The compiled RE2 program of a Match pattern (searched, unanchored; RE2 syntax).

    Raises SSSRMAPError(316) naming the pattern and the reason when it is over
    MAX_PATTERN characters, is not RE2 syntax (RE2's own message, e.g.
    "invalid perl operator: (?=" for a lookahead, "invalid escape sequence:
    \\1" for a backreference), or compiles to over MAX_PROGRAM instructions
    or MATCHER_MEMORY bytes.  Never falls back to Python's ``re``.  google-re2
    caches the compiled program by pattern, so the engine's second call is a
    look-up.
    """
    where = f"Where {path.text} Match pattern"
    if len(pattern) > MAX_PATTERN:
        raise SSSRMAPError(BAD_WHERE, f"{where} {pattern[:40]!r}... is {len(pattern)} characters, over the {MAX_PATTERN} accepted")
    try:
        program = re2.compile(pattern, _matcher_options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        reason = reason[:120]
        if "pattern too large" in reason:
            reason = f"its compiled form is over the matcher's {MATCHER_MEMORY // 1024} KiB (simplify the repetitions)"
        elif "\\Z" in reason:
            reason += " (RE2 writes the end of the text \\z or $)"
        elif "perl operator" in reason or "escape sequence" in reason:
            reason += " (RE2 has no backreferences or lookaround)"
        raise SSSRMAPError(BAD_WHERE, f"{where} {pattern[:60]!r} is refused by the RE2 matcher: {reason}") from None
    if program.programsize > MAX_PROGRAM:
        raise SSSRMAPError(BAD_WHERE, f"{where} {pattern[:60]!r} compiles to {program.programsize} RE2 instructions, over the "
                                      f"{MAX_PROGRAM} accepted (simplify the repetitions)")
    return program


def _check_groups(wheres: Sequence[WhereCondition]) -> None:
    depth = 0
    for where in wheres:
        depth += where.group
        if depth < 0:
            raise SSSRMAPError(BAD_WHERE, f"Where {where.path.text} group={where.group:+d} closes a parenthesis never opened")
        if depth > MAX_GROUP_DEPTH:
            raise SSSRMAPError(BAD_WHERE, f"Where {where.path.text} group={where.group:+d} nests parentheses {depth} deep, "
                                          f"over the {MAX_GROUP_DEPTH} accepted")
    if depth:
        raise SSSRMAPError(BAD_WHERE, f"Where groups leave {depth} parenthesis(es) open")


def _check_aggregation(gets: Sequence[GetField]) -> None:
    if not any(g.op in AGGREGATES for g in gets):
        if any(g.op == "GroupBy" for g in gets):
            raise SSSRMAPError(BAD_GET, "GroupBy needs an aggregated Get (Count, Sum, Average, Min or Max) beside it")
        return
    for get in gets:
        if get.op not in AGGREGATES and get.op != "GroupBy":
            raise SSSRMAPError(BAD_GET, f"Get {get.path.text} must be aggregated (Count, Sum, Average, Min, Max) or "
                                        "grouped (GroupBy) when another Get is aggregated")

