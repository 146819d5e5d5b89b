"""Reading OpenLDAP ``.schema`` text into the :class:`Schema` model.

``Schema.add_text(text, source)`` parses ``attributetype``,
``objectclass`` and ``objectidentifier`` statements (the subset of
slapd.conf schema syntax the GLUE and core schema files use; other
statements are skipped) into :class:`AttributeType` and
:class:`ObjectClass` definitions, looked up case-insensitively by any of
their names or their OID.  A definition that cannot be parsed raises
:class:`SchemaError` naming file, line and text; nothing about GLUE is
hard-coded here.

The Schema also answers for the rest of the package: ``check`` and
``check_entries`` (check.py: what slapd would reject), ``normalise`` and
``normalise_entries`` (normalise.py: what can be fixed); it holds their
per-schema caches, emptied whenever definitions are added.  Reading files
from disk is load.py's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any, Optional, TypeVar

from glueinfo.core.errors import ConfigurationError
from glueinfo.core.ldif import Entry, Value
from glueinfo.core.records import dataclass
from glueinfo.glue.schema import check as checking
from glueinfo.glue.schema import normalise as normalising
from glueinfo.glue.schema.check import Closure, Plan, Problem, Shape

# Schema.to_plain's first item: a cache written in another form is parsed again.
PLAIN_FORMAT = "glueinfo-schema-1"


class SchemaError(ConfigurationError, ValueError):
    """A schema file that cannot be parsed; the message names file and definition."""


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


def _first(fields: dict[str, list[str]], keyword: str) -> Optional[str]:
    """The first value of a keyword of a definition, None when absent or empty."""
    values = fields.get(keyword)
    return values[0] if values else None


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
        self._attribute_types: dict[str, AttributeType] = {}
        self._object_classes: dict[str, ObjectClass] = {}
        # Read from the cache, not made yet (from_plain): key -> (every key of the definition, its fields).
        self._unmade_attribute_types: dict[str, tuple[tuple[str, ...], tuple[Any, ...]]] = {}
        self._unmade_object_classes: dict[str, tuple[tuple[str, ...], tuple[Any, ...]]] = {}
        self.sources: list[str] = []
        self._oid_macros: dict[str, str] = {}
        # Caches of check.py and normalise.py, emptied by add_text.
        self._closure_cache: dict[tuple[str, ...], Closure] = {}
        self._plans: dict[str, Plan] = {}
        self._shapes: dict[tuple[tuple[Value, ...], tuple[str, ...]], Shape] = {}
        self._class_lists: dict[tuple[Value, ...], list[str]] = {}
        self._plans_by_names: dict[tuple[str, ...], list[normalising.NamePlan]] = {}

    @property
    def attribute_types(self) -> dict[str, AttributeType]:
        """Every attribute type, by its names and OID in lower case."""
        while self._unmade_attribute_types:
            self.attribute(next(iter(self._unmade_attribute_types)))
        return self._attribute_types

    @property
    def object_classes(self) -> dict[str, ObjectClass]:
        """Every object class, by its names and OID in lower case."""
        while self._unmade_object_classes:
            self.object_class(next(iter(self._unmade_object_classes)))
        return self._object_classes

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
                syntax = _first(fields, "SYNTAX")
                if syntax:
                    syntax = self._expand_oid(syntax.split("{", 1)[0])
                definition = AttributeType(
                    oid=oid, names=names, sup=_first(fields, "SUP"),
                    equality=_first(fields, "EQUALITY"), syntax=syntax,
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

    # -- the parsed-schema cache's form (glueinfo.glue.schema.load)
    def to_plain(self) -> tuple[Any, ...]:
        """The definitions as tuples, strings and dicts only (what ``marshal`` writes): for each
        definition, every key it is looked up by maps to one (keys, fields) tuple, which marshal
        writes once.  :meth:`from_plain` reads it back."""
        def definitions(table: dict[str, Any]) -> dict[str, tuple[tuple[str, ...], tuple[Any, ...]]]:
            keys: dict[int, list[str]] = {}
            for key, definition in table.items():
                keys.setdefault(id(definition), []).append(key)
            plain: dict[int, tuple[tuple[str, ...], tuple[Any, ...]]] = {}
            for definition in table.values():
                if id(definition) not in plain:
                    fields = tuple(getattr(definition, f.name) for f in dataclasses.fields(definition))
                    plain[id(definition)] = (tuple(keys[id(definition)]), fields)
            return {key: plain[id(definition)] for key, definition in table.items()}

        return (PLAIN_FORMAT, tuple(self.sources), dict(self._oid_macros), definitions(self.attribute_types),
                definitions(self.object_classes))

    @classmethod
    def from_plain(cls, plain: Any) -> Schema:
        """The schema :meth:`to_plain` gave; ValueError (or TypeError) for anything else."""
        if not isinstance(plain, tuple) or len(plain) != 5 or plain[0] != PLAIN_FORMAT:
            raise ValueError("not a parsed schema of this format")
        _, sources, macros, attribute_types, object_classes = plain
        for table, kind in ((attribute_types, AttributeType), (object_classes, ObjectClass)):
            width = len(dataclasses.fields(kind))
            if not isinstance(table, dict) or not all(type(item) is tuple and len(item) == 2 and len(item[1]) == width
                                                      for item in table.values()):
                raise ValueError("not a parsed schema of this format")
        schema = cls()
        schema.sources = list(sources)
        schema._oid_macros = dict(macros)
        # Each definition is made when first looked up: a check of a few entries asks for a few
        # dozen of the schema files' thousand or so.
        schema._unmade_attribute_types = attribute_types
        schema._unmade_object_classes = object_classes
        return schema

    def _expand_oid(self, value: str) -> str:
        prefix, sep, rest = value.partition(":")
        if sep and prefix.lower() in self._oid_macros:
            return f"{self._oid_macros[prefix.lower()]}.{rest}"
        return self._oid_macros.get(value.lower(), value)

    # -- lookups
    def attribute(self, name: str) -> Optional[AttributeType]:
        return _made(name.split(";", 1)[0].lower(), self._attribute_types, self._unmade_attribute_types, AttributeType)

    def object_class(self, name: str) -> Optional[ObjectClass]:
        return _made(name.lower(), self._object_classes, self._unmade_object_classes, ObjectClass)

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

    # -- checking (check.py) and normalising (normalise.py)
    def check(self, entry: Entry) -> list[Problem]:
        """What slapd would reject this entry for (empty list: it loads)."""
        return checking.check_entry(self, entry)

    def check_entries(self, entries: Iterable[Entry]) -> list[Problem]:
        """check() over many entries, plus duplicate DNs and children written
        before their parent (both make ldapadd fail)."""
        return checking.check_entries(self, entries)

    def normalise(self, entry: Entry) -> tuple[Entry, list[Problem]]:
        """A copy of the entry slapd will accept value by value, and warnings
        for every value changed or dropped (see normalise.py)."""
        return normalising.normalise_entry(self, entry)

    def normalise_entries(self, entries: Iterable[Entry]) -> tuple[list[Entry], list[Problem]]:
        return normalising.normalise_schema_entries(self, entries)


_Made = TypeVar("_Made")


def _made(key: str, made: dict[str, _Made], unmade: dict[str, tuple[Any, Any]], kind: Callable[..., _Made]) -> Optional[_Made]:
    """The definition named ``key``, made from its cached fields at its first lookup (under each of
    its names at once, so one definition stays one object); None when the schema has none."""
    found = made.get(key)
    if found is None and key in unmade:
        keys, fields = unmade[key]
        found = kind(*fields)
        for each in keys:
            made[each] = found
            unmade.pop(each, None)
    return found
