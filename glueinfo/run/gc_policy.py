"""How the daemon lets Python's cyclic garbage collector work: a policy of `glueinfo run`, not of the library.

A site's model lives for the daemon's life: at 10,000 hosts about 1.6 million container objects
(snapshots, GLUE entries, their lists and dicts), most of them unchanged from one cycle to the
next.  With CPython's default thresholds a full collection, which walks every one of them, ran
1.3 times per 60 s cycle and cost about 1.1 CPU-s each cycle (a fifth of the daemon's work) to
find almost nothing: the model's objects are freed by reference counting when a newer snapshot
replaces them, and hardly any form cycles.

So after each publish, what survived is frozen (``gc.freeze``: moved to the permanent generation,
which collections skip; reference counting still frees those objects), and the oldest generation
is collected only when the daemon says so: once every ``full_every_s`` the freeze is undone and
one full collection reclaims any cycles that became garbage meanwhile.  The young generations
keep CPython's thresholds, so garbage cycles made within a cycle are still found as usual.

Process-wide by nature (the collector is), so only the daemon's Provider applies it; it is
undone by :meth:`CollectorPolicy.restore` when the daemon stops.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

OLDEST_THRESHOLD = 1_000_000  # young collections before the oldest generation is considered: in effect, never by itself


class CollectorPolicy:
    """The daemon's garbage-collection schedule (see the module docstring)."""

    def __init__(self, clock: Callable[[], float], full_every_s: float = 3600.0) -> None:
        self.clock = clock
        self.full_every_s = full_every_s
        self.last_full = clock()
        self.full_collections = 0
        self._thresholds = gc.get_threshold()
        young, middle, _ = self._thresholds
        gc.set_threshold(young, middle, OLDEST_THRESHOLD)

    def after_publish(self) -> None:
        """Freeze what the publish left alive; a full collection first when one is due."""
        now = self.clock()
        if now - self.last_full >= self.full_every_s:
            gc.unfreeze()
            gc.collect()
            self.last_full = now
            self.full_collections += 1
        gc.freeze()

    def restore(self) -> None:
        """CPython's thresholds back, nothing frozen (the daemon is stopping, or tests run on)."""
        gc.unfreeze()
        gc.set_threshold(*self._thresholds)
