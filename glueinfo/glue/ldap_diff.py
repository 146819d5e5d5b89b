"""What differs between an entry glueinfo publishes and the server's: the modify that turns
one into the other, attribute by attribute.

:func:`changes_for` compares an :class:`~glueinfo.core.ldif.Entry` with the raw attributes a
search returned (or that a writer remembers it wrote): the attributes that differ are replaced,
those the server has and we do not are emptied, and a change of structural object class,
which no modify can make, asks for a delete and an add instead.  Names compare without case;
object class names and the naming value also compare without case, as the server matches them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Optional

from glueinfo.core.ldif import Entry, parse_dn, value_text
from glueinfo.glue.ldap_wire import Changes


def value_texts(values: Iterable[Any]) -> list[str]:
    """Values as the LDAP strings a write sends (glueinfo.core.ldif.value_text of each)."""
    return [value_text(v) for v in values]


def _attribute_map(entry: Entry) -> dict[str, tuple[str, list[str]]]:
    """lower-case name -> (spelling, values as LDAP strings)."""
    return {name.lower(): (name, value_texts(values)) for name, values in entry.attributes.items()}


def _server_map(raw: dict[str, list[bytes]]) -> dict[str, tuple[str, list[str]]]:
    out: dict[str, tuple[str, list[str]]] = {}
    for name, values in raw.items():
        texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values]
        key = name.lower()
        if key in out:
            out[key][1].extend(texts)
        else:
            out[key] = (name, texts)
    return out


def _structural(classes: Sequence[str]) -> str:
    """Our entries list the abstract top class first and the structural class second."""
    names = [c.lower() for c in classes]
    return names[1] if len(names) > 1 else (names[0] if names else "")


def changes_for(new: Entry, server_attributes: dict[str, list[bytes]]) -> Optional[Changes]:
    """ldap3 modify changes turning the server's entry into ``new`` (only the
    attributes that differ); {} when equal; None when only delete + add can do
    it (the structural object class changed)."""
    import ldap3

    ours = _attribute_map(new)
    theirs = _server_map(server_attributes)
    ours_classes = ours.get("objectclass", ("objectClass", []))[1]
    theirs_classes = theirs.get("objectclass", ("objectClass", []))[1]
    if {c.lower() for c in ours_classes} != {c.lower() for c in theirs_classes}:
        if _structural(ours_classes) != _structural(theirs_classes) and theirs_classes:
            return None
    rdn_attrs = {attr.lower(): value for attr, value in (parse_dn(new.dn)[0] if new.dn else [])}
    changes: Changes = {}
    for key, (name, values) in ours.items():
        server = theirs.get(key)
        if server is not None and sorted(server[1]) == sorted(values):
            continue
        if server is not None and key == "objectclass" and \
                sorted(v.casefold() for v in server[1]) == sorted(v.casefold() for v in values):
            continue  # object class names match case-insensitively: MDS is the schema's Mds, nothing to write
        if server is not None and key in rdn_attrs and sorted(v.casefold() for v in server[1]) == sorted(v.casefold() for v in values):
            continue  # the naming value differs only in case: slapd would refuse to change it, and matches it anyway
        changes[name] = [(ldap3.MODIFY_REPLACE, values)]
    for key, (name, _server_values) in theirs.items():
        if key not in ours:
            changes[name] = [(ldap3.MODIFY_REPLACE, [])]
    return changes
