"""Self-metrics: one record per job and per collector of the periodic provider, and the
figures monitoring (/metrics, the status page, /health) reads that no other part keeps: per
source and per LRMS query, the hosts dropped, the last site assembled."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.model import QueueAccelerators, QueueState
from glueinfo.core.runstats import JobStats
from glueinfo.core.text import one_line
from glueinfo.gather.gatherer import GatherResult
from glueinfo.gather.registry import Source, SourceContext, SourceReport
from glueinfo.publish.outbox import OutboxState
from glueinfo.site.accelerators import AcceleratorKind
from glueinfo.site.assemble import AssembledSite, SiteAssembler

# -- figures no other part keeps: per source, per LRMS query, the last site ---------------------


@dataclass
class SourceRecord(JobStats):
    """One source's record: a run that raised, or that could not read some of its targets, is a
    failure (``failed_targets`` says how many); ``snapshots``: good snapshots in its last report."""

    snapshots: int = 0
    failed_targets: int = 0


@dataclass
class LrmsRecord:
    """One batch-system query (an LRMS type and queue; every CE asking it shares the record)."""

    runs: int = 0
    failures: int = 0  # answers with an error (the state partly or wholly unknown)
    last_duration_s: Optional[float] = None
    last_error: Optional[str] = None


@dataclass
class Observed:
    """What monitoring reads that the gatherer and the assembler do not keep themselves.

    Filled by the process that serves (``serve``'s refresh, ``run``'s jobs) through
    :func:`timed_sources`, :func:`timed_queue_state` and :class:`ObservedAssembler`; read by
    the /metrics collector, the status page and /health.  Never raises on being read."""

    sources: dict[str, SourceRecord] = field(default_factory=dict)
    lrms: dict[tuple[str, str], LrmsRecord] = field(default_factory=dict)  # (lrms type, queue) -> record
    collector_failures: dict[str, int] = field(default_factory=dict)  # serve: failed runs per collector
    hosts_dropped: int = 0  # hosts forgotten after [sources] drop_after, since start
    claims_refused: int = 0  # targets' claims on another host refused after a gather, since start
    site: Optional[AssembledSite] = None  # the last site assembled
    on_lrms: Optional[Callable[[float, dict[str, QueueState]], None]] = None  # each LRMS refresh (the history)


def timed_sources(sources: Sequence[Source], records: dict[str, SourceRecord],
                  clock: Callable[[], float] = time.time) -> list[Source]:
    """The same sources, each run recording its duration and outcome in ``records`` by name.
    A source that raises still raises (the gatherer reports it); one abandoned past the gather
    deadline is recorded when it finally returns."""
    def wrap(source: Source) -> Source:
        record = records.setdefault(source.name, SourceRecord())
        inner = source.gather

        def gather(ctx: SourceContext) -> SourceReport:
            began = time.perf_counter()
            record.runs += 1
            record.last_started_at = clock()
            try:
                report = inner(ctx)
            except Exception as exc:
                record.failures += 1
                record.last_error = f"{type(exc).__name__}: {one_line(exc)}"
                raise
            finally:
                record.last_duration_s = time.perf_counter() - began
            record.snapshots, record.failed_targets = len(report.snapshots), len(report.failures)
            if report.failures:
                record.failures += 1
                more = f" (and {len(report.failures) - 1} more)" if len(report.failures) > 1 else ""
                record.last_error = one_line(report.failures[0]) + more
            else:
                record.last_success_at = clock()
                record.last_error = None
            return report

        return dataclasses.replace(source, gather=gather)

    return [wrap(source) for source in sources]


def timed_queue_state(records: dict[tuple[str, str], LrmsRecord],
                      ask: Optional[Callable[..., QueueState]] = None) -> Callable[..., QueueState]:
    """The LRMS query (``ask``, default glueinfo.lrms.registry.queue_state), recording each
    query's duration and outcome in ``records`` by (LRMS type, queue)."""
    def timed(lrms: str, ctx: Any) -> QueueState:
        from glueinfo.lrms.registry import queue_state

        record = records.setdefault((lrms, str(ctx.queue)), LrmsRecord())
        began = time.perf_counter()
        record.runs += 1
        try:
            state = (ask or queue_state)(lrms, ctx)
        except Exception as exc:
            record.failures += 1
            record.last_error = f"{type(exc).__name__}: {one_line(exc)}"
            raise
        finally:
            record.last_duration_s = time.perf_counter() - began
        if state.error is not None:
            record.failures += 1
        record.last_error = one_line(state.error) if state.error is not None else None
        return state

    return timed


