"""What slapd will say about an entry, said first: ``Schema.check``.

``check_entry(schema, entry)`` lists what slapd would reject the entry for
(checked against a real slapd in tests/integration/test_ldapschema.py): no
or unknown object class, no structural class or two structural classes not
in one chain, a MUST attribute missing, an attribute no class of the entry
allows or the schema does not know, several values for a SINGLE-VALUE
attribute, duplicate values, values that break the INTEGER, BOOLEAN,
IA5String, DirectoryString or GeneralizedTime syntax, and an RDN value
missing from the entry.  ``check_entries`` adds duplicate DNs and children
written before their parent.  Nothing raises: every finding is a
:class:`Problem` naming DN, attribute and cause.

Speed comes from working out once what depends only on names: a
:class:`Plan` per attribute name (its definition, syntax, equality rule) and
a :class:`Shape` per combination of object classes and attribute names (the
structural verdict).  Both are cached on the Schema (also used by
normalise.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Optional

from glueinfo.core.ldif import DNError, Entry, LDIFError, Value, normalise_dn, parent_dn, parse_dn, parse_ldif, value_text
from glueinfo.core.records import dataclass

if TYPE_CHECKING:  # parse.py imports this module: the model is only needed for annotations
    from glueinfo.glue.schema.parse import AttributeType, ObjectClass, Schema

SYNTAX_BOOLEAN = "1.3.6.1.4.1.1466.115.121.1.7"
SYNTAX_DIRECTORY_STRING = "1.3.6.1.4.1.1466.115.121.1.15"
SYNTAX_GENERALIZED_TIME = "1.3.6.1.4.1.1466.115.121.1.24"
SYNTAX_IA5_STRING = "1.3.6.1.4.1.1466.115.121.1.26"
SYNTAX_INTEGER = "1.3.6.1.4.1.1466.115.121.1.27"
SYNTAX_OID = "1.3.6.1.4.1.1466.115.121.1.38"
SYNTAX_NAMES = {
    SYNTAX_BOOLEAN: "BOOLEAN",
    SYNTAX_DIRECTORY_STRING: "DirectoryString",
    SYNTAX_GENERALIZED_TIME: "GeneralizedTime",
    SYNTAX_IA5_STRING: "IA5String",
    SYNTAX_INTEGER: "INTEGER",
    SYNTAX_OID: "OID",
}
_CHECKED_SYNTAXES = frozenset({SYNTAX_BOOLEAN, SYNTAX_DIRECTORY_STRING, SYNTAX_GENERALIZED_TIME, SYNTAX_IA5_STRING, SYNTAX_INTEGER})

Matcher = Callable[[Value], object]  # a value -> what the attribute's EQUALITY rule compares


@dataclass(frozen=True)
class Problem:
    """One finding about one entry (an error from check, a warning from normalise)."""

    dn: str
    message: str
    attribute: Optional[str] = None

    def __str__(self) -> str:
        return f"{self.dn}: {self.message}" if self.dn else self.message


@dataclass(frozen=True)
class Plan:
    """What checking and normalising one attribute name needs, worked out once (package-internal)."""

    at: Optional[AttributeType]
    canonical: str
    syntax: Optional[str]
    matcher: Optional[Matcher]  # the EQUALITY rule, approximated; None without one
    single_value: bool
    oid: str


@dataclass(frozen=True)
class Closure:
    """An object class list with all its superclasses, and what they require and allow (package-internal)."""

    everything: dict[str, ObjectClass]  # the classes and all their superclasses, by OID
    must: dict[str, str]  # OID -> name
    allowed: Optional[set[str]]  # OIDs; None: any (extensibleObject)
    chain_problem: Optional[str]


@dataclass(frozen=True)
class Shape:
    """The structural verdict for one entry shape (object classes and attribute names) (package-internal)."""

    static: tuple[tuple[str, Optional[str]], ...]  # (message, attribute) true of every entry of this shape
    groups: tuple[tuple[Plan, tuple[str, ...]], ...]  # known attribute types, with the spellings used


# ---------------------------------------------------------------- per-name and per-shape work, cached


def plan_for(schema: Schema, name: str) -> Plan:
    """Everything check/normalise need about one attribute name, computed once per schema."""
    plan = schema._plans.get(name)
    if plan is None:
        at = schema.attribute(name)
        if at is None:
            plan = Plan(None, name, None, None, False, "")
        else:
            equality = schema.equality(name)
            plan = Plan(at, schema.canonical_name(name), schema.syntax(name), _matcher_for(equality) if equality else None,
                        at.single_value, at.oid)
        schema._plans[name] = plan
    return plan


def _closure(schema: Schema, classes: Sequence[str]) -> Closure:
    key = tuple(classes)
    cached = schema._closure_cache.get(key)
    if cached is not None:
        return cached
    everything: dict[str, ObjectClass] = {}
    for name in classes:
        for definition in schema.superclasses(name):
            everything[definition.oid] = definition
    # A class declared without SUP has top above it (RFC 4512 2.4.1; slapd reads it so): GLUE20.schema's
    # GLUE2Entity and GLUE2Group name no superclass, yet their entries must carry objectClass.
    top = schema.object_class("top") if classes else None
    if top is not None:
        everything.setdefault(top.oid, top)
    must: dict[str, str] = {}
    allowed: Optional[set[str]] = set()
    for definition in everything.values():
        if definition.name.lower() == "extensibleobject":
            allowed = None
        for attr in definition.must:
            at = schema.attribute(attr)
            if at is not None:
                must[at.oid] = at.name
                if allowed is not None:
                    allowed.add(at.oid)
        for attr in definition.may:
            at = schema.attribute(attr)
            if at is not None and allowed is not None:
                allowed.add(at.oid)
    structural = [d for d in everything.values() if d.kind == "STRUCTURAL"]
    chain_problem = None
    if classes and not structural:
        chain_problem = f"no structural object class among {', '.join(classes)}"
    elif structural:
        # One chain: some structural class must have every other as a superclass.
        for candidate in structural:
            above = {d.oid for d in schema.superclasses(candidate.name)}
            if all(d.oid in above for d in structural):
                break
        else:
            names = " and ".join(sorted(d.name for d in structural))
            chain_problem = f"structural object classes {names} are not in one superclass chain"
    result = Closure(everything, must, allowed, chain_problem)
    schema._closure_cache[key] = result
    return result


def _shape(schema: Schema, classes: tuple[Value, ...], names: tuple[str, ...]) -> Shape:
    """What can be known about an entry from its classes and attribute
    names alone; entries of one kind share it, so it is computed once."""
    key = (classes, names)
    shape = schema._shapes.get(key)
    if shape is not None:
        return shape
    static: list[tuple[str, Optional[str]]] = []
    class_names = [value_text(c) for c in classes]
    if not class_names:
        static.append(("no objectClass attribute", None))
    unknown = [c for c in class_names if schema.object_class(c) is None]
    for name in unknown:
        static.append((f"unknown object class {name!r}", "objectClass"))
    closure = _closure(schema, [c for c in class_names if c not in unknown])
    if class_names and not unknown and closure.chain_problem:
        static.append((closure.chain_problem, "objectClass"))
    groups: dict[str, tuple[Plan, AttributeType, list[str]]] = {}
    for name in names:
        plan = plan_for(schema, name)
        if plan.at is None:
            static.append((f"attribute {name} is not in the schema", name))
        elif plan.oid in groups:
            groups[plan.oid][2].append(name)  # another spelling: slapd merges them
        else:
            groups[plan.oid] = (plan, plan.at, [name])
    for plan, at, spellings in groups.values():
        name = spellings[0]
        if at.usage != "userApplications":
            static.append((f"attribute {name} is operational ({at.usage}); the server sets it", name))
        elif closure.allowed is not None and plan.oid not in closure.allowed and not unknown:
            static.append((f"attribute {name} is not allowed by the object classes {', '.join(class_names)}", name))
    if not unknown:
        for oid, name in closure.must.items():
            if oid not in groups:
                static.append((f"required attribute {name} is missing (MUST of {_who_requires(schema, oid, closure.everything)})",
                               name))
    shape = Shape(tuple(static), tuple((plan, tuple(spellings)) for plan, _, spellings in groups.values()))
    if len(schema._shapes) > 10_000:  # only hostile input has this many kinds of entries
        schema._shapes.clear()
    schema._shapes[key] = shape
    return shape


def _who_requires(schema: Schema, oid: str, everything: dict[str, ObjectClass]) -> str:
    names = {d.name for d in everything.values() for attr in d.must
             if (at := schema.attribute(attr)) is not None and at.oid == oid}
    return ", ".join(sorted(names)) or "a class of the entry"


def _matcher_for(equality: str) -> Matcher:
    equality = equality.lower()
    if equality.startswith("caseignore"):
        return lambda v: " ".join(value_text(v).casefold().split())
    if equality == "integermatch":
        return lambda v: _int_or_text(value_text(v))
    if equality == "objectidentifiermatch":  # object class names
        return lambda v: value_text(v).casefold()
    if equality.startswith("caseexact"):
        return lambda v: " ".join(value_text(v).split())
    return value_text


def _int_or_text(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


# ---------------------------------------------------------------- checking


def check_entry(schema: Schema, entry: Entry) -> list[Problem]:
    """What slapd would reject this entry for (empty list: it loads)."""
    dn = entry.dn
    problems: list[Problem] = []

    def problem(message: str, attribute: Optional[str] = None) -> None:
        problems.append(Problem(dn, message, attribute))

    try:
        rdns = parse_dn(dn)
    except DNError as exc:
        problem(f"invalid DN: {exc}")
        rdns = []
    if not rdns and not problems:
        problem("empty DN")

    attributes = entry.attributes
    names = tuple(name for name, values in attributes.items() if values)
    shape = _shape(schema, tuple(entry.get("objectClass")), names)
    for message, attribute in shape.static:
        problems.append(Problem(dn, message, attribute))
    by_oid: dict[str, tuple[Plan, list[Value]]] = {}
    for plan, spellings in shape.groups:
        values = attributes[spellings[0]] if len(spellings) == 1 else [v for n in spellings for v in attributes[n]]
        _check_values(plan, spellings[0], values, problem)
        by_oid[plan.oid] = (plan, values)

    for rdn in rdns[:1]:
        for attr, value in rdn:
            plan = plan_for(schema, attr)
            if plan.at is None:
                problem(f"naming attribute {attr} of the DN is not in the schema", attr)
                continue
            if not value.strip(" ") and (value == "" or plan.syntax == SYNTAX_IA5_STRING):
                # slapd: "invalid DN" (an IA5 value normalises to nothing without its spaces)
                problem(f"naming attribute {attr} of the DN has an empty or all-space value", attr)
                continue
            values = by_oid[plan.oid][1] if plan.oid in by_oid else []
            if value in values:
                continue
            matcher = plan.matcher or value_text
            if matcher(value) not in {matcher(v) for v in values}:
                problem(f"naming attribute {attr}={value!r} of the DN is not among the entry's {plan.at.name} values", attr)
    return problems


def check_entries(schema: Schema, entries: Iterable[Entry]) -> list[Problem]:
    """check_entry() over many entries, plus duplicate DNs and children written
    before their parent (both make ldapadd fail)."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    entries = list(entries)
    keys: list[Optional[str]] = []
    for index, entry in enumerate(entries):
        problems.extend(check_entry(schema, entry))
        try:
            key: Optional[str] = normalise_dn(entry.dn)
        except DNError:
            key = None
        keys.append(key)
        if key is not None:
            if key in seen:
                problems.append(Problem(entry.dn, "the same DN appears twice; the second add fails"))
            else:
                seen[key] = index
    for index, found in enumerate(keys):
        if found is None:
            continue
        parent = parent_dn(found)
        if parent in seen and seen[parent] > index:
            problems.append(Problem(entries[index].dn, "comes before its parent entry; add the parent first"))
    return problems


