"""`glueinfo collectors`: which collectors exist, where from, enabled or not."""

from __future__ import annotations

import argparse
import logging

from glueinfo.core.config import Config

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.host.collect import all_collectors, select

    collectors = all_collectors(on_error=log.warning)
    section = config.section("collectors")
    enable = (set(section["enable"]) - set(args.no_collector)) | set(args.collector)
    disable = (set(section["disable"]) - set(args.collector)) | set(args.no_collector)
    enabled = {c.name for c in select(collectors, enable, disable)}  # CollectorError: exit 2
    width = max(len(c.name) for c in collectors)
    print(f"{'NAME':<{width}}  {'ENABLED':<8} {'DEFAULT':<8} SOURCE")
    for c in collectors:
        print(f"{c.name:<{width}}  {('yes' if c.name in enabled else 'no'):<8} "
              f"{('on' if c.default_enabled else 'off'):<8} {c.source}")
    return 0
