"""Fixing what is data rather than a renderer bug: ``Schema.normalise``.

So that one hostile host fact never makes slapd reject a whole entry,
``normalise_entry(schema, entry)`` returns a copy with attribute and class
names in the schema's spelling, ints and bools formatted, IA5 values
transliterated to ASCII (in the DN too, identically), duplicate values
dropped, and values that cannot be made valid (``12.5`` for an INTEGER, an
empty string) dropped -- each change reported as a warning
(:class:`~glueinfo.glue.schema.check.Problem`) naming DN, attribute and
original value.  Structural mistakes (an unknown attribute, two values for a
single-valued one) are left for check.py to report.  Nothing raises.

Without schema files (``SchemaUnavailable`` from load.py) the caller says
so once and publishes unchecked, normalising with ``normalise_unchecked``:
every string value of a GLUE 1.x attribute (name starting ``Glue``, not
``GLUE2``) is transliterated to ASCII.  That needs no built-in attribute
list: every GLUE 1.3 attribute in the installed files is IA5String, INTEGER
or BOOLEAN, all ASCII-only syntaxes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Optional

from glueinfo.core.ldif import DNError, Entry, Value, format_dn, parse_dn, value_text
from glueinfo.glue.schema.check import (
    INTEGER_FORMAT,
    SYNTAX_BOOLEAN,
    SYNTAX_IA5_STRING,
    SYNTAX_INTEGER,
    Plan,
    Problem,
    plan_for,
    shown,
    syntax_error,
)

if TYPE_CHECKING:  # parse.py imports this module: the model is only needed for annotations
    from glueinfo.glue.schema.parse import Schema

NamePlan = tuple[str, Plan, Optional[type]]  # (attribute name, its plan, the type its values pass unchanged as)

_OBJECT_CLASS_OID = "2.5.4.0"
# Syntax -> the Python type whose values pass it unchanged (str: when ASCII and not empty).
_FAST_TYPES: dict[Optional[str], type] = {SYNTAX_IA5_STRING: str, SYNTAX_INTEGER: int, SYNTAX_BOOLEAN: bool}

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
    import unicodedata  # only for text that is not ASCII already

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


# ---------------------------------------------------------------- with a schema


def normalise_entry(schema: Schema, entry: Entry) -> tuple[Entry, list[Problem]]:
    """A copy of the entry slapd will accept value by value, and warnings
    for every value changed or dropped (see the module docstring)."""
    warnings: list[Problem] = []
    dn = _normalise_dn(schema, entry.dn, warnings)
    out = Entry(dn)
    attributes = entry.attributes
    names = tuple(attributes)
    plans = schema._plans_by_names.get(names)
    if plans is None:
        plans = [(name, plan_for(schema, name), _FAST_TYPES.get(plan_for(schema, name).syntax)) for name in names]
        if len(schema._plans_by_names) < 10_000:
            schema._plans_by_names[names] = plans
    for name, plan, fast in plans:
        values = attributes[name]
        if not values:
            continue
        if plan.oid == _OBJECT_CLASS_OID:
            classes = _normalise_classes(schema, tuple(values))
            if len(classes) != len(values):
                warnings.append(Problem(dn, "objectClass: dropped duplicate class names", "objectClass"))
            _put(out, "objectClass", classes)
            continue
        if fast is str:
            unchanged = all(type(v) is str and v and v.isascii() for v in values)
        else:
            unchanged = fast is not None and all(type(v) is fast for v in values)
        if unchanged:
            kept = list(values)  # the usual case: nothing to change
        else:
            kept = _normalise_values(dn, plan, values, warnings)
        if plan.matcher is not None and len(kept) > 1:
            matcher = plan.matcher
            unique: list[Value] = []
            seen: set[object] = set()
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


def normalise_schema_entries(schema: Schema, entries: Iterable[Entry]) -> tuple[list[Entry], list[Problem]]:
    """normalise_entry over many entries: the fixed entries and all warnings, in order."""
    out: list[Entry] = []
    warnings: list[Problem] = []
    for entry in entries:
        fixed, notes = normalise_entry(schema, entry)
        out.append(fixed)
        warnings.extend(notes)
    return out, warnings


def _put(entry: Entry, name: str, values: list[Value]) -> None:
    """Add values to an entry being built, fast when the name is new."""
    key = name.lower()
    if key in entry._index:
        entry.attributes[entry._index[key]].extend(values)
    else:
        entry.own_index()[key] = name
        entry.attributes[name] = values


def _normalise_classes(schema: Schema, values: tuple[Value, ...]) -> list[Value]:
    cached = schema._class_lists.get(values)
    if cached is None:
        classes: dict[str, str] = {}
        for v in values:
            canonical_class = schema.canonical_class(value_text(v))
            classes.setdefault(canonical_class.casefold(), canonical_class)
        cached = list(classes.values())
        if len(schema._class_lists) < 10_000:
            schema._class_lists[values] = cached
    return list(cached)


def _normalise_values(dn: str, plan: Plan, values: list[Value], warnings: list[Problem]) -> list[Value]:
    syntax, canonical = plan.syntax, plan.canonical
    kept: list[Value] = []
    for v in values:
        fixed = _normalise_value(syntax, v)
        if fixed is None:
            warnings.append(Problem(dn, f"{canonical}: dropped {shown(v)}: {syntax_error(syntax, v) or 'empty value'}", canonical))
            continue
        if type(v) is str and fixed != v and syntax == SYNTAX_IA5_STRING:
            if fixed == "":
                warnings.append(Problem(dn, f"{canonical}: dropped {shown(v)}: no ASCII form (IA5String)", canonical))
                continue
            warnings.append(Problem(dn, f"{canonical}: {shown(v)} is not ASCII (IA5String); published as {fixed!r}", canonical))
        kept.append(fixed)
    return kept


def _normalise_value(syntax: Optional[str], value: Value) -> Optional[Value]:
    """The value slapd accepts for this syntax (str/int), or None to drop it."""
    if syntax == SYNTAX_INTEGER:
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        text = value.strip()
        if INTEGER_FORMAT.fullmatch(text):
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


def _normalise_dn(schema: Schema, dn: str, warnings: list[Problem]) -> str:
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
            new = to_ascii(value) if plan_for(schema, attr).syntax == SYNTAX_IA5_STRING else value
            changed |= new != value
            fixed_rdn.append((attr, new))
        fixed_rdns.append(fixed_rdn)
    if not changed:
        return dn
    new_dn = format_dn(fixed_rdns)
    warnings.append(Problem(new_dn, f"DN {dn!r} is not ASCII; published as {new_dn!r}"))
    return new_dn


# ---------------------------------------------------------------- without a schema


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
        kept: list[Value] = []
        for v in values:
            if glue1(name) and isinstance(v, str) and not v.isascii():
                new = to_ascii(v)
                if not new:
                    warnings.append(Problem(dn, f"{name}: dropped {shown(v)}: no ASCII form", name))
                    continue
                warnings.append(Problem(dn, f"{name}: {shown(v)} is not ASCII; published as {new!r}", name))
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
        return normalise_schema_entries(schema, entries)
    out: list[Entry] = []
    warnings: list[Problem] = []
    for entry in entries:
        fixed, notes = normalise_unchecked(entry)
        out.append(fixed)
        warnings.extend(notes)
    return out, warnings
