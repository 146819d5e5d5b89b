"""The SSSRMAP query engine: Where selects, Get orders, projects or aggregates.

Object-agnostic: it queries lxml elements of any object class, held in an
:class:`ObjectSet` that caches per path what queries need (matched
elements, numbers in a common unit, sorted columns, serialized fragments),
for a bounded number of paths (cache.py: least recently used first out).
:func:`run_query` takes a checked :class:`QueryRequest` (see request.py)
and returns the serialized records, in order.

Semantics:

- Where ops EQ NE GT GE LT LE Match.  NOT binds tighter than And, And
  tighter than Or (as in the SQL the reference implementations generate).
  A field with several values (Feature) matches when any value does; NE is
  "no value equals", so it matches objects without the field.  An element
  with ``aggregation="List"`` (a job's Nodes, ``n01,n02``) holds one value
  per item of its list (split at its ``delimiter``, a comma by default), for
  Where, Match and GroupBy alike.  A Where
  without a value is a truth test: the field exists and is not empty, 0 or
  false.
- Names must be fields of the object class (fields.py): a Get or Where on
  a name outside its vocabulary is a Failure naming it; an optional field no
  object has selects nothing.
- How a Where compares depends on the field's kind (fields.py).  A number
  field compares numbers in a common unit: the Where's ``units`` attribute
  or a suffix on its value (``4GB``), else the field's default unit; the
  object's side uses its ``units`` attribute, else the default.  Byte units
  are binary (SSS Appendix A).  The value must be a finite decimal number
  (``1e400``, ``0x10``, ``nan``, ``inf``, ``lots`` are refused) with a
  known unit of the field's family (``64XB`` and ``4Gbps`` on Memory are
  refused); a unit no converter knows is accepted only on fields whose data
  names its units (Resource) when some value on the path carries exactly
  that unit, as a Get's conversion does.  A text field compares text, with
  no units.  A field of either kind (Extension of no known name, a Job's
  Id) compares a number with numeric values and text with text values.
- Match searches the text of each value with RE2 (request.py): a match
  anywhere in the value, as Python's ``re.search`` did; never backtracks.
- Get ops Sort/Tros order the results (objects without the field last);
  Count/Sum/Average/Min/Max aggregate, per GroupBy group, each result
  marked with the op that made it (``<Processors op="Sum">``).  No Get
  returns whole objects; records keep the nesting of the Get names and the
  request's order (a Get shares ``<Configured>`` only with the Get before
  it); a Get ``alias`` names its result instead (Gold's form).
- Options Unique, Offset, Limit (request.py) apply to the records.

Budget: :func:`run_query` takes a :class:`Budget` (a deadline on a clock
the caller passes in) and checks it every CHECK_EVERY objects in each loop
over objects (Where evaluation, cache fills, sorting keys, projection,
grouping); past it the query stops with SSSRMAPError(QUERY_BUDGET, 740)
naming the budget and the step it was in.

Failures: :class:`SSSRMAPError` BAD_GET/BAD_WHERE for names and values the
object class refuses and for what can only be seen against the data (Sum
of text, units that do not convert); QUERY_BUDGET when the budget runs out.
"""

from __future__ import annotations

import bisect
import itertools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Optional, Union

from lxml import etree

from glueinfo.core.units import UnitError, canonical, convert, format_number, parse_quantity
from glueinfo.core.xmlsafe import escape_attribute, escape_text
from glueinfo.sss.sssrmap.cache import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PATHS,
    PathCache,
    size_of_fragments,
    size_of_indices,
    size_of_matches,
    size_of_measures,
    size_of_slots,
    size_of_sorted,
    size_of_values,
)
from glueinfo.sss.sssrmap.fields import ANY, GROUP, NUMBER, OPEN, TEXT, Field, missing_step, resolve, vocabulary_of
from glueinfo.sss.sssrmap.request import AGGREGATES, GetField, Path, QueryRequest, WhereCondition, matcher, split_step
from glueinfo.sss.sssrmap.status import BAD_GET, BAD_WHERE, QUERY_BUDGET, SSSRMAPError

_FALSE_WORDS = {"", "0", "false", "no", "off"}
CHECK_EVERY = 256  # objects between two looks at the clock: ~1 ms of work at most on the slowest loops
MAX_MEMBERSHIPS = 1_000_000  # (object, group) pairs GroupBy may make: memory stays bounded whatever the request