def check_ldif_text(text: str, schema: Schema) -> list[Problem]:
    """Problems slapd would reject in an LDIF text (``glueinfo ldif --check``):
    unparseable LDIF (one problem naming the line), then every entry's."""
    try:
        entries = parse_ldif(text)
    except LDIFError as exc:
        return [Problem("", f"not valid LDIF: {exc}")]
    return check_entries(schema, entries)


def _check_values(plan: Plan, name: str, values: list[Value], problem: Callable[[str, Optional[str]], None]) -> None:
    if plan.single_value and len(values) > 1:
        listed = ", ".join(repr(value_text(v)) for v in values[:4])
        problem(f"{name} is single-valued but has {len(values)} values ({listed})", name)
    syntax = plan.syntax
    if syntax not in _CHECKED_SYNTAXES:
        values_to_check: list[Value] = []
    else:
        values_to_check = values
    for v in values_to_check:
        kind = type(v)
        if (syntax == SYNTAX_IA5_STRING and isinstance(v, str) and v.isascii()) or (syntax == SYNTAX_INTEGER and kind is int) \
                or (syntax == SYNTAX_BOOLEAN and kind is bool):
            continue
        message = syntax_error(syntax, v)
        if message:
            problem(f"{name}: {message}", name)
    if plan.matcher is not None and len(values) > 1:
        seen: set[object] = set()
        for v in values:
            key = plan.matcher(v)
            if key in seen:
                problem(f"{name} has the value {value_text(v)!r} twice", name)
            seen.add(key)


