"""The last 24 hours of each CE's free CPUs and running/waiting jobs, for the status page.

Kept in memory and in a small file of its own in the state directory
(``status-history.json`` under ``[run] state_dir``), written atomically
(glueinfo.core.atomicwrite) at most once per ``step_s`` and read back at
start, so a restart keeps the day's trend.  Bounded: one point per CE per
``step_s`` (a later sample in the same step replaces the earlier one),
points older than ``window_s`` forgotten, at most ``max_series`` CEs (the
first ones seen).  A figure the LRMS did not know is kept as unknown (None),
never as 0.  A file that cannot be read or written is one warning; the
history then lives in memory only.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Optional

from glueinfo.core.atomicwrite import WriteError, write_atomic
from glueinfo.core.model import QueueState
from glueinfo.core.text import one_line

log = logging.getLogger(__name__)

FILE_NAME = "status-history.json"
FORMAT = 1

# (time, free CPUs, running jobs, waiting jobs); None: unknown at that time
Point = tuple[float, Optional[int], Optional[int], Optional[int]]


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class History:
    """Per-CE series of :data:`Point` (see the module docstring).  Thread-safe."""

    def __init__(self, directory: Optional[str], clock: Callable[[], float], window_s: float = 86400.0,
                 step_s: float = 60.0, max_series: int = 64) -> None:
        self.path = os.path.join(directory, FILE_NAME) if directory else None
        self.clock = clock
        self.window_s, self.step_s, self.max_series = window_s, step_s, max_series
        self._series: dict[str, list[Point]] = {}
        self._lock = threading.Lock()
        self._saved_at = float("-inf")
        self._warned = False
        self._read_only = False

    def read_only(self) -> None:
        """Read the file but never write it: its directory is another process's (a ``glueinfo run``
        holds the state directory ``glueinfo serve`` reads).  The series is still kept in memory."""
        self._read_only = True

    # -- recording ---------------------------------------------------------------------------
    def record(self, now: float, states: Mapping[str, QueueState]) -> None:
        """One sample of every CE's queue state (CE unique id -> QueueState); saves when due."""
        with self._lock:
            for ce, state in states.items():
                series = self._series.get(ce)
                if series is None:
                    if len(self._series) >= self.max_series:
                        continue
                    series = self._series[ce] = []
                point: Point = (now, _count(state.free_cpus), _count(state.running_jobs), _count(state.waiting_jobs))
                if series and series[-1][0] // self.step_s == now // self.step_s:
                    series[-1] = point  # the same step: the latest sample stands for it
                else:
                    series.append(point)
                self._trim(series, now)
            due = now - self._saved_at >= self.step_s
        if due:
            self.save(now)

    def _trim(self, series: list[Point], now: float) -> None:
        cutoff = now - self.window_s
        first = 0
        while first < len(series) and series[first][0] < cutoff:
            first += 1
        if first:
            del series[:first]
        limit = int(self.window_s / self.step_s) * 2 + 2  # bounded whatever the clock does
        if len(series) > limit:
            del series[:-limit]

    def series(self) -> dict[str, list[Point]]:
        """A copy of every CE's points within the window, oldest first."""
        now = self.clock()
        with self._lock:
            return {ce: [p for p in points if p[0] >= now - self.window_s] for ce, points in self._series.items()}

    # -- the file ----------------------------------------------------------------------------
    def load(self) -> int:
        """Read the file back (points still within the window); returns how many CEs.  A missing
        file is no history; an unreadable or malformed one is a warning and no history."""
        if self.path is None:
            return 0
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.loads(handle.read(16 * 1024 * 1024))
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            log.warning("%s: status history not read (starting afresh): %s", self.path, one_line(exc))
            return 0
        series = data.get("series") if isinstance(data, dict) and data.get("format") == FORMAT else None
        if not isinstance(series, dict):
            log.warning("%s: status history not read (starting afresh): not a format %d history file", self.path, FORMAT)
            return 0
        now = self.clock()
        loaded: dict[str, list[Point]] = {}
        for ce, points in list(series.items())[: self.max_series]:
            if not isinstance(ce, str) or not isinstance(points, list):
                continue
            kept: list[Point] = []
            for point in points:
                if (isinstance(point, list) and len(point) == 4 and isinstance(point[0], (int, float))
                        and now - self.window_s <= point[0] <= now):
                    kept.append((float(point[0]), _count(point[1]), _count(point[2]), _count(point[3])))
            kept.sort(key=lambda p: p[0])
            if kept:
                self._trim(kept, now)
                loaded[ce] = kept
        with self._lock:
            self._series = loaded
        return len(loaded)

    def save(self, now: Optional[float] = None) -> bool:
        """Write the file now (atomically); False after a warning when it cannot be written, or
        when it is not this process's to write (:meth:`read_only`)."""
        if self.path is None or self._read_only:
            return False
        with self._lock:
            payload = json.dumps({"format": FORMAT, "series": self._series}, separators=(",", ":"))
            self._saved_at = self.clock() if now is None else now
        try:
            write_atomic(self.path, payload, mode=0o644, durable=False)
        except WriteError as exc:
            if not self._warned:  # once: the disk stays full for a while
                log.warning("status history not saved: %s", exc)
                self._warned = True
            return False
        self._warned = False
        return True
