"""SSSRMAP messages and the query engine (message format 3.0.3 + NOTES.md).

Object-agnostic: the engine queries lxml elements of any object class.  A
:class:`QueryService` maps object names (``Node``, later ``Job``) to
callables returning the current :class:`ObjectSet`; ``<Object>Job</Object>``
works as soon as something registers a Job source.

Request -> Response, in short:

- ``<Envelope><Body><Request action="Query" actor=".."><Object>Node</Object>
  <Get name=".." op=".." units=".."/>*<Where name=".." op=".." conj=".."
  group="..">value</Where>*</Request></Body><Signature>..</Signature></Envelope>``
- Get/Where names are modified XPATH relative to the object: element names
  separated by ``/``, each optionally with ``[@attr='value']`` predicates,
  e.g. ``Configured/Memory``, ``Feature``, ``Extension[@name='CpuModel']``.
- Where ops EQ (default) NE GT GE LT LE Match; conj And (default) Or AndNot
  OrNot; group ``+N`` opens N parentheses before the condition, ``-N``
  closes N after it.  NOT binds tighter than And, And tighter than Or (as in
  the SQL the reference implementations generate).  A field with several
  values (Feature) matches when any value does; NE is "no value equals", so
  it matches objects without the field.  A Where without a value is a truth
  test: the field exists and is not empty, 0 or false.
- Numbers compare as numbers in a common unit: the Where's ``units``
  attribute or a suffix on its value (``4GB``), else the field's default
  unit; the object's side uses its ``units`` attribute, else the default.
  Byte units are binary (SSS Appendix A).
- Get ops Sort/Tros order the results; Count/Sum/Average/Min/Max aggregate
  (per group when some Get has op GroupBy; every other Get must then be
  aggregated or grouped).  No Get returns whole objects.
- Responses keep the nesting of the Get names; ``chunking="True"`` with
  ``chunkSize`` (objects per chunk, default 1000) splits the Data over
  several Responses with ``chunkNum``/``chunkMax``; each chunk's Count is
  the number of objects in that chunk.
- Status codes: 000 success; 2xx wire protocol; 3xx message format; 4xx
  security; 7xx server; see the constants below.

Signatures: DigestValue = base64(SHA1(serialized <Body>)), SignatureValue =
base64(HMAC-SHA1(key, raw digest)), ``<SecurityToken type="Symmetric"
name="actor"/>``.  With a key, requests must be signed and responses are.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import hmac
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

from lxml import etree

from glueinfo.core.errors import GlueinfoError
from glueinfo.core.units import UnitError, canonical, convert, format_number, parse_quantity
from glueinfo.core.xmlsafe import XMLInputError, parse_xml, strip_namespaces

# -- status codes -------------------------------------------------------------------------
SUCCESS = "000"
WIRE_BODY_TOO_LARGE = "211"  # request body over the server's limit
WIRE_BAD_FRAMING = "212"  # truncated body, bad chunked encoding
MALFORMED_XML = "301"  # not well-formed, or refused (DTD, entities, size)
NO_REQUEST = "302"  # no Envelope/Body/Request where one must be
NO_OBJECT = "311"
NO_ACTION_OR_ACTOR = "312"
UNKNOWN_OBJECT = "313"  # no source registered for that object class
UNSUPPORTED_ACTION = "314"
BAD_GET = "315"
BAD_WHERE = "316"
BAD_ATTRIBUTE = "317"  # chunking/chunkSize and the like
UNSUPPORTED_FEATURE = "318"  # multi-object joins, Set in a query, ...
SIGNATURE_REQUIRED = "421"
BAD_SIGNATURE = "422"
UNSUPPORTED_TOKEN = "423"
SERVER_ERROR = "720"
UNKNOWN_ERROR = "999"

DEFAULT_CHUNK_SIZE = 1000
MAX_CONDITIONS = 256  # Get + Where elements in one request
MAX_PATTERN = 256  # characters in a Match regular expression

_STEP = r"[A-Z][A-Za-z0-9]*(?:\[@[a-z][A-Za-z0-9]*=(?:'[^'\[\]]*'|\"[^\"\[\]]*\")\])*"
_PATH = re.compile(rf"^{_STEP}(?:/{_STEP})*$")
_STEP_PARTS = re.compile(r"\[@([a-z][A-Za-z0-9]*)=(?:'([^']*)'|\"([^\"]*)\")\]")
# Quantified groups that themselves contain a quantifier: the classic catastrophic-backtracking shape.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*[+*{]")

WHERE_OPS = {"eq": "EQ", "ne": "NE", "gt": "GT", "ge": "GE", "lt": "LT", "le": "LE", "match": "Match"}
CONJUNCTIONS = {"and": "And", "or": "Or", "andnot": "AndNot", "ornot": "OrNot"}
GET_OPS = {"sort": "Sort", "tros": "Tros", "count": "Count", "sum": "Sum", "average": "Average",
           "min": "Min", "max": "Max", "groupby": "GroupBy"}
AGGREGATES = ("Count", "Sum", "Average", "Min", "Max")
_FALSE_WORDS = {"", "0", "false", "no", "off"}


class SSSRMAPError(GlueinfoError):
    """A request we answer with a Failure: ``code`` is the SSSRMAP status code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = " ".join(message.split())


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
        steps, depth, current = [], 0, ""
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
        return tuple((step.split("[", 1)[0],
                      tuple((m.group(1), m.group(2) if m.group(2) is not None else m.group(3)) for m in _STEP_PARTS.finditer(step)))
                     for step in self.steps)

    @property
    def leaf_tag(self) -> str:
        return self.steps[-1].split("[", 1)[0]

    @property
    def leaf_attributes(self) -> list[tuple[str, str]]:
        return [(m.group(1), m.group(2) if m.group(2) is not None else m.group(3)) for m in _STEP_PARTS.finditer(self.steps[-1])]


