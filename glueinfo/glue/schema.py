"""The GLUE LDAP schema checker: what slapd will say about an entry, said first.

``load_schema(directory)`` reads OpenLDAP ``.schema`` files -- by default the
ones Debian's ``glue-schema`` package installs in /etc/ldap/schema plus
core.schema and cosine.schema, the same set BDII's slapd includes -- and the
system schema slapd has built in (``top``, ``objectClass``,
``extensibleObject``...).  The installed files are the contract: nothing about
GLUE attributes is hard-coded here.

``Schema.check(entry)`` lists what slapd would reject the entry for (checked
against a real slapd in tests/test_ldapschema.py): no or unknown object
class, no structural class or two structural classes not in one chain, a
MUST attribute missing, an attribute no class of the entry allows or the
schema does not know, several values for a SINGLE-VALUE attribute, duplicate
values, values that break the INTEGER, BOOLEAN, IA5String or
DirectoryString syntax, and an RDN value missing from the entry.

``Schema.normalise(entry)`` fixes what is data rather than a renderer bug, so
that one hostile host fact never makes slapd reject a whole entry: attribute
and class names in the schema's spelling, ints and bools formatted, IA5
values transliterated to ASCII (in the DN too, identically), values that
cannot be made valid (``12.5`` for an INTEGER, an empty string) dropped -- each
change reported as a warning naming DN, attribute and original value.
Structural mistakes (an unknown attribute, two values for a single-valued
one) are left for ``check`` to report.

Without schema files (``SchemaUnavailable`` from ``load_schema``) the caller
says so once and publishes unchecked, normalising with ``normalise_unchecked``:
every string value of a GLUE 1.x attribute (name starting ``Glue``, not
``GLUE2``) is transliterated to ASCII.  That needs no built-in attribute list:
every GLUE 1.3 attribute in the installed files is IA5String, INTEGER or
BOOLEAN, all ASCII-only syntaxes.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

from glueinfo.core.errors import GlueinfoError
from glueinfo.core.ldif import DNError, Entry, LDIFError, format_dn, normalise_dn, parent_dn, parse_dn, parse_ldif, value_text

log = logging.getLogger(__name__)

DEFAULT_SCHEMA_DIR = "/etc/ldap/schema"
# What BDII's slapd includes (bdii-slapd.conf), minus nis.schema and BDII's own
# stats schema, which no GLUE entry uses.  Missing optional files are skipped.
DEFAULT_SCHEMA_FILES = (
    "core.schema",
    "cosine.schema",
    "Glue-CORE.schema",
    "Glue-MDS.schema",
    "Glue-CE.schema",
    "Glue-CESEBind.schema",
    "Glue-SE.schema",
    "GLUE20.schema",
)
# Without these there is nothing to check GLUE 1.3 against.
REQUIRED_SCHEMA_FILES = ("Glue-CORE.schema", "Glue-CE.schema")

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

# slapd's hard-coded system schema (core.schema has these commented out).
SYSTEM_SCHEMA = """
attributetype ( 2.5.4.0 NAME 'objectClass' EQUALITY objectIdentifierMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.38 )
attributetype ( 2.5.4.1 NAME ( 'aliasedObjectName' 'aliasedEntryName' ) EQUALITY distinguishedNameMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.12 SINGLE-VALUE )
attributetype ( 2.16.840.1.113730.3.1.34 NAME 'ref' EQUALITY caseExactMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15
  USAGE distributedOperation )
