"""When the provider's jobs run: APScheduler, signals, start and stop of ``glueinfo run``.

Only ``glueinfo run`` imports this module (APScheduler is never loaded by
the one-shot commands).  What each job does is glueinfo.run.provider.

- Start: the state directory is read and, when it held hosts, published at
  once with their real age; then this host's slow and fast facts are
  collected and published (so the first files are whole), then the
  scheduler starts with the first gather due at once.  ``glueinfo serve``
  (the http output alone) runs every job once before it listens, so its
  first request is answered with the site.
- Jobs run in a thread pool, one thread per job, each on its own
  IntervalTrigger (``[run] *_interval``, ``jitter``) with ``max_instances=1``
  and ``coalesce=True``: a job still running when its next run is due is
  not started twice -- the overrun is logged (EVENT_JOB_MAX_INSTANCES) and
  counted in the self-metrics; runs missed by more than ``misfire_grace``
  (a suspended process) are logged and run once, not in a burst.
- SIGTERM / SIGINT: no new runs; a running job gets ``[run] shutdown_grace``
  seconds to finish, then is abandoned (files are replaced atomically, so
  abandoning one never leaves half a file); the state is flushed; exit 0.
  A publication writes all its outputs or none: one not yet writing when
  SIGTERM comes writes nothing (the file and LDAP both keep the previous
  cycle's), one already writing is let finish every output, up to
  ``PUBLISH_FINISH_S`` beyond the grace.
- SIGHUP: the config file is read again.  A file that does not parse, or
  that the provider cannot run with (unknown collector or source, bad site
  model), is rejected with one ERROR line and the running config stays.
  Otherwise the intervals are applied and the slow collectors run at once.
"""

from __future__ import annotations

import datetime
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from glueinfo.core.config import Config
from glueinfo.core.errors import ConfigurationError
from glueinfo.run.provider import JOB_NAMES, Provider

log = logging.getLogger(__name__)

UTC = datetime.UTC
# How much longer than [run] shutdown_grace SIGTERM waits for a publication already writing its
# outputs (an LDAP sync under way): inside systemd's default 90 s stop timeout.
PUBLISH_FINISH_S = 60.0


