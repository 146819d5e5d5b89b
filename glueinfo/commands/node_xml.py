"""`glueinfo node-xml`: this host as an SSS Node, or the site as a <Data> of Nodes."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from glueinfo.core.config import Config

log = logging.getLogger("glueinfo.node_xml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", action="store_true",
                        help="print a <Data> with every host's Node: this host, [node] site_snapshots and --snapshot")
    parser.add_argument("--snapshot", action="append", default=[], metavar="PATH",
                        help="another host's snapshot: JSON from `glueinfo probe`, Node XML, or a directory of them "
                             "(repeatable; implies --site)")
    parser.add_argument("--no-local", action="store_true", help="with --site: leave this host out (render only the files)")
    parser.add_argument("--compact", action="store_true", help="no indentation")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.probe import collect_from_args
    from glueinfo.gather.snapshot_files import load_snapshots, merge_site
    from glueinfo.site.node_settings import node_settings
    from glueinfo.sss.node_xml import NodeRenderError, attach_resources, render_data, render_node

    settings = node_settings(config)
    site = args.site or bool(args.snapshot) or args.no_local
    local = None
    if not (site and args.no_local):
        local = attach_resources(collect_from_args(args, config), settings.resources)
        for result in local.collectors:
            if not result.success:
                log.warning("collector %s failed: %s", result.name, result.error)
    now = time.time()
    try:
        if not site:
            sys.stdout.buffer.write(render_node(local, now, settings, pretty=not args.compact))  # type: ignore[arg-type]
            return 0
        errors: list[str] = []
        paths = list(config.section("node")["site_snapshots"]) + list(args.snapshot)
        others = load_snapshots(paths, on_error=errors.append)
        if args.snapshot and not others and errors:  # nothing usable among the files asked for
            print(f"glueinfo: {errors[0]}", file=sys.stderr)
            return 2
        for message in errors:
            log.warning("%s", message)
        sys.stdout.buffer.write(render_data(merge_site(local, others), now, settings, pretty=not args.compact))
    except NodeRenderError as exc:
        print(f"glueinfo: {exc}", file=sys.stderr)
        return 1
    return 0
