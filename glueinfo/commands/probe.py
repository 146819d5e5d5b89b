"""`glueinfo probe`: this host's snapshot as JSON."""

from __future__ import annotations

import argparse
import logging
import sys

from glueinfo.config import Config

log = logging.getLogger("glueinfo.probe")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pretty", action="store_true", help="indented JSON for people")


def collect_from_args(args: argparse.Namespace, config: Config):
    """Probe as the command line and config say; shared by every command that probes."""
    from glueinfo.cli import UsageError
    from glueinfo.collect import CollectorError, probe

    try:
        return probe(config, host_root=args.host_root, enable=args.collector, disable=args.no_collector,
                     on_error=log.warning)
    except CollectorError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace, config: Config) -> int:
    snapshot = collect_from_args(args, config)
    for result in snapshot.collectors:
        if not result.success:
            log.warning("collector %s failed: %s", result.name, result.error)
    sys.stdout.write(snapshot.to_json(pretty=args.pretty) + "\n")
    return 0
