"""Gather stage: every enabled source -> one snapshot per known host.

Data flow: sources (glueinfo.gather.registry: local, agents, spool, ganglia) ->
sanity check -> last good snapshot per (host, source) -> merge -> the site's
host list, each host with its freshness.

Rules (the README "Many hosts" section says the same for admins):

- **Last good wins over a failure.**  A pull that fails (unreachable, hung,
  bad XML, too big, a Node claiming another host's Id, negative or absurd
  numbers) is logged with the host's name and changes nothing: that host's
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

import copy
import dataclasses
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.freshness import drop_after_s, is_expired, is_stale, stale_after_s
from glueinfo.core.model import HostSnapshot
from glueinfo.gather.registry import Source, SourceContext, SourceFailure, SourceReport, enabled_sources

log = logging.getLogger("glueinfo.gather")

# Tie-break when two sources report a host at the same instant: the more direct one wins.
SOURCE_RANK = {"local": 0, "agents": 1, "spool": 2, "ganglia": 3}

# Extra time a source gets beyond the gather deadline before it is abandoned.
GRACE_S = 1.0

# -- sanity checks -----------------------------------------------------------------

_HOSTNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,252}$|^[0-9A-Fa-f:.]{2,45}$")

# Largest believable value per field name; anything above is an absurd report, not a host.
_LIMITS: dict[str, float] = {
    "logical_cpus": 1 << 20, "physical_cores": 1 << 20, "sockets": 1 << 16,
    "clock_mhz": 100_000, "cache_l1_kb": 1 << 24, "cache_l1i_kb": 1 << 24, "cache_l1d_kb": 1 << 24,
    "cache_l2_kb": 1 << 24, "cache_l3_kb": 1 << 24,
    "ram_mb": 1 << 32, "ram_available_mb": 1 << 32, "swap_mb": 1 << 32, "swap_free_mb": 1 << 32,
    "virtual_mb": 1 << 33, "virtual_available_mb": 1 << 33,
    "load1": 1e7, "load5": 1e7, "load15": 1e7, "runnable_tasks": 1e8, "total_tasks": 1e9,
    "cpu_utilisation_percent": 100.5, "utilisation_interval_s": 86400.0 * 365,
    "mtu": 1 << 20, "speed_mbps": 10_000_000, "size_mb": 1 << 44, "available_mb": 1 << 44,
    "si00": 1e9, "sf00": 1e9,
}
_MAX_TEXT = 65536
_MAX_ITEMS = 10_000
_CLOCK_SLACK_S = 300.0  # boot times this far in the future are a wrong clock, not a report


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _walk(obj: Any, path: str, problems: list[str]) -> None:
    """Check every number, text and list of a model dataclass, recursively (kept lean: it runs for every host)."""
    for name in _field_names(type(obj)):
        value = getattr(obj, name)
        kind = value.__class__
        if value is None or kind is bool:
            continue
        if kind is int or kind is float:
            if kind is float and not math.isfinite(value):
                problems.append(f"{path}{name} is {value}")
            elif value < 0:
                problems.append(f"{path}{name} is negative ({value})")
            elif value > _LIMITS.get(name, math.inf):
                problems.append(f"{path}{name} = {value} is beyond belief")
        elif kind is str:
            if len(value) > _MAX_TEXT:
                problems.append(f"{path}{name} is {len(value)} characters long")
        elif kind is list or kind is dict:
            if len(value) > _MAX_ITEMS:
                problems.append(f"{path}{name} has {len(value)} items")
            elif kind is list:
                for index, item in enumerate(value):
                    if item.__class__ is str:
                        if len(item) > _MAX_TEXT:
                            problems.append(f"{path}{name}[{index}] is {len(item)} characters long")
                    elif dataclasses.is_dataclass(item):
                        _walk(item, f"{path}{name}[{index}].", problems)
        elif dataclasses.is_dataclass(value):
            _walk(value, f"{path}{name}.", problems)
        if len(problems) >= 3:
            return


def check_snapshot(snapshot: HostSnapshot, now: float) -> Optional[str]:
    """Why this snapshot cannot be believed (one line), or None when it can."""
    if not snapshot.hostname or not _HOSTNAME.match(snapshot.hostname):
        return f"host name {snapshot.hostname[:80]!r} is not a host name"
    problems: list[str] = []
    _walk(snapshot, "", problems)
    if not problems:
        cpu, memory = snapshot.cpu, snapshot.memory
        if cpu and cpu.logical_cpus is not None and cpu.logical_cpus == 0:
            problems.append("cpu.logical_cpus is 0")
        if cpu and None not in (cpu.logical_cpus, cpu.physical_cores) and cpu.physical_cores > cpu.logical_cpus:  # type: ignore[operator]
            problems.append(f"cpu.physical_cores {cpu.physical_cores} > logical_cpus {cpu.logical_cpus}")
        if memory and None not in (memory.ram_mb, memory.ram_available_mb) and memory.ram_available_mb > memory.ram_mb:  # type: ignore[operator]
            problems.append(f"memory.ram_available_mb {memory.ram_available_mb} > ram_mb {memory.ram_mb}")
        if memory and None not in (memory.swap_mb, memory.swap_free_mb) and memory.swap_free_mb > memory.swap_mb:  # type: ignore[operator]
            problems.append(f"memory.swap_free_mb {memory.swap_free_mb} > swap_mb {memory.swap_mb}")
        for fs in snapshot.filesystems or ():
            if None not in (fs.size_mb, fs.available_mb) and fs.available_mb > fs.size_mb:  # type: ignore[operator]
                problems.append(f"filesystem {fs.mount_point[:80]!r} has more available ({fs.available_mb}) than size ({fs.size_mb})")
                break
        if snapshot.os and snapshot.os.boot_time and snapshot.os.boot_time > now + _CLOCK_SLACK_S:
            problems.append("os.boot_time is in the future")
    if not math.isfinite(snapshot.collected_at) or snapshot.collected_at < 0:
        problems.append(f"collected_at is {snapshot.collected_at}")
    return "; ".join(problems[:3]) if problems else None


# -- host identity -----------------------------------------------------------------


def host_key(name: str) -> str:
    """How host names are compared: case-insensitive, no trailing dot."""
    return name.strip().rstrip(".").lower()


def same_host(reported: str, expected: str) -> bool:
    """Does a reported name denote the expected host?  Equal, or equal in the
    first label when one of the two is a short name (``wn01`` vs ``wn01.example.org``)."""
    a, b = host_key(reported), host_key(expected)
    if a == b:
        return True
    if "." in a and "." in b:
        return False
    return a.split(".", 1)[0] == b.split(".", 1)[0]


def _fold_short_names(keys: Iterable[str]) -> dict[str, str]:
    """Map every key to its canonical key: a short name to the single FQDN it abbreviates."""
    keys = set(keys)
    by_label: dict[str, list[str]] = {}
    for key in keys:
        if "." in key and not _looks_like_ip(key):
            by_label.setdefault(key.split(".", 1)[0], []).append(key)
    canonical = {}
    for key in keys:
        fqdns = by_label.get(key, []) if "." not in key else []
        canonical[key] = fqdns[0] if len(fqdns) == 1 else key
    return canonical


def _looks_like_ip(key: str) -> bool:
    return bool(re.match(r"^[0-9.]+$", key)) or ":" in key


# -- merging -----------------------------------------------------------------------


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


MERGED_FIELDS = ("cpu", "memory", "load", "network", "filesystems", "os", "static")


def merge(snapshots: Sequence[HostSnapshot], now: float, stale_after: float) -> HostSnapshot:
    """One host's snapshots from several sources -> one, by the rules in this module's docstring."""
    if not snapshots:
        raise ValueError("nothing to merge")
    order = _newest_first(snapshots)
    if len(order) == 1:  # the common case: nothing to fill, no need to copy the facts
        only = order[0]
        return dataclasses.replace(only, extra={**only.extra, "gather": {"sources": {only.source: only.collected_at}}})
    result = copy.deepcopy(order[0])
    donors = [s if not is_stale(s, now, stale_after) else _without_volatile(s) for s in order[1:]]
    for name in MERGED_FIELDS:
        value = getattr(result, name)
        if _missing(value):
            for donor in donors:
                if not _missing(getattr(donor, name)):
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
        if "." in s.hostname and not _looks_like_ip(s.hostname):
            result.hostname = s.hostname
            break
    result.extra["gather"] = {"sources": {s.source: s.collected_at for s in reversed(order)}}
    return result


# -- the gatherer ------------------------------------------------------------------


@dataclass
class GatheredHost:
    snapshot: HostSnapshot  # merged
    stale: bool
    age_s: float
    sources: dict[str, float]  # source -> collected_at of its last good snapshot


@dataclass
class GatherResult:
    started_at: float
    duration_s: float
    hosts: list[GatheredHost] = field(default_factory=list)  # sorted by host name
    failures: list[SourceFailure] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # hosts forgotten in this gather
    counts: dict[str, int] = field(default_factory=dict)  # source -> good snapshots received

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


class Gatherer:
    """Runs the enabled sources and remembers each host's last good snapshots.

    Keep one Gatherer for the life of a process (``glueinfo run`` / ``serve``)
    and call :meth:`gather` every cycle; nothing is global.
    """

    def __init__(self, config: Any, clock: Callable[[], float] = time.time,
                 sources: Optional[Sequence[Source]] = None,
                 probe: Optional[Callable[[], HostSnapshot]] = None) -> None:
        self.config = config
        self.clock = clock
        self.sources = list(sources) if sources is not None else enabled_sources(config, on_error=log.warning)
        self.probe = probe
        # host key -> source name -> last good snapshot from that source
        self.last_good: dict[str, dict[str, HostSnapshot]] = {}
        self._memory: dict[str, dict[str, Any]] = {}

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
            ctx = SourceContext(config=self.config, clock=self.clock, deadline=deadline, memory=memory, probe=self.probe)
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

    def gather(self) -> GatherResult:
        started = self.clock()
        section = self.config.section("sources")
        deadline = started + section["gather_timeout"]
        stale_after, drop_after = stale_after_s(self.config), drop_after_s(self.config)
        result = GatherResult(started_at=started, duration_s=0.0)

        for source, report, error in self._run_sources(deadline):
            if error is not None:
                result.failures.append(SourceFailure(target=source.name, error=error, source=source.name))
                continue
            assert report is not None
            received = self.clock()
            good = 0
            for failure in report.failures:
                failure.source = source.name
                result.failures.append(failure)
            for snapshot in report.snapshots:
                snapshot.source = source.name
                if snapshot.collected_at > received:  # a worker's clock ahead of ours: heard now, not later
                    snapshot.collected_at = received
                problem = check_snapshot(snapshot, received)
                if problem is not None:
                    result.failures.append(SourceFailure(target=snapshot.hostname[:80], host=snapshot.hostname[:80],
                                                         error=f"not believed: {problem}", source=source.name))
                    continue
                per_source = self.last_good.setdefault(host_key(snapshot.hostname), {})
                previous = per_source.get(source.name)
                if previous is None or snapshot.collected_at >= previous.collected_at:
                    per_source[source.name] = snapshot
                good += 1
            result.counts[source.name] = good

        now = self.clock()
        for key in list(self.last_good):
            per_source = self.last_good[key]
            for name in [n for n, s in per_source.items() if is_expired(s, now, drop_after)]:
                del per_source[name]
            if not per_source:
                del self.last_good[key]
                result.dropped.append(key)

        canonical = _fold_short_names(self.last_good)
        groups: dict[str, list[HostSnapshot]] = {}
        for key, per_source in self.last_good.items():
            groups.setdefault(canonical[key], []).extend(per_source.values())
        for key in sorted(groups):
            merged = merge(groups[key], now, stale_after)
            result.hosts.append(GatheredHost(
                snapshot=merged, stale=is_stale(merged, now, stale_after), age_s=now - merged.collected_at,
                sources=dict(merged.extra["gather"]["sources"])))
        result.duration_s = self.clock() - started

        for failure in result.failures:
            log.warning("%s", failure)
        log.info("gathered %d hosts (%d stale) from %s in %.2f s; %d failures",
                 len(result.hosts), sum(h.stale for h in result.hosts),
                 ", ".join(f"{n}: {c}" for n, c in result.counts.items()) or "no source",
                 result.duration_s, len(result.failures))
        return result


def gather_once(config: Any, clock: Callable[[], float] = time.time,
                probe: Optional[Callable[[], HostSnapshot]] = None) -> GatherResult:
    """One gather with no memory of earlier ones (``glueinfo gather``, one-shot commands)."""
    return Gatherer(config, clock=clock, probe=probe).gather()


def build_site_fresh(config: Any, snapshots: Sequence[HostSnapshot], clock: Callable[[], float] = time.time,
                     local_fqdn: Optional[str] = None, **options: Any) -> Any:
    """The checked GLUE tree (glueinfo.glue.build.SiteBuild) for these hosts.

    Every host is published; the CE states are asked with the fresh hosts
    only, so a stale host (its load says nothing any more) is kept out of
    FreeCPUs and the other LRMS figures derived from host facts.
    """
    from glueinfo.glue.build import build_site, default_local_fqdn, query_states
    from glueinfo.site.aggregate import aggregate
    from glueinfo.site.model import site_from_config

    local_fqdn = local_fqdn or default_local_fqdn(config)
    if "states" not in options:
        now, stale_after = clock(), stale_after_s(config)
        site = site_from_config(config, local_fqdn)
        fresh = [s for s in snapshots if not is_stale(s, now, stale_after)]
        options["states"] = query_states(site, aggregate(site, fresh), clock)
    return build_site(config, snapshots, clock, local_fqdn=local_fqdn, **options)


def build_site_from_gather(config: Any, result: GatherResult, clock: Callable[[], float] = time.time,
                           local_fqdn: Optional[str] = None, **options: Any) -> Any:
    """:func:`build_site_fresh` for the hosts of a gather."""
    return build_site_fresh(config, result.snapshots(), clock, local_fqdn, **options)