# -- the object set and its per-path cache ------------------------------------------------------


def _number_of(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    parsed = parse_quantity(text)
    return parsed[0] if parsed is not None and parsed[1] is None else None


def _measure(value: float, unit: Optional[str]) -> tuple[Optional[str], float]:
    """(unit family, value in the family's base unit); custom units are their own family."""
    if not unit:
        return None, value
    try:
        family, factor = canonical(unit)
    except UnitError:
        return "unit:" + unit, value
    return family, value * factor


class ObjectSet:
    """The objects of one class (``Node``) at one moment, with values cached per path.

    Build a new ObjectSet when the objects change; never mutate the elements
    afterwards (the caches assume they are frozen).  Caches are filled on
    first use and only ever grow, so concurrent queries may share one set.
    """

    def __init__(self, name: str, elements: Sequence[etree._Element], default_units: Optional[Mapping[str, str]] = None):
        self.name = name
        self.elements = list(elements)
        self.default_units = dict(default_units or {})
        self._matches: dict[str, list[tuple[etree._Element, ...]]] = {}
        self._measures: dict[str, list[tuple[tuple[Optional[str], float], ...]]] = {}
        self._sorted: dict[tuple[str, Optional[str]], tuple[list[float], list[int]]] = {}
        self._fragments: dict[str, list[Optional[bytes]]] = {}
        self._whole: Optional[list[bytes]] = None
        self._families: dict[Optional[str], tuple[Optional[str], float]] = {}

    def __len__(self) -> int:
        return len(self.elements)

    def matches(self, path: Path) -> list[tuple[etree._Element, ...]]:
        """Per object, the elements the path selects (iterchildren filters in C: faster than iterfind)."""
        cached = self._matches.get(path.text)
        if cached is None:
            steps = path.compiled
            if len(steps) > 1:  # the parent path's matches are shared by its siblings (Configured/*)
                parents = self.matches(Path("/".join(path.steps[:-1]), path.steps[:-1]))
                cached = [_select_children(found, steps[-1]) if found else () for found in parents]
            elif not steps[0][1]:
                tag = steps[0][0]
                cached = [tuple(element.iterchildren(tag)) for element in self.elements]
            else:
                cached = [_select_children((element,), steps[0]) for element in self.elements]
            self._matches[path.text] = cached
        return cached

    def warm(self, names: Sequence[str]) -> None:
        """Fill the caches of these paths now (the server does it after a refresh, not in a request)."""
        for name in names:
            path = Path.parse(name, BAD_GET, "warm")
            self.measures(path)
            self.fragments(path, range(len(self.elements)))

    def unit_of(self, element: etree._Element) -> Optional[str]:
        return element.get("units") or self.default_units.get(element.tag)

    def _family(self, unit: Optional[str]) -> tuple[Optional[str], float]:
        found = self._families.get(unit)
        if found is None:
            found = self._families[unit] = _measure(1.0, unit)
        return found

    def measures(self, path: Path) -> list[tuple[tuple[Optional[str], float], ...]]:
        """Per object, the numeric values of the path as (family, base value); non-numbers left out."""
        cached = self._measures.get(path.text)
        if cached is None:
            cached = []
            default_units = self.default_units
            for found in self.matches(path):
                values = []
                for element in found:
                    number = _number_of(element.text)
                    if number is not None:
                        family, factor = self._family(element.get("units") or default_units.get(element.tag))
                        values.append((family, number * factor))
                cached.append(tuple(values))
            self._measures[path.text] = cached
        return cached

    def sorted_values(self, path: Path, family: Optional[str]) -> tuple[list[float], list[int]]:
        """The path's numeric values of one unit family, ascending, with the object each belongs to."""
        key = (path.text, family)
        cached = self._sorted.get(key)
        if cached is None:
            pairs = sorted((value, i) for i, values in enumerate(self.measures(path)) for f, value in values if f == family)
            cached = self._sorted[key] = ([v for v, _ in pairs], [i for _, i in pairs])
        return cached

    def values(self, path: Path) -> list[tuple[tuple[str, Optional[float], Optional[str]], ...]]:
        """Per object, each selected element as (stripped text, number or None, units or None)."""
        key = "values:" + path.text
        cached = self._matches.get(key)
        if cached is None:
            cached = [tuple(((e.text or "").strip(), _number_of(e.text), self.unit_of(e)) for e in found)
                      for found in self.matches(path)]
            self._matches[key] = cached  # type: ignore[assignment]
        return cached  # type: ignore[return-value]

    def text_only(self, path: Path) -> list[int]:
        """Objects that have the path but no numeric value in it."""
        key = "text-only:" + path.text
        cached = self._matches.get(key)
        if cached is None:
            cached = [i for i, (values, found) in enumerate(zip(self.measures(path), self.matches(path), strict=True))
                      if found and not values]
            self._matches[key] = cached  # type: ignore[assignment]
        return cached  # type: ignore[return-value]

    def fragments(self, path: Path, chosen: Sequence[int]) -> list[bytes]:
        """For the chosen objects, the serialized elements the path selects (concatenated)."""
        cached = self._fragments.get(path.text)
        if cached is None:
            cached = self._fragments[path.text] = [None] * len(self.elements)
        missing = [i for i in chosen if cached[i] is None]
        if missing:
            matches = self.matches(path)
            for i in missing:
                cached[i] = b"".join([etree.tostring(e, encoding="UTF-8", with_tail=False) for e in matches[i]])
        return [cached[i] for i in chosen]  # type: ignore[misc]

    def whole(self) -> list[bytes]:
        if self._whole is None:
            self._whole = [etree.tostring(e, encoding="UTF-8", with_tail=False) for e in self.elements]
        return self._whole


def _select_children(parents: Sequence[etree._Element], step: tuple[str, tuple[tuple[str, str], ...]]) -> tuple[etree._Element, ...]:
    tag, predicates = step
    if not predicates:
        return tuple(child for parent in parents for child in parent.iterchildren(tag))
    return tuple(child for parent in parents for child in parent.iterchildren(tag)
                 if all(child.get(name) == value for name, value in predicates))


# -- requests -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GetField:
    path: Path
    op: Optional[str] = None
    units: Optional[str] = None


@dataclass(frozen=True)
class WhereCondition:
    path: Path
    op: str = "EQ"
    value: Optional[str] = None
    conj: str = "And"
    group: int = 0
    units: Optional[str] = None


@dataclass(frozen=True)
class QueryRequest:
    action: str
    actor: str
    object_name: str
    gets: tuple[GetField, ...] = ()
    wheres: tuple[WhereCondition, ...] = ()
    request_id: Optional[str] = None
    chunking: bool = False
    chunk_size: int = DEFAULT_CHUNK_SIZE


def _canonical_op(table: Mapping[str, str], raw: Optional[str], default: Optional[str], code: str, what: str) -> Optional[str]:
    if raw is None or raw.strip() == "":
        return default
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


def _group(raw: Optional[str]) -> int:
    if raw is None or raw.strip() == "":
        return 0
    if not re.match(r"^[+-]?\d{1,3}$", raw.strip()):
        raise SSSRMAPError(BAD_WHERE, f"Where group={raw[:20]!r} must be +N or -N")
    return int(raw.strip())


def parse_request(request: etree._Element) -> QueryRequest:
    """A ``<Request>`` element -> QueryRequest; SSSRMAPError (3xx) for anything malformed or unsupported."""
    action = (request.get("action") or "").strip()
    actor = (request.get("actor") or "").strip()
    if not action:
        raise SSSRMAPError(NO_ACTION_OR_ACTOR, "Request has no action attribute")
    if not actor:
        raise SSSRMAPError(NO_ACTION_OR_ACTOR, "Request has no actor attribute")
    if action.lower() != "query":
        raise SSSRMAPError(UNSUPPORTED_ACTION, f"action {action[:40]!r} is not supported: this service only answers Query")
    children = [c for c in request if isinstance(c.tag, str)]
    if len(children) > MAX_CONDITIONS:
        raise SSSRMAPError(UNSUPPORTED_FEATURE, f"Request has {len(children)} elements, more than the {MAX_CONDITIONS} accepted")
    objects = [(c.text or "").strip() for c in children if c.tag == "Object"]
    if not objects or not objects[0]:
        raise SSSRMAPError(NO_OBJECT, "Request names no Object")
    if len(objects) > 1:
        raise SSSRMAPError(UNSUPPORTED_FEATURE, "multi-object queries (joins) are not supported: send one Object per Request")
    object_name = objects[0]
    gets, wheres = [], []
    for child in children:
        if child.get("object") not in (None, "", object_name):
            raise SSSRMAPError(UNSUPPORTED_FEATURE, f"{child.tag} names object {child.get('object')!r}, not {object_name!r}")
        if child.tag == "Get":
            path = Path.parse(child.get("name"), BAD_GET, "Get")
            op = _canonical_op(GET_OPS, child.get("op"), None, BAD_GET, f"Get {path.text} op")
            gets.append(GetField(path, op, (child.get("units") or "").strip() or None))
        elif child.tag == "Where":
            path = Path.parse(child.get("name"), BAD_WHERE, "Where")
            op = _canonical_op(WHERE_OPS, child.get("op"), "EQ", BAD_WHERE, f"Where {path.text} op")
            conj = _canonical_op(CONJUNCTIONS, child.get("conj"), "And", BAD_WHERE, f"Where {path.text} conj")
            value = child.text
            if value is not None and value.strip() == "":
                value = None
            if value is None and op not in ("EQ", "NE"):
                raise SSSRMAPError(BAD_WHERE, f"Where {path.text} op {op} needs a value")
            if op == "Match":
                _check_pattern(path, value)  # type: ignore[arg-type]
            wheres.append(WhereCondition(path, op, value.strip() if value is not None else None, conj,  # type: ignore[arg-type]
                                         _group(child.get("group")), (child.get("units") or "").strip() or None))
        elif child.tag == "Set":
            raise SSSRMAPError(UNSUPPORTED_FEATURE, "Set belongs in Create or Modify requests, not in a Query")
        elif child.tag not in ("Object", "Option", "Count", "Data"):
            raise SSSRMAPError(NO_REQUEST, f"unexpected element {child.tag!r} in Request")
    chunking = _truthy(request.get("chunking"), "chunking")
    chunk_size = DEFAULT_CHUNK_SIZE
    raw_size = request.get("chunkSize")
    if raw_size is not None:
        if not re.match(r"^\s*\d{1,9}\s*$", raw_size) or int(raw_size) < 1:
            raise SSSRMAPError(BAD_ATTRIBUTE, f"chunkSize={raw_size[:20]!r} must be a positive whole number")
        chunk_size = int(raw_size)
    _check_groups(wheres)
    _check_aggregation(gets)
    return QueryRequest(action="Query", actor=actor, object_name=object_name, gets=tuple(gets), wheres=tuple(wheres),
                        request_id=request.get("id"), chunking=chunking, chunk_size=chunk_size)


def _check_pattern(path: Path, pattern: str) -> None:
    if len(pattern) > MAX_PATTERN:
        raise SSSRMAPError(BAD_WHERE, f"Where {path.text} Match pattern is over {MAX_PATTERN} characters")
    if _NESTED_QUANTIFIER.search(pattern):
        raise SSSRMAPError(BAD_WHERE, f"Where {path.text} Match pattern {pattern[:60]!r} nests quantifiers (too slow to run)")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise SSSRMAPError(BAD_WHERE, f"Where {path.text} Match pattern {pattern[:60]!r} is not a regular expression: {exc}") from None


def _check_groups(wheres: Sequence[WhereCondition]) -> None:
    depth = 0
    for where in wheres:
        depth += where.group
        if depth < 0:
            raise SSSRMAPError(BAD_WHERE, f"Where {where.path.text} group={where.group} closes a parenthesis never opened")
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


# -- Where evaluation -----------------------------------------------------------------------------


class _Condition:
    def __init__(self, objects: ObjectSet, where: WhereCondition):
        self.objects = objects
        self.where = where

    def query_measure(self) -> Optional[tuple[Optional[str], float]]:
        where = self.where
        if where.value is None:
            return None
        parsed = parse_quantity(where.value)
        if parsed is None:
            return None
        number, suffix = parsed
        unit = where.units or suffix or self.objects.default_units.get(where.path.leaf_tag)
        if suffix and where.units and suffix != where.units:
            raise SSSRMAPError(BAD_WHERE, f"Where {where.path.text}: value {where.value!r} and units={where.units!r} disagree")
        if unit:
            try:
                canonical(unit)
            except UnitError:
                if suffix:
                    return None  # '4cores' and the like: compare as text
        return _measure(number, unit)

    def evaluate(self) -> set[int]:
        where, objects = self.where, self.objects
        matches = objects.matches(where.path)
        op = where.op
        if where.value is None:  # truth test
            truthy = {i for i, found in enumerate(matches)
                      if any((e.text or "").strip().lower() not in _FALSE_WORDS or len(e) for e in found)}
            return truthy if op == "EQ" else set(range(len(matches))) - truthy
        if op == "Match":
            pattern = re.compile(where.value)
            return {i for i, found in enumerate(matches) if any(pattern.search(e.text or "") for e in found)}
        measure = self.query_measure()
        text = where.value
        result: set[int] = set()
        if measure is not None:
            family, target = measure
            compare_op = op if op != "NE" else "EQ"
            values, owners = objects.sorted_values(where.path, family)
            low, high = _bounds(values, compare_op, target)
            result.update(owners[low:high])
            for i in objects.text_only(where.path):  # the object's value is text although the query's is a number
                if any(_text_compare(compare_op, e.text, text) for e in matches[i]):
                    result.add(i)
        else:
            compare_op = op if op != "NE" else "EQ"
            for i, found in enumerate(matches):
                if any(_text_compare(compare_op, e.text, text) for e in found):
                    result.add(i)
        if op == "NE":
            return set(range(len(matches))) - result
        return result


def _text_compare(op: str, left: Optional[str], right: str) -> bool:
    left = (left or "").strip()
    if op == "EQ":
        return left == right
    if op == "GT":
        return left > right
    if op == "GE":
        return left >= right
    if op == "LT":
        return left < right
    if op == "LE":
        return left <= right
    return False


def _bounds(values: list[float], op: str, target: float) -> tuple[int, int]:
    """The slice of the ascending ``values`` that satisfies ``value OP target``."""
    if op == "EQ":
        return bisect.bisect_left(values, target), bisect.bisect_right(values, target)
    if op == "GT":
        return bisect.bisect_right(values, target), len(values)
    if op == "GE":
        return bisect.bisect_left(values, target), len(values)
    if op == "LT":
        return 0, bisect.bisect_left(values, target)
    return 0, bisect.bisect_right(values, target)  # LE


def select(objects: ObjectSet, wheres: Sequence[WhereCondition]) -> list[int]:
    """Indices of the objects the Where conditions select, in object order."""
    if not wheres:
        return list(range(len(objects)))
    # Tokens: ("cond", set) | ("and",) | ("or",) | ("not",) | ("(",) | (")",)
    tokens: list[tuple[Any, ...]] = []
    for position, where in enumerate(wheres):
        if position:
            tokens.append(("or",) if where.conj in ("Or", "OrNot") else ("and",))
        if where.conj in ("AndNot", "OrNot"):
            tokens.append(("not",))
        tokens.extend([("(",)] * max(0, where.group))
        tokens.append(("cond", _Condition(objects, where)))
        tokens.extend([(")",)] * max(0, -where.group))
    universe = set(range(len(objects)))
    position = 0

    def expression() -> set[int]:
        nonlocal position
        result = term()
        while position < len(tokens) and tokens[position][0] == "or":
            position += 1
            result = result | term()
        return result

    def term() -> set[int]:
        nonlocal position
        result = factor()
        while position < len(tokens) and tokens[position][0] == "and":
            position += 1
            result = result & factor()
        return result

    def factor() -> set[int]:
        nonlocal position
        kind = tokens[position][0]
        if kind == "not":
            position += 1
            return universe - factor()
        if kind == "(":
            position += 1
            inner = expression()
            if position >= len(tokens) or tokens[position][0] != ")":
                raise SSSRMAPError(BAD_WHERE, "Where groups do not nest")
            position += 1
            return inner
        if kind == "cond":
            position += 1
            return tokens[position - 1][1].evaluate()
        raise SSSRMAPError(BAD_WHERE, "Where groups do not nest")

    chosen = expression()
    if position != len(tokens):
        raise SSSRMAPError(BAD_WHERE, "Where groups do not nest")
    return sorted(chosen)


# -- Get: ordering, projection, aggregation -----------------------------------------------------------


def _sort_key(objects: ObjectSet, path: Path, index: int) -> Optional[tuple[int, Any]]:
    measures = objects.measures(path)[index]
    if measures:
        return (0, measures[0][1])
    found = objects.matches(path)[index]
    if found:
        return (1, (found[0].text or "").strip())
    return None


def order(objects: ObjectSet, chosen: list[int], gets: Sequence[GetField]) -> list[int]:
    """Apply Sort/Tros Gets, first Get the primary key; objects without the field go last."""
    result = list(chosen)
    for get in reversed([g for g in gets if g.op in ("Sort", "Tros")]):
        keyed = [(i, _sort_key(objects, get.path, i)) for i in result]
        present = [(i, k) for i, k in keyed if k is not None]
        present.sort(key=lambda pair: pair[1], reverse=get.op == "Tros")
        result = [i for i, _ in present] + [i for i, k in keyed if k is None]
    return result


class _Trie:
    """Get paths merged by common prefix, so Configured/Memory and Configured/Swap share one <Configured>."""

    def __init__(self) -> None:
        self.children: dict[str, _Trie] = {}
        self.leaves: list[GetField] = []  # the Gets ending here (several: Min and Max of one field)

    @property
    def leaf(self) -> Optional[GetField]:
        return self.leaves[0] if self.leaves else None

    def add(self, get: GetField) -> None:
        node = self
        for step in get.path.steps:
            node = node.children.setdefault(step, _Trie())
        node.leaves.append(get)


def _open_tag(step: str) -> tuple[bytes, bytes]:
    tag = step.split("[", 1)[0]
    attributes = "".join(f' {m.group(1)}="{_escape_attribute(m.group(2) if m.group(2) is not None else m.group(3))}"'
                         for m in _STEP_PARTS.finditer(step))
    return f"<{tag}{attributes}>".encode(), f"</{tag}>".encode()


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def _escape_attribute(text: str) -> str:
    return (_escape_text(text).replace('"', "&quot;").replace("\n", "&#10;").replace("\t", "&#9;"))


def _converted(objects: ObjectSet, get: GetField, index: int) -> bytes:
    """The path's elements with their numeric text converted to the Get's units."""
    parts = []
    for element in objects.matches(get.path)[index]:
        number = _number_of(element.text)
        unit = objects.unit_of(element)
        if number is None or not unit or len(element):
            parts.append(etree.tostring(element, encoding="UTF-8", with_tail=False))
            continue
        try:
            value = convert(number, unit, get.units)  # type: ignore[arg-type]
        except UnitError as exc:
            raise SSSRMAPError(BAD_GET, f"Get {get.path.text} units={get.units!r}: {exc}") from None
        attributes = "".join(f' {k}="{_escape_attribute(v)}"' for k, v in element.attrib.items() if k != "units")
        parts.append(f'<{element.tag}{attributes} units="{_escape_attribute(get.units)}">{format_number(value)}</{element.tag}>'.encode())
    return b"".join(parts)


def project(objects: ObjectSet, chosen: Sequence[int], gets: Sequence[GetField]) -> list[bytes]:
    """One serialized record per chosen object: the whole object, or the Get paths, nested.

    Built column by column (one list per Get path, joined level by level) rather
    than object by object: list comprehensions over cached fragments.
    """
    if not gets:
        whole = objects.whole()
        return [whole[i] for i in chosen]
    trie = _Trie()
    for get in gets:
        trie.add(get)

    def column(node: _Trie) -> list[bytes]:
        """For each chosen object, the concatenated output of this trie node's children."""
        parts: list[list[bytes]] = []
        for step, child in node.children.items():
            get = child.leaf
            if get is not None:
                parts.append([_converted(objects, get, i) for i in chosen] if get.units else objects.fragments(get.path, chosen))
                continue
            inner = column(child)
            opening, closing = _open_tag(step)
            parts.append([opening + text + closing if text else b"" for text in inner])
        if len(parts) == 1:
            return parts[0]
        return [b"".join(row) for row in zip(*parts, strict=True)]

    root_open, root_close = f"<{objects.name}>".encode(), f"</{objects.name}>".encode()
    return [root_open + text + root_close for text in column(trie)]


def _aggregate_values(objects: ObjectSet, get: GetField, members: Sequence[int]) -> tuple[Optional[str], Optional[str]]:
    """(text, units) of one aggregate over the members' values; text None when there is nothing to show."""
    column = objects.values(get.path)
    if get.op == "Count":
        return str(sum(len(column[i]) for i in members)), None
    found = [value for i in members for value in column[i]]
    if not found:
        return None, None
    if any(number is None for _, number, _ in found):
        if get.op in ("Min", "Max"):
            texts = [text for text, _, _ in found]
            return (min(texts) if get.op == "Min" else max(texts)), None
        bad = next(text for text, number, _ in found if number is None)
        raise SSSRMAPError(BAD_GET, f"Get {get.path.text} op {get.op} needs numbers, found {bad[:40]!r}")
    unit = get.units or objects.default_units.get(get.path.leaf_tag) or next((u for _, _, u in found if u), None)
    factors: dict[Optional[str], float] = {}
    values = []
    for _, number, own in found:
        factor = factors.get(own)
        if factor is None:
            try:
                factor = factors[own] = convert(1.0, own, unit) if unit and own and own != unit else 1.0
            except UnitError as exc:
                raise SSSRMAPError(BAD_GET, f"Get {get.path.text} op {get.op}: {exc}") from None
        values.append(number * factor)  # type: ignore[operator]
    if get.op == "Sum":
        result = sum(values)
    elif get.op == "Average":
        result = sum(values) / len(values)
    elif get.op == "Min":
        result = min(values)
    else:
        result = max(values)
    return format_number(result), unit


def aggregate(objects: ObjectSet, chosen: Sequence[int], gets: Sequence[GetField]) -> list[bytes]:
    """Records of aggregates, one per group of the GroupBy fields (one record without GroupBy)."""
    group_gets = [g for g in gets if g.op == "GroupBy"]
    groups: dict[tuple[Optional[str], ...], list[int]] = {}
    columns = [objects.values(get.path) for get in group_gets]
    for i in chosen:
        keys = [list(dict.fromkeys(text for text, _, _ in column[i])) or [None] for column in columns]
        for combination in itertools.product(*keys):
            groups.setdefault(combination, []).append(i)
    if not group_gets:
        groups = {(): list(chosen)}

    def group_order(key: tuple[Optional[str], ...]) -> tuple:
        return tuple((1, "") if k is None else (0, _number_of(k)) if _number_of(k) is not None else (0.5, k) for k in key)

    trie = _Trie()
    for get in gets:
        trie.add(get)
    index_of = {id(get): position for position, get in enumerate(gets)}
    records = []
    for key in sorted(groups, key=group_order):
        members = groups[key]
        values: dict[int, tuple[Optional[str], Optional[str]]] = {}
        for position, get in enumerate(gets):
            if get.op == "GroupBy":
                values[position] = (key[group_gets.index(get)], None)
            else:
                values[position] = _aggregate_values(objects, get, members)

        def render(node: _Trie, values: dict[int, tuple[Optional[str], Optional[str]]]) -> bytes:
            parts = []
            for step, child in node.children.items():
                if child.leaf is not None:
                    for get in child.leaves:
                        text, unit = values[index_of[id(get)]]
                        if text is None:
                            continue
                        opening, closing = _open_tag(step)
                        if unit:
                            opening = opening[:-1] + f' units="{_escape_attribute(unit)}">'.encode()
                        parts.append(opening + _escape_text(text).encode() + closing)
                else:
                    inner = render(child, values)
                    if inner:
                        opening, closing = _open_tag(step)
                        parts.append(opening + inner + closing)
            return b"".join(parts)

        records.append(f"<{objects.name}>".encode() + render(trie, values) + f"</{objects.name}>".encode())
    return records


def run_query(objects: ObjectSet, request: QueryRequest) -> list[bytes]:
    """The records (serialized objects) a Query returns, in order."""
    chosen = select(objects, request.wheres)
    if any(g.op in AGGREGATES for g in request.gets):
        return aggregate(objects, chosen, request.gets)
    chosen = order(objects, chosen, request.gets)
    return project(objects, chosen, request.gets)


# -- responses --------------------------------------------------------------------------------------------


def response_bytes(value: str, code: str, message: str, records: Optional[Sequence[bytes]] = None,
                   request_id: Optional[str] = None, chunk: Optional[tuple[int, int]] = None) -> bytes:
    """A serialized ``<Response>``: Status, and Count + Data when there are records (even none)."""
    attributes = ""
    if request_id is not None:
        attributes += f' id="{_escape_attribute(request_id)}"'
    if chunk is not None:
        attributes += f' chunkNum="{chunk[0]}" chunkMax="{chunk[1]}"'
    parts = [f"<Response{attributes}><Status><Value>{value}</Value><Code>{code}</Code>"
             f"<Message>{_escape_text(message)}</Message></Status>".encode()]
    if records is not None:
        parts.append(f"<Count>{len(records)}</Count>".encode())
        parts.append(b"<Data>" + b"".join(records) + b"</Data>" if records else b"<Data/>")
    parts.append(b"</Response>")
    return b"".join(parts)


def failure_bytes(code: str, message: str, request_id: Optional[str] = None) -> bytes:
    return response_bytes("Failure", code, message, None, request_id)


def digest(body: bytes) -> bytes:
    """The raw 20-byte SHA1 digest of a serialized Body."""
    return hashlib.sha1(body).digest()


def signature(key: bytes, body: bytes) -> tuple[str, str]:
    """(DigestValue, SignatureValue) for a serialized Body, both base64."""
    raw = digest(body)
    return (base64.b64encode(raw).decode("ascii"),
            base64.b64encode(hmac.new(key, raw, hashlib.sha1).digest()).decode("ascii"))


def envelope(body_content: bytes, key: Optional[bytes] = None, actor: str = "glueinfo") -> bytes:
    """``<Envelope><Body>content</Body>[<Signature>..</Signature>]</Envelope>``, signed when a key is given."""
    body = b"<Body>" + body_content + b"</Body>"
    if key is None:
        return b"<Envelope>" + body + b"</Envelope>"
    digest_value, signature_value = signature(key, body)
    token = f'<SecurityToken type="Symmetric" name="{_escape_attribute(actor)}"/>'
    return (b"<Envelope>" + body + f"<Signature><DigestValue>{digest_value}</DigestValue>"
            f"<SignatureValue>{signature_value}</SignatureValue>{token}</Signature></Envelope>".encode())


def request_envelope(request: Union[bytes, str], key: Optional[bytes] = None, actor: str = "glueinfo") -> bytes:
    """A client's request envelope around serialized ``<Request>`` bytes (used by tests and peers)."""
    if isinstance(request, str):
        request = request.encode("utf-8")
    return envelope(request, key, actor)


_RAW_BODY = re.compile(rb"<Body\b.*</Body\s*>", re.DOTALL)


def verify_signature(root: etree._Element, raw: bytes, key: Optional[bytes]) -> None:
    """Check the Envelope's Signature; SSSRMAPError (4xx) when it is missing (with a key) or wrong."""
    sig = root.find("Signature")
    if sig is None:
        if key is not None:
            raise SSSRMAPError(SIGNATURE_REQUIRED, "this service requires signed requests: the Envelope has no Signature")
        return
    token = sig.find("SecurityToken")
    if token is not None and (token.get("type") or "Symmetric").lower() != "symmetric":
        raise SSSRMAPError(UNSUPPORTED_TOKEN, f"SecurityToken type {token.get('type')!r} is not supported (only Symmetric)")
    digest_text = (sig.findtext("DigestValue") or "").strip()
    signature_text = (sig.findtext("SignatureValue") or "").strip()
    if key is not None and (not digest_text or not signature_text):
        raise SSSRMAPError(BAD_SIGNATURE, "the Signature needs both DigestValue and SignatureValue")
    if not digest_text:
        return
    try:
        claimed = base64.b64decode(digest_text, validate=True)
        claimed_signature = base64.b64decode(signature_text, validate=True) if signature_text else b""
    except ValueError:
        raise SSSRMAPError(BAD_SIGNATURE, "DigestValue or SignatureValue is not base64") from None
    body = root.find("Body")
    candidates = [etree.tostring(body, encoding="UTF-8", with_tail=False)] if body is not None else []
    match = _RAW_BODY.search(raw)
    if match:
        candidates.append(match.group(0))
    actual = next((digest(c) for c in candidates if hmac.compare_digest(digest(c), claimed)), None)
    if actual is None:
        raise SSSRMAPError(BAD_SIGNATURE, "DigestValue does not match the Body: the request was altered or badly serialized")
    if key is not None:
        expected = hmac.new(key, actual, hashlib.sha1).digest()
        if not hmac.compare_digest(expected, claimed_signature):
            raise SSSRMAPError(BAD_SIGNATURE, "SignatureValue does not match: wrong key or altered request")


# -- the service --------------------------------------------------------------------------------------------


class QueryService:
    """Answers SSSRMAP envelopes from registered object sources.

    ``register("Node", lambda: current_node_set)``; the callable is asked for
    the current ObjectSet on every request, so the owner can swap in a new
    set whenever its data changes.
    """

    def __init__(self, key: Optional[bytes] = None, max_bytes: int = 1048576, log: Optional[Callable[[str], None]] = None):
        self.key = key
        self.max_bytes = max_bytes
        self._sources: dict[str, Callable[[], ObjectSet]] = {}
        self._log = log or (lambda message: None)

    def register(self, object_name: str, source: Callable[[], ObjectSet]) -> None:
        self._sources[object_name] = source

    @property
    def object_names(self) -> list[str]:
        return sorted(self._sources)

    def answer(self, request: QueryRequest) -> list[bytes]:
        """Serialized Response(s) for a parsed request: one, or one per chunk."""
        source = self._sources.get(request.object_name)
        if source is None:
            known = ", ".join(self.object_names) or "none"
            raise SSSRMAPError(UNKNOWN_OBJECT, f"object {request.object_name[:40]!r} is not served here (served: {known})")
        records = run_query(source(), request)
        noun = request.object_name
        if not request.chunking or len(records) <= request.chunk_size:
            message = f"{len(records)} {noun} object(s)"
            chunk = (1, 1) if request.chunking else None
            return [response_bytes("Success", SUCCESS, message, records, request.request_id, chunk)]
        size = request.chunk_size
        total = (len(records) + size - 1) // size
        return [response_bytes("Success", SUCCESS, f"{len(records)} {noun} object(s), chunk {n + 1} of {total}",
                               records[n * size:(n + 1) * size], request.request_id, (n + 1, total))
                for n in range(total)]

    def handle(self, raw: bytes) -> list[bytes]:
        """Raw request bytes -> the Envelope(s) to send back (several when chunked). Never raises."""
        request_id: Optional[str] = None
        actor = "glueinfo"
        try:
            try:
                root = parse_xml(raw, max_bytes=self.max_bytes, what="SSSRMAP request")
            except XMLInputError as exc:
                raise SSSRMAPError(MALFORMED_XML, str(exc)) from None
            strip_namespaces(root)
            if root.tag == "Envelope":
                body = root.find("Body")
                request_el = body.find("Request") if body is not None else None
                if request_el is not None:
                    request_id = request_el.get("id")
                    actor = request_el.get("actor") or actor
                verify_signature(root, raw, self.key)
            elif root.tag == "Request":  # a bare Request: accepted unsigned when no key is set
                if self.key is not None:
                    raise SSSRMAPError(SIGNATURE_REQUIRED, "this service requires signed requests: send an Envelope with a Signature")
                request_el = root
            else:
                raise SSSRMAPError(NO_REQUEST, f"expected an Envelope, got <{str(root.tag)[:40]}>")
            if request_el is None:
                raise SSSRMAPError(NO_REQUEST, "the Envelope has no Body/Request")
            request = parse_request(request_el)
            responses = self.answer(request)
        except SSSRMAPError as exc:
            responses = [failure_bytes(exc.code, exc.message, request_id)]
        except Exception as exc:  # a bug must not take the server down; the peer gets a 7xx
            self._log(f"SSSRMAP request failed: {type(exc).__name__}: {exc}")
            responses = [failure_bytes(SERVER_ERROR, f"internal error: {type(exc).__name__}", request_id)]
        return [envelope(response, self.key, actor) for response in responses]
