"""`glueinfo haizea`: the site as a Haizea ``<site>``; with --lwf, its batch jobs as a Haizea lease workload."""

from __future__ import annotations

import argparse

from glueinfo.core.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lwf", action="store_true",
                        help="print a Haizea <lease-workload> (LWF) of the CEs' jobs instead of the <site>")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.cli import UsageError

    raise UsageError("haizea: not implemented yet")
