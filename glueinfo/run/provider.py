"""The periodic provider's work, step by step (when each step runs: glueinfo.run.scheduler).

``glueinfo run`` keeps one :class:`Provider` for the life of the process.
The site is assembled by the same core every command uses
(glueinfo.site.assemble.SiteAssembler); the provider only decides when each
input is refreshed.  Its jobs, each on its own interval ([run] section):

- **slow** (``slow_interval``, and on SIGHUP) and **fast**
  (``fast_interval``): this host's collectors (glueinfo.run.local_host),
  when ``[sources] enabled`` names ``local`` (the combined snapshot is fed
  to the assembler as the ``local`` source's report) or a server answers
  /node.xml.
- **gather** (``gather_interval``, when a source other than ``local`` is
  enabled): agents, spool, Ganglia through the assembler's gatherer (last
  good snapshot per host and source, the freshness rules).
- **lrms** (``lrms_interval``, whatever the sources): every CE's batch
  system, asked with the fresh hosts of its cluster.  Every publish uses
  the latest answer, so CE state is never older than this interval.

Each job is followed by a **publish**: the site assembled, its documents
made by the publish layer (glueinfo.publish.documents: the checked GLUE
trees, the Node XML), and the same publication handed to every output in
turn (glueinfo.publish.outputs): ``file`` ([run] ldif_file and node_xml_file,
rewritten only when they change, else marked fresh), ``ldap`` when ``[run]
ldap_sync`` is on, ``http`` when ``[run] serve`` is (so the server answers
exactly what was written), each timed and failing alone; then the state is
saved (hosts' last good snapshots, SubCluster ids).  One publish at a time.
A publish whose hosts, their times and freshness, and CE states are the same
as the last one's renders nothing: the outputs only mark what they hold
fresh.

Failures never stop the provider: a collector that raises or hangs is a
WARNING naming it (its facts are left out); a full or read-only disk is a
WARNING naming the file, whose previous version stays; an LDAP server that
is down is retried with doubling waits while the files keep being updated,
and is fully re-synchronised when it answers again; entries it rejects are
reported by DN at every publish until they are accepted.

Self-metrics (per job and per output: runs, failures, last duration, last
success; per collector: failures and last success; LDAP status) are in ``/health`` and
are Extension elements of this host's own Node (``/node.xml``); the site's
Node XML file stays the same document ``glueinfo node-xml --site`` prints.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Optional

from glueinfo.core.config import Config
from glueinfo.core.model import HostSnapshot
from glueinfo.core.runstats import JobStats
from glueinfo.core.text import one_line
from glueinfo.publish.documents import Publisher
from glueinfo.publish.outputs import (
    Output,
    OutputContext,
    OutputError,
    Publication,
    all_outputs,
    close_outputs,
    make_outputs,
    outbox_states,
    publish_all,
)
from glueinfo.publish.outputs.file import FileOutput
from glueinfo.publish.outputs.ldap import LdapOutcome, LdapOutput, LdapSync
from glueinfo.run.gc_policy import CollectorPolicy
from glueinfo.run.history import History
from glueinfo.run.local_host import LocalHost, combine_local
from glueinfo.run.plan import Plan, RunSettings, ServiceError, make_plan
from glueinfo.run.stats import Observed, ObservedAssembler, OutputStatus, timed_queue_state, timed_sources, with_run
from glueinfo.site.assemble import LOCAL, AssembledSite, SiteAssembler

if TYPE_CHECKING:
    from glueinfo.run.http_output import ServeOptions
    from glueinfo.run.job_objects import JobObjects

log = logging.getLogger(__name__)

JOB_NAMES = ("slow", "fast", "gather", "lrms")
METRICS_PREFIX = "glueinfo-run"  # Extension names of the self-metrics on this host's Node

__all__ = ["JOB_NAMES", "LdapOutcome", "LdapSync", "Provider", "RunSettings", "ServiceError", "combine_local", "make_plan"]


def _with_host_root(config: Config, host_root: Optional[str]) -> Config:
    """The config with the command line's --host-root in it, so every part reads the same tree."""
    return config.with_values("glueinfo", host_root=host_root) if host_root else config


def _view_key(view: Any) -> Any:
    """A scheduler view (a dict of plain values, or None) as something a tuple can compare."""
    return tuple(sorted(view.items())) if isinstance(view, dict) else view


