"""`glueinfo node-xml`: this host as an SSS Node, or the site as a <Data> of Nodes.

``--site`` assembles the site as every command does (glueinfo.site.assemble:
the enabled [sources], [node] site_snapshots, the state directory); files
given with ``--snapshot`` are read as more site_snapshots, and
``--no-local`` leaves this host's own probe out.
"""

from __future__ import annotations

import argparse
import logging
import sys

from glueinfo.core.config import Config

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", action="store_true",
                        help="print a <Data> with every host's Node: this host, [node] site_snapshots and --snapshot")
    parser.add_argument("--snapshot", action="append", default=[], metavar="PATH",
                        help="another host's snapshot: JSON from `glueinfo probe`, Node XML, or a directory of them "
                             "(repeatable; implies --site)")
    parser.add_argument("--no-local", action="store_true", help="with --site: leave this host out (render only the files)")
    parser.add_argument("--compact", action="store_true", help="no indentation")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.site_options import (
        clock_from_environment,
        local_probe,
        make_assembler,
        print_documents,
        publisher_for,
        site_config,
    )
    from glueinfo.gather.snapshot_files import SiteFiles
    from glueinfo.site.node_settings import node_settings
    from glueinfo.sss.node_xml import render_node

    config = site_config(args, config)
    clock = clock_from_environment()
    settings = node_settings(config)
    site = args.site or bool(args.snapshot) or args.no_local
    # a snapshot with no host name: NodeRenderError (a PublicationError), one line and exit 1
    if not site:
        local = local_probe(args, config, clock)()
        for result in local.collectors:
            if not result.success:
                log.warning("collector %s failed: %s", result.name, result.error)
        sys.stdout.buffer.write(render_node(local, clock(), settings, pretty=not args.compact))
        return 0
    if args.snapshot:
        errors: list[str] = []
        if not SiteFiles(args.snapshot).load(on_error=errors.append) and errors:  # nothing usable among the files asked for
            print(f"glueinfo: {errors[0]}", file=sys.stderr)
            return 2
        paths = list(config.section("node")["site_snapshots"]) + list(args.snapshot)
        config = config.with_values("node", site_snapshots=paths)
    assembled = make_assembler(args, config, without_local=args.no_local, clock=clock).once()
    print_documents(publisher_for(args, config).documents(assembled), "node-xml", pretty=not args.compact)
    return 0
