"""A cache of what the last run produced, for incremental publication.

Each publish renders the site again; whatever it renders the same way as
last time can be taken from the last run instead of being made again.
:class:`LastRun` keeps exactly two generations: what the last run produced
(readable) and what this run produces (written, and read by the next one).
Anything the last run made that this run did not ask for is dropped at the
next :meth:`LastRun.start`, so memory follows the site and never grows with
hosts that left; a run that calls :meth:`LastRun.finish` when it is done
drops the last run's values at once, so only one generation is held between
runs.  Not thread-safe: one run at a time.
"""

from __future__ import annotations

from typing import Generic, Optional, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LastRun(Generic[K, V]):
    """Values by key from the last run, carried into this one when asked for."""

    def __init__(self) -> None:
        self._previous: dict[K, V] = {}
        self._current: dict[K, V] = {}
        self.reused = 0
        self.made = 0

    def start(self) -> None:
        """Begin a run: what the last one kept becomes what this one may reuse."""
        if self._current:
            self._previous, self._current = self._current, {}
        self.reused = self.made = 0

    def finish(self) -> None:
        """End a run that completed: the last run's values are no longer needed (what this run
        carried over or made is kept for the next)."""
        self._previous = {}

    def previous(self, key: K) -> Optional[V]:
        """What the last run kept under ``key`` (not yet carried over: see :meth:`reuse`)."""
        return self._previous.get(key)

    def reuse(self, key: K, value: V) -> V:
        """Carry the last run's value into this run."""
        self._current[key] = value
        self.reused += 1
        return value

    def keep(self, key: K, value: V) -> V:
        """A value made in this run."""
        self._current[key] = value
        self.made += 1
        return value
