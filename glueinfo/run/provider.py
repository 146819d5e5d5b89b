"""The periodic provider's work, step by step (when each step runs: glueinfo.run.scheduler).

``glueinfo run`` keeps one :class:`Provider` for the life of the process.
Its jobs, each on its own interval ([run] section):

- **slow** (``slow_interval``, and on SIGHUP): the enabled collectors that
  are not in ``[run] fast_collectors`` -- CPU model and caches, OS, network
  adapters, static facts, plugins.  Their facts are kept and merged into
  every fast refresh.
- **fast** (``fast_interval``): the fast collectors (load, memory,
  filesystems by default) on this host, merged with the latest slow facts;
  then a publish that asks each CE's LRMS for its queue state.
- **gather** (``gather_interval``, only when a source other than ``local``
  is enabled): agents, spool, Ganglia through one long-lived
  glueinfo.gather.gatherer.Gatherer (it keeps each host's last good snapshot and the
  freshness rules); then a publish reusing the last CE states.

A **publish** joins this host and the gathered hosts (glueinfo.gather's
merge rule when one is both), builds the checked GLUE tree
(glueinfo.glue.build through gather.build_site_from_gather), renders the Node
XML through glueinfo.serve's NodeStore (so ``[run] serve`` answers exactly
what was written), writes both files with glueinfo.core.atomicwrite, synchronises
the LDAP server when ``[run] ldap_sync`` is on, and saves each host's last
good snapshot (glueinfo.gather.state).  One publish at a time.  A gather that
brought nothing new (same hosts, times and freshness) does not republish.

Failures never stop the provider: a collector that raises or hangs is a
WARNING naming it (its facts are left out); a full or read-only disk is a
WARNING naming the file, whose previous version stays; an LDAP server that
is down is retried with doubling waits (``ldap_retry_min`` ..
``ldap_retry_max``) while the files keep being updated, and is fully
re-synchronised when it answers again; entries it rejects are reported by DN
at every publish until they are accepted.

Self-metrics (per job: runs, failures, last duration, last success; per
collector: failures and last success; LDAP status) are published as Extension
elements of this host's Node and in ``/health``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.atomicwrite import WriteError, remove_temporaries, write_atomic
from glueinfo.core.config import Config, ConfigError
from glueinfo.core.errors import GlueinfoError
from glueinfo.core.freshness import drop_after_s, is_expired, is_stale, stale_after_s
from glueinfo.core.model import HostSnapshot
from glueinfo.gather.gatherer import GatheredHost, Gatherer, GatherResult, check_snapshot, host_key, merge, same_host
from glueinfo.gather.state import StateStore

log = logging.getLogger("glueinfo.run")

JOB_NAMES = ("slow", "fast", "gather")
METRICS_PREFIX = "glueinfo-run"  # snapshot.extra keys of the self-metrics (Node XML Extension names)


class ServiceError(GlueinfoError):
    """A config the provider cannot run with (unknown collector or source, bad site model); one line."""


@dataclass(frozen=True)
class RunSettings:
    """The [run] section, typed."""

    fast_interval_s: float = 60.0
    slow_interval_s: float = 3600.0
    gather_interval_s: float = 60.0
    fast_collectors: tuple[str, ...] = ("load", "memory", "filesystems")
    jitter_s: float = 0.0
    misfire_grace_s: float = 30.0
    ldif_file: str = "/var/lib/glueinfo/glue.ldif"
    node_xml_file: str = "/var/lib/glueinfo/nodes.xml"
    state_dir: str = "/var/lib/glueinfo/state"
    ldap_sync: bool = False
    ldap_retry_min_s: float = 5.0
    ldap_retry_max_s: float = 300.0
    serve: bool = False
    shutdown_grace_s: float = 5.0

    @classmethod
    def from_config(cls, config: Config) -> RunSettings:
        s = config.section("run")
        return cls(fast_interval_s=s["fast_interval"], slow_interval_s=s["slow_interval"], gather_interval_s=s["gather_interval"],
                   fast_collectors=tuple(s["fast_collectors"]), jitter_s=s["jitter"], misfire_grace_s=s["misfire_grace"],
                   ldif_file=s["ldif_file"], node_xml_file=s["node_xml_file"], state_dir=s["state_dir"],
                   ldap_sync=s["ldap_sync"], ldap_retry_min_s=s["ldap_retry_min"],
                   ldap_retry_max_s=max(s["ldap_retry_max"], s["ldap_retry_min"]), serve=s["serve"],
                   shutdown_grace_s=s["shutdown_grace"])


@dataclass
class JobStats:
    """One job's (or collector's) record, published as self-metrics."""

    runs: int = 0
    failures: int = 0
    last_duration_s: Optional[float] = None
    last_started_at: Optional[float] = None
    last_success_at: Optional[float] = None
    last_error: Optional[str] = None
    overruns: int = 0  # a run due while the previous one still ran (skipped)
    missed: int = 0  # a run too late to start (past misfire grace)

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in dataclasses.asdict(self).items()}


def _one_line(text: object, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


# -- LDAP: retries with backoff, full re-sync on return ---------------------------------------


@dataclass
class LdapOutcome:
    """What one synchronisation did.  ``error`` set: the server could not be used at all."""

    added: int = 0
    modified: int = 0
    deleted: int = 0
    rejected: list[str] = field(default_factory=list)  # one line each, starting with the DN
    error: Optional[str] = None


class LdapSync:
    """Calls ``sync(entries)`` after each publish, backing off while the server fails.

    While the server is down, attempts are spaced ``retry_min`` doubling to
    ``retry_max`` seconds; publishes in between skip the LDAP step (the files
    are still written).  The sync compares the new tree with what the server
    holds, so the first attempt that succeeds after an outage is a full
    re-synchronisation.
    """

    def __init__(self, sync: Callable[[Sequence[Any]], LdapOutcome], retry_min_s: float, retry_max_s: float,
                 clock: Callable[[], float] = time.time, url: str = "") -> None:
        self.sync = sync
        self.retry_min_s, self.retry_max_s = retry_min_s, retry_max_s
        self.clock = clock
        self.url = url
        self.backoff_s = 0.0
        self.next_attempt_at = 0.0
        self.failing_since: Optional[float] = None
        self.stats = JobStats()
        self.last: Optional[LdapOutcome] = None

    def maybe_sync(self, entries: Sequence[Any]) -> Optional[LdapOutcome]:
        now = self.clock()
        if now < self.next_attempt_at:
            log.debug("LDAP %s: next attempt in %.1f s", self.url, self.next_attempt_at - now)
            return None
        began = time.perf_counter()
        self.stats.runs += 1
        self.stats.last_started_at = now
        try:
            outcome = self.sync(entries)
        except Exception as exc:  # a bug or an unexpected library error must not stop the provider
            outcome = LdapOutcome(error=f"{type(exc).__name__}: {_one_line(exc)}")
        self.stats.last_duration_s = time.perf_counter() - began
        self.last = outcome
        if outcome.error is not None:
            self.stats.failures += 1
            self.stats.last_error = outcome.error
            self.backoff_s = self.retry_min_s if self.backoff_s <= 0 else min(self.retry_max_s, self.backoff_s * 2)
            self.next_attempt_at = self.clock() + self.backoff_s
            if self.failing_since is None:
                self.failing_since = now
            log.warning("LDAP %s: %s; local files keep being updated; next attempt in %.0f s",
                        self.url, outcome.error, self.backoff_s)
            return outcome
        if self.failing_since is not None:
            log.info("LDAP %s: answering again after %.0f s: full re-sync: %d added, %d modified, %d deleted",
                     self.url, now - self.failing_since, outcome.added, outcome.modified, outcome.deleted)
        self.failing_since = None
        self.backoff_s = 0.0
        self.next_attempt_at = 0.0
        for line in outcome.rejected:
            log.warning("LDAP %s: %s", self.url, line)
        if outcome.rejected:
            self.stats.failures += 1
            self.stats.last_error = f"{len(outcome.rejected)} entries rejected"
        else:
            self.stats.last_success_at = now
            self.stats.last_error = None
        return outcome

    def to_dict(self) -> dict[str, Any]:
        last = self.last
        return {"url": self.url, **self.stats.to_dict(),
                "state": "waiting" if self.next_attempt_at else "ok" if last is None or not last.rejected else "rejecting",
                "next_attempt_at": self.next_attempt_at or None,
                "rejected": list(last.rejected) if last is not None else [],
                "last": None if last is None else {"added": last.added, "modified": last.modified, "deleted": last.deleted}}


def make_ldap_sync(config: Config, clock: Callable[[], float]) -> Callable[[Sequence[Any]], LdapOutcome]:
    """The synchronisation step: glueinfo.glue.ldapsync.sync_tree into [ldap] url under [glue] base_dn.

    The password file is read at every attempt (a changed password applies
    without a restart); publish_ldap's state file lives in [run] state_dir.
    """
    from glueinfo.glue.ldapsync import LdapTarget, PublishError, sync_tree

    ldap = config.section("ldap")
    base = config.get("glue", "base_dn")
    state_dir = config.get("run", "state_dir")
    state_file = os.path.join(state_dir, "ldap-publish.json") if state_dir else None

    def sync(entries: Sequence[Any]) -> LdapOutcome:
        password = ""
        if ldap["password_file"]:
            try:
                with open(ldap["password_file"], encoding="utf-8") as handle:
                    password = handle.readline().rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as exc:
                why = getattr(exc, "strerror", None) or exc
                return LdapOutcome(error=f"[ldap] password_file {ldap['password_file']}: cannot read: {why}")
        target = LdapTarget(url=ldap["url"], bind_dn=ldap["bind_dn"], password=password, base_dn=base,
                            timeout_s=ldap["timeout"], state_file=state_file)
        try:
            report = sync_tree(entries, target)
        except PublishError as exc:
            return LdapOutcome(error=_one_line(exc))
        return LdapOutcome(added=report.added, modified=report.modified, deleted=report.deleted,
                           rejected=[_one_line(r) for r in report.rejected])

    return sync


# -- the provider ----------------------------------------------------------------------------


@dataclass
class Plan:
    """Everything derived from one config; built whole before it replaces the running one."""

    config: Config
    settings: RunSettings
    fast_names: tuple[str, ...]
    slow_names: tuple[str, ...]
    remote_sources: list[Any]
    node_settings: Any
    schema: Any
    templates: Any
    site_files: tuple[str, ...]


def _selected_collector_names(config: Config, enable: Iterable[str], disable: Iterable[str]) -> list[str]:
    """The collectors glueinfo probe would run with this config and these command-line lists."""
    from glueinfo.host.collect import CollectorError, all_collectors, select

    section = config.section("collectors")
    enable, disable = set(enable), set(disable)
    try:
        chosen = select(all_collectors(lambda message: log.warning("%s", message)),
                        enable=(set(section["enable"]) - disable) | enable,
                        disable=(set(section["disable"]) - enable) | disable)
    except CollectorError as exc:
        raise ServiceError(str(exc)) from None
    return [c.name for c in chosen]


def make_plan(config: Config, enable: Iterable[str] = (), disable: Iterable[str] = ()) -> Plan:
    """Check a config as far as running it needs; ServiceError or ConfigError (one line) when it cannot run."""
    from glueinfo.gather.registry import SourceError, enabled_sources
    from glueinfo.glue.build import default_local_fqdn
    from glueinfo.glue.schema import load_glue_schema
    from glueinfo.glue.templates import TemplateError, load_templates
    from glueinfo.site.model import site_from_config
    from glueinfo.site.node_settings import node_settings as read_node_settings

    settings = RunSettings.from_config(config)
    names = _selected_collector_names(config, enable, disable)
    unknown_fast = [n for n in settings.fast_collectors if n not in names]
    if unknown_fast:
        log.debug("[run] fast_collectors names collectors not enabled: %s", ", ".join(unknown_fast))
    fast = tuple(n for n in names if n in settings.fast_collectors)
    slow = tuple(n for n in names if n not in settings.fast_collectors)
    if not fast:  # nothing fast: every collector runs at the fast interval, so this host never goes stale
        fast, slow = tuple(names), ()
    try:
        sources = enabled_sources(config, on_error=lambda message: log.warning("%s", message))
    except SourceError as exc:
        raise ServiceError(str(exc)) from None
    try:
        site = site_from_config(config, default_local_fqdn(config))
        templates = load_templates(site.glue.templates_dir)
    except TemplateError as exc:
        raise ServiceError(str(exc)) from None
    schema = load_glue_schema(site.glue.schema_dir, bool(site.glue.static_ldif_dir))
    node_settings = read_node_settings(config)
    if settings.ldap_sync and not config.get("ldap", "url"):
        raise ConfigError(f"{config.path or '<config>'}: [run] ldap_sync is on but [ldap] url is not set")
    return Plan(config=config, settings=settings, fast_names=fast, slow_names=slow,
                remote_sources=[s for s in sources if s.name != "local"], node_settings=node_settings,
                schema=schema, templates=templates, site_files=tuple(config.section("node")["site_snapshots"]))


def combine_local(slow: Optional[HostSnapshot], fast: HostSnapshot) -> HostSnapshot:
    """This host's snapshot: the latest slow facts with the fresh fast ones over them.

    Times and name are the fast run's (its facts are the ones that age); the
    collectors list keeps each collector's latest outcome.
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
    return combined


