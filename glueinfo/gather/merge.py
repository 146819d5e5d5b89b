"""One host seen by several sources -> one snapshot (the rule is in glueinfo.gather.gatherer's docstring).

For every fact the newest snapshot that knows it wins (ties: local, agents,
spool, ganglia, plugins in that order); fast-changing facts (load, free
memory and disk) are never taken from a stale snapshot.  Accelerators are a lasting fact, and
a host's empty list of them is a fact (known to have none), filled from another source only
when unknown (None).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from glueinfo.core.freshness import is_stale
from glueinfo.core.model import HostSnapshot, replaced
from glueinfo.gather.identity import looks_like_ip

# Tie-break when two sources report a host at the same instant: the more direct one wins.
SOURCE_RANK = {"local": 0, "agents": 1, "spool": 2, "ganglia": 3}



def _without_volatile(snapshot: HostSnapshot) -> HostSnapshot:
    """A stale snapshot's lasting facts only: no load, free memory or free disk."""
    lasting = copy.deepcopy(snapshot)
    lasting.load = None
    if lasting.memory:
        lasting.memory.ram_available_mb = lasting.memory.swap_free_mb = lasting.memory.virtual_available_mb = None
    for fs in lasting.filesystems or ():
        fs.available_mb = None
    return lasting


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, (list, dict)) and not value)


def _unknown(value: Any) -> bool:
    return value is None


def _fill(base: Any, donors: Sequence[Any]) -> None:
    """Fill base's unknown fields, in place, from the first donor that knows each."""
    for f in dataclasses.fields(base):
        value = getattr(base, f.name)
        if _missing(value):
            for donor in donors:
                candidate = getattr(donor, f.name, None)
                if not _missing(candidate):
                    setattr(base, f.name, copy.deepcopy(candidate))
                    break
        elif dataclasses.is_dataclass(value):
            _fill(value, [getattr(d, f.name) for d in donors if dataclasses.is_dataclass(getattr(d, f.name, None))])


def _newest_first(snapshots: Iterable[HostSnapshot]) -> list[HostSnapshot]:
    return sorted(snapshots, key=lambda s: (-s.collected_at, SOURCE_RANK.get(s.source, len(SOURCE_RANK)), s.source))


MERGED_FIELDS = ("cpu", "memory", "load", "network", "filesystems", "os", "static", "accelerators")
# Facts whose empty list is itself a fact: a host known to have no accelerators is not a host whose
# accelerators are unknown, so only None is filled from another source.  Accelerators are a
# lasting fact (a stale snapshot's still count, as its CPU model does).
_EMPTY_IS_KNOWN = frozenset({"accelerators"})


def merge(snapshots: Sequence[HostSnapshot], now: float, stale_after: float) -> HostSnapshot:
    """One host's snapshots from several sources -> one, by the rules in this module's docstring."""
    if not snapshots:
        raise ValueError("nothing to merge")
    order = _newest_first(snapshots)
    if len(order) == 1:  # the common case: nothing to fill, no need to copy the facts
        only = order[0]
        return replaced(only, extra={**only.extra, "gather": {"sources": {only.source: only.collected_at}}})
    result = copy.deepcopy(order[0])
    donors = [s if not is_stale(s, now, stale_after) else _without_volatile(s) for s in order[1:]]
    for name in MERGED_FIELDS:
        value = getattr(result, name)
        missing = _unknown if name in _EMPTY_IS_KNOWN else _missing
        if missing(value):
            for donor in donors:
                if not missing(getattr(donor, name)):
                    setattr(result, name, copy.deepcopy(getattr(donor, name)))
                    break
        elif dataclasses.is_dataclass(value):
            _fill(value, [getattr(d, name) for d in donors if getattr(d, name) is not None])
    for donor in order[1:]:
        for key, facts in donor.extra.items():
            result.extra.setdefault(key, copy.deepcopy(facts))
        known = {c.name for c in result.collectors}
        result.collectors.extend(copy.deepcopy(c) for c in donor.collectors if c.name not in known)
    # The name with a domain is the better one to publish.
    for s in order:
        if "." in s.hostname and not looks_like_ip(s.hostname):
            result.hostname = s.hostname
            break
    result.extra["gather"] = {"sources": {s.source: s.collected_at for s in reversed(order)}}
    return result
