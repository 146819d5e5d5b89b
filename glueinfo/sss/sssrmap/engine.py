"""The SSSRMAP query engine: Where selects, Get orders, projects or aggregates.

Object-agnostic: it queries lxml elements of any object class, held in an
:class:`ObjectSet` that caches per path what queries need (matched
elements, numbers in a common unit, sorted columns, serialized fragments).
:func:`run_query` takes a checked :class:`QueryRequest` (see request.py)
and returns the serialized records, in order.

Semantics:

- Where ops EQ NE GT GE LT LE Match.  NOT binds tighter than And, And
  tighter than Or (as in the SQL the reference implementations generate).
  A field with several values (Feature) matches when any value does; NE is
  "no value equals", so it matches objects without the field.  A Where
  without a value is a truth test: the field exists and is not empty, 0 or
  false.
- Numbers compare as numbers in a common unit: the Where's ``units``
  attribute or a suffix on its value (``4GB``), else the field's default
  unit; the object's side uses its ``units`` attribute, else the default.
  Byte units are binary (SSS Appendix A).  A number against text compares
  as text.
- Get ops Sort/Tros order the results (objects without the field last);
  Count/Sum/Average/Min/Max aggregate, per GroupBy group.  No Get returns
  whole objects; records keep the nesting of the Get names.

Failures: :class:`SSSRMAPError` BAD_GET/BAD_WHERE for what can only be
seen against the data (Sum of text, units that do not convert).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from lxml import etree

from glueinfo.core.units import UnitError, canonical, convert, format_number, parse_quantity
from glueinfo.core.xmlsafe import escape_attribute, escape_text
from glueinfo.sss.sssrmap.request import AGGREGATES, GetField, Path, QueryRequest, WhereCondition, split_step
from glueinfo.sss.sssrmap.status import BAD_GET, BAD_WHERE, SSSRMAPError

_FALSE_WORDS = {"", "0", "false", "no", "off"}


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
        self._values: dict[str, list[tuple[tuple[str, Optional[float], Optional[str]], ...]]] = {}
        self._text_only: dict[str, list[int]] = {}
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
        cached = self._values.get(path.text)
        if cached is None:
            cached = self._values[path.text] = [tuple(((e.text or "").strip(), _number_of(e.text), self.unit_of(e)) for e in found)
                                                for found in self.matches(path)]
        return cached

    def text_only(self, path: Path) -> list[int]:
        """Objects that have the path but no numeric value in it."""
        cached = self._text_only.get(path.text)
        if cached is None:
            cached = self._text_only[path.text] = [
                i for i, (values, found) in enumerate(zip(self.measures(path), self.matches(path), strict=True)) if found and not values]
        return cached

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
        return [cached[i] or b"" for i in chosen]  # all filled above; `or` tells the type checker

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
    # Tokens: a condition, or one of "and", "or", "not", "(", ")"
    tokens: list[Union[_Condition, str]] = []
    for position, where in enumerate(wheres):
        if position:
            tokens.append("or" if where.conj in ("Or", "OrNot") else "and")
        if where.conj in ("AndNot", "OrNot"):
            tokens.append("not")
        tokens.extend(["("] * max(0, where.group))
        tokens.append(_Condition(objects, where))
        tokens.extend([")"] * max(0, -where.group))
    universe = set(range(len(objects)))
    position = 0

    def expression() -> set[int]:
        nonlocal position
        result = term()
        while position < len(tokens) and tokens[position] == "or":
            position += 1
            result = result | term()
        return result

    def term() -> set[int]:
        nonlocal position
        result = factor()
        while position < len(tokens) and tokens[position] == "and":
            position += 1
            result = result & factor()
        return result

    def factor() -> set[int]:
        nonlocal position
        kind = tokens[position]
        if isinstance(kind, _Condition):
            position += 1
            return kind.evaluate()
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
    tag, predicates = split_step(step)
    attributes = "".join(f' {name}="{escape_attribute(value)}"' for name, value in predicates)
    return f"<{tag}{attributes}>".encode(), f"</{tag}>".encode()


def _converted(objects: ObjectSet, get: GetField, units: str, index: int) -> bytes:
    """The path's elements with their numeric text converted to ``units`` (the Get's)."""
    parts = []
    for element in objects.matches(get.path)[index]:
        number = _number_of(element.text)
        unit = objects.unit_of(element)
        if number is None or not unit or len(element):
            parts.append(etree.tostring(element, encoding="UTF-8", with_tail=False))
            continue
        try:
            value = convert(number, unit, units)
        except UnitError as exc:
            raise SSSRMAPError(BAD_GET, f"Get {get.path.text} units={units!r}: {exc}") from None
        attributes = "".join(f' {k}="{escape_attribute(v)}"'  # type: ignore[str-bytes-safe,arg-type]  # lxml-stubs: attrib items are str, not str|bytes
                             for k, v in element.attrib.items() if k != "units")
        parts.append(f'<{element.tag}{attributes} units="{escape_attribute(units)}">{format_number(value)}</{element.tag}>'.encode())
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
                parts.append([_converted(objects, get, get.units, i) for i in chosen] if get.units else objects.fragments(get.path, chosen))
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


def aggregate(objects: ObjectSet, chosen: Sequence[int], gets: Sequence[GetField]) -> list[bytes]:
    """Records of aggregates, one per group of the GroupBy fields (one record without GroupBy)."""
    group_gets = [g for g in gets if g.op == "GroupBy"]
    groups: dict[tuple[Optional[str], ...], list[int]] = {}
    columns = [objects.values(get.path) for get in group_gets]
    for i in chosen:
        keys: list[list[Optional[str]]] = [list(dict.fromkeys(text for text, _, _ in column[i])) or [None] for column in columns]
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
                            opening = opening[:-1] + f' units="{escape_attribute(unit)}">'.encode()
                        parts.append(opening + escape_text(text).encode() + closing)
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