class Service:
    """Runs a Provider's jobs on their intervals until told to stop (see the module docstring)."""

    def __init__(self, provider: Provider, reload_config: Callable[[], Config], clock: Callable[[], float] = time.time) -> None:
        self.provider = provider
        self.reload_config = reload_config
        self.clock = clock
        self.stop_requested = threading.Event()
        self.reload_requested = threading.Event()
        self._wake = threading.Event()
        self._running: dict[str, float] = {}  # job name -> monotonic start
        self._running_changed = threading.Condition()
        self.scheduler: Optional[BackgroundScheduler] = None
        self.abandoned: list[str] = []  # jobs still running at exit: the caller must not wait for their threads

    # -- signals ---------------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        def stop(signum: int, frame: Any) -> None:
            self.stop_requested.set()
            self._wake.set()

        def reload(signum: int, frame: Any) -> None:
            self.reload_requested.set()
            self._wake.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, reload)

    # -- jobs ------------------------------------------------------------------------------------
    def _run(self, name: str) -> None:
        if self.stop_requested.is_set():
            return
        with self._running_changed:
            self._running[name] = time.monotonic()
        try:
            self.provider.run_job(name)
        finally:
            with self._running_changed:
                self._running.pop(name, None)
                self._running_changed.notify_all()

    def _run_at_start(self, name: str) -> None:
        """Run a job before the scheduler starts, on a thread of its own, waiting for it only until
        SIGTERM/SIGINT: a collector or batch system that hangs at start must not keep the process
        from stopping within [run] shutdown_grace (the shutdown waits for it as for any running job)."""
        if self.stop_requested.is_set():
            return
        thread = threading.Thread(target=self._run, args=(name,), name=f"glueinfo-{name}-at-start", daemon=True)
        thread.start()
        while thread.is_alive() and not self.stop_requested.is_set():
            thread.join(0.1)  # returns as the job ends; looks at stop_requested ten times a second

    def _trigger(self, interval_s: float) -> IntervalTrigger:
        jitter = self.provider.settings.jitter_s
        return IntervalTrigger(seconds=interval_s, jitter=jitter if jitter > 0 else None, timezone=UTC)

    def _schedule(self, first_runs: dict[str, float]) -> None:
        """Add or update the jobs the provider needs; ``first_runs``: name -> seconds from now to its first run."""
        assert self.scheduler is not None
        wanted = self.provider.intervals()
        settings = self.provider.settings
        now = datetime.datetime.now(UTC)
        for job in self.scheduler.get_jobs():
            if job.id not in wanted:
                job.remove()
        for name, interval in wanted.items():
            first = now + datetime.timedelta(seconds=first_runs.get(name, interval))
            if self.scheduler.get_job(name) is None:
                self.scheduler.add_job(self._run, self._trigger(interval), args=[name], id=name, name=name,
                                       max_instances=1, coalesce=True, misfire_grace_time=int(max(1, settings.misfire_grace_s)),
                                       next_run_time=first)
            else:
                self.scheduler.reschedule_job(name, trigger=self._trigger(interval))
                self.scheduler.modify_job(name, misfire_grace_time=int(max(1, settings.misfire_grace_s)),
                                          next_run_time=first)

    def _on_event(self, event: Any) -> None:
        name = getattr(event, "job_id", "?")
        stats = self.provider.job_stats.get(name)
        if event.code == EVENT_JOB_MAX_INSTANCES:
            with self._running_changed:
                started = self._running.get(name)
            running = f" for {time.monotonic() - started:.1f} s" if started is not None else ""
            if stats is not None:
                stats.overruns += 1
            interval = self.provider.intervals().get(name)
            log.warning("job %s overran: still running%s when its next run was due (interval %s s); that run is skipped",
                        name, running, f"{interval:g}" if interval else "?")
        elif event.code == EVENT_JOB_MISSED:
            if stats is not None:
                stats.missed += 1
            scheduled = getattr(event, "scheduled_run_time", None)
            log.warning("job %s missed its run due at %s by more than [run] misfire_grace (%g s)", name,
                        scheduled.isoformat() if scheduled else "?", self.provider.settings.misfire_grace_s)

    # -- the process -----------------------------------------------------------------------------
    def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT, stop.  Returns the exit code (0)."""
        provider = self.provider
        self.install_signal_handlers()
        restored = provider.restore()  # first: a second glueinfo run on the state directory stops here (StateLocked)
        first_cycle = provider.listens_after_first_cycle
        if first_cycle:
            provider.bind_server()  # a busy port is said before the first cycle, however long it takes
        else:
            provider.start_server()
        if restored:
            provider.publish("restart")
        jobs = provider.intervals()
        # This host first (the first files are whole); serve runs every job once, then publishes once
        # (one LRMS query, not one per job's publish), then answers.
        if first_cycle:
            provider.hold_publishes(True)
        for name in ("slow", "fast", "gather", "lrms") if first_cycle else ("slow", "fast"):
            if name in jobs:
                self._run_at_start(name)
        if first_cycle and not self.stop_requested.is_set():
            provider.hold_publishes(False)
            provider.publish("start")
            provider.start_server()
        if not self.stop_requested.is_set():
            # One thread per job (a reload may add the gather job) and one spare.
            self.scheduler = BackgroundScheduler(executors={"default": ThreadPoolExecutor(max_workers=len(JOB_NAMES) + 1)},
                                                 timezone=UTC)
            self.scheduler.add_listener(self._on_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
            self._schedule({} if first_cycle else {"gather": 0.0})
            self.scheduler.start()
            log.info("running: %s", ", ".join(f"{name} every {interval:g} s" for name, interval in jobs.items()) or "no jobs")
        while not self.stop_requested.is_set():
            self._wake.wait(5.0)
            self._wake.clear()
            if self.reload_requested.is_set() and not self.stop_requested.is_set():
                self.reload_requested.clear()
                self.reload()
        return self.shutdown()

    def reload(self) -> bool:
        """SIGHUP: the new config, or one ERROR line and the old config keeps running."""
        config: Optional[Config] = None
        try:
            config = self.reload_config()
            self.provider.reload(config)
        except ConfigurationError as exc:  # ConfigError, ServiceError, SourceError, OutputError, ...
            message = config.located(str(exc)) if config is not None else str(exc)  # FILE:LINE: [section] key: why
            log.error("SIGHUP: new config rejected, the running one stays: %s", message)
            return False
        except Exception as exc:  # whatever it was, the running config must survive it
            log.error("SIGHUP: new config rejected, the running one stays: %s: %s", type(exc).__name__, exc)
            return False
        if self.scheduler is not None:
            self._schedule({"slow": 0.0})
        log.info("SIGHUP: config %s reloaded; slow collectors run now", config.path or "(defaults)")
        return True

    def shutdown(self) -> int:
        grace = self.provider.settings.shutdown_grace_s
        log.info("stopping (waiting up to %g s for running jobs)", grace)
        self.provider.stop_publishing()
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        deadline = time.monotonic() + grace
        with self._running_changed:
            while self._running and time.monotonic() < deadline:
                self._running_changed.wait(max(0.0, deadline - time.monotonic()))
        # A publication writing its outputs is let finish all of them (each bounded by its own
        # timeouts), so the file and LDAP never part: up to PUBLISH_FINISH_S more.
        finish_by = time.monotonic() + PUBLISH_FINISH_S
        if self.provider.writing.is_set():
            log.info("a publication is writing its outputs: letting it finish (up to %g s more)", PUBLISH_FINISH_S)
        while self.provider.writing.is_set() and time.monotonic() < finish_by:
            time.sleep(0.05)
        if self.provider.writing.is_set():
            log.error("a publication still writing after %g s more was abandoned: its outputs may disagree until "
                      "the next start", PUBLISH_FINISH_S)
        with self._running_changed:
            abandoned = sorted(self._running)
        self.provider.close()
        self.abandoned = abandoned
        if abandoned:
            log.warning("abandoned running job(s) %s after %g s; their outputs keep their previous versions", ", ".join(abandoned), grace)
        log.info("stopped")
        return 0
