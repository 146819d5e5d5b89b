"""`glueinfo serve`: Node XML, GLUE LDIF and SSSRMAP queries over HTTP, from memory.

Wiring only: each refresh probes this host, assembles the site as every
command does (glueinfo.site.assemble), and has the publish layer
(glueinfo.publish) make its documents, handed to the HTTP store as the
daemon's ``http`` output hands them (glueinfo.run.http_output.refreshed);
glueinfo.run.http does the HTTP; glueinfo.run.job_objects adds the CEs'
batch jobs as SSSRMAP Job objects.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from glueinfo.core.config import Config
from glueinfo.core.model import HostSnapshot

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="address to listen on (default [serve] listen, 127.0.0.1:7170; loopback unless told otherwise)")
    parser.add_argument("--refresh-interval", type=float, metavar="SECONDS",
                        help="seconds between refreshes (default [serve] refresh_interval, 60)")
    parser.add_argument("--no-ldif", action="store_true", help="do not build GLUE LDIF (a worker's agent: /ldif answers 503)")


def run(args: argparse.Namespace, config: Config) -> int:
    import dataclasses

    from glueinfo.commands.site_options import clock_from_environment, local_probe, make_assembler, publisher_for, site_config
    from glueinfo.core.errors import UsageError
    from glueinfo.run.history import History
    from glueinfo.run.http import NodeStore, Refreshed, Server, ServeSettings, listen_origin
    from glueinfo.run.http_output import refreshed
    from glueinfo.run.stats import Observed
    from glueinfo.site.node_settings import node_settings as read_node_settings

    try:
        settings = ServeSettings.from_config(config, args.listen)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.refresh_interval is not None:
        if args.refresh_interval < 1:
            raise UsageError("--refresh-interval must be at least 1 second")
        settings = dataclasses.replace(settings, refresh_interval_s=args.refresh_interval)
    node_settings = read_node_settings(config)
    config = site_config(args, config)
    clock = clock_from_environment()
    probe_here = local_probe(args, config, clock)
    local_probe_result: list[HostSnapshot] = []

    def probe() -> HostSnapshot:  # the local source takes this refresh's probe of this host
        return local_probe_result[-1]

    # Monitoring (/metrics, the status page): each source's and LRMS query's time and outcome,
    # and the CEs' last 24 hours, kept in the state directory when this process holds it.
    observed = Observed()
    # The local source takes this refresh's probe of this host (it is /node.xml whatever the sources).
    assembler = make_assembler(args, config, clock=clock, probe=probe, observed=observed)
    assembler.open_state()
    state = assembler.state
    history = History(state.directory if state is not None and state.writable else None, clock)
    history.load()

    publisher = None if args.no_ldif else publisher_for(args, config, daemon=True)

    def refresh() -> Refreshed:
        """One refresh: this host probed (it is /node.xml whatever the sources), the site
        assembled as every command assembles it, its documents made by the publish layer as
        every command and output makes them (/nodes.xml, /ldif, /glue2.json)."""
        local = probe_here()
        local_probe_result[:] = [local]
        gathered = assembler.gather()
        observed.hosts_dropped += len(gathered.dropped)
        observed.claims_refused += gathered.refused_claims
        history.record(clock(), assembler.refresh_lrms())
        site = assembler.assemble()
        observed.site = site
        assembler.save_state()
        if publisher is None:
            return Refreshed(local=local, snapshots=site.snapshots(), problems=list(site.failures), site=site,
                             ldif_off="LDIF is off (--no-ldif)")
        documents = publisher.documents(site)
        try:
            answer = refreshed(documents, local)
        except Exception as exc:  # keep serving the last good LDIF; /health says it failed
            error = f"LDIF build failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
            log.warning("%s", error)
            return Refreshed(local=local, snapshots=site.snapshots(), problems=list(site.failures), site=site,
                             ldif_error=error)
        for problem in documents.errors:
            log.warning("LDIF: left out %s", problem)
        return answer

    store = NodeStore(refresh, node_settings, clock=clock, observed=observed, history=history,
                      role="agent" if args.no_ldif else "site")
    started = time.perf_counter()
    store.refresh_once(raise_errors=True)  # before listening, so the first request has data; bad collector names stop here
    try:
        server = Server(settings, store)
    except OSError as exc:
        raise UsageError(f"{listen_origin(args.listen)}: cannot listen on {settings.host}:{settings.port}: "
                         f"{os.strerror(exc.errno) if exc.errno else exc}") from None
    jobs = None
    try:  # <Object>Job</Object>: the CEs' batch jobs, refreshed on the same interval (none on a fork-only site)
        from glueinfo.run.job_objects import JobObjects
    except ImportError:
        log.info("no Job objects: glueinfo.run.job_objects is not installed")
    else:
        jobs = JobObjects(config, local_fqdn=local_probe_result[-1].hostname if local_probe_result else None)
        jobs.register(server.service)
        jobs.start(settings.refresh_interval_s)
    host, port = server.address
    shown = f"[{host}]" if ":" in host else host
    print(f"glueinfo: serving http://{shown}:{port}/ (status page /, node.xml, nodes.xml, ldif, health, metrics; "
          f"POST SSSRMAP3), "
          f"first refresh took {time.perf_counter() - started:.2f} s, refreshing every {settings.refresh_interval_s:g} s"
          f"{', signed SSSRMAP requests required' if settings.key else ''}", file=sys.stderr, flush=True)

    grace = float(config.get("run", "shutdown_grace"))

    def stop(signum: int, frame: Any) -> None:
        """SIGTERM: leave serve_forever by an exception; whatever then hangs (a refresh holding the
        state directory, a query) cannot keep the process past [run] shutdown_grace."""
        watchdog = threading.Timer(grace, _exit_now, (grace,))
        watchdog.daemon = True
        watchdog.start()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        server.stop(min(grace, 2.0))
        if jobs is not None:
            jobs.stop()
        history.save()
        assembler.close()
    return 0


def _exit_now(grace: float) -> None:
    log.error("not stopped within [run] shutdown_grace (%g s): exiting now", grace)
    logging.shutdown()
    os._exit(1)