class Provider:
    """The state of one ``glueinfo run`` process and its jobs (see the module docstring)."""

    def __init__(self, config: Config, *, clock: Callable[[], float] = time.time, host_root: Optional[str] = None,
                 enable: Iterable[str] = (), disable: Iterable[str] = (),
                 ldap_sync_factory: Callable[[Config, Callable[[], float]], Callable[[Sequence[Any]], LdapOutcome]] = make_ldap_sync
                 ) -> None:
        self.clock = clock
        self.host_root = host_root
        self.cli_enable, self.cli_disable = tuple(enable), tuple(disable)
        self.ldap_sync_factory = ldap_sync_factory
        self.plan = make_plan(config, self.cli_enable, self.cli_disable)
        self.stopping = threading.Event()
        self._publish_lock = threading.Lock()
        self._data_lock = threading.Lock()
        self.slow_facts: Optional[HostSnapshot] = None
        self.fast_facts: Optional[HostSnapshot] = None
        self.local: Optional[HostSnapshot] = None
        self.gatherer = self._new_gatherer(self.plan)
        self.remote: Optional[GatherResult] = None
        self.remote_last_good: dict[str, dict[str, HostSnapshot]] = {}
        self.states: Optional[dict[str, Any]] = None  # CE id -> QueueState of the last LRMS query
        self.job_stats: dict[str, JobStats] = {name: JobStats() for name in (*JOB_NAMES, "publish")}
        self.collector_stats: dict[str, JobStats] = {}
        self._hung: dict[str, tuple[float, float]] = {}  # collector -> (not before, last pause) after a timeout
        self._published_fingerprint: Optional[tuple] = None
        self._previous_entries: Optional[dict[str, Any]] = None
        self.last_entries: list[Any] = []
        self.write_errors: dict[str, str] = {}
        self.state_store = StateStore(self.plan.settings.state_dir, clock=clock) if self.plan.settings.state_dir else None
        self.ldap = self._new_ldap(self.plan)
        self.store = self._new_store(self.plan)
        self.server: Any = None
        self.publishes = 0

    # -- construction helpers ------------------------------------------------------------------
    def _new_gatherer(self, plan: Plan) -> Gatherer:
        return Gatherer(plan.config, clock=self.clock, sources=plan.remote_sources)

    def _new_ldap(self, plan: Plan) -> Optional[LdapSync]:
        if not plan.settings.ldap_sync:
            return None
        sync = self.ldap_sync_factory(plan.config, self.clock)
        return LdapSync(sync, plan.settings.ldap_retry_min_s, plan.settings.ldap_retry_max_s, self.clock,
                        url=plan.config.get("ldap", "url"))

    def _new_store(self, plan: Plan) -> Any:
        from glueinfo.run.http import NodeStore, Refreshed

        provider = self

        class RunStore(NodeStore):
            """serve's store, fed by the provider's publishes; /health gains the run's self-metrics."""

            def health(self) -> dict[str, Any]:
                report = super().health()
                report["run"] = provider.metrics()
                return report

        self._latest = Refreshed(local=None, snapshots=[])
        return RunStore(lambda: self._latest, plan.node_settings, clock=self.clock)

    @property
    def settings(self) -> RunSettings:
        return self.plan.settings

    @property
    def local_enabled(self) -> bool:
        return "local" in self.plan.config.get("sources", "enabled")

    @property
    def gathers(self) -> bool:
        return bool(self.plan.remote_sources)

    def intervals(self) -> dict[str, float]:
        """Job name -> interval in seconds, for the jobs this config needs."""
        jobs = {}
        if self.local_enabled:
            jobs["slow"] = self.settings.slow_interval_s
            jobs["fast"] = self.settings.fast_interval_s
        if self.gathers:
            jobs["gather"] = self.settings.gather_interval_s
        return jobs

    # -- start and stop ------------------------------------------------------------------------
    def restore(self) -> int:
        """Read the state directory: last good snapshots of every host, with their real age.
        Returns how many hosts were restored."""
        for path in (self.settings.ldif_file, self.settings.node_xml_file):
            if path:  # what a writer killed mid-write left behind (only this process writes these files)
                remove_temporaries(path)
        if self.state_store is None:
            return 0
        states = self.state_store.load()
        now = self.clock()
        drop_after = drop_after_s(self.plan.config)
        remote_names = {s.name for s in self.plan.remote_sources}
        restored_hosts = 0
        local_candidates = []
        for key, sources in states.items():
            kept = False
            for source, snapshot in sources.items():
                if is_expired(snapshot, now, drop_after):
                    continue
                problem = check_snapshot(snapshot, now)
                if problem is not None:
                    log.warning("state of %s from %s ignored: %s", key, source, problem)
                    continue
                if source == "local":
                    if self.local_enabled:
                        local_candidates.append(snapshot)
                        kept = True
                elif source in remote_names:
                    self.gatherer.last_good.setdefault(key, {})[source] = snapshot
                    kept = True
            restored_hosts += kept
        if local_candidates:
            self.local = max(local_candidates, key=lambda s: s.collected_at)
        if self.gatherer.last_good:
            # A gatherer without sources merges what was restored, by the same rules as a live gather.
            offline = Gatherer(self.plan.config, clock=self.clock, sources=[])
            offline.last_good = {k: dict(v) for k, v in self.gatherer.last_good.items()}
            self.remote = offline.gather()
            self.remote_last_good = {k: dict(v) for k, v in self.gatherer.last_good.items()}
        if restored_hosts:
            log.info("restored %d hosts from %s (published with their age until refreshed)", restored_hosts,
                     self.state_store.directory)
        return restored_hosts

    def start_server(self) -> None:
        """Listen on [serve] listen (``[run] serve``), answering from the published state."""
        if not self.settings.serve:
            return
        from glueinfo.run.http import Server, ServeSettings

        try:
            serve_settings = ServeSettings.from_config(self.plan.config)
        except ValueError as exc:
            raise ServiceError(str(exc)) from None
        try:
            self.server = Server(serve_settings, self.store)
        except OSError as exc:
            raise ServiceError(f"cannot listen on {serve_settings.host}:{serve_settings.port}: {exc.strerror or exc}") from None
        # Only the HTTP loop: the store is refreshed by publishes, not by serve's own timer.
        threading.Thread(target=self.server.httpd.serve_forever, kwargs={"poll_interval": 0.5},
                         name="glueinfo-http", daemon=True).start()
        host, port = self.server.address
        log.info("serving http://%s:%d/ (node.xml, nodes.xml, ldif, health; POST SSSRMAP3)", host, port)

    def close(self) -> None:
        """Flush: the last state, and stop answering HTTP."""
        self.stopping.set()
        if self.server is not None:
            try:
                self.server.stop()
            except Exception as exc:  # closing down anyway
                log.debug("HTTP server stop: %s", exc)
        self._save_state()

    # -- jobs ------------------------------------------------------------------------------------
    def run_job(self, name: str) -> None:
        """Run one job by name with its stats recorded; never raises (the scheduler must go on)."""
        stats = self.job_stats[name]
        began = time.perf_counter()
        stats.runs += 1
        stats.last_started_at = self.clock()
        try:
            getattr(self, f"job_{name}")()
        except Exception as exc:
            stats.failures += 1
            stats.last_error = f"{type(exc).__name__}: {_one_line(exc)}"
            log.warning("job %s failed: %s", name, stats.last_error, exc_info=log.isEnabledFor(logging.DEBUG))
        else:
            stats.last_success_at = self.clock()
            stats.last_error = None
        finally:
            stats.last_duration_s = time.perf_counter() - began

    def _probe(self, names: Sequence[str]) -> Optional[HostSnapshot]:
        from glueinfo.core.model import CollectorResult
        from glueinfo.host.collect import probe
        from glueinfo.sss.node_xml import attach_resources

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
        snapshot = probe(plan.config, host_root=self.host_root,
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
        return attach_resources(snapshot, plan.node_settings.resources)

    def job_slow(self) -> None:
        slow = self._probe(self.plan.slow_names)
        with self._data_lock:
            self.slow_facts = slow
            ready = self.fast_facts is not None
            if ready:
                self.local = combine_local(slow, self.fast_facts)  # type: ignore[arg-type]
        if ready:  # before the first fast run there is nothing whole to publish
            self.publish("slow")

    def job_fast(self) -> None:
        fast = self._probe(self.plan.fast_names)
        if fast is None:
            return
        with self._data_lock:
            self.fast_facts = fast
            self.local = combine_local(self.slow_facts, fast)
        self.publish("fast", query_lrms=True)

    def job_gather(self) -> None:
        gatherer = self.gatherer
        result = gatherer.gather()
        with self._data_lock:
            if gatherer is not self.gatherer:  # the config was reloaded meanwhile: this gather is for the old one
                return
            self.remote = result
            self.remote_last_good = {k: dict(v) for k, v in gatherer.last_good.items()}
        self.publish("gather")

    # -- publishing ----------------------------------------------------------------------------
    def site_hosts(self, now: float) -> tuple[GatherResult, Optional[HostSnapshot]]:
        """This host and the gathered hosts as one GatherResult, freshness as of ``now``,
        and this host's snapshot in it (merged with other sources' reports of it)."""
        config = self.plan.config
        stale_after, drop_after = stale_after_s(config), drop_after_s(config)
        with self._data_lock:
            local, remote = self.local, self.remote
        hosts: list[GatheredHost] = []
        local_merged = False
        here = local
        for gathered in remote.hosts if remote is not None else ():
            snapshot = gathered.snapshot
            if is_expired(snapshot, now, drop_after):
                continue
            if local is not None and not local_merged and same_host(snapshot.hostname, local.hostname):
                snapshot = merge([local, snapshot], now, stale_after)
                local_merged = True
                here = snapshot
            hosts.append(GatheredHost(snapshot=snapshot, stale=is_stale(snapshot, now, stale_after),
                                      age_s=now - snapshot.collected_at, sources=dict(snapshot.extra.get("gather", {}).get("sources", {}))))
        if local is not None and not local_merged:
            hosts.append(GatheredHost(snapshot=local, stale=is_stale(local, now, stale_after), age_s=now - local.collected_at,
                                      sources={"local": local.collected_at}))
        if self.plan.site_files:
            from glueinfo.gather.snapshot_files import load_snapshots

            known = {host_key(h.snapshot.hostname) for h in hosts}
            for snapshot in load_snapshots(self.plan.site_files, on_error=lambda message: log.warning("%s", message)):
                if host_key(snapshot.hostname) not in known:
                    known.add(host_key(snapshot.hostname))
                    hosts.append(GatheredHost(snapshot=snapshot, stale=is_stale(snapshot, now, stale_after),
                                              age_s=now - snapshot.collected_at, sources={"file": snapshot.collected_at}))
        hosts.sort(key=lambda h: host_key(h.snapshot.hostname))
        return GatherResult(started_at=now, duration_s=0.0, hosts=hosts), here

    def _collector_stats_copy(self) -> dict[str, JobStats]:
        return dict(self.collector_stats)  # one C-level copy: the fast and slow jobs add to it meanwhile

    def metrics(self) -> dict[str, Any]:
        """The self-metrics: jobs, collectors, outputs, LDAP."""
        return {
            "jobs": {name: stats.to_dict() for name, stats in self.job_stats.items()},
            "collectors": {name: stats.to_dict() for name, stats in sorted(self._collector_stats_copy().items())},
            "outputs": {path: error for path, error in self.write_errors.items()},
            "ldap": self.ldap.to_dict() if self.ldap is not None else None,
            "publishes": self.publishes,
        }

    def _with_metrics(self, snapshot: HostSnapshot) -> HostSnapshot:
        """A copy of this host's snapshot carrying the self-metrics as Extension facts."""
        extra = dict(snapshot.extra)
        for name, stats in self.job_stats.items():
            extra[f"{METRICS_PREFIX}-job-{name}"] = stats.to_dict()
        extra[f"{METRICS_PREFIX}-collectors"] = {name: stats.to_dict() for name, stats in sorted(self._collector_stats_copy().items())}
        if self.ldap is not None:
            extra[f"{METRICS_PREFIX}-ldap"] = self.ldap.to_dict()
        return dataclasses.replace(snapshot, extra=extra)

    def publish(self, reason: str, query_lrms: bool = False) -> bool:
        """Build and write everything from the current hosts; returns whether anything was published."""
        with self._publish_lock:
            began = time.perf_counter()
            stats = self.job_stats["publish"]
            stats.runs += 1
            stats.last_started_at = self.clock()
            try:
                published = self._publish(reason, query_lrms, began)
            except Exception as exc:
                stats.failures += 1
                stats.last_error = f"{type(exc).__name__}: {_one_line(exc)}"
                log.warning("publish after %s failed: %s (the previous outputs stay)", reason, stats.last_error,
                            exc_info=log.isEnabledFor(logging.DEBUG))
                return False
            finally:
                stats.last_duration_s = time.perf_counter() - began
            stats.last_error = None if not self.write_errors else "; ".join(self.write_errors.values())
            if self.write_errors:
                stats.failures += 1
            else:
                stats.last_success_at = self.clock()
            return published

    def _publish(self, reason: str, query_lrms: bool, began: float) -> bool:
        from glueinfo.gather.gatherer import build_site_from_gather
        from glueinfo.run.http import Refreshed

        plan = self.plan
        now = self.clock()
        site, local = self.site_hosts(now)
        fingerprint = tuple((host_key(h.snapshot.hostname), h.snapshot.collected_at, h.stale) for h in site.hosts)
        if reason == "gather" and fingerprint == self._published_fingerprint and not query_lrms:
            log.info("cycle %s: nothing new from %d hosts; outputs left as they are (%.2f s)", reason, len(site.hosts),
                     time.perf_counter() - began)
            if self.ldap is not None and self.ldap.next_attempt_at and self.last_entries:
                self.ldap.maybe_sync(self.last_entries)  # an LDAP server coming back need not wait for news
            return False
        states = None if (query_lrms or self.states is None) else self.states
        options: dict[str, Any] = {"schema": plan.schema, "templates": plan.templates}
        if states is not None:
            options["states"] = states
        build = build_site_from_gather(plan.config, site, self.clock, local_fqdn=local.hostname if local else None, **options)
        self.states = dict(build.states)
        for warning in build.warnings:
            log.debug("%s", warning)
        for problem in build.errors:
            log.warning("LDIF: left out %s", problem)
        ldif = build.ldif()

        # Node XML through serve's store: the file and /nodes.xml are the same document.
        snapshots = [self._with_metrics(h.snapshot) if h.snapshot is local else h.snapshot for h in site.hosts]
        local_for_node = next((s for s, h in zip(snapshots, site.hosts, strict=True) if h.snapshot is local), None)
        self._latest = Refreshed(local=local_for_node, snapshots=snapshots, ldif=ldif)
        view = self.store.view() if self.store.refresh_once() else None  # failed: logged; the old file stays

        written = []
        for path, payload in ((plan.settings.ldif_file, ldif.encode("utf-8")),
                              (plan.settings.node_xml_file, view.nodes_xml if view is not None else None)):
            if not path or payload is None:
                continue
            try:
                write_atomic(path, payload)
            except WriteError as exc:
                if self.write_errors.get(path) != str(exc):
                    log.warning("%s", exc)
                else:
                    log.warning("%s (still)", exc)
                self.write_errors[path] = str(exc)
                continue
            if path in self.write_errors:
                log.info("%s: written again", path)
                del self.write_errors[path]
            written.append(path)

        entries = {self._dn_key(e.dn): e for e in build.entries}
        changes = self._count_changes(self._previous_entries, entries)
        self._previous_entries = entries
        self.last_entries = list(build.entries)

        ldap_note = ""
        if self.ldap is not None and not self.stopping.is_set():
            outcome = self.ldap.maybe_sync(build.entries)
            if outcome is None:
                ldap_note = ", LDAP waiting to retry"
            elif outcome.error is not None:
                ldap_note = ", LDAP failed"
            else:
                ldap_note = (f", LDAP +{outcome.added} ~{outcome.modified} -{outcome.deleted}"
                             + (f" ({len(outcome.rejected)} rejected)" if outcome.rejected else ""))
        self._save_state()
        self._published_fingerprint = fingerprint
        self.publishes += 1
        stale = sum(h.stale for h in site.hosts)
        log.info("cycle %s: %d hosts (%d stale), %d entries (%s changed%s), %d files written%s, %.2f s",
                 reason, len(site.hosts), stale, len(build.entries), changes,
                 f", {len(build.errors)} left out" if build.errors else "", len(written), ldap_note,
                 time.perf_counter() - began)
        return True

    @staticmethod
    def _dn_key(dn: str) -> str:
        from glueinfo.core.ldif import normalise_dn

        return normalise_dn(dn)

    @staticmethod
    def _count_changes(before: Optional[Mapping[str, Any]], after: Mapping[str, Any]) -> str:
        if before is None:
            return "all"
        changed = sum(1 for key, entry in after.items() if before.get(key) != entry)
        changed += sum(1 for key in before if key not in after)
        return str(changed)

    def _save_state(self) -> None:
        if self.state_store is None:
            return
        with self._data_lock:
            states = {k: dict(v) for k, v in self.remote_last_good.items()}
            local = self.local
        if local is not None and local.source == "local":
            states.setdefault(host_key(local.hostname), {})["local"] = local
        for error in self.state_store.save(states):
            log.warning("state: %s", error)

    # -- SIGHUP ----------------------------------------------------------------------------------
    def reload(self, config: Config) -> None:
        """Switch to a new config, or raise (ConfigError/ServiceError) and keep the running one.

        Hosts already known are kept (the gatherer's last good snapshots move
        over for the sources still enabled); slow facts are collected again.
        """
        plan = make_plan(config, self.cli_enable, self.cli_disable)
        with self._publish_lock, self._data_lock:
            old_settings = self.plan.settings
            gatherer = self._new_gatherer(plan)
            names = {s.name for s in plan.remote_sources}
            for key, sources in self.gatherer.last_good.items():
                kept = {n: s for n, s in sources.items() if n in names}
                if kept:
                    gatherer.last_good[key] = kept
            self.gatherer = gatherer
            self.plan = plan
            if not self.local_enabled:  # [sources] enabled no longer names local: this host is no longer published
                self.local = self.fast_facts = self.slow_facts = None
            self.states = None
            self._published_fingerprint = None
            self.ldap = self._new_ldap(plan)
            self.store.settings = plan.node_settings
            if plan.settings.state_dir != old_settings.state_dir:
                self.state_store = StateStore(plan.settings.state_dir, clock=self.clock) if plan.settings.state_dir else None
        if plan.settings.serve != old_settings.serve:
            log.warning("[run] serve changed: takes effect at the next restart")
