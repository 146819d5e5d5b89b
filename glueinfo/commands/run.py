"""`glueinfo run`: the periodic provider, a long-running service (systemd: etc/systemd/glueinfo.service).

Wiring only: logging, the config file to re-read on SIGHUP, then
glueinfo.run.provider.Provider (what each job does) under glueinfo.run.scheduler.Service
(when, signals, stop).  APScheduler is imported here, inside run(), never by
the one-shot commands.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from glueinfo.core.config import Config

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s glueinfo[%(process)d]: %(levelname)s: %(message)s"
SYSLOG_FORMAT = "glueinfo[%(process)d]: %(levelname)s: %(message)s"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_logging_arguments(parser)
    parser.add_argument("--once", action="store_true",
                        help="one refresh of everything (restore, collect, gather, publish), then exit: 0 when every output "
                             "was written (the LDAP server took every entry, the broker confirmed every document)")


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    """The long-running commands' logging options (``run``, ``serve``)."""
    parser.add_argument("--log-file", metavar="FILE",
                        help="also log to FILE (reopened when logrotate moves it)")
    parser.add_argument("--syslog", nargs="?", const="/dev/log", metavar="SOCKET",
                        help="also log to syslog (default socket /dev/log), facility daemon")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only (no line per cycle)")


def setup_logging(args: argparse.Namespace, cycles: bool = True) -> None:
    """INFO by default (one line per cycle); -v for debug, -q for warnings only; stderr plus --log-file / --syslog.
    ``cycles`` False (``serve``: a worker's agent would log a line a minute): warnings only by
    default, -v for the cycles, -vv for debug."""
    import logging.handlers

    from glueinfo.core.errors import UsageError

    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    verbose = args.verbose if cycles else args.verbose - 1
    level = logging.WARNING if args.quiet or verbose < 0 else logging.DEBUG if verbose else logging.INFO
    root.setLevel(level)
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(stream)
    handler: logging.Handler
    if args.log_file:
        try:
            handler = logging.handlers.WatchedFileHandler(args.log_file, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--log-file {args.log_file}: cannot open: {exc.strerror or exc}") from None
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
    if args.syslog:
        try:
            handler = logging.handlers.SysLogHandler(address=args.syslog, facility=logging.handlers.SysLogHandler.LOG_DAEMON)
        except OSError as exc:
            raise UsageError(f"--syslog {args.syslog}: cannot connect: {exc.strerror or exc}") from None
        handler.setFormatter(logging.Formatter(SYSLOG_FORMAT))
        root.addHandler(handler)
    # APScheduler logs every run at INFO and overruns at WARNING: ours say more, once (glueinfo.run.scheduler).
    logging.getLogger("apscheduler").setLevel(logging.DEBUG if args.verbose > 1 else logging.ERROR)
    # pika (the amqp output) logs every connection step at INFO and a refused one at ERROR: the output says it once.
    logging.getLogger("pika").setLevel(logging.DEBUG if args.verbose > 1 else logging.CRITICAL)


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.plugin_keys import plugin_keys
    from glueinfo.commands.site_options import clock_from_environment
    from glueinfo.core.config import load
    from glueinfo.run.gc_policy import CollectorPolicy
    from glueinfo.run.malloc_policy import use_one_arena
    from glueinfo.run.provider import Provider

    setup_logging(args)
    if not args.once:
        use_one_arena(os.environ)  # before any thread: see glueinfo.run.malloc_policy
    config_path = args.config or os.environ.get("GLUEINFO_CONFIG") or None
    clock = clock_from_environment()
    # a config it cannot run with: ServiceError or ConfigError (ConfigurationErrors), exit 2
    provider = Provider(config, clock=clock, host_root=args.host_root, enable=args.collector,
                        disable=args.no_collector, collector_policy=None if args.once else CollectorPolicy(clock))

    if args.once:
        return run_once(provider)
    return run_service(provider, lambda: load(config_path, plugin_keys))


def run_service(provider: Any, reload_config: Callable[[], Config]) -> int:
    """The provider's jobs on their intervals until SIGTERM (glueinfo.run.scheduler), SIGHUP
    re-reading the config through ``reload_config``; the exit code."""
    from glueinfo.run.scheduler import Service

    service = Service(provider, reload_config=reload_config)
    code = service.run()  # ServiceError (cannot listen, say): exit 2
    if service.abandoned:
        # A hung job's thread would keep the interpreter from exiting: leave now, the outputs are whole.
        logging.shutdown()
        sys.stdout.flush()
        os._exit(code)
    return code


def run_once(provider: Any) -> int:
    """Every job once, in order (each followed by a publish); for cron and for trying a config."""
    restored = provider.restore()  # first: a second glueinfo run on the state directory stops here (StateLocked)
    provider.start_server()
    if restored:
        provider.publish("restart")
    for name in provider.intervals():  # slow, fast (this host), gather, lrms: the jobs this config runs
        provider.run_job(name)
    provider.close()  # a pushing output sends what waits, within its drain time
    from glueinfo.publish.outputs import outbox_states

    ldap = provider.ldap.last if provider.ldap is not None else None
    ldap_failed = provider.ldap is not None and (ldap is None or ldap.error is not None or bool(ldap.rejected))
    unsent = any(state.depth for state in outbox_states(provider.outputs))  # left for the next run
    return 1 if provider.write_errors or provider.publishes == 0 or ldap_failed or unsent else 0