class ObservedAssembler(SiteAssembler):
    """The site-assembly core, telling ``observed`` the last site, the hosts each gather
    dropped and each LRMS refresh (the daemon's: ``run`` and ``serve``)."""

    def __init__(self, config: Any, *, observed: Observed, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.observed = observed

    def gather(self, list_hosts: bool = True) -> GatherResult:
        result = super().gather(list_hosts)
        self.observed.hosts_dropped += len(result.dropped)
        self.observed.claims_refused += result.refused_claims
        return result

    def refresh_lrms(self) -> dict[str, QueueState]:
        states = super().refresh_lrms()
        if self.observed.on_lrms is not None:
            self.observed.on_lrms(self.clock(), states)
        return states

    def assemble(self) -> AssembledSite:
        site = super().assemble()
        self.observed.site = site
        return site


# -- the status: one plain picture that /metrics, the status page and /health all read ----------


@dataclass(frozen=True)
class CeStatus:
    """One CE as its LRMS last answered; None: unknown (never published as 0)."""

    unique_id: str
    name: str  # the [ce:NAME] section, "" for the implicit CE
    cluster: str
    lrms: str
    queue: str
    status: Optional[str] = None
    total_cpus: Optional[int] = None
    free_cpus: Optional[int] = None
    running_jobs: Optional[int] = None
    waiting_jobs: Optional[int] = None
    total_jobs: Optional[int] = None
    collected_at: float = 0.0
    error: Optional[str] = None
    query_duration_s: Optional[float] = None
    query_runs: int = 0
    query_failures: int = 0
    queue_missing: bool = False  # the batch system has no such queue (``error`` names the ones it has)
    accelerators: tuple[QueueAccelerators, ...] = ()  # as its batch system counts them; empty: none said


@dataclass(frozen=True)
class HostRow:
    """One host: its published State and since when its facts are (``collected_at``)."""

    hostname: str
    state: str
    stale: bool
    collected_at: float
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubClusterRow:
    unique_id: str
    name: str
    cluster: str
    hosts: tuple[str, ...]
    hardware: tuple[tuple[str, str], ...]  # (label, value) the hosts share
    # per host, as every output publishes them (glueinfo.site.accelerators): None unknown, () none
    accelerators: Optional[tuple[AcceleratorKind, ...]] = None


@dataclass(frozen=True)
class HealthRow:
    """A collector, a source or a job: its last run and failures so far."""

    name: str
    ok: Optional[bool]  # None: never ran
    last_duration_s: Optional[float] = None
    runs: int = 0
    failures: int = 0
    error: Optional[str] = None
    last_success_at: Optional[float] = None
    snapshots: Optional[int] = None  # a source's good snapshots in its last report
    failed_targets: Optional[int] = None  # targets a source could not read in its last run


@dataclass(frozen=True)
class PublishStatus:
    """The last publication (``run``), or the last refresh's LDIF (``serve``)."""

    runs: int = 0
    failures: int = 0
    ok: Optional[bool] = None
    last_at: Optional[float] = None
    last_duration_s: Optional[float] = None
    entries: Optional[int] = None
    error: Optional[str] = None
    ldap_url: Optional[str] = None
    ldap_state: Optional[str] = None  # ok, waiting (server down, retrying), rejecting
    ldap_added: Optional[int] = None
    ldap_modified: Optional[int] = None
    ldap_deleted: Optional[int] = None
    ldap_runs: int = 0
    ldap_failures: int = 0
    ldap_duration_s: Optional[float] = None
    rejected: tuple[str, ...] = ()
    ldap_refused_total: int = 0  # writes refused since start


@dataclass(frozen=True)
class OutputStatus:
    """A file ``run`` writes: its age by its modification time, and its last write error."""

    kind: str  # ldif, node_xml
    path: str
    age_s: Optional[float]  # None: missing
    interval_s: Optional[float]  # it is rewritten or marked fresh at least this often
    error: Optional[str] = None


@dataclass(frozen=True)
class Status:
    """Everything monitoring shows, at ``generated_at``."""

    generated_at: float
    version: str
    role: str  # "site" (serve or run with LDIF) or "agent" (a worker's serve --no-ldif)
    site_name: str
    hostname: Optional[str]
    host_state: Optional[str]
    states: dict[str, int]  # Node State -> hosts
    hosts_total: int
    hosts_stale: int
    hosts_dropped: int
    claims_refused: int = 0
    sssrmap_cache: Optional[tuple[int, int]] = None  # (fields, estimated bytes) SSSRMAP queries keep; None: never queried
    ces: tuple[CeStatus, ...] = ()
    subclusters: tuple[SubClusterRow, ...] = ()
    notable_hosts: tuple[HostRow, ...] = ()  # stale or Unknown
    local_host: tuple[tuple[str, str], ...] = ()  # (label, value): the agent's one host
    collectors: tuple[HealthRow, ...] = ()
    sources: tuple[HealthRow, ...] = ()
    jobs: tuple[HealthRow, ...] = ()
    publish: Optional[PublishStatus] = None
    outputs: tuple[OutputStatus, ...] = ()
    output_plugins: tuple[HealthRow, ...] = ()  # each output of the publish layer: its runs, failures, last error
    outboxes: tuple[OutboxState, ...] = ()  # each pushing output's outbox (the amqp output's)
    refresh_ok: Optional[bool] = None
    problems: tuple[str, ...] = ()
    history: dict[str, list[tuple[float, Optional[int], Optional[int], Optional[int]]]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The figures ``glueinfo check`` reads (in /health's "monitor")."""
        def row(r: HealthRow) -> dict[str, Any]:
            return {"name": r.name, "ok": r.ok, "failures": r.failures, "error": r.error,
                    "last_duration_s": round(r.last_duration_s, 4) if r.last_duration_s is not None else None}

        return {
            "role": self.role, "site": self.site_name,
            "hosts": {"total": self.hosts_total, "stale": self.hosts_stale, "unknown": self.states.get("Unknown", 0),
                      "dropped": self.hosts_dropped, "states": dict(self.states)},
            "ces": [{"id": c.unique_id, "lrms": c.lrms, "queue": c.queue, "status": c.status, "free_cpus": c.free_cpus,
                     "running_jobs": c.running_jobs, "waiting_jobs": c.waiting_jobs, "error": c.error,
                     "queue_missing": c.queue_missing} for c in self.ces],
            "collectors": [row(r) for r in self.collectors],
            "sources": [{**row(r), "snapshots": r.snapshots, "failed_targets": r.failed_targets} for r in self.sources],
            "publish": None if self.publish is None else {
                "ok": self.publish.ok, "error": self.publish.error, "entries": self.publish.entries,
                "last_at": self.publish.last_at, "ldap_state": self.publish.ldap_state,
                "rejected": len(self.publish.rejected), "rejected_dns": list(self.publish.rejected[:20])},
            "outputs": [{"kind": o.kind, "path": o.path, "age_s": None if o.age_s is None else round(o.age_s, 3),
                         "interval_s": o.interval_s, "error": o.error} for o in self.outputs],
        }


def stats_row(name: str, stats: JobStats) -> HealthRow:
    """A job's or collector's record as a status row."""
    return HealthRow(name, None if stats.runs == 0 else stats.last_error is None, stats.last_duration_s, stats.runs,
                     stats.failures, stats.last_error, stats.last_success_at)


def with_run(status: Status, *, jobs: dict[str, JobStats], collectors: dict[str, JobStats], ldap: Any,
             outputs: Sequence[OutputStatus], entries: Optional[int],
             output_records: Optional[dict[str, JobStats]] = None, outboxes: Sequence[OutboxState] = ()) -> Status:
    """``serve``'s status with what ``glueinfo run`` keeps besides: its jobs, its collectors'
    records, the last publication (``jobs["publish"]``) with the LDAP synchronisation
    (glueinfo.publish.outputs.ldap.LdapSync or None), the output files and the pushing outputs' outboxes."""
    publish = jobs.get("publish", JobStats())
    last = getattr(ldap, "last", None)
    ldap_stats = getattr(ldap, "stats", None)
    report = PublishStatus(
        runs=publish.runs, failures=publish.failures, ok=None if publish.runs == 0 else publish.last_error is None,
        last_at=publish.last_started_at, last_duration_s=publish.last_duration_s, entries=entries, error=publish.last_error,
        ldap_url=getattr(ldap, "url", None) if ldap is not None else None,
        ldap_state=ldap.to_dict()["state"] if ldap is not None else None,
        ldap_added=last.added if last is not None else None, ldap_modified=last.modified if last is not None else None,
        ldap_deleted=last.deleted if last is not None else None,
        ldap_runs=ldap_stats.runs if ldap_stats is not None else 0,
        ldap_failures=ldap_stats.failures if ldap_stats is not None else 0,
        ldap_duration_s=ldap_stats.last_duration_s if ldap_stats is not None else None,
        ldap_refused_total=getattr(ldap, "refused_total", 0) if ldap is not None else 0,
        rejected=tuple(last.rejected) if last is not None else ())
    return dataclasses.replace(
        status, publish=report, outputs=tuple(outputs), outboxes=tuple(outboxes),
        output_plugins=tuple(stats_row(name, stats) for name, stats in (output_records or {}).items()),
        jobs=tuple(stats_row(name, stats) for name, stats in jobs.items() if name != "publish"),
        collectors=tuple(stats_row(name, stats) for name, stats in sorted(collectors.items())) or status.collectors)
