"""The VOs a CE admits, read once from its ``[ce:NAME] access`` rules for every document: one
GLUE 1.3 VOView and one GLUE 2 ComputingShare per VO, and the AllowedVOs of its
OSG_ResourceCatalog entries (glueinfo.catalogs), whether a rule names the whole VO (``VO:atlas``)
or only some of its members (``VOMS:/atlas/Role=pilot``).  Here, with the site model, because
the admin's declarations are the site's: the GLUE renderers and the catalogs, siblings that may
not import each other, both read them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional


def vo_of_rule(rule: str) -> Optional[str]:
    """The VO an access rule names: ``VO:atlas`` and ``VOMS:/atlas/Role=pilot`` -> atlas; None for
    any other rule."""
    kind, _, value = rule.partition(":")
    if kind.upper() == "VO" and value:
        return value
    if kind.upper() == "VOMS" and value.startswith("/"):
        return value[1:].split("/", 1)[0] or None
    return None


def vos_of(access: Sequence[str]) -> dict[str, list[str]]:
    """VO -> its access rules, in the order the admin wrote them."""
    result: dict[str, list[str]] = {}
    for rule in access:
        vo = vo_of_rule(rule)
        if vo:
            result.setdefault(vo, []).append(rule)
    return result


def whole_vo_rule(vo: str, rules: Sequence[str]) -> list[str]:
    """The access rules a VO's GLUE 1.3 VOView publishes: ``VO:vo`` when a rule admits the whole VO
    (its FQAN rules are within it), else its FQAN rules (``VOMS:/atlas/Role=pilot``)."""
    if any(rule.partition(":")[0].upper() == "VO" for rule in rules):
        return [f"VO:{vo}"]
    return list(rules)