attributetype ( 2.5.18.1 NAME 'createTimestamp' EQUALITY generalizedTimeMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.24
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.2 NAME 'modifyTimestamp' EQUALITY generalizedTimeMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.24
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.3 NAME 'creatorsName' EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.4 NAME 'modifiersName' EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.21.9 NAME 'structuralObjectClass' EQUALITY objectIdentifierMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.38
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 1.3.6.1.1.16.4 NAME 'entryUUID' EQUALITY UUIDMatch SYNTAX 1.3.6.1.1.16.1
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 1.3.6.1.4.1.4203.666.1.7 NAME 'entryCSN' EQUALITY CSNMatch SYNTAX 1.3.6.1.4.1.4203.666.11.2.1
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 1.3.6.1.1.20 NAME 'entryDN' EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.10 NAME 'subschemaSubentry' EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.9 NAME 'hasSubordinates' EQUALITY booleanMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.7
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
objectclass ( 2.5.6.0 NAME 'top' ABSTRACT MUST objectClass )
objectclass ( 2.5.6.1 NAME 'alias' SUP top STRUCTURAL MUST aliasedObjectName )
objectclass ( 2.16.840.1.113730.3.2.6 NAME 'referral' SUP top STRUCTURAL MUST ref )
objectclass ( 1.3.6.1.4.1.1466.101.120.111 NAME 'extensibleObject' SUP top AUXILIARY )
"""


class SchemaError(GlueinfoError, ValueError):
    """A schema file that cannot be parsed; the message names file and definition."""


class SchemaUnavailable(GlueinfoError, OSError):
    """The schema directory or the GLUE schema files are not there."""


@dataclass(frozen=True)
class Problem:
    """One finding about one entry (an error from check, a warning from normalise)."""

    dn: str
    message: str
    attribute: Optional[str] = None

    def __str__(self) -> str:
        return f"{self.dn}: {self.message}" if self.dn else self.message


@dataclass
class AttributeType:
    """An attributetype definition of a schema file."""

    oid: str
    names: tuple[str, ...]
    sup: Optional[str] = None
    equality: Optional[str] = None
    syntax: Optional[str] = None  # own SYNTAX, without {length}
    single_value: bool = False
    usage: str = "userApplications"
    source: str = ""

    @property
    def name(self) -> str:
        return self.names[0] if self.names else self.oid


@dataclass
class ObjectClass:
    """An objectclass definition of a schema file."""

    oid: str
    names: tuple[str, ...]
    sup: tuple[str, ...] = ()
    kind: str = "STRUCTURAL"  # ABSTRACT, STRUCTURAL or AUXILIARY
    must: tuple[str, ...] = ()
    may: tuple[str, ...] = ()
    source: str = ""

    @property
    def name(self) -> str:
        return self.names[0] if self.names else self.oid


# ---------------------------------------------------------------- parsing

# Compiled when first used (re caches it): a `glueinfo ldif` that reads the
# parsed schema from its cache never needs it.
_TOKEN_PATTERN = r"\(|\)|\$|'(?:[^'\\]|\\.)*'|[^\s()$']+"


def _tokens(text: str, where: str) -> list[str]:
    """'(' ')' '$', bare words, and quoted strings marked by a leading "'"."""
    tokenizer = re.compile(_TOKEN_PATTERN)
    leftover = tokenizer.sub(" ", text)
    if leftover.strip():
        raise SchemaError(f"{where}: cannot parse {leftover.strip()[:40]!r} in {text[:60]!r}")
    return [token[:-1] if token[0] == "'" else token for token in tokenizer.findall(text)]


def _word(token: str) -> str:
    return token[1:] if token.startswith("'") else token


def _parse_definition(tokens: list[str], where: str) -> tuple[str, dict[str, list[str]]]:
    """(oid, keyword -> list of values) for ``( oid KEYWORD value ... )``."""
    if len(tokens) < 3 or tokens[0] != "(" or tokens[-1] != ")":
        raise SchemaError(f"{where}: a definition must be '( OID ... )'")
    body = tokens[1:-1]
    oid = _word(body[0])
    fields: dict[str, list[str]] = {}
    i = 1
    flags = {"SINGLE-VALUE", "COLLECTIVE", "NO-USER-MODIFICATION", "OBSOLETE", "ABSTRACT", "STRUCTURAL", "AUXILIARY"}
    while i < len(body):
        keyword = body[i].upper()
        i += 1
        if keyword in flags:
            fields[keyword] = []
            continue
        if i >= len(body):
            raise SchemaError(f"{where}: {keyword} without a value")
        if body[i] == "(":
            values = []
            i += 1
            while i < len(body) and body[i] != ")":
                if body[i] != "$":
                    values.append(_word(body[i]))
                i += 1
            if i >= len(body):
                raise SchemaError(f"{where}: unclosed list after {keyword}")
            i += 1
        else:
            values = [_word(body[i])]
            i += 1
        fields[keyword] = values
    return oid, fields


def _statements(text: str, source: str) -> Iterable[tuple[str, str, int]]:
    """(keyword, rest, line) for each top-level statement; continuation lines
    start with white space; comments start with '#'."""
    keyword = None
    parts: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        if not line.strip():
            continue
        if line[0].isspace() and keyword is not None:
            parts.append(line.strip())
            continue
        if keyword is not None:
            yield keyword, " ".join(parts), start
        head, _, rest = line.strip().partition(" ")
        keyword, parts, start = head.lower(), [rest.strip()], number
        if "\t" in head:
            head, _, rest = line.strip().partition("\t")
            keyword, parts = head.lower(), [rest.strip()]
    if keyword is not None:
        yield keyword, " ".join(parts), start


class Schema:
    """Attribute types and object classes, looked up case-insensitively by any
    of their names or their OID."""

    def __init__(self) -> None:
        self.attribute_types: dict[str, AttributeType] = {}
        self.object_classes: dict[str, ObjectClass] = {}
        self.sources: list[str] = []
        self._oid_macros: dict[str, str] = {}
        self._closure_cache: dict[tuple[str, ...], _Closure] = {}
        self._plans: dict[str, _Plan] = {}
        self._shapes: dict[tuple, _Shape] = {}
        self._class_lists: dict[tuple, list[str]] = {}
        self._plans_by_names: dict[tuple, list] = {}

    # -- loading
    def add_text(self, text: str, source: str) -> None:
        for keyword, rest, line in _statements(text, source):
            where = f"{source}:{line}"
            if keyword == "objectidentifier":
                name, _, value = rest.partition(" ")
                self._oid_macros[name.strip().lower()] = self._expand_oid(value.strip())
                continue
            if keyword not in ("attributetype", "attributetypes", "objectclass", "objectclasses"):
                continue  # ditcontentrule, ldapsyntax...: nothing GLUE uses
            oid, fields = _parse_definition(_tokens(rest, where), where)
            oid = self._expand_oid(oid)
            names = tuple(fields.get("NAME", ()))
            if keyword.startswith("attributetype"):
                syntax = fields.get("SYNTAX", [None])[0]
                if syntax:
                    syntax = self._expand_oid(syntax.split("{", 1)[0])
                definition = AttributeType(
                    oid=oid, names=names, sup=(fields.get("SUP") or [None])[0],
                    equality=(fields.get("EQUALITY") or [None])[0], syntax=syntax,
                    single_value="SINGLE-VALUE" in fields, usage=(fields.get("USAGE") or ["userApplications"])[0],
                    source=where,
                )
                for key in (oid, *names):
                    self.attribute_types[key.lower()] = definition
            else:
                kind = next((k for k in ("ABSTRACT", "AUXILIARY", "STRUCTURAL") if k in fields), "STRUCTURAL")
                definition_oc = ObjectClass(
                    oid=oid, names=names, sup=tuple(fields.get("SUP", ())), kind=kind,
                    must=tuple(fields.get("MUST", ())), may=tuple(fields.get("MAY", ())), source=where,
                )
                for key in (oid, *names):
                    self.object_classes[key.lower()] = definition_oc
        self.sources.append(source)
        self._closure_cache.clear()
        self._plans.clear()
        self._shapes.clear()
        self._class_lists.clear()
        self._plans_by_names.clear()

    def _expand_oid(self, value: str) -> str:
        prefix, sep, rest = value.partition(":")
        if sep and prefix.lower() in self._oid_macros:
            return f"{self._oid_macros[prefix.lower()]}.{rest}"
        return self._oid_macros.get(value.lower(), value)

    # -- lookups
    def attribute(self, name: str) -> Optional[AttributeType]:
        return self.attribute_types.get(name.split(";", 1)[0].lower())

    def object_class(self, name: str) -> Optional[ObjectClass]:
        return self.object_classes.get(name.lower())

    def canonical_name(self, attr: str) -> str:
        """The schema's spelling of an attribute (first NAME); unknown names as given."""
        definition = self.attribute(attr)
        if definition is None:
            return attr
        base, sep, options = attr.partition(";")
        return definition.name + sep + options

    def canonical_class(self, name: str) -> str:
        definition = self.object_class(name)
        return definition.name if definition else name

    def syntax(self, attr: str) -> Optional[str]:
        """The attribute's syntax OID, inherited through SUP when not its own."""
        definition = self.attribute(attr)
        seen = set()
        while definition is not None and definition.oid not in seen:
            if definition.syntax:
                return definition.syntax
            seen.add(definition.oid)
            definition = self.attribute(definition.sup) if definition.sup else None
        return None

    def equality(self, attr: str) -> Optional[str]:
        definition = self.attribute(attr)
        seen = set()
        while definition is not None and definition.oid not in seen:
            if definition.equality:
                return definition.equality
            seen.add(definition.oid)
            definition = self.attribute(definition.sup) if definition.sup else None
        return None

    def superclasses(self, name: str) -> list[ObjectClass]:
        """The class and all its superclasses (known ones), nearest first."""
        out: list[ObjectClass] = []
        seen: set[str] = set()
        todo = [name]
        while todo:
            definition = self.object_class(todo.pop(0))
            if definition is None or definition.oid in seen:
                continue
            seen.add(definition.oid)
            out.append(definition)
            todo.extend(definition.sup)
        return out

    # -- checking
    def _plan(self, name: str) -> _Plan:
        """Everything check/normalise need about one attribute name, computed once."""
        plan = self._plans.get(name)
        if plan is None:
            at = self.attribute(name)
            if at is None:
                plan = _Plan(None, name, None, None, False, "")
            else:
                equality = self.equality(name)
                plan = _Plan(at, self.canonical_name(name), self.syntax(name), _matcher_for(equality) if equality else None,
                             at.single_value, at.oid)
            self._plans[name] = plan
        return plan

    def _closure(self, classes: Sequence[str]) -> _Closure:
        key = tuple(classes)
        cached = self._closure_cache.get(key)
        if cached is not None:
            return cached
        everything: dict[str, ObjectClass] = {}
        for name in classes:
            for definition in self.superclasses(name):
                everything[definition.oid] = definition
        must: dict[str, str] = {}
        allowed: Optional[set[str]] = set()
        for definition in everything.values():
            if definition.name.lower() == "extensibleobject":
                allowed = None
            for attr in definition.must:
                at = self.attribute(attr)
                if at is not None:
                    must[at.oid] = at.name
                    if allowed is not None:
                        allowed.add(at.oid)
            for attr in definition.may:
                at = self.attribute(attr)
                if at is not None and allowed is not None:
                    allowed.add(at.oid)
        structural = [d for d in everything.values() if d.kind == "STRUCTURAL"]
        chain_problem = None
        if classes and not structural:
            chain_problem = f"no structural object class among {', '.join(classes)}"
        elif structural:
            # One chain: some structural class must have every other as a superclass.
            for candidate in structural:
                above = {d.oid for d in self.superclasses(candidate.name)}
                if all(d.oid in above for d in structural):
                    break
            else:
                names = " and ".join(sorted(d.name for d in structural))
                chain_problem = f"structural object classes {names} are not in one superclass chain"
        result = _Closure(everything, must, allowed, chain_problem)
        self._closure_cache[key] = result
        return result

    def _shape(self, classes: tuple, names: tuple) -> _Shape:
        """What can be known about an entry from its classes and attribute
        names alone; entries of one kind share it, so it is computed once."""
        key = (classes, names)
        shape = self._shapes.get(key)
        if shape is not None:
            return shape
        static: list[tuple[str, Optional[str]]] = []
        class_names = [value_text(c) for c in classes]
        if not class_names:
            static.append(("no objectClass attribute", None))
        unknown = [c for c in class_names if self.object_class(c) is None]
        for name in unknown:
            static.append((f"unknown object class {name!r}", "objectClass"))
        closure = self._closure([c for c in class_names if c not in unknown])
        if class_names and not unknown and closure.chain_problem:
            static.append((closure.chain_problem, "objectClass"))
        groups: dict[str, tuple[_Plan, list[str]]] = {}
        for name in names:
            plan = self._plan(name)
            if plan.at is None:
                static.append((f"attribute {name} is not in the schema", name))
            elif plan.oid in groups:
                groups[plan.oid][1].append(name)  # another spelling: slapd merges them
            else:
                groups[plan.oid] = (plan, [name])
        for plan, spellings in groups.values():
            name = spellings[0]
            if plan.at.usage != "userApplications":  # type: ignore[union-attr]
                static.append((f"attribute {name} is operational ({plan.at.usage}); the server sets it", name))  # type: ignore[union-attr]
            elif closure.allowed is not None and plan.oid not in closure.allowed and not unknown:
                static.append((f"attribute {name} is not allowed by the object classes {', '.join(class_names)}", name))
        if not unknown:
            for oid, name in closure.must.items():
                if oid not in groups:
                    static.append((f"required attribute {name} is missing (MUST of {self._who_requires(oid, closure.everything)})",
                                   name))
        shape = _Shape(tuple(static), tuple((plan, tuple(spellings)) for plan, spellings in groups.values()))
        if len(self._shapes) > 10_000:  # only hostile input has this many kinds of entries
            self._shapes.clear()
        self._shapes[key] = shape
        return shape

    def check(self, entry: Entry) -> list[Problem]:
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
        shape = self._shape(tuple(entry.get("objectClass")), names)
        for message, attribute in shape.static:
            problems.append(Problem(dn, message, attribute))
        by_oid: dict[str, tuple[_Plan, list]] = {}
        for plan, spellings in shape.groups:
            values = attributes[spellings[0]] if len(spellings) == 1 else [v for n in spellings for v in attributes[n]]
            _check_values(plan, spellings[0], values, problem)
            by_oid[plan.oid] = (plan, values)

        for rdn in rdns[:1]:
            for attr, value in rdn:
                plan = self._plan(attr)
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

    def _who_requires(self, oid: str, everything: dict[str, ObjectClass]) -> str:
        names = {d.name for d in everything.values() for attr in d.must if (self.attribute(attr) or _NONE).oid == oid}
        return ", ".join(sorted(names)) or "a class of the entry"

    def check_entries(self, entries: Iterable[Entry]) -> list[Problem]:
        """check() over many entries, plus duplicate DNs and children written
        before their parent (both make ldapadd fail)."""
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        entries = list(entries)
        keys = []
        for index, entry in enumerate(entries):
            problems.extend(self.check(entry))
            try:
                key = normalise_dn(entry.dn)
            except DNError:
                key = None
            keys.append(key)
            if key is not None:
                if key in seen:
                    problems.append(Problem(entry.dn, "the same DN appears twice; the second add fails"))
                else:
                    seen[key] = index
        for index, key in enumerate(keys):
            if key is None:
                continue
            parent = parent_dn(key)
            if parent in seen and seen[parent] > index:
                problems.append(Problem(entries[index].dn, "comes before its parent entry; add the parent first"))
        return problems

    # -- normalising
    def normalise(self, entry: Entry) -> tuple[Entry, list[Problem]]:
        """A copy of the entry slapd will accept value by value, and warnings
        for every value changed or dropped (see the module docstring)."""
        warnings: list[Problem] = []
        dn = self._normalise_dn(entry.dn, warnings)
        out = Entry(dn)
        attributes = entry.attributes
        names = tuple(attributes)
        plans = self._plans_by_names.get(names)
        if plans is None:
            plans = [(name, self._plan(name), _FAST_TYPES.get(self._plan(name).syntax)) for name in names]  # type: ignore[arg-type]
            if len(self._plans_by_names) < 10_000:
                self._plans_by_names[names] = plans
        for name, plan, fast in plans:
            values = attributes[name]
            if not values:
                continue
            if plan.oid == _OBJECT_CLASS_OID:
                kept = self._normalise_classes(tuple(values))
                if len(kept) != len(values):
                    warnings.append(Problem(dn, "objectClass: dropped duplicate class names", "objectClass"))
                _put(out, "objectClass", kept)
                continue
            if fast is not None and all(type(v) is fast and (fast is not str or (v and v.isascii())) for v in values):
                kept = list(values)  # the usual case: nothing to change
            else:
                kept = self._normalise_values(dn, plan, values, warnings)
            if plan.matcher is not None and len(kept) > 1:
                matcher = plan.matcher
                unique, seen = [], set()
                for v in kept:
                    key = matcher(v)
                    if key not in seen:
                        seen.add(key)
                        unique.append(v)
                if len(unique) != len(kept):
                    warnings.append(Problem(dn, f"{plan.canonical}: dropped {len(kept) - len(unique)} duplicate value(s)",
                                            plan.canonical))
                kept = unique
            if kept:
                _put(out, plan.canonical, kept)
        return out, warnings

    def _normalise_classes(self, values: tuple) -> list[str]:
        cached = self._class_lists.get(values)
        if cached is None:
            classes: dict[str, str] = {}
            for v in values:
                canonical_class = self.canonical_class(value_text(v))
                classes.setdefault(canonical_class.casefold(), canonical_class)
            cached = list(classes.values())
            if len(self._class_lists) < 10_000:
                self._class_lists[values] = cached
        return list(cached)

    @staticmethod
    def _normalise_values(dn: str, plan: _Plan, values: list, warnings: list[Problem]) -> list:
        syntax, canonical = plan.syntax, plan.canonical
        kept = []
        for v in values:
            fixed = _normalise_value(syntax, v)
            if fixed is None:
                warnings.append(Problem(dn, f"{canonical}: dropped {_shown(v)}: {syntax_error(syntax, v) or 'empty value'}", canonical))
                continue
            if type(v) is str and fixed != v and syntax == SYNTAX_IA5_STRING:
                if fixed == "":
                    warnings.append(Problem(dn, f"{canonical}: dropped {_shown(v)}: no ASCII form (IA5String)", canonical))
                    continue
                warnings.append(Problem(dn, f"{canonical}: {_shown(v)} is not ASCII (IA5String); published as {fixed!r}", canonical))
            kept.append(fixed)
        return kept

    def _normalise_dn(self, dn: str, warnings: list[Problem]) -> str:
        if dn.isascii() and "\\" not in dn:  # nothing to transliterate, not even a hex-escaped byte
            return dn
        try:
            rdns = parse_dn(dn)
        except DNError:
            return dn  # check() reports it
        changed = False
        fixed_rdns = []
        for rdn in rdns:
            fixed_rdn = []
            for attr, value in rdn:
                new = to_ascii(value) if self._plan(attr).syntax == SYNTAX_IA5_STRING else value
                changed |= new != value
                fixed_rdn.append((attr, new))
            fixed_rdns.append(fixed_rdn)
        if not changed:
            return dn
        new_dn = format_dn(fixed_rdns)
        warnings.append(Problem(new_dn, f"DN {dn!r} is not ASCII; published as {new_dn!r}"))
        return new_dn

    def normalise_entries(self, entries: Iterable[Entry]) -> tuple[list[Entry], list[Problem]]:
        out: list[Entry] = []
        warnings: list[Problem] = []
        for entry in entries:
            fixed, notes = self.normalise(entry)
            out.append(fixed)
            warnings.extend(notes)
        return out, warnings


_NONE = AttributeType(oid="", names=())


@dataclass(frozen=True)
class _Plan:
    """What checking and normalising one attribute name needs, worked out once."""

    at: Optional[AttributeType]
    canonical: str
    syntax: Optional[str]
    matcher: Optional[Callable[[object], object]]  # the EQUALITY rule, approximated; None without one
    single_value: bool
    oid: str


@dataclass(frozen=True)
class _Closure:
    """An object class list with all its superclasses, and what they require and allow."""

    everything: dict[str, ObjectClass]  # the classes and all their superclasses, by OID
    must: dict[str, str]  # OID -> name
    allowed: Optional[set[str]]  # OIDs; None: any (extensibleObject)
    chain_problem: Optional[str]


@dataclass(frozen=True)
class _Shape:
    """The structural verdict for one entry shape (object classes and attribute names)."""

    static: tuple[tuple[str, Optional[str]], ...]  # (message, attribute) true of every entry of this shape
    groups: tuple[tuple[_Plan, tuple[str, ...]], ...]  # known attribute types, with the spellings used


_OBJECT_CLASS_OID = "2.5.4.0"
# Syntax -> the Python type whose values pass it unchanged (str: when ASCII and not empty).
_FAST_TYPES = {SYNTAX_IA5_STRING: str, SYNTAX_INTEGER: int, SYNTAX_BOOLEAN: bool}
_CHECKED_SYNTAXES = frozenset({SYNTAX_BOOLEAN, SYNTAX_DIRECTORY_STRING, SYNTAX_GENERALIZED_TIME, SYNTAX_IA5_STRING, SYNTAX_INTEGER})


def _put(entry: Entry, name: str, values: list) -> None:
    """Add values to an entry being built, fast when the name is new."""
    key = name.lower()
    if key in entry._index:
        entry.attributes[entry._index[key]].extend(values)
    else:
        entry._index[key] = name
        entry.attributes[name] = values


def _matcher_for(equality: str) -> Callable[[object], object]:
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


def _check_values(plan: _Plan, name: str, values: list, problem: Callable[..., None]) -> None:
    if plan.single_value and len(values) > 1:
        shown = ", ".join(repr(value_text(v)) for v in values[:4])
        problem(f"{name} is single-valued but has {len(values)} values ({shown})", name)
    syntax = plan.syntax
    if syntax not in _CHECKED_SYNTAXES:
        values_to_check: list = []
    else:
        values_to_check = values
    for v in values_to_check:
        kind = type(v)
        if (syntax == SYNTAX_IA5_STRING and kind is str and v.isascii()) or (syntax == SYNTAX_INTEGER and kind is int) \
                or (syntax == SYNTAX_BOOLEAN and kind is bool):
            continue
        message = syntax_error(syntax, v)
        if message:
            problem(f"{name}: {message}", name)
    if plan.matcher is not None and len(values) > 1:
        seen: set = set()
        for v in values:
            key = plan.matcher(v)
            if key in seen:
                problem(f"{name} has the value {value_text(v)!r} twice", name)
            seen.add(key)


def _int_or_text(text: str):
    try:
        return int(text)
    except ValueError:
        return text


def _shown(value) -> str:
    text = value_text(value) if isinstance(value, (str, int)) else repr(value)
    return repr(text if len(text) <= 80 else text[:77] + "...")


# ---------------------------------------------------------------- syntaxes

_INTEGER = re.compile(r"0|-?[1-9][0-9]*")  # slapd refuses 007, +5, -0 and spaces
_GENERALIZED_TIME_PATTERN = r"[0-9]{10}([0-9]{2}([0-9]{2})?)?([.,][0-9]+)?(Z|[+-][0-9]{4})"  # GLUE 1.3 has none: compiled if seen


def syntax_error(syntax: Optional[str], value) -> Optional[str]:
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
        if not _INTEGER.fullmatch(text):
            return f"{_shown(text)} is not an INTEGER"
    elif syntax == SYNTAX_BOOLEAN:
        if text not in ("TRUE", "FALSE"):
            return f"{_shown(text)} is not a BOOLEAN (TRUE or FALSE)"
    elif syntax == SYNTAX_IA5_STRING:
        if not text.isascii():
            return f"{_shown(text)} is not ASCII (IA5String)"
    elif syntax == SYNTAX_GENERALIZED_TIME:
        if not re.fullmatch(_GENERALIZED_TIME_PATTERN, text):
            return f"{_shown(text)} is not a GeneralizedTime"
    return None


# Characters NFKD leaves non-ASCII but that have a usual ASCII spelling.
_TRANSLIT = {
    "\u2122": "(TM)", "\u00ae": "(R)", "\u00a9": "(C)", "\u00df": "ss", "\u00e6": "ae", "\u00c6": "AE",
    "\u0153": "oe", "\u0152": "OE", "\u00f8": "o", "\u00d8": "O", "\u0111": "d", "\u0110": "D", "\u0142": "l",
    "\u0141": "L", "\u00fe": "th", "\u00de": "TH", "\u00f0": "d", "\u00d0": "D", "\u0131": "i",
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"',
    "\u2013": "-", "\u2014": "-", "\u2212": "-", "\u2026": "...", "\u00b5": "u", "\u00d7": "x", "\u00b0": "deg",
    "\u00a0": " ", "\u00ab": "<<", "\u00bb": ">>", "\u2022": "*",
}


def to_ascii(text: str) -> str:
    """Transliterate to ASCII, character by character (so the same text gives
    the same result inside a DN, a value or a GlueChunkKey): ™ -> (TM),
    é -> e (NFKD without combining marks); characters with no ASCII form are
    dropped."""
    if text.isascii():
        return text
    out = []
    for ch in text:
        if ch.isascii():
            out.append(ch)
        elif ch in _TRANSLIT:
            out.append(_TRANSLIT[ch])
        else:
            decomposed = unicodedata.normalize("NFKD", ch)
            out.append("".join(c for c in decomposed if c.isascii()))
    return "".join(out)


def _normalise_value(syntax: Optional[str], value):
    """The value slapd accepts for this syntax (str/int), or None to drop it."""
    if syntax == SYNTAX_INTEGER:
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        text = value.strip()
        if _INTEGER.fullmatch(text):
            return text
        if re.fullmatch(r"[+-]?[0-9]+", text):
            return str(int(text))  # "+5", "007"
        return None
    if syntax == SYNTAX_BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().upper() in ("TRUE", "FALSE"):
            return value.strip().upper()
        return None
    text = value_text(value)
    if text == "":
        return None
    if syntax == SYNTAX_IA5_STRING:
        return to_ascii(text)
    return value


def normalise_unchecked(entry: Entry) -> tuple[Entry, list[Problem]]:
    """Without schema files: every string value of a GLUE 1.x attribute
    (Glue*, not GLUE2*) to ASCII -- all of them are IA5String, INTEGER or
    BOOLEAN in glue-schema -- and the same for the DN's Glue* RDN values."""
    warnings: list[Problem] = []

    def glue1(name: str) -> bool:
        return name[:4].lower() == "glue" and name[:5].lower() != "glue2"

    dn = entry.dn
    try:
        rdns = parse_dn(dn)
        fixed = [[(a, to_ascii(v) if glue1(a) else v) for a, v in rdn] for rdn in rdns]
        if fixed != rdns:
            dn = format_dn(fixed)
            warnings.append(Problem(dn, f"DN {entry.dn!r} is not ASCII; published as {dn!r}"))
    except DNError:
        pass
    out = Entry(dn)
    for name, values in entry.attributes.items():
        kept = []
        for v in values:
            if glue1(name) and isinstance(v, str) and not v.isascii():
                new = to_ascii(v)
                if not new:
                    warnings.append(Problem(dn, f"{name}: dropped {_shown(v)}: no ASCII form", name))
                    continue
                warnings.append(Problem(dn, f"{name}: {_shown(v)} is not ASCII; published as {new!r}", name))
                v = new
            if isinstance(v, str) and v == "":
                warnings.append(Problem(dn, f"{name}: dropped an empty value", name))
                continue
            kept.append(v)
        out.add(name, kept)
    return out, warnings


def normalise_entries(entries: Iterable[Entry], schema: Optional[Schema]) -> tuple[list[Entry], list[Problem]]:
    """Schema.normalise over many entries, or normalise_unchecked when schema is None."""
    if schema is not None:
        return schema.normalise_entries(entries)
    out: list[Entry] = []
    warnings: list[Problem] = []
    for entry in entries:
        fixed, notes = normalise_unchecked(entry)
        out.append(fixed)
        warnings.extend(notes)
    return out, warnings


# ---------------------------------------------------------------- loading

def load_schema(directory: str = DEFAULT_SCHEMA_DIR, files: Sequence[str] = DEFAULT_SCHEMA_FILES) -> Schema:
    """Read the schema files (those present of ``files``) from ``directory``.

    Raises SchemaUnavailable when the directory or one of the GLUE core files
    (Glue-CORE.schema, Glue-CE.schema) is missing, SchemaError when a file
    cannot be parsed.
    """
    if not os.path.isdir(directory):
        raise SchemaUnavailable(f"LDAP schema directory {directory} does not exist")
    missing = [name for name in REQUIRED_SCHEMA_FILES if name in files and not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise SchemaUnavailable(f"GLUE schema file(s) {', '.join(missing)} not found in {directory} (Debian package glue-schema)")
    schema = Schema()
    schema.add_text(SYSTEM_SCHEMA, "<slapd system schema>")
    for name in files:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError as exc:
            raise SchemaUnavailable(f"cannot read schema file {path}: {exc}") from None
        schema.add_text(text, path)
    return schema


def load_schema_or_warn(directory: str = DEFAULT_SCHEMA_DIR, logger: Optional[logging.Logger] = None) -> Optional[Schema]:
    """load_schema, or None after ONE warning that output goes unchecked.
    Call it once per process and keep the result."""
    try:
        return load_schema(directory)
    except SchemaUnavailable as exc:
        (logger or log).warning("%s: publishing without a schema check", exc)
        return None


def check_ldif_text(text: str, schema: Schema) -> list[Problem]:
    """Problems slapd would reject in an LDIF text (``glueinfo ldif --check``):
    unparseable LDIF (one problem naming the line), then every entry's."""
    try:
        entries = parse_ldif(text)
    except LDIFError as exc:
        return [Problem("", f"not valid LDIF: {exc}")]
    return schema.check_entries(entries)


# -- loading with a cache (what `glueinfo ldif` needs at every start) ------------------------

# What the rendered tree uses; parsing GLUE20.schema and the SE schema too
# would triple the start-up time of `glueinfo ldif`.  Static LDIF files may
# hold anything, so with [glue] static_ldif_dir the whole default set is read.
GLUE13_SCHEMA_FILES = ("Glue-CORE.schema", "Glue-MDS.schema", "Glue-CE.schema", "Glue-CESEBind.schema")


def load_glue_schema(schema_dir: str, everything: bool = False, cache_dir: Optional[str] = None) -> Optional[Schema]:
    """The schema to check the tree against, or None after one warning when the files are absent.

    The parsed schema is kept in a cache file (``cache_dir``, default
    $XDG_CACHE_HOME/glueinfo or ~/.cache/glueinfo) named after the schema
    files' paths, sizes and modification times and glueinfo's own schema
    reader, so a fresh `glueinfo ldif` does not parse 80 KB of schema text;
    any problem with the cache just means parsing again.
    """
    files = DEFAULT_SCHEMA_FILES if everything else GLUE13_SCHEMA_FILES
    cache = _schema_cache_path(schema_dir, files, cache_dir)
    if cache is not None:
        try:
            with open(cache, "rb") as handle:
                cached = pickle.load(handle)
            if isinstance(cached, Schema):
                return cached
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
            pass
    try:
        schema = load_schema(schema_dir, files)
    except SchemaUnavailable as exc:
        log.warning("%s: publishing without a schema check", exc)
        return None
    if cache is not None:
        _write_schema_cache(cache, schema)
    return schema


def _schema_cache_path(schema_dir: str, files: Sequence[str], cache_dir: Optional[str]) -> Optional[str]:
    parts = [schema_dir, __file__ or ""]
    try:
        for path in [__file__ or "", *(os.path.join(schema_dir, name) for name in files)]:
            try:
                st = os.stat(path)
                parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
            except FileNotFoundError:
                parts.append(f"{path}:absent")
    except OSError:
        return None
    if not os.path.isdir(schema_dir):
        return None  # let load_schema say why, every time
    directory = cache_dir or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                                          "glueinfo")
    digest = f"{zlib.crc32(chr(10).join(parts).encode()):08x}{len(parts):02d}"
    return os.path.join(directory, f"schema-{digest}.pickle")


def _write_schema_cache(path: str, schema: Schema) -> None:
    try:
        data = pickle.dumps(schema, protocol=pickle.HIGHEST_PROTOCOL)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        import tempfile  # only when the cache is written

        fd, temporary = tempfile.mkstemp(prefix=".schema-", dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # no cache: the next run parses again