class Budget:
    """A deadline on one query's work, on a clock the caller passes in (tests control it).

    ``seconds`` None: no deadline.  :meth:`check` raises SSSRMAPError(QUERY_BUDGET)
    naming the budget and what the query was doing once the clock is past the
    deadline.  The engine calls it between slices of CHECK_EVERY objects, so
    a query stops at most one slice after its deadline.
    """

    def __init__(self, seconds: Optional[float] = None, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self._clock = clock
        self._deadline = None if seconds is None else clock() + seconds

    def check(self, doing: str) -> None:
        if self._deadline is not None and self._clock() > self._deadline:
            raise SSSRMAPError(QUERY_BUDGET, f"the query ran past its budget of {self.seconds:g} s of work while {doing}; "
                                             "narrow it with Where conditions or fewer Gets, or ask again later")

    def slices(self, count: int, doing: str) -> Iterator[range]:
        """range(count) in slices of CHECK_EVERY, the budget checked before each."""
        for start in range(0, count, CHECK_EVERY):
            self.check(doing)
            yield range(start, min(count, start + CHECK_EVERY))


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
    first use, per field (path), and bounded (cache.py): at most
    ``max_paths`` fields and about ``max_bytes`` of their columns, the fields
    used longest ago forgotten first and worked out again when asked, with
    the same answer; fields :meth:`warm` filled are kept outside the bound.
    Concurrent queries may share one set; a fill a query's budget interrupts
    stores nothing, or whole entries.  ``fields`` is the class's vocabulary
    (fields.py), by default the built-in one of ``name``.  ValueError for a
    bound under 1.
    """

    def __init__(self, name: str, elements: Sequence[etree._Element], default_units: Optional[Mapping[str, str]] = None,
                 fields: Optional[Field] = None, max_paths: int = DEFAULT_MAX_PATHS, max_bytes: int = DEFAULT_MAX_BYTES):
        self.name = name
        self.elements = list(elements)
        self.default_units = dict(default_units or {})
        self.fields = fields if fields is not None else vocabulary_of(name)
        self.cache = PathCache(max_paths, max_bytes)
        self._whole: Optional[list[bytes]] = None
        self._families: dict[Optional[str], tuple[Optional[str], float]] = {}

    def __len__(self) -> int:
        return len(self.elements)

    def field(self, path: Path, code: str, what: str) -> Field:
        """The field ``path`` names; SSSRMAPError(code) naming it when the object class has no such field."""
        found = resolve(self.fields, path.compiled)
        if found is None:
            assert self.fields is not None  # resolve() finds every name when there is no vocabulary
            missing, allowed = missing_step(self.fields, path.compiled)
            where = f"in {missing.rsplit('/', 1)[0]}" if "/" in missing else "at the top level"
            raise SSSRMAPError(code, f"{what} {path.text[:80]!r}: {self.name} objects have no field {missing[:80]!r} "
                                     f"({'fields ' + where + ': ' + ', '.join(allowed) if allowed else 'it holds no fields'})")
        return found

    def matches(self, path: Path, budget: Optional[Budget] = None) -> list[tuple[etree._Element, ...]]:
        """Per object, the elements the path selects (iterchildren filters in C: faster than iterfind)."""
        columns = self.cache.columns(path.text)
        cached = columns.matches
        if cached is None:
            budget = budget or Budget()
            doing = f"finding {path.text[:80]}"
            steps = path.compiled
            cached = []
            if len(steps) > 1:  # the parent path's matches are shared by its siblings (Configured/*)
                parents = self.matches(Path("/".join(path.steps[:-1]), path.steps[:-1]), budget)
                for part in budget.slices(len(parents), doing):
                    cached.extend([_select_children(parents[i], steps[-1]) if parents[i] else () for i in part])
            elif not steps[0][1]:
                tag, elements = steps[0][0], self.elements
                for part in budget.slices(len(elements), doing):
                    cached.extend([tuple(elements[i].iterchildren(tag)) for i in part])
            else:
                elements = self.elements
                for part in budget.slices(len(elements), doing):
                    cached.extend([_select_children((elements[i],), steps[0]) for i in part])
            if columns.matches is None:  # a query at the same time may have filled it first
                columns.matches = cached
                self.cache.grew(path.text, columns, size_of_matches(cached))
        return cached

    def warm(self, names: Sequence[str]) -> None:
        """Fill the caches of these paths now and keep them outside the bound (the server does it
        after a refresh, not in a request, for the fields most queries name)."""
        for name in names:
            path = Path.parse(name, BAD_GET, "warm")
            self.cache.pin(path.text)
            self.measures(path)
            self.fragments(path, range(len(self.elements)))

    def unit_of(self, element: etree._Element) -> Optional[str]:
        return element.get("units") or self.default_units.get(element.tag)

    def _family(self, unit: Optional[str]) -> tuple[Optional[str], float]:
        found = self._families.get(unit)
        if found is None:
            found = self._families[unit] = _measure(1.0, unit)
        return found

    def measures(self, path: Path, budget: Optional[Budget] = None) -> list[tuple[tuple[Optional[str], float], ...]]:
        """Per object, the numeric values of the path as (family, base value); non-numbers left out."""
        columns = self.cache.columns(path.text)
        cached = columns.measures
        if cached is None:
            budget = budget or Budget()
            cached = []
            default_units = self.default_units
            for index, found in enumerate(self.matches(path, budget)):
                if not index % CHECK_EVERY:
                    budget.check(f"reading the numbers of {path.text[:80]}")
                values = []
                for element in found:
                    number = _number_of(element.text)
                    if number is not None:
                        family, factor = self._family(element.get("units") or default_units.get(element.tag))
                        values.append((family, number * factor))
                cached.append(tuple(values))
            if columns.measures is None:
                columns.measures = cached
                self.cache.grew(path.text, columns, size_of_measures(cached))
        return cached

    def sorted_values(self, path: Path, family: Optional[str], budget: Optional[Budget] = None) -> tuple[list[float], list[int]]:
        """The path's numeric values of one unit family, ascending, with the object each belongs to."""
        measures = self.measures(path, budget)
        columns = self.cache.columns(path.text)
        cached = columns.sorted.get(family)
        if cached is None:
            (budget or Budget()).check(f"sorting the numbers of {path.text[:80]}")
            pairs = sorted((value, i) for i, values in enumerate(measures) for f, value in values if f == family)
            cached = ([v for v, _ in pairs], [i for _, i in pairs])
            if columns.sorted.setdefault(family, cached) is cached:
                self.cache.grew(path.text, columns, size_of_sorted(len(pairs)))
        return cached

    def values(self, path: Path, budget: Optional[Budget] = None) -> list[tuple[tuple[str, Optional[float], Optional[str]], ...]]:
        """Per object, each selected element as (stripped text, number or None, units or None)."""
        columns = self.cache.columns(path.text)
        cached = columns.values
        if cached is None:
            budget = budget or Budget()
            matches = self.matches(path, budget)
            cached = []
            for part in budget.slices(len(matches), f"reading the values of {path.text[:80]}"):
                cached.extend([tuple((text.strip(), _number_of(text), self.unit_of(e)) for e in matches[i] for text in _texts(e))
                               for i in part])
            if columns.values is None:
                columns.values = cached
                self.cache.grew(path.text, columns, size_of_values(cached))
        return cached

    def text_only(self, path: Path, budget: Optional[Budget] = None) -> list[int]:
        """Objects that have the path but no numeric value in it."""
        columns = self.cache.columns(path.text)
        cached = columns.text_only
        if cached is None:
            cached = [i for i, (values, found) in enumerate(zip(self.measures(path, budget), self.matches(path, budget), strict=True))
                      if found and not values]
            if columns.text_only is None:
                columns.text_only = cached
                self.cache.grew(path.text, columns, size_of_indices(len(cached)))
        return cached

    def fragments(self, path: Path, chosen: Sequence[int], budget: Optional[Budget] = None) -> list[bytes]:
        """For the chosen objects, the serialized elements the path selects (concatenated)."""
        columns = self.cache.columns(path.text)
        cached = columns.fragments
        if cached is None:
            cached = [None] * len(self.elements)
            if columns.fragments is None:
                columns.fragments = cached
                self.cache.grew(path.text, columns, size_of_slots(len(cached)))
        missing = [i for i in chosen if cached[i] is None]
        if missing:
            budget = budget or Budget()
            matches = self.matches(path, budget)
            for part in budget.slices(len(missing), f"writing {path.text[:80]}"):
                written = []
                for i in (missing[n] for n in part):  # each entry filled whole: an interrupted fill is still a valid cache
                    text = cached[i] = b"".join([etree.tostring(e, encoding="UTF-8", with_tail=False) for e in matches[i]])
                    written.append(text)
                self.cache.grew(path.text, columns, size_of_fragments(written))
        return [cached[i] or b"" for i in chosen]  # all filled above; `or` tells the type checker

    def whole(self, budget: Optional[Budget] = None) -> list[bytes]:
        if self._whole is None:
            budget = budget or Budget()
            elements, whole = self.elements, []
            for part in budget.slices(len(elements), f"writing whole {self.name} objects"):
                whole.extend([etree.tostring(elements[i], encoding="UTF-8", with_tail=False) for i in part])
            self._whole = whole
        return self._whole


def _select_children(parents: Sequence[etree._Element], step: tuple[str, tuple[tuple[str, str], ...]]) -> tuple[etree._Element, ...]:
    tag, predicates = step
    if not predicates:
        return tuple(child for parent in parents for child in parent.iterchildren(tag))
    if len(predicates) == 1:  # the usual Extension[@name='X']: one comparison per child, twice as fast as all()
        (name, value), = predicates
        return tuple(child for parent in parents for child in parent.iterchildren(tag) if child.get(name) == value)
    return tuple(child for parent in parents for child in parent.iterchildren(tag)
                 if all(child.get(name) == value for name, value in predicates))

# -- Where evaluation -----------------------------------------------------------------------------


class _Condition:
    """One Where, checked against the object class's fields when built (before any Where is evaluated)."""

    def __init__(self, objects: ObjectSet, where: WhereCondition, budget: Budget):
        self.objects = objects
        self.where = where
        self.budget = budget
        self.field = objects.field(where.path, BAD_WHERE, "Where")
        self.measure = self._query_measure()

    def _refuse(self, problem: str) -> SSSRMAPError:
        return SSSRMAPError(BAD_WHERE, f"Where {self.where.path.text[:80]} op {self.where.op}: {problem}")

    def _query_measure(self) -> Optional[tuple[Optional[str], float]]:
        """The Where's value as (unit family, base value) when it compares as a number; None when as text.

        Raises SSSRMAPError(316) naming the value for what the field's kind refuses (module docstring).
        """
        where, field = self.where, self.field
        if where.value is None or where.op == "Match":
            if field.kind == GROUP and where.op == "Match":
                raise self._refuse(f"{where.path.text[:80]} holds other fields ({', '.join(field.children)}): match one of them")
            return None
        value = where.value[:60]
        if field.kind == GROUP:
            raise self._refuse(f"{where.path.text[:80]} holds other fields ({', '.join(field.children)}): compare one of them")
        if field.kind == TEXT:
            if where.units:
                raise self._refuse(f"units={where.units[:20]!r} given, but {where.path.text[:80]} is text (units apply to numbers)")
            return None
        parsed = parse_quantity(where.value)
        if parsed is None:
            if field.kind == NUMBER:
                raise self._refuse(f"value {value!r} is not a number: {where.path.text[:80]} holds numbers, so the value must be a "
                                   "finite decimal number with an optional unit (e.g. 64, 1.5, 64GB; no hex, nan or inf)")
            if where.units:
                raise self._refuse(f"units={where.units[:20]!r} given, but value {value!r} is not a number")
            return None  # a field of either kind: text compares with text values
        number, suffix = parsed
        if suffix and where.units and suffix != where.units:
            raise SSSRMAPError(BAD_WHERE, f"Where {where.path.text[:80]}: value {value!r} and units={where.units[:20]!r} disagree")
        given = where.units or suffix
        if given:
            what = f"units={given[:20]!r}" if where.units else f"value {value!r}"
            try:
                family = canonical(given)[0]
            except UnitError:
                if field.kind == ANY and not where.units:
                    return None  # '4cores' on a field of either kind: compared as text
                if field.kind == ANY or field.family == OPEN:  # units the data names: accepted where some value has them
                    custom = "unit:" + given
                    if any(f == custom for values in self.objects.measures(where.path, self.budget) for f, _ in values):
                        return _measure(number, given)
                raise self._refuse(f"{what}: unknown unit {given[:20]!r} (byte units B KB MB GB TB PB, rates bps Kbps Mbps Gbps)"
                                   ) from None
            if field.kind == NUMBER and field.family != OPEN and family != field.family:
                default = self.objects.default_units.get(where.path.leaf_tag)
                measured = f"in {field.family} ({default})" if field.family and default else field.describe()
                raise self._refuse(f"{what}: {given[:20]} is a unit of {family}, but {where.path.text[:80]} is {measured}")
        return _measure(number, given or self.objects.default_units.get(where.path.leaf_tag))

    def evaluate(self) -> set[int]:
        where, objects, budget = self.where, self.objects, self.budget
        matches = objects.matches(where.path, budget)
        op = where.op
        doing = f"evaluating Where {where.path.text[:80]} {op}"
        if where.value is None:  # truth test
            truthy: set[int] = set()
            for part in budget.slices(len(matches), doing):
                truthy.update(i for i in part if any((e.text or "").strip().lower() not in _FALSE_WORDS or len(e) for e in matches[i]))
            return truthy if op == "EQ" else set(range(len(matches))) - truthy
        if op == "Match":
            return self._match(matches, doing)
        measure, text = self.measure, where.value
        compare_op = op if op != "NE" else "EQ"
        result: set[int] = set()
        if measure is not None:
            family, target = measure
            values, owners = objects.sorted_values(where.path, family, budget)
            low, high = _bounds(values, compare_op, target)
            result.update(owners[low:high])
            if self.field.kind != NUMBER:  # a field of either kind: its text values compare with the value as text
                text_only, texts = objects.text_only(where.path, budget), objects.values(where.path, budget)
                for part in budget.slices(len(text_only), doing):
                    result.update(i for i in (text_only[n] for n in part)
                                  if any(_text_compare(compare_op, t, text) for t, _, _ in texts[i]))
        else:
            texts = objects.values(where.path, budget)  # cached per path, List items apart (_texts)
            for part in budget.slices(len(matches), doing):
                result.update(i for i in part if any(_text_compare(compare_op, t, text) for t, _, _ in texts[i]))
        if op == "NE":
            return set(range(len(matches))) - result
        return result

    @staticmethod
    def _found(program: Any, seen: dict[str, bool], text: str) -> bool:
        found = seen.get(text)
        if found is None:
            found = seen[text] = program.search(text) is not None
        return found

    def _match(self, matches: list[tuple[etree._Element, ...]], doing: str) -> set[int]:
        """Objects with a value the RE2 pattern finds a match in; each distinct text is searched once."""
        program = matcher(self.where.value or "", self.where.path)
        seen: dict[str, bool] = {}  # many hosts share a CPU model or an OS: search each text once
        result: set[int] = set()
        for part in self.budget.slices(len(matches), doing):
            for i in part:
                if any(self._found(program, seen, text) for element in matches[i] for text in _texts(element)):
                    result.add(i)
        return result


def _texts(element: etree._Element) -> list[str]:
    """The values an element holds: its text, or each item of an ``aggregation="List"`` (SSS Job
    Node and Feature: ``n01,n02``) split at its delimiter (a comma by default)."""
    text = element.text or ""
    if element.get("aggregation") == "List":
        return [item.strip() for item in text.split(element.get("delimiter") or ",") if item.strip()] or [""]
    return [text]


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


def select(objects: ObjectSet, wheres: Sequence[WhereCondition], budget: Optional[Budget] = None) -> list[int]:
    """Indices of the objects the Where conditions select, in object order.

    Every Where is checked against the object class's fields before any is
    evaluated (SSSRMAPError 316 naming the field or value).
    """
    budget = budget or Budget()
    if not wheres:
        return list(range(len(objects)))
    # Tokens: a condition, or one of "and", "or", "not", "(", ")"
    tokens: list[Union[_Condition, str]] = []
    for position, where in enumerate(wheres):
        if position:
            tokens.append("or" if where.conj in ("Or", "OrNot") else "and")
        if where.conj in ("AndNot", "OrNot"):
            tokens.append("not")
        tokens.extend(["("] * max(0, where.group))
        tokens.append(_Condition(objects, where, budget))
        tokens.extend([")"] * max(0, -where.group))
    universe = set(range(len(objects)))
    position = 0

    def expression() -> set[int]:
        nonlocal position
        result = term()
        while position < len(tokens) and tokens[position] == "or":
            position += 1
            result = result | term()
            budget.check("combining Where conditions")
        return result

    def term() -> set[int]:
        nonlocal position
        result = factor()
        while position < len(tokens) and tokens[position] == "and":
            position += 1
            result = result & factor()
            budget.check("combining Where conditions")
        return result

    def factor() -> set[int]:
        nonlocal position
        kind = tokens[position]
        if isinstance(kind, _Condition):
            position += 1
            return kind.evaluate()
        budget.check("combining Where conditions")
        if kind == "not":
            position += 1
            return universe - factor()
        if kind == "(":
            position += 1
            inner = expression()
            if position >= len(tokens) or tokens[position] != ")":
                raise SSSRMAPError(BAD_WHERE, "Where groups do not nest")
            position += 1
            return inner
        raise SSSRMAPError(BAD_WHERE, "Where groups do not nest")

    chosen = expression()
    if position != len(tokens):
        raise SSSRMAPError(BAD_WHERE, "Where groups do not nest")
    return sorted(chosen)


# -- Get: ordering, projection, aggregation -----------------------------------------------------------


def _sort_key(measures: tuple[tuple[Optional[str], float], ...], found: tuple[etree._Element, ...]) -> Optional[tuple[int, Any]]:
    if measures:
        return (0, measures[0][1])
    if found:
        return (1, (found[0].text or "").strip())
    return None


def order(objects: ObjectSet, chosen: list[int], gets: Sequence[GetField], budget: Optional[Budget] = None) -> list[int]:
    """Apply Sort/Tros Gets, first Get the primary key; objects without the field go last."""
    budget = budget or Budget()
    result = list(chosen)
    for get in reversed([g for g in gets if g.op in ("Sort", "Tros")]):
        measures, matches = objects.measures(get.path, budget), objects.matches(get.path, budget)
        keyed: list[tuple[int, Optional[tuple[int, Any]]]] = []
        for part in budget.slices(len(result), f"sorting by {get.path.text[:80]}"):
            keyed.extend([(i, _sort_key(measures[i], matches[i])) for i in (result[n] for n in part)])
        present = [(i, k) for i, k in keyed if k is not None]
        present.sort(key=lambda pair: pair[1], reverse=get.op == "Tros")  # one C sort: O(n log n), checked before and after
        budget.check(f"sorting by {get.path.text[:80]}")
        result = [i for i, _ in present] + [i for i, k in keyed if k is None]
    return result


class _Layout:
    """Gets laid out in the request's order (message format: "Multiple Get elements cause the fields to be
    returned in the order specified"): a Get shares an enclosing element (``<Configured>``) only with the Get
    just before it, so Configured/Memory, Configured/Swap give one ``<Configured>`` while Configured/Memory, Id,
    Configured/Swap give two.  A Get with an alias is one top-level element of that name (Gold's column alias)."""

    def __init__(self) -> None:
        self.children: list[tuple[str, Union[_Layout, GetField]]] = []

    def add(self, get: GetField) -> None:
        steps = (get.alias,) if get.alias else get.path.steps
        node = self
        for step in steps[:-1]:
            last = node.children[-1] if node.children else None
            if last is not None and last[0] == step and isinstance(last[1], _Layout):
                node = last[1]
            else:
                inner = _Layout()
                node.children.append((step, inner))
                node = inner
        node.children.append((steps[-1], get))

    @classmethod
    def of(cls, gets: Sequence[GetField]) -> _Layout:
        layout = cls()
        for get in gets:
            layout.add(get)
        return layout


def _open_tag(step: str) -> tuple[bytes, bytes]:
    tag, predicates = split_step(step)
    attributes = "".join(f' {name}="{escape_attribute(value)}"' for name, value in predicates)
    return f"<{tag}{attributes}>".encode(), f"</{tag}>".encode()


def _renamed(fragment: bytes, tag: str, alias: str) -> bytes:
    """A serialized element (``<Tag ...>...</Tag>`` or ``<Tag .../>``, as lxml writes it) under another name."""
    old, new = tag.encode(), alias.encode()
    body = new + fragment[1 + len(old):]
    if body.endswith(b"</" + old + b">"):
        body = body[:-len(old) - 3] + b"</" + new + b">"
    return b"<" + body


def _rendered(objects: ObjectSet, get: GetField, index: int, budget: Budget) -> bytes:
    """One object's elements for a Get with units (numeric text converted) or an alias (renamed)."""
    parts = []
    for element in objects.matches(get.path, budget)[index]:
        tag = get.alias or str(element.tag)
        number = _number_of(element.text)
        unit = objects.unit_of(element)
        if not get.units or number is None or not unit or len(element):
            fragment = etree.tostring(element, encoding="UTF-8", with_tail=False)
            parts.append(_renamed(fragment, str(element.tag), get.alias) if get.alias else fragment)
            continue
        try:
            value = convert(number, unit, get.units)
        except UnitError as exc:
            raise SSSRMAPError(BAD_GET, f"Get {get.path.text} units={get.units!r}: {exc}") from None
        attributes = "".join(f' {k}="{escape_attribute(v)}"'  # type: ignore[str-bytes-safe,arg-type]  # lxml-stubs: attrib items are str, not str|bytes
                             for k, v in element.attrib.items() if k != "units")
        parts.append(f'<{tag}{attributes} units="{escape_attribute(get.units)}">{format_number(value)}</{tag}>'.encode())
    return b"".join(parts)


def project(objects: ObjectSet, chosen: Sequence[int], gets: Sequence[GetField], budget: Optional[Budget] = None) -> list[bytes]:
    """One serialized record per chosen object: the whole object, or the Gets in the request's order, nested.

    Built column by column (one list per Get, joined level by level) rather
    than object by object: list comprehensions over cached fragments.
    """
    budget = budget or Budget()
    if not gets:
        whole = objects.whole(budget)
        return [whole[i] for i in chosen]

    def column(node: _Layout) -> list[bytes]:
        """For each chosen object, the concatenated output of this layout node's children."""
        parts: list[list[bytes]] = []
        for step, child in node.children:
            if isinstance(child, GetField):
                if child.units or child.alias:
                    rendered: list[bytes] = []
                    doing = f"converting {child.path.text[:80]} to {child.units[:20]}" if child.units else \
                        f"writing {child.path.text[:80]} as {child.alias}"
                    for part in budget.slices(len(chosen), doing):
                        rendered.extend([_rendered(objects, child, chosen[n], budget) for n in part])
                    parts.append(rendered)
                else:
                    parts.append(objects.fragments(child.path, chosen, budget))
                continue
            inner = column(child)
            opening, closing = _open_tag(step)
            parts.append([opening + text + closing if text else b"" for text in inner])
        budget.check("putting the records together")
        if len(parts) == 1:
            return parts[0]
        return [b"".join(row) for row in zip(*parts, strict=True)]

    root_open, root_close = f"<{objects.name}>".encode(), f"</{objects.name}>".encode()
    return [root_open + text + root_close for text in column(_Layout.of(gets))]


def _aggregate_values(objects: ObjectSet, get: GetField, members: Sequence[int], budget: Budget) -> tuple[Optional[str], Optional[str]]:
    """(text, units) of one aggregate over the members' values; text None when there is nothing to show."""
    column = objects.values(get.path, budget)
    if get.op == "Count":
        return str(sum(len(column[i]) for i in members)), None
    found = [value for i in members for value in column[i]]
    if not found:
        return None, None
    numbers = [(number, own) for _, number, own in found if number is not None]
    if len(numbers) != len(found):  # some value is text
        if get.op in ("Min", "Max"):
            texts = [text for text, _, _ in found]
            return (min(texts) if get.op == "Min" else max(texts)), None
        bad = next(text for text, number, _ in found if number is None)
        raise SSSRMAPError(BAD_GET, f"Get {get.path.text} op {get.op} needs numbers, found {bad[:40]!r}")
    unit = get.units or objects.default_units.get(get.path.leaf_tag) or next((u for _, _, u in found if u), None)
    factors: dict[Optional[str], float] = {}
    values = []
    for number, own in numbers:
        factor = factors.get(own)
        if factor is None:
            try:
                factor = factors[own] = convert(1.0, own, unit) if unit and own and own != unit else 1.0
            except UnitError as exc:
                raise SSSRMAPError(BAD_GET, f"Get {get.path.text} op {get.op}: {exc}") from None
        values.append(number * factor)
    if get.op == "Sum":
        result = sum(values)
    elif get.op == "Average":
        result = sum(values) / len(values)
    elif get.op == "Min":
        result = min(values)
    else:
        result = max(values)
    return format_number(result), unit


def aggregate(objects: ObjectSet, chosen: Sequence[int], gets: Sequence[GetField], budget: Optional[Budget] = None) -> list[bytes]:
    """Records of aggregates, one per group of the GroupBy fields (one record without GroupBy)."""
    budget = budget or Budget()
    group_gets = [g for g in gets if g.op == "GroupBy"]
    groups: dict[tuple[Optional[str], ...], list[int]] = {}
    columns = [objects.values(get.path, budget) for get in group_gets]
    memberships = 0
    for part in budget.slices(len(chosen), "grouping"):
        for i in chosen[part.start:part.stop]:
            keys: list[list[Optional[str]]] = [list(dict.fromkeys(text for text, _, _ in column[i])) or [None] for column in columns]
            if len(keys) == 1:  # the usual single GroupBy: one group per distinct value
                memberships += len(keys[0])
                for value in keys[0]:
                    groups.setdefault((value,), []).append(i)
                continue
            memberships += math.prod(map(len, keys))  # multi-valued GroupBy fields multiply: counted before they are made
            if memberships > MAX_MEMBERSHIPS:
                raise SSSRMAPError(BAD_GET, f"GroupBy {', '.join(g.path.text[:40] for g in group_gets[:4])}: the objects fall in "
                                            f"over {MAX_MEMBERSHIPS} groups in all (each value of a multi-valued field is a group)")
            for combination in itertools.product(*keys):
                groups.setdefault(combination, []).append(i)
    if not group_gets:
        groups = {(): list(chosen)}

    def group_order(key: tuple[Optional[str], ...]) -> tuple[tuple[float, Union[float, str]], ...]:
        """Numbers first (in numeric order), then texts, then objects without the field."""
        ranks: list[tuple[float, Union[float, str]]] = []
        for k in key:
            number = _number_of(k)
            ranks.append((1, "") if k is None else (0, number) if number is not None else (0.5, k))
        return tuple(ranks)

    layout = _Layout.of(gets)
    index_of = {id(get): position for position, get in enumerate(gets)}

    def render(node: _Layout, values: dict[int, tuple[Optional[str], Optional[str]]]) -> bytes:
        """An aggregate is marked with the op that made it (op="Sum"), so Sum and Average of one field differ."""
        parts = []
        for step, child in node.children:
            if isinstance(child, GetField):
                text, unit = values[index_of[id(child)]]
                if text is None:
                    continue
                opening, closing = _open_tag(step)
                marks = (f' op="{child.op}"' if child.op in AGGREGATES else "") + (f' units="{escape_attribute(unit)}"' if unit else "")
                if marks:
                    opening = opening[:-1] + marks.encode() + b">"
                parts.append(opening + escape_text(text).encode() + closing)
            else:
                inner = render(child, values)
                if inner:
                    opening, closing = _open_tag(step)
                    parts.append(opening + inner + closing)
        return b"".join(parts)

    records = []
    budget.check("ordering the groups")
    for number, key in enumerate(sorted(groups, key=group_order)):
        if not number % CHECK_EVERY:
            budget.check("aggregating")
        members = groups[key]
        values: dict[int, tuple[Optional[str], Optional[str]]] = {}
        for position, get in enumerate(gets):
            if get.op == "GroupBy":
                values[position] = (key[group_gets.index(get)], None)
            else:
                values[position] = _aggregate_values(objects, get, members, budget)
        records.append(f"<{objects.name}>".encode() + render(layout, values) + f"</{objects.name}>".encode())
    return records


def check_get(objects: ObjectSet, get: GetField) -> None:
    """A Get's name must be a field of the object class, and its units ones the field's values convert to.

    SSSRMAPError(315) naming the field or the unit otherwise; decided by the
    vocabulary, so the answer does not depend on which objects exist.
    """
    field = objects.field(get.path, BAD_GET, "Get")
    if not get.units:
        return
    what = f"Get {get.path.text[:80]} units={get.units[:20]!r}"
    if field.kind in (TEXT, GROUP):
        raise SSSRMAPError(BAD_GET, f"{what}: {get.path.text[:80]} is {field.describe()}; units apply to numbers")
    if field.kind != NUMBER or field.family == OPEN:
        return  # the data names its units: converted where they convert, 315 from the conversion where not
    default = objects.default_units.get(get.path.leaf_tag)
    try:
        family = canonical(get.units)[0]
    except UnitError:
        raise SSSRMAPError(BAD_GET, f"{what}: unknown unit {get.units[:20]!r}, cannot convert "
                                    f"{get.path.text[:80]} ({default or field.describe()}) to it") from None
    if family != field.family:
        raise SSSRMAPError(BAD_GET, f"{what}: cannot convert {get.path.text[:80]} ({default or field.describe()}) "
                                    f"to {get.units[:20]}, a unit of {family}")


def run_query(objects: ObjectSet, request: QueryRequest, budget: Optional[Budget] = None) -> list[bytes]:
    """The records (serialized objects) a Query returns, in order.

    Options: Unique drops repeated records (the first kept), then Offset skips
    and Limit cuts, counting records (groups, for an aggregate query).

    SSSRMAPError: 315/316 for names and values the object class refuses
    (checked before any work), QUERY_BUDGET (740) once ``budget`` runs out.
    """
    budget = budget or Budget()
    for get in request.gets:
        check_get(objects, get)
    chosen = select(objects, request.wheres, budget)
    if any(g.op in AGGREGATES for g in request.gets):
        records = aggregate(objects, chosen, request.gets, budget)
    else:
        chosen = order(objects, chosen, request.gets, budget)
        if not request.unique:  # Offset and Limit count records: cut before writing them
            chosen = _window(chosen, request)
        records = project(objects, chosen, request.gets, budget)
        if not request.unique:
            return records
    if request.unique:
        budget.check("removing duplicate records")
        records = list(dict.fromkeys(records))  # the first of identical records kept, in order
    return _window(records, request)


def _window(items: list[Any], request: QueryRequest) -> list[Any]:
    """Option Offset then Limit, as Gold's LIMIT .. OFFSET .. does."""
    end = None if request.limit is None else request.offset + request.limit
    return items[request.offset:end]