# ---------------------------------------------------------------- syntaxes

INTEGER_FORMAT = re.compile(r"0|-?[1-9][0-9]*")  # slapd refuses 007, +5, -0 and spaces
_GENERALIZED_TIME_PATTERN = r"[0-9]{10}([0-9]{2}([0-9]{2})?)?([.,][0-9]+)?(Z|[+-][0-9]{4})"  # GLUE 1.3 has none: compiled if seen


def syntax_error(syntax: Optional[str], value: Value) -> Optional[str]:
    """Why slapd would refuse this value for this syntax, or None if it is fine."""
    if isinstance(value, bool):
        if syntax == SYNTAX_INTEGER:
            return f"{value!r} is a boolean, not an INTEGER"
        text = value_text(value)
    else:
        text = value_text(value)
    if text == "" and syntax != SYNTAX_IA5_STRING:  # slapd takes an empty IA5String
        return "empty value"
    if syntax == SYNTAX_INTEGER:
        if not INTEGER_FORMAT.fullmatch(text):
            return f"{shown(text)} is not an INTEGER"
    elif syntax == SYNTAX_BOOLEAN:
        if text not in ("TRUE", "FALSE"):
            return f"{shown(text)} is not a BOOLEAN (TRUE or FALSE)"
    elif syntax == SYNTAX_IA5_STRING:
        if not text.isascii():
            return f"{shown(text)} is not ASCII (IA5String)"
    elif syntax == SYNTAX_GENERALIZED_TIME:
        if not re.fullmatch(_GENERALIZED_TIME_PATTERN, text):
            return f"{shown(text)} is not a GeneralizedTime"
    return None


def shown(value: object) -> str:
    """A value as quoted in a problem message, cut to 80 characters."""
    text = value_text(value) if isinstance(value, (str, int)) else repr(value)
    return repr(text if len(text) <= 80 else text[:77] + "...")
