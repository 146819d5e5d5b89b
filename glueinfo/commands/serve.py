"""`glueinfo serve`: Node XML, GLUE LDIF and SSSRMAP queries over HTTP, from memory.

Wiring only: ``serve`` is ``glueinfo run`` with the ``http`` output alone
(glueinfo.run.provider.Provider under glueinfo.run.scheduler.Service, the
same jobs, publish layer, store and server), so a server and the daemon
answer the same bytes and neither keeps a second copy.  What differs:
the fast collectors, the gather and the LRMS run every ``--refresh-interval``
(``[serve] refresh_interval``) and the slow collectors every ``[run]
slow_interval``; every job runs once before the server listens; the state
directory is read, and written back only when no ``glueinfo run`` holds it;
``--no-ldif`` (a worker's agent) makes no GLUE document; only warnings are
logged unless ``-v``; it answers SSSRMAP Job queries (``run`` does not).
SIGHUP re-reads the config ([serve] itself at the next start), SIGTERM stops
within ``[run] shutdown_grace``, at start too.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from glueinfo.core.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from glueinfo.commands.run import add_logging_arguments

    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="address to listen on (default [serve] listen, 127.0.0.1:7170; loopback unless told otherwise)")
    parser.add_argument("--refresh-interval", type=float, metavar="SECONDS",
                        help="seconds between refreshes of this host's fast facts, the sources and the batch systems "
                             "(default [serve] refresh_interval, 60)")
    parser.add_argument("--no-ldif", action="store_true", help="do not build GLUE LDIF (a worker's agent: /ldif answers 503)")
    add_logging_arguments(parser)


def served(config: Config, refresh_interval: Optional[float]) -> Config:
    """The config as ``serve`` runs it: [run] serve on, and the jobs that refresh what is served at
    --refresh-interval (else [serve] refresh_interval)."""
    interval = refresh_interval if refresh_interval is not None else float(config.get("serve", "refresh_interval"))
    return config.with_values("run", serve=True, fast_interval=interval, gather_interval=interval, lrms_interval=interval)


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.plugin_keys import plugin_keys
    from glueinfo.commands.run import run_service, setup_logging
    from glueinfo.commands.site_options import clock_from_environment
    from glueinfo.core.config import MAX_INTERVAL_S, load
    from glueinfo.core.errors import UsageError
    from glueinfo.run.gc_policy import CollectorPolicy
    from glueinfo.run.http import ServeSettings
    from glueinfo.run.http_output import ServeOptions
    from glueinfo.run.malloc_policy import use_one_arena
    from glueinfo.run.provider import Provider

    interval = args.refresh_interval
    if interval is not None and not 1.0 <= interval <= MAX_INTERVAL_S:  # nan too
        raise UsageError(f"--refresh-interval: expected seconds from 1 to {MAX_INTERVAL_S:g}, got {interval:g}")
    try:  # a bad address or key file is said now, not after the first cycle
        ServeSettings.from_config(config, args.listen)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    setup_logging(args, cycles=False)
    use_one_arena(os.environ)  # before any thread: see glueinfo.run.malloc_policy
    config_path = args.config or os.environ.get("GLUEINFO_CONFIG") or None
    options = ServeOptions(listen=args.listen, ldif_off="LDIF is off (--no-ldif)" if args.no_ldif else None,
                           announce=lambda line: print(f"glueinfo: {line}", file=sys.stderr, flush=True))
    # a config it cannot serve with: ServiceError or ConfigError (ConfigurationErrors), exit 2
    clock = clock_from_environment()
    provider = Provider(served(config, args.refresh_interval), clock=clock, host_root=args.host_root,
                        enable=args.collector, disable=args.no_collector, collector_policy=CollectorPolicy(clock),
                        serve=options)
    return run_service(provider, lambda: served(load(config_path, plugin_keys), args.refresh_interval))
