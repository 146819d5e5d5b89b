"""When a host's snapshot is too old to trust: the one definition of staleness.

A snapshot carries ``collected_at`` (when it was taken) and ``source`` (who
took it).  Measured against the reader's clock ``now``:

- *stale* when it has no collection time, or is more than ``[node]
  stale_after`` seconds old, or that far in the future (a wrong clock).  A
  stale host is published with Node State Unknown and is kept out of
  free-CPU figures (its load no longer says anything);
- *dropped* when more than ``[sources] drop_after`` seconds old: the
  gatherer forgets it and it is no longer published at all.

Renderers and the gatherer call these functions rather than comparing ages
themselves, so the rule is written once.
"""

from __future__ import annotations

from typing import Any

from glueinfo.core.model import HostSnapshot


def stale_after_s(config: Any) -> float:
    return float(config.get("node", "stale_after"))


def drop_after_s(config: Any) -> float:
    return float(config.get("sources", "drop_after"))


def age_s(snapshot: HostSnapshot, now: float) -> float:
    return now - snapshot.collected_at


def is_stale(snapshot: HostSnapshot, now: float, stale_after: float) -> bool:
    """True when the snapshot is too old (or too far in the future) to trust."""
    collected = snapshot.collected_at
    return not collected or collected <= 0 or abs(now - collected) > stale_after


def is_expired(snapshot: HostSnapshot, now: float, drop_after: float) -> bool:
    """True when the host has not been heard from for so long that it is forgotten."""
    collected = snapshot.collected_at
    return not collected or collected <= 0 or now - collected > drop_after
