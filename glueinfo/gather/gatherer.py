"""Gather stage: every enabled source -> one snapshot per known host.

Data flow: sources (glueinfo.gather.registry: local, agents, spool, ganglia) ->
sanity check -> last good snapshot per (host, source) -> merge -> the site's
host list, each host with its freshness.

Rules (the README "Many hosts" section says the same for admins):

- **Last good wins over a failure.**  A pull that fails (unreachable, hung,
  bad XML, too big, a Node claiming another host's Id, a snapshot
  glueinfo.core.validate refuses) is logged with the host's name and changes nothing: that host's
  last good snapshot from that source is kept until it goes stale and is
  finally dropped.  Nothing else is affected.
- **Freshness** is glueinfo.core.freshness: stale after ``[node] stale_after``
  (published Unknown, out of free-CPU figures), dropped after ``[sources]
  drop_after``.  Each (host, source) snapshot ages on its own.
- **One host, several sources** (a worker seen by its agent and by
  Ganglia, say) are merged field by field: for every fact the newest snapshot
  that knows it wins (ties: local, agents, spool, ganglia, plugins in that
  order).  So a fresh Ganglia report updates load and memory while the CPU
  model, caches, adapters and mounts that Ganglia cannot tell come from the
  agent's snapshot.  Fast-changing facts (load, available memory and swap,
  free disk space) are never taken from a stale snapshot.  The merged
  snapshot's ``collected_at``/``source`` are those of the newest contributor;
  ``extra["gather"]["sources"]`` records every contributor's time.
- Host names are compared case-insensitively without a trailing dot; a short
  name (``wn001``, as Ganglia often reports) is the same host as the one
  FQDN whose first label it is (``wn001.example.org``), when exactly one is known.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any, Optional

from glueinfo.core.freshness import drop_after_s, is_expired, is_stale, stale_after_s
from glueinfo.core.model import HostSnapshot, replaced
from glueinfo.core.records import dataclass
from glueinfo.core.validate import validate_snapshot
from glueinfo.gather.identity import fold_short_names, host_key, release_pin, unbound_refusals
from glueinfo.gather.merge import merge
from glueinfo.gather.registry import Source, SourceContext, SourceFailure, SourceReport, enabled_sources

log = logging.getLogger(__name__)

# Extra time a source gets beyond the gather deadline before it is abandoned.
GRACE_S = 1.0


# -- the gatherer ------------------------------------------------------------------


@dataclass
class GatheredHost:
    """One host of a gather: its snapshot merged from every source that knows it, and how fresh it is."""

    snapshot: HostSnapshot  # merged
    stale: bool
    age_s: float
    sources: dict[str, float]  # source -> collected_at of its last good snapshot


@dataclass
class _Listed:
    """What hosts() listed last: for which generation of last_good, at what time, until when it holds."""

    generation: int
    now: float
    valid_until: float
    hosts: list[GatheredHost]


@dataclass
class GatherResult:
    """One gather: its hosts, the sources' failures, and the hosts forgotten in it."""

    started_at: float
    duration_s: float
    hosts: list[GatheredHost] = field(default_factory=list)  # sorted by host name
    failures: list[SourceFailure] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # hosts forgotten in this gather
    counts: dict[str, int] = field(default_factory=dict)  # source -> good snapshots received
    refused_claims: int = 0  # answers refused for claiming a host not their target's (SourceFailure.claim)

    def snapshots(self) -> list[HostSnapshot]:
        """Every known host, stale ones included (renderers mark them Unknown)."""
        return [h.snapshot for h in self.hosts]

    def fresh_snapshots(self) -> list[HostSnapshot]:
        """Hosts whose facts are current: the ones free-CPU figures may count."""
        return [h.snapshot for h in self.hosts if not h.stale]

    def to_dict(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at, "duration_s": round(self.duration_s, 4),
            "counts": self.counts, "dropped": self.dropped,
            "failures": [dataclasses.asdict(f) for f in self.failures],
            "hosts": [{"hostname": h.snapshot.hostname, "stale": h.stale, "age_s": round(h.age_s, 3),
                       "sources": h.sources, "snapshot": h.snapshot.to_dict()} for h in self.hosts],
        }


# The facts of a snapshot that are checked part by part (glueinfo.core.validate: every rule reads
# one part, the contradictions included), so a part equal to one already believed needs no new check.
_PARTS = ("cpu", "memory", "load", "network", "filesystems", "os", "static", "accelerators", "collectors")


