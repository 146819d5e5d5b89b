"""`glueinfo probe`: this host's snapshot as JSON."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from glueinfo.core.config import Config

if TYPE_CHECKING:  # not imported at run time: a fresh probe imports as little as it can
    from glueinfo.core.model import HostSnapshot

# Without -v, glueinfo.cli leaves logging to this command, which sets it up
# with its first warning: most probes have none, and importing logging was
# about 6 ms of a fresh `glueinfo probe`.
LOGGING_ON_FIRST_WARNING = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pretty", action="store_true", help="indented JSON for people")


def warn(args: argparse.Namespace, message: str) -> None:
    """Log a warning as glueinfo.probe, setting logging up first if nothing has."""
    import logging

    from glueinfo.cli import setup_logging

    setup_logging(args.verbose)
    logging.getLogger(__name__).warning("%s", message)


def collect_from_args(args: argparse.Namespace, config: Config) -> HostSnapshot:
    """Probe as the command line and config say; shared by every command that probes.
    CollectorError (a ConfigurationError: exit 2) for unknown collectors or host root."""
    from glueinfo.host.collect import probe

    return probe(config, host_root=args.host_root, enable=args.collector, disable=args.no_collector,
                 on_error=lambda message: warn(args, message))


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.cli import long_lived_objects

    with long_lived_objects():
        snapshot = collect_from_args(args, config)
    for result in snapshot.collectors:
        if not result.success:
            warn(args, f"collector {result.name} failed: {result.error}")
    sys.stdout.write(snapshot.to_json(pretty=args.pretty) + "\n")
    return 0