class Provider:
    """The state of one ``glueinfo run`` process and its jobs (see the module docstring)."""

    def __init__(self, config: Config, *, clock: Callable[[], float] = time.time, host_root: Optional[str] = None,
                 enable: Iterable[str] = (), disable: Iterable[str] = (),
                 ldap_sync_factory: Optional[Callable[[Any, Callable[[], float]], Callable[[Sequence[Any]], LdapOutcome]]] = None,
                 queue_state: Optional[Callable[..., Any]] = None, collector_policy: Optional[CollectorPolicy] = None,
                 outputs: Optional[Sequence[str]] = None, serve: Optional[ServeOptions] = None) -> None:
        self.clock = clock
        # ``glueinfo serve``: this provider with the http output only (glueinfo.run.http_output.ServeOptions).
        self.serve_options = serve
        if serve is not None:
            outputs = ("http",)
        self.collector_policy = collector_policy  # the daemon's garbage-collection schedule (glueinfo.run.gc_policy)
        self.host_root = host_root
        self.cli_enable, self.cli_disable = tuple(enable), tuple(disable)
        self.ldap_sync_factory = ldap_sync_factory
        self.output_names = tuple(outputs) if outputs is not None else None  # None: as [run] says
        self.queue_state = queue_state
        self.plan = make_plan(_with_host_root(config, host_root), self.cli_enable, self.cli_disable)
        self.stopping = threading.Event()
        # Set while a publication writes its outputs.  A publication writes all of its outputs or none:
        # once stopping is set, none begins (stop_publishing), and one already writing is let finish.
        self.writing = threading.Event()
        self._writing_lock = threading.Lock()
        self._publish_lock = threading.Lock()
        # Jobs that will publish when done and have not yet begun to (see job_lrms), and whether an
        # LRMS refresh left its publish to one of them.
        self._pending_lock = threading.Lock()
        self._will_publish: set[str] = set()
        self._deferred = False
        self.local_host = LocalHost(self.plan, clock, host_root, self.cli_enable, self.cli_disable)
        # Monitoring (/metrics, the status page): figures the assembler does not keep, and the CEs' last 24 hours.
        self.history = History(self.plan.settings.state_dir or None, clock)
        self.observed = Observed(on_lrms=self.history.record)
        self.assembler = self._new_assembler(self.plan)
        self._entries: Optional[int] = None  # entries published at the last publish
        self.job_stats: dict[str, JobStats] = {name: JobStats() for name in (*JOB_NAMES, "publish")}
        self.output_stats: dict[str, JobStats] = {}  # each output's record (/metrics, the status page)
        self._published_fingerprint: Optional[tuple[Any, ...]] = None
        self.store = self._new_store(self.plan)
        self.server: Any = None
        # [run] serve takes effect at a start only: a reload neither starts nor stops the server, so the
        # http output stays as long as the process (a listening server is fed to the end).
        self._serving = self.plan.settings.serve or serve is not None
        # This host as the fast and slow jobs last probed it, when it is not one of the site's hosts
        # (``local`` not in [sources] enabled): a server's /node.xml is this host whatever the sources.
        self._this_host: Optional[HostSnapshot] = None
        # The CEs' batch jobs as SSSRMAP Job objects, refreshed by the lrms job: ``glueinfo serve`` answers
        # them (its own role, as before); ``run``'s server does not (each is one more LRMS query a cycle,
        # and user and job names for anyone its [serve] allow lets in).
        self.jobs: Optional[JobObjects] = self._new_jobs(self.plan) if serve is not None else None
        # Publishes wait while serve's first cycle runs (one publish, one LRMS query: see hold_publishes).
        self._held = False
        self.publishes = 0
        self.publisher = self._new_publisher(self.plan)
        self.outputs: list[Output] = self._new_outputs(self.plan, self.publisher)

    # -- construction helpers ------------------------------------------------------------------
    def _new_assembler(self, plan: Plan) -> SiteAssembler:
        try:
            return ObservedAssembler(plan.config, observed=self.observed, clock=self.clock,
                                     sources=timed_sources(plan.remote_sources, self.observed.sources, self.clock),
                                     state_dir=plan.settings.state_dir,
                                     queue_state=timed_queue_state(self.observed.lrms, self.queue_state))
        except Exception as exc:  # a site model that cannot be built: the config is refused
            raise ServiceError(one_line(exc)) from None

    def _new_publisher(self, plan: Plan) -> Publisher:
        settings = plan.publish_settings
        if self.serve_options is not None and self.serve_options.ldif_off is not None:
            settings = dataclasses.replace(settings, versions=())  # a worker's agent: Node documents only
        publisher = Publisher(settings, daemon=True, schema=plan.schema, templates=plan.templates,
                              glue2_schema=plan.glue2_schema)
        old = getattr(self, "publisher", None)
        if old is not None:  # a reload keeps the CreationTimes and the rendered pieces
            publisher.times, publisher.render_cache, publisher.node_markup = old.times, old.render_cache, old.node_markup
            publisher.last_glue2 = old.last_glue2
        return publisher

    def _output_names(self, plan: Plan) -> tuple[str, ...]:
        if self.output_names is not None:
            return self.output_names
        names = ["file"]
        if plan.settings.ldap_sync:
            names.append("ldap")
        if self._serving:
            names.append("http")
        names.extend(name for name in plan.config.get("run", "outputs") if name not in names)  # installed plugins'
        if "stdout" in names:
            raise OutputError("[run] outputs: stdout is a one-shot command's output; the daemon writes files ([run] "
                              "ldif_file, node_xml_file)")
        return tuple(names)

    def _new_outputs(self, plan: Plan, publisher: Publisher) -> list[Output]:
        """The outputs this config publishes to, each made from its own section; OutputError (one
        line) for one that cannot be made.  ``publisher`` is told whether any of them needs every
        entry (an LDAP server to sync)."""
        from glueinfo.run.http_output import http_plugin

        names = self._output_names(plan)
        sections = {name: plan.config.section(name) for name in ("run", "serve", "ldap", "amqp", "htcondor-ce")}
        sections.update({f"output:{name}": plan.config.section(f"output:{name}") for name in names})  # each plugin's own
        context = OutputContext(plan.publish_settings, sections, self.clock, {"ldap_sync_factory": self.ldap_sync_factory})
        ldif_off = self.serve_options.ldif_off if self.serve_options is not None else None
        available = all_outputs(lambda message: log.warning("%s", message), extra=[http_plugin(self.store, ldif_off)])
        outputs = make_outputs(names, context, available)  # OutputError: a ConfigurationError
        publisher.keep_entries(any(plugin.needs_entries for plugin in available if plugin.name in names))
        return outputs

    @property
    def ldap(self) -> Optional[LdapSync]:
        """The LDAP output's retry state, None without one."""
        return next((o.sync for o in self.outputs if isinstance(o, LdapOutput)), None)

    @property
    def files(self) -> Optional[FileOutput]:
        return next((o for o in self.outputs if isinstance(o, FileOutput)), None)

    def _new_jobs(self, plan: Plan) -> JobObjects:
        from glueinfo.run.job_objects import JobObjects

        return JobObjects(plan.config, clock=self.clock, local_fqdn=self.assembler.local_fqdn)

    def _new_store(self, plan: Plan) -> Any:
        from glueinfo.run.http import NodeStore

        provider = self
        agent = self.serve_options is not None and self.serve_options.ldif_off is not None

        class RunStore(NodeStore):
            """serve's store, fed by the provider's publishes; /health gains the run's self-metrics."""

            def health(self) -> dict[str, Any]:
                report = super().health()
                report["run"] = provider.metrics()
                failed = provider.job_stats["publish"].last_error
                if failed is not None:  # what is served (if anything) is not what should be
                    report["status"] = "degraded"
                    report["reasons"].append(f"the last publication failed: {failed}")
                return report

            def status(self) -> Any:
                return provider.monitor_status(super().status())

        return RunStore(lambda: self._http_latest(), plan.node_settings, clock=self.clock, observed=self.observed,
                        history=self.history, role="agent" if agent else "site")

    def _http_latest(self) -> Any:
        from glueinfo.run.http import Refreshed
        from glueinfo.run.http_output import HttpOutput

        http = next((o for o in getattr(self, "outputs", ()) if isinstance(o, HttpOutput)), None)
        return http.latest if http is not None else Refreshed(local=None, snapshots=[])

    @property
    def settings(self) -> RunSettings:
        return self.plan.settings

    @property
    def write_errors(self) -> dict[str, str]:
        """The outputs that failed at the last publish: name -> one line."""
        current = {output.name for output in self.outputs}
        return {name: stats.last_error for name, stats in self.output_stats.items()
                if stats.last_error is not None and name in current}

    @property
    def local_enabled(self) -> bool:
        return LOCAL in self.plan.config.get("sources", "enabled")

    @property
    def gathers(self) -> bool:
        return bool(self.plan.remote_sources)

    def intervals(self) -> dict[str, float]:
        """Job name -> interval in seconds, for the jobs this config needs."""
        jobs = {}
        if self.local_enabled or self._serving:  # a server's /node.xml is this host
            jobs["slow"] = self.settings.slow_interval_s
            jobs["fast"] = self.settings.fast_interval_s
        if self.gathers:
            jobs["gather"] = self.settings.gather_interval_s
        jobs["lrms"] = self.settings.lrms_interval_s
        return jobs

    # -- start and stop ------------------------------------------------------------------------
    def restore(self) -> int:
        """Take the state directory (its lock, its hosts with their real age, the SubCluster ids);
        with no ids remembered, adopt those already published (the last LDIF file, else the LDAP
        server), so an upgrade renames nothing.  Returns how many hosts were restored.

        ``glueinfo serve`` does not take the directory as a daemon does: it reads it when it
        exists and writes it back (its status history too) only when no ``glueinfo run`` holds
        it, so a server may run beside the daemon."""
        writer = self.serve_options is None
        restored = self.assembler.open_state(writer=writer)
        state = self.assembler.state
        if not writer and (state is None or not state.writable):
            self.history.read_only()
        self.history.load()
        if self.assembler.ids.is_empty():
            self._adopt_published_ids()
        return restored

    def _adopt_published_ids(self) -> None:
        from glueinfo.core.ldif import LDIFError, parse_ldif

        path = self.settings.ldif_file
        if path:
            try:
                with open(path, encoding="utf-8") as handle:
                    entries = parse_ldif(handle.read())
            except FileNotFoundError:
                entries = []
            except (OSError, UnicodeDecodeError, LDIFError) as exc:
                log.warning("%s: cannot read the last publication to keep its SubCluster ids: %s", path, one_line(exc))
                entries = []
            if self.assembler.adopt_published(entries, path):
                return
        if self.ldap is not None:
            from glueinfo.glue.ldap_connection import PublishError
            from glueinfo.publish.outputs.ldap import published_hosts

            settings = self.plan.publish_settings
            try:
                self.assembler.adopt_published(published_hosts(settings), settings.ldap.url)
            except PublishError as exc:  # the sync reports an unreachable server or unreadable password
                log.info("SubCluster ids not adopted from the LDAP server: %s", exc)

    @property
    def listens_after_first_cycle(self) -> bool:
        """Whether the server answers only once every job has run once (``glueinfo serve``: its first
        request has the site to answer with; the port is bound first, so a busy one is said at once),
        rather than at once (``glueinfo run``: /health answers while a big site's first gather runs)."""
        return self.serve_options is not None

    def bind_server(self) -> None:
        """Take [serve] listen's (or serve's --listen) port without answering yet: connections wait
        in the kernel's queue until :meth:`start_server`.  ServiceError (one line naming the
        setting) for a bad address or a port taken; nothing without a server to run."""
        if not self._serving or self.server is not None:
            return
        from glueinfo.run.http import Server, listen_origin

        listen = self.serve_options.listen if self.serve_options is not None else None
        serve_settings = self._serve_settings(self.plan)
        try:
            self.server = Server(serve_settings, self.store)
        except OSError as exc:
            raise ServiceError(f"{listen_origin(listen)}: cannot listen on {serve_settings.host}:{serve_settings.port}: "
                               f"{os.strerror(exc.errno) if exc.errno else exc}") from None
        if self.jobs is not None:
            self.jobs.register(self.server.service)

    def _serve_settings(self, plan: Plan) -> Any:
        """The server's settings from [serve] (serve's --listen over its listen); ServiceError (one
        line naming the key) for bad ones."""
        from glueinfo.run.http import ServeSettings

        try:
            return ServeSettings.from_config(plan.config, self.serve_options.listen if self.serve_options else None)
        except ValueError as exc:
            raise ServiceError(str(exc)) from None

    def start_server(self) -> None:
        """Answer HTTP (bound first if it was not: ServiceError) from the published state, the
        CEs' batch jobs too."""
        if not self._serving:
            return
        self.bind_server()
        self.server.start()
        host, port = self.server.address
        shown = f"[{host}]" if ":" in host else host
        jobs = ", ".join(f"{name} every {interval:g} s" for name, interval in self.intervals().items())
        line = (f"serving http://{shown}:{port}/ (status page /, node.xml, nodes.xml, ldif, glue2.json, health, metrics; "
                f"POST SSSRMAP3{', signed requests required' if self.server.settings.key else ''}); {jobs}")
        announce = self.serve_options.announce if self.serve_options is not None else None
        if announce is not None:
            announce(line)
        else:
            log.info("%s", line)

    def stop_publishing(self) -> bool:
        """No publication begins from now on; returns whether one is writing its outputs now
        (the caller lets it finish: see :attr:`writing`)."""
        with self._writing_lock:
            self.stopping.set()
            return self.writing.is_set()

    def close(self) -> None:
        """Flush: the last state, and stop answering HTTP."""
        self.stopping.set()
        close_outputs(self.outputs)  # a pushing output's sender sends what waits, within its drain time
        if self.server is not None:
            try:
                self.server.stop()
            except Exception as exc:  # closing down anyway
                log.debug("HTTP server stop: %s", exc)
        self.history.save()
        self.assembler.close()
        if self.collector_policy is not None:
            self.collector_policy.restore()

    # -- jobs ------------------------------------------------------------------------------------
    def run_job(self, name: str) -> None:
        """Run one job by name with its stats recorded; never raises (the scheduler must go on)."""
        stats = self.job_stats[name]
        began = time.perf_counter()
        stats.runs += 1
        stats.last_started_at = self.clock()
        if name != "lrms":
            with self._pending_lock:
                self._will_publish.add(name)
        try:
            getattr(self, f"job_{name}")()
        except Exception as exc:
            stats.failures += 1
            stats.last_error = f"{type(exc).__name__}: {one_line(exc)}"
            log.warning("job %s failed: %s", name, stats.last_error, exc_info=log.isEnabledFor(logging.DEBUG))
        else:
            stats.last_success_at = self.clock()
            stats.last_error = None
        finally:
            stats.last_duration_s = time.perf_counter() - began
            with self._pending_lock:
                self._will_publish.discard(name)  # ended without publishing (failed, or nothing whole yet)
                owed = self._deferred and not self._will_publish
                if owed:
                    self._deferred = False
            if owed:
                self.publish("lrms (left to a job that did not publish)")

    def job_slow(self) -> None:
        whole = self.local_host.collect_slow()
        if whole is not None:  # before the first fast run there is nothing whole to publish
            self._accept_this_host(whole)
            self.publish("slow")

    def job_fast(self) -> None:
        whole = self.local_host.collect_fast()
        if whole is not None:
            self._accept_this_host(whole)
            self.publish("fast")

    def _accept_this_host(self, whole: HostSnapshot) -> None:
        """This host's new snapshot: one of the site's hosts when ``local`` is a source, and what
        ``serve``'s /node.xml answers as probed (a head node's agents source reads it: nothing
        the assembly adds, such as the batch system's view of this node, goes with it)."""
        self._this_host = whole
        if self.local_enabled:
            self.assembler.accept_local(whole)

    def job_gather(self) -> None:
        assembler = self.assembler
        assembler.gather(list_hosts=False)  # the publish below assembles the hosts
        if assembler is self.assembler:  # not reloaded meanwhile
            self.publish("gather")

    def job_lrms(self) -> None:
        """Refresh the CEs' LRMS state and publish it, unless a job that will publish is at work
        (the gather, which usually runs at the same interval and starts at the same moment): its
        publish, which assembles after this refresh, carries the new state too, and a whole
        render of the site is saved.  Should that job end without publishing, it publishes
        this state on its way out (run_job)."""
        self.assembler.refresh_lrms()
        with self._pending_lock:
            deferred = bool(self._will_publish)
            if deferred:
                self._deferred = True
                log.debug("LRMS state refreshed; published by the %s job at work", ", ".join(sorted(self._will_publish)))
        if not deferred:
            self.publish("lrms")
        self._refresh_jobs()

    def _refresh_jobs(self) -> None:
        """The server's Job objects, read from the batch systems after their state (a CE whose LRMS
        cannot be read contributes none: glueinfo.run.job_objects); never raises."""
        jobs = self.jobs
        if jobs is None:
            return
        try:
            jobs.refresh()
        except Exception as exc:  # a bug must not end the lrms job's publishes
            log.error("job refresh failed: %s", f"{type(exc).__name__}: {one_line(exc)}")

    # -- self-metrics ----------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """The self-metrics: jobs, collectors, outputs, LDAP."""
        return {
            "jobs": {name: stats.to_dict() for name, stats in self.job_stats.items()},
            "collectors": {name: stats.to_dict() for name, stats in sorted(self.local_host.stats_copy().items())},
            "outputs": dict(self.write_errors),
            "output_records": {name: stats.to_dict() for name, stats in self.output_stats.items()},
            "ldap": self.ldap.to_dict() if self.ldap is not None else None,
            "outboxes": [dataclasses.asdict(state) for state in outbox_states(self.outputs)],
            "publishes": self.publishes,
        }

    def monitor_status(self, status: Any) -> Any:
        """serve's status (glueinfo.run.stats.Status) with the run's jobs, publication and files."""
        import os

        interval = min(self.intervals().values())  # every job publishes: the files are this fresh at worst
        outputs = []
        files = self.files
        for kind, path in files.paths if files is not None else ():
            try:
                age: Optional[float] = self.clock() - os.stat(path).st_mtime
            except OSError:
                age = None
            outputs.append(OutputStatus(kind, path, age, interval, files.files.errors.get(path) if files else None))
        return with_run(status, jobs=self.job_stats, collectors=self.local_host.stats_copy(), ldap=self.ldap,
                        outputs=outputs, entries=self.store.ldif_entries() if self.settings.serve else self._entries,
                        output_records=self.output_stats, outboxes=outbox_states(self.outputs))

    def _with_metrics(self, snapshot: HostSnapshot) -> HostSnapshot:
        """A copy of this host's snapshot carrying the self-metrics as Extension facts."""
        extra = dict(snapshot.extra)
        for name, stats in self.job_stats.items():
            extra[f"{METRICS_PREFIX}-job-{name}"] = stats.to_dict()
        extra[f"{METRICS_PREFIX}-collectors"] = {name: stats.to_dict() for name, stats in sorted(self.local_host.stats_copy().items())}
        if self.ldap is not None:
            extra[f"{METRICS_PREFIX}-ldap"] = self.ldap.to_dict()
        return dataclasses.replace(snapshot, extra=extra)

    # -- publishing ----------------------------------------------------------------------------
    def hold_publishes(self, held: bool) -> None:
        """While held, a job's publish does nothing (``serve``'s first cycle: this host, the gather
        and the LRMS once each, then one publish: a publish before the LRMS job would ask the batch
        systems itself, once per publish)."""
        self._held = held

    def publish(self, reason: str) -> bool:
        """Build and write everything from the current site; returns whether anything was rendered."""
        if self._held:
            return False
        with self._publish_lock:
            with self._pending_lock:  # from here on, this publish assembles what every job has finished
                self._will_publish.discard(reason)  # a job publishes with its own name as the reason
                self._deferred = False
            began = time.perf_counter()
            stats = self.job_stats["publish"]
            stats.runs += 1
            stats.last_started_at = self.clock()
            try:
                published = self._publish(reason, began)
                if self.collector_policy is not None:
                    self.collector_policy.after_publish()
            except Exception as exc:
                stats.failures += 1
                stats.last_error = f"{type(exc).__name__}: {one_line(exc)}"
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

    @staticmethod
    def _fingerprint(site: AssembledSite) -> tuple[Any, ...]:
        # Names as assembled (already one per host, in one order): a spelling or order that differs
        # from last time costs one needless render, never a missed change.  The batch system's view
        # of a node (extra["lrms"], which Node XML's State follows) is part of the host.
        hosts = tuple([(h.snapshot.hostname, h.snapshot.collected_at, h.stale, tuple(h.sources.items()),
                        _view_key(h.snapshot.extra.get("lrms"))) for h in site.hosts])
        return hosts, tuple(sorted(site.states.items(), key=lambda item: item[0]))  # QueueStates compare by value

    def _publish(self, reason: str, began: float) -> bool:
        site = self.assembler.assemble()
        fingerprint = self._fingerprint(site)
        if self.serve_options is not None:  # this host as probed (see _accept_this_host)
            local = self._this_host
        else:  # this host as published, with the daemon's self-metrics
            this_host = site.local if site.local is not None else self._this_host
            local = self._with_metrics(this_host) if this_host is not None else None
        if fingerprint == self._published_fingerprint:
            # Unchanged: the outputs mark what they hold fresh (files touched, a waiting LDAP server retried).
            publish_all(self.outputs, Publication(None, hosts_changed=False, local=local), self.output_stats, self.clock)
            log.info("cycle %s: nothing new from %d hosts; outputs marked fresh (%.2f s)", reason, len(site.hosts),
                     time.perf_counter() - began)
            return False
        hosts_changed = fingerprint[0] != (self._published_fingerprint or ((),))[0]
        documents = self.publisher.documents(site)
        publication = Publication(documents, hosts_changed=hosts_changed, local=local)
        with self._writing_lock:
            if self.stopping.is_set():
                # Shutting down: writing only some outputs (the file, not LDAP) would leave them
                # disagreeing until the next start; none is written, all keep the previous cycle's.
                log.info("cycle %s: not published, glueinfo is stopping (every output keeps the previous cycle's)",
                         reason)
                return False
            self.writing.set()
        try:
            results = publish_all(self.outputs, publication, self.output_stats, self.clock)
        finally:
            self.writing.clear()
        for problem in documents.errors:
            log.warning("LDIF: left out %s", problem)
        for warning in documents.warnings:
            log.debug("%s", warning)
        self.assembler.save_state()
        self._published_fingerprint = fingerprint
        self.publishes += 1
        self._entries = documents.entry_count()
        cache = self.publisher.render_cache
        changes = cache.rendered if cache is not None else self._entries
        stale = sum(h.stale for h in site.hosts)
        notes = "".join(f", {result.note or f'{name} failed'}" for name, result in results.items() if result.note or result.error)
        log.info("cycle %s: %d hosts (%d stale), %d entries (%s changed%s)%s, %.2f s",
                 reason, len(site.hosts), stale, self._entries, changes,
                 f", {len(documents.errors)} left out" if documents.errors else "", notes, time.perf_counter() - began)
        return True

    # -- SIGHUP ----------------------------------------------------------------------------------
    def reload(self, config: Config) -> None:
        """Switch to a new config, or raise (ConfigError/ServiceError) and keep the running one.

        Hosts already known are kept (last good snapshots of the sources still
        enabled move over), so are the SubCluster ids; slow facts are collected again.
        """
        plan = make_plan(_with_host_root(config, self.host_root), self.cli_enable, self.cli_disable)
        serve_settings = self._serve_settings(plan) if self.server is not None else None
        assembler = self._new_assembler(plan)
        # Everything that can refuse the config is made before anything is switched: a reload that
        # fails leaves the running config whole (OutputError for an output that cannot be made).
        publisher = self._new_publisher(plan)
        outputs = self._new_outputs(plan, publisher)
        with self._publish_lock:
            old_settings = self.plan.settings
            old = self.assembler
            names = {s.name for s in plan.remote_sources}
            if LOCAL in plan.config.get("sources", "enabled"):
                names.add(LOCAL)
            for key, sources in old.gatherer.last_good.items():
                kept = {n: s for n, s in sources.items() if n in names}
                if kept:
                    assembler.gatherer.last_good[key] = kept
            assembler.gatherer.changed()
            assembler.ids = old.ids
            if plan.settings.state_dir == old_settings.state_dir:
                assembler.state = old.state  # the same directory, its lock still held
            else:  # the new directory first: one another glueinfo run holds refuses the reload (StateLocked)
                assembler.open_state(writer=self.serve_options is None)  # serve only reads a daemon's
                old.close()
            self.assembler = assembler
            self.plan = plan
            self.local_host.plan = plan
            if LOCAL not in names:  # this host is no longer published
                self.local_host.slow_facts = self.local_host.fast_facts = None
            self._published_fingerprint = None
            self.publisher = publisher
            old_outputs, self.outputs = self.outputs, outputs
            close_outputs(old_outputs, drain=False)  # the new ones take over (an outbox included)
            for name in set(self.output_stats) - {output.name for output in outputs}:
                del self.output_stats[name]  # an output no longer made reports nothing, not its last error
            self.store.settings = plan.node_settings
            if self.jobs is not None:
                self.jobs.reconfigure(plan.config, assembler.local_fqdn)
        if plan.settings.serve != old_settings.serve and self.serve_options is None:
            log.warning("[run] serve changed: takes effect at the next restart")
        if serve_settings is not None and self.server is not None and serve_settings != self.server.settings:
            log.warning("[serve] changed: takes effect at the next restart (the server keeps its address, allow "
                        "list, key and limits until then)")