def _reuse_known(snapshot: HostSnapshot, previous: HostSnapshot) -> dict[str, Any]:
    """Value-based reuse: each part of ``snapshot`` equal to the same part of ``previous`` (the
    host's last good snapshot from the same source, already validated) is replaced by
    ``previous``'s object, so renderers keyed by those objects find the host unchanged, and the
    copy just read is let go.  Returns the parts so taken, by name.  Extra facts equal to the
    previous ones are shared the same way (they are still validated)."""
    known: dict[str, Any] = {}
    for name in _PARTS:
        theirs = getattr(previous, name)
        if theirs is None:
            continue
        mine = getattr(snapshot, name)
        if mine is theirs or mine == theirs:
            known[name] = theirs
            setattr(snapshot, name, theirs)
    if snapshot.extra and previous.extra:
        before = previous.extra
        snapshot.extra = {name: before[name] if name in before and before[name] == facts else facts
                          for name, facts in snapshot.extra.items()}
    return known


def _without(snapshot: HostSnapshot, known: dict[str, Any]) -> HostSnapshot:
    """The snapshot with the parts already believed left out: what is left to validate."""
    if not known:
        return snapshot
    return replaced(snapshot, **dict.fromkeys(known))


class Gatherer:
    """Runs the enabled sources and remembers each host's last good snapshots.

    Keep one Gatherer for the life of a process (``glueinfo run`` / ``serve``)
    and call :meth:`gather` every cycle; nothing is global.
    """

    def __init__(self, config: Any, clock: Callable[[], float] = time.time,
                 sources: Optional[Sequence[Source]] = None,
                 probe: Optional[Callable[[], HostSnapshot]] = None, lock: Optional[threading.RLock] = None,
                 reserved: Sequence[str] = ()) -> None:
        self.config = config
        # Names no target may claim unless a listed name says so: this head node's, when it is a host of the site.
        self.reserved = tuple(reserved)
        self.clock = clock
        self.sources = list(sources) if sources is not None else enabled_sources(config, on_error=log.warning)
        self.probe = probe
        # host key -> source name -> last good snapshot from that source
        self.last_good: dict[str, dict[str, HostSnapshot]] = {}
        # The host keys last folded, and fold_short_names of them (hosts() runs several times a cycle).
        self._canonical: tuple[set[str], dict[str, str]] = (set(), {})
        # Held while last_good changes or is read (take, accept, forget_expired, hosts), never while
        # sources run: a daemon publishes from it while a slow gather is still waiting on agents.
        self.lock = lock if lock is not None else threading.RLock()
        self._memory: dict[str, dict[str, Any]] = {}
        self._dropped_told: dict[tuple[str, str], list[str]] = {}  # (host key, source) -> fields last warned about
        # host key -> (what its last merge read: each live snapshot and whether it was stale, the merged snapshot)
        self._merged: dict[str, tuple[tuple[tuple[HostSnapshot, bool], ...], HostSnapshot]] = {}
        # Bumped whenever last_good changes (see changed()); hosts() answers again from its last list
        # while it is the same and no snapshot has crossed its stale or drop age since.
        self.generation = 0
        self._listed: Optional[_Listed] = None

    # One thread per source, so a slow Ganglia port never holds up the agents.
    def _run_sources(self, deadline: float) -> list[tuple[Source, Optional[SourceReport], Optional[str]]]:
        outcomes: dict[str, tuple[Optional[SourceReport], Optional[str]]] = {}

        def run(source: Source, ctx: SourceContext) -> None:
            try:
                outcomes[source.name] = (source.gather(ctx), None)
            except Exception as exc:  # a broken source must not take the others down
                outcomes[source.name] = (None, f"{type(exc).__name__}: {exc}")

        threads = []
        for source in self.sources:
            memory = self._memory.setdefault(source.name, {})
            ctx = SourceContext(config=self.config, clock=self.clock, deadline=deadline, memory=memory, probe=self.probe,
                                known_hosts=functools.partial(self.known_hosts, source.name))
            thread = threading.Thread(target=run, args=(source, ctx), name=f"source-{source.name}", daemon=True)
            thread.start()
            threads.append((source, thread))
        wall_deadline = time.monotonic() + max(0.0, deadline - self.clock()) + GRACE_S
        results = []
        for source, thread in threads:
            thread.join(max(0.0, wall_deadline - time.monotonic()))
            if source.name in outcomes:
                report, error = outcomes[source.name]
            else:  # abandoned: its late answer is never read; it starts afresh next time
                report, error = None, "did not finish within [sources] gather_timeout"
                self._memory[source.name] = {}
            results.append((source, report, error))
        return results

    def _refuse_unbound_claims(self, reports: Sequence[tuple[Source, SourceReport]]) -> int:
        """Refuse every new pin (a report's ``unbound``) on a host that this head node is or that
        another source reported in this gather or before, now that all of them have reported: the
        decision never depends on which source finished first.  A refused snapshot is taken out of
        its report (never kept nor saved), becomes one failure of that source naming both sides,
        and its pin is undone.  Returns how many were refused."""
        if not any(report.unbound for _, report in reports):
            return 0
        count = 0
        reported_by: dict[str, set[str]] = {}
        with self.lock:
            for key, per_source in self.last_good.items():
                reported_by.setdefault(key, set()).update(per_source)
        for source, report in reports:
            for snapshot in report.snapshots:
                if isinstance(snapshot.hostname, str):
                    reported_by.setdefault(host_key(snapshot.hostname), set()).add(source.name)
        for name in self.reserved:
            reported_by.setdefault(host_key(name), set()).add("this host")
        for source, report in reports:
            refused = unbound_refusals(report.unbound, source.name, reported_by)
            for target, key, others in refused:
                report.snapshots = [s for s in report.snapshots
                                    if not (isinstance(s.hostname, str) and host_key(s.hostname) == key)]
                del report.unbound[key]
                release_pin(self._memory.setdefault(source.name, {}), target)
                sources = [name for name in others if name != "this host"]
                whom = ", ".join(([f"a host {' and '.join(sources)} reported"] if sources else [])
                                 + (["this head node's own name"] if "this host" in others else []))
                report.failures.append(SourceFailure(
                    target=target, host=key[:80],
                    error=f"Node claims to be {key[:80]!r}, {whom}, and nothing says {target} is that host "
                          f"(write it as {target}={key[:80]} in [sources] if it is): refused", claim=True))
                count += 1
        return count

    def take(self, source_name: str, report: SourceReport, result: GatherResult) -> None:
        """Check a source's report and keep each believable snapshot as that host's last good
        one from that source; failures and unbelievable snapshots go to ``result.failures``.
        The one way snapshots enter the gatherer: gathered ones and those fed by ``accept``."""
        with self.lock:
            self._take(source_name, report, result)

    def _take(self, source_name: str, report: SourceReport, result: GatherResult) -> None:
        received = self.clock()
        good = 0
        for failure in report.failures:
            failure.source = source_name
            result.failures.append(failure)
        for snapshot in report.snapshots:
            snapshot.source = source_name
            if snapshot.collected_at > received:  # a worker's clock ahead of ours: heard now, not later
                snapshot.collected_at = received
            key = host_key(snapshot.hostname) if isinstance(snapshot.hostname, str) else ""
            previous = self.last_good.get(key, {}).get(source_name)
            known = _reuse_known(snapshot, previous) if previous is not None and snapshot is not previous else {}
            checked = validate_snapshot(_without(snapshot, known), received)
            if checked.snapshot is None:
                result.failures.append(SourceFailure(target=str(snapshot.hostname)[:80], host=str(snapshot.hostname)[:80],
                                                     error=f"not believed: {checked.refused}", source=source_name))
                continue
            self._warn_dropped(key, source_name, checked.dropped)
            if checked.dropped or not known:
                snapshot = checked.snapshot
            for name, part in known.items():
                setattr(snapshot, name, part)
            per_source = self.last_good.setdefault(key, {})
            if previous is None or snapshot.collected_at >= previous.collected_at:
                per_source[source_name] = snapshot
                self.generation += 1
            good += 1
        result.counts[source_name] = result.counts.get(source_name, 0) + good

    def _warn_dropped(self, key: str, source_name: str, dropped: list[str]) -> None:
        """Log the fields dropped from a host's snapshot once, not every cycle the same report is read."""
        told = self._dropped_told.get((key, source_name))
        if dropped and told != dropped:
            for line in dropped:
                log.warning("%s (from %s)", line, source_name)
        if dropped:
            self._dropped_told[(key, source_name)] = dropped
        elif told is not None:
            del self._dropped_told[(key, source_name)]

    def known_hosts(self, excluding_source: str) -> frozenset[str]:
        """Host keys some other source than ``excluding_source`` has a last good snapshot of:
        the hosts an identity-bound source (agents) must not let a target claim."""
        with self.lock:
            return frozenset(key for key, per_source in self.last_good.items()
                             if any(name != excluding_source for name in per_source))

    def accept(self, source_name: str, snapshots: Sequence[HostSnapshot]) -> list[SourceFailure]:
        """Snapshots collected outside :meth:`gather` (``glueinfo run`` probes this host on its own
        intervals), checked and kept exactly as a source's would be; returns what was refused."""
        result = GatherResult(started_at=self.clock(), duration_s=0.0)
        self.take(source_name, SourceReport(snapshots=list(snapshots)), result)
        return result.failures

    def forget_expired(self, now: float) -> list[str]:
        """Drop every (host, source) snapshot older than ``[sources] drop_after``; returns the hosts gone."""
        drop_after = drop_after_s(self.config)
        dropped = []
        with self.lock:
            dropped.extend(self._forget_expired(now, drop_after))
        return dropped

    def _forget_expired(self, now: float, drop_after: float) -> list[str]:
        dropped = []
        for key in list(self.last_good):
            per_source = self.last_good[key]
            for name in [n for n, s in per_source.items() if is_expired(s, now, drop_after)]:
                del per_source[name]
            if not per_source:
                del self.last_good[key]
                dropped.append(key)
        if dropped:
            self.generation += 1
        return dropped

    def changed(self) -> None:
        """Say that last_good was changed from outside (a restored state): hosts() lists afresh."""
        with self.lock:
            self.generation += 1

    def hosts(self, now: float) -> list[GatheredHost]:
        """Every host known now, one per host (sources merged by the rule in the module
        docstring), with its freshness as of ``now``, sorted by host name."""
        stale_after = stale_after_s(self.config)
        drop_after = drop_after_s(self.config)
        groups: dict[str, list[HostSnapshot]] = {}
        with self.lock:
            listed, generation = self._listed, self.generation
            if listed is not None and listed.generation == generation and listed.now <= now < listed.valid_until:
                # Nothing came, went, turned stale or expired since: the same hosts, older.
                return [GatheredHost(snapshot=h.snapshot, stale=h.stale, age_s=now - h.snapshot.collected_at,
                                     sources=dict(h.sources)) for h in listed.hosts]
            keys = self.last_good.keys()
            if self._canonical[0] != keys:  # the same hosts as last time fold the same way
                self._canonical = (set(keys), fold_short_names(keys))
            canonical = self._canonical[1]
            valid_until = math.inf  # the first time a snapshot's age crosses stale_after or drop_after
            for key, per_source in self.last_good.items():
                live = []
                for s in per_source.values():
                    if not is_expired(s, now, drop_after):
                        live.append(s)
                        for edge in (s.collected_at + stale_after, s.collected_at + drop_after, s.collected_at - stale_after):
                            if now < edge < valid_until:
                                valid_until = edge
                if live:
                    groups.setdefault(canonical[key], []).extend(live)
        hosts = []
        merged_before, self._merged = self._merged, {}  # only this call's hosts are kept (two calls at once: a miss, never a wrong hit)
        for key in sorted(groups):
            # A merge reads its snapshots and, of several, which are stale: the same ones (by identity
            # first; snapshots are never changed once kept) give the same merged snapshot, kept from last time.
            inputs = tuple((s, is_stale(s, now, stale_after)) for s in groups[key])
            before = merged_before.get(key)
            if before is not None and before[0] == inputs:
                merged = before[1]
            else:
                merged = merge(groups[key], now, stale_after)
            self._merged[key] = (inputs, merged)
            hosts.append(GatheredHost(snapshot=merged, stale=is_stale(merged, now, stale_after), age_s=now - merged.collected_at,
                                      sources=dict(merged.extra["gather"]["sources"])))
        self._listed = _Listed(generation, now, valid_until, list(hosts))  # a copy: callers may extend theirs
        return hosts

    def gather(self, list_hosts: bool = True) -> GatherResult:
        """Run every source once (each in its own thread, within ``[sources] gather_timeout``),
        keep what they brought, forget what expired, and return the site's hosts now (without
        ``list_hosts``, ``hosts`` stays empty: for a caller that assembles the site itself)."""
        started = self.clock()
        section = self.config.section("sources")
        deadline = started + section["gather_timeout"]
        result = GatherResult(started_at=started, duration_s=0.0)

        reports: list[tuple[Source, SourceReport]] = []
        for source, report, error in self._run_sources(deadline):
            if error is not None:
                result.failures.append(SourceFailure(target=source.name, error=error, source=source.name))
                continue
            assert report is not None
            reports.append((source, report))
        self._refuse_unbound_claims(reports)
        for source, report in reports:
            self.take(source.name, report, result)
        result.refused_claims = sum(1 for failure in result.failures if failure.claim)

        now = self.clock()
        result.dropped.extend(self.forget_expired(now))
        if list_hosts:
            result.hosts.extend(self.hosts(now))
        result.duration_s = self.clock() - started

        for failure in result.failures:
            log.warning("%s", failure)
        if log.isEnabledFor(logging.INFO):
            known = (f"{len(result.hosts)} hosts ({sum(h.stale for h in result.hosts)} stale)" if list_hosts
                     else f"{len(self.last_good)} host names")
            log.info("gathered %s from %s in %.2f s; %d failures", known,
                     ", ".join(f"{n}: {c}" for n, c in result.counts.items()) or "no source",
                     result.duration_s, len(result.failures))
        return result
