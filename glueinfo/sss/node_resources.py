"""A host's extensible consumables (``[node] resources``): parsed from the config's entries, carried in
the snapshot's extra facts, read back from it for its Node."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from glueinfo.core.model import HostSnapshot

# snapshot.extra key under which Resource elements (extensible consumables) are kept.  Defined here,
# not with the rest of the Node vocabulary (glueinfo.sss.vocabulary, which gives it too), so that
# probing this host for the site does not import the vocabulary.
RESOURCES_EXTRA = "node_resources"

_RESOURCE = re.compile(r"^([A-Za-z][\w.+-]*)(?::([\w.+-]+))?=(\d+(?:\.\d+)?)$")


def parse_resources(entries: Iterable[str]) -> list[dict[str, Any]]:
    """``["GPU:A100=4", "License=2"]`` -> resource records; ValueError names a bad entry."""
    records = []
    seen = set()
    for entry in entries:
        match = _RESOURCE.match(entry.strip())
        if not match:
            raise ValueError(f"bad entry {entry!r}: expected NAME[:TYPE]=AMOUNT, e.g. GPU:A100=4")
        name, rtype, amount = match.group(1), match.group(2), float(match.group(3))
        if (name, rtype) in seen:
            raise ValueError(f"{entry!r}: resource {name}{':' + rtype if rtype else ''} given twice")
        seen.add((name, rtype))
        records.append({"name": name, "type": rtype, "configured": amount, "available": None, "utilized": None, "units": None})
    return records


def attach_resources(snapshot: HostSnapshot, resources: Sequence[dict[str, Any]]) -> HostSnapshot:
    """Record this host's configured consumables in the snapshot, so they travel with it."""
    if resources:
        snapshot.extra[RESOURCES_EXTRA] = {"resources": [dict(r) for r in resources]}
    return snapshot


def resources_of(snapshot: HostSnapshot) -> list[dict[str, Any]]:
    """The resource records the snapshot carries (each with a name), as its Node writes them."""
    block = snapshot.extra.get(RESOURCES_EXTRA)
    records = block.get("resources") if isinstance(block, dict) else None
    return [r for r in records or () if isinstance(r, dict) and r.get("name")]
