"""``glueinfo federate``: the federation view (glueinfo/federate/), until SIGTERM.

Reads its own config file (``[federate]``, ``[amqp]``, ``[ldap]``: see
docs/federation.md), takes the lock of its state directory (a second view
on the same directory is refused, naming the holder's PID), loads what it
kept, then consumes, writes LDAP and serves HTTP.  Exit 0 after SIGTERM or
SIGINT; 2 for a config error, a state directory that cannot be used or an
address that cannot be listened on.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any

from glueinfo.core.config import Config

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-file", metavar="FILE", help="also log to FILE (reopened when logrotate moves it)")
    parser.add_argument("--syslog", nargs="?", const="/dev/log", metavar="SOCKET",
                        help="also log to syslog (default socket /dev/log), facility daemon")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.run import setup_logging
    from glueinfo.core.errors import UsageError
    from glueinfo.federate.consumer import Consumer
    from glueinfo.federate.http_view import FederationRoutes
    from glueinfo.federate.ldap_view import LdapView
    from glueinfo.federate.settings import federate_settings
    from glueinfo.federate.store import SiteStore
    from glueinfo.federate.trust import Senders
    from glueinfo.federate.view import Federation
    from glueinfo.run.http_server import HttpServer, Limits

    setup_logging(args)
    try:
        settings = federate_settings(config)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        store = SiteStore(settings.state_dir)
        store.lock()
    except OSError as exc:
        raise UsageError(f"[federate] state_dir {settings.state_dir}: cannot be used: {exc.strerror or exc}") from None
    senders = Senders.load(settings.senders_file)
    ldap = None
    if settings.ldap is not None:
        ldap = LdapView(settings.ldap, settings.bases, os.path.join(settings.state_dir, "ldap-view.json"),
                        full_sync_s=settings.full_sync_s)
    federation = Federation(store, senders, settings.limits, settings.ages, ldap, settings.bases)
    loaded = federation.load()
    consumer = Consumer(settings.amqp, settings.queue, settings.kinds, federation.take, settings.prefetch)
    try:
        httpd = HttpServer(settings.host, settings.port, Limits(max_body=0, allow=settings.allow),
                           FederationRoutes(federation, lambda: consumer.state, lambda: httpd.stats()),
                           server_name="glueinfo-federate")
    except OSError as exc:
        raise UsageError(f"[federate] listen: cannot listen on {settings.host}:{settings.port}: "
                         f"{os.strerror(exc.errno) if exc.errno else exc}") from None
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        federation.wake.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    httpd.start()
    consumer.start()
    host, port = httpd.address
    print(f"glueinfo federate: queue {settings.queue} on {settings.amqp.where} exchange {settings.amqp.exchange}, "
          f"{loaded} sites kept from {settings.state_dir}, LDAP {settings.ldap.url if settings.ldap else 'none'}, "
          f"serving http://{host}:{port}/sites", file=sys.stderr, flush=True)
    try:
        federation.run(stop)
    finally:
        consumer.stop()
        httpd.stop(2.0)
        if ldap is not None:
            ldap.close()
        store.release()
    return 0
