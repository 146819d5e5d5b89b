"""This host in ``glueinfo run``: slow and fast collectors on their own intervals, merged.

The slow collectors (CPU model, caches, OS, adapters, static facts,
plugins) run every ``[run] slow_interval``; the fast ones (``[run]
fast_collectors``: load, memory, filesystems by default) every
``fast_interval``.  :func:`combine_local` lays the latest fast facts over the
latest slow ones.  A collector that timed out is retried only after a
growing pause (each timed-out run leaves a thread blocked for good: a dead
NFS server, a hung device), reported meanwhile as not run.  Every
collector's outcome is counted in ``collector_stats``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Optional

from glueinfo.core.model import HostSnapshot
from glueinfo.core.runstats import JobStats
from glueinfo.run.plan import Plan

log = logging.getLogger(__name__)


def combine_local(slow: Optional[HostSnapshot], fast: HostSnapshot, order: Sequence[str] = ()) -> HostSnapshot:
    """This host's snapshot: the latest slow facts with the fresh fast ones over them.

    Times and name are the fast run's (its facts are the ones that age); the
    collectors list keeps each collector's latest outcome, in ``order`` (the
    order one whole probe runs them in, so the snapshot is the one `glueinfo
    probe` would give), the others after.
    """
    if slow is None:
        return fast
    combined = dataclasses.replace(slow, hostname=fast.hostname, collected_at=fast.collected_at, source=fast.source,
                                   host_root=fast.host_root, extra={**slow.extra, **fast.extra})
    fast_names = {c.name for c in fast.collectors}
    from glueinfo.host.collect import SNAPSHOT_FIELDS

    for name in SNAPSHOT_FIELDS:
        value = getattr(fast, name)
        if value is not None:
            setattr(combined, name, value)
    combined.collectors = [c for c in slow.collectors if c.name not in fast_names] + list(fast.collectors)
    if order:
        position = {name: index for index, name in enumerate(order)}
        combined.collectors.sort(key=lambda c: position.get(c.name, len(position)))
    return combined


class LocalHost:
    """The latest slow and fast facts of this host, and the collectors' records."""

    def __init__(self, plan: Plan, clock: Callable[[], float], host_root: Optional[str],
                 cli_enable: Sequence[str], cli_disable: Sequence[str]) -> None:
        self.plan = plan
        self.clock = clock
        self.host_root = host_root
        self.cli_enable, self.cli_disable = tuple(cli_enable), tuple(cli_disable)
        self.slow_facts: Optional[HostSnapshot] = None
        self.fast_facts: Optional[HostSnapshot] = None
        self.collector_stats: dict[str, JobStats] = {}
        self._hung: dict[str, tuple[float, float]] = {}  # collector -> (not before, last pause) after a timeout
        self._lock = threading.Lock()

    def collect_slow(self) -> Optional[HostSnapshot]:
        """Run the slow collectors; returns this host's whole snapshot when fast facts exist already."""
        slow = self.probe(self.plan.slow_names)
        with self._lock:
            self.slow_facts = slow
            return combine_local(slow, self.fast_facts, self.plan.collector_names) if self.fast_facts is not None else None

    def collect_fast(self) -> Optional[HostSnapshot]:
        """Run the fast collectors; returns this host's whole snapshot (None with no collector)."""
        fast = self.probe(self.plan.fast_names)
        if fast is None:
            return None
        with self._lock:
            self.fast_facts = fast
            return combine_local(self.slow_facts, fast, self.plan.collector_names)

    def stats_copy(self) -> dict[str, JobStats]:
        return dict(self.collector_stats)  # one C-level copy: the fast and slow jobs add to it meanwhile

    def probe(self, names: Sequence[str]) -> Optional[HostSnapshot]:
        from glueinfo.core.model import CollectorResult
        from glueinfo.site.local_probe import probe_this_host

        plan = self.plan
        if not names:
            return None
        now = self.clock()
        # A collector that timed out is retried only after a growing pause: each timed-out run
        # leaves its thread blocked for good (a dead NFS server, a hung device), and a service
        # that retried every fast cycle would pile one up per cycle.
        held_back = {n for n in names if self._hung.get(n, (0.0, 0.0))[0] > now}
        running = [n for n in names if n not in held_back]
        others = [n for n in (*plan.fast_names, *plan.slow_names) if n not in running]
        snapshot = probe_this_host(plan.config, plan.node_settings, host_root=self.host_root,
                         enable=[n for n in self.cli_enable if n in running],
                         disable=[*(n for n in self.cli_disable if n not in running), *others],
                         on_error=lambda message: log.warning("%s", message), clock=self.clock)
        for name in sorted(held_back):
            retry_at = self._hung[name][0]
            snapshot.collectors.append(CollectorResult(name, False, 0.0,
                                                       f"not run: it timed out before; next try in {retry_at - now:.0f} s"))
        now = self.clock()
        for result in snapshot.collectors:
            stats = self.collector_stats.setdefault(result.name, JobStats())
            stats.runs += 1
            stats.last_duration_s = result.duration_s
            stats.last_started_at = snapshot.collected_at
            if result.success:
                stats.last_success_at = now
                stats.last_error = None
                self._hung.pop(result.name, None)
            else:
                stats.failures += 1
                stats.last_error = result.error
                if result.name not in held_back and (result.error or "").startswith("timed out"):
                    previous = self._hung.get(result.name, (0.0, 0.0))[1]
                    pause = min(plan.settings.slow_interval_s, max(plan.settings.fast_interval_s, 2 * previous))
                    self._hung[result.name] = (now + pause, pause)
                log.warning("collector %s on %s failed: %s", result.name, snapshot.hostname, result.error)
        return snapshot
