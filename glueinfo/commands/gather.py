"""`glueinfo gather`: run every enabled source once and print the site's hosts.

The site is assembled as every command assembles it (glueinfo.site.assemble).
``--format json`` (default) prints every host with its freshness, sources
and merged snapshot, and every failure; ``summary`` one line a host;
``ldif`` the GLUE 1.3 tree, byte for byte what ``glueinfo ldif`` prints
(stale hosts kept out of free-CPU figures); ``node-xml`` a ``<Data>`` with
every host's Node (stale ones State Unknown), what ``node-xml --site`` prints.  Failures are logged on stderr with the host's name;
the exit code is 1 only when no host at all could be gathered.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from glueinfo.core.config import Config

log = logging.getLogger("glueinfo.gather")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("json", "summary", "ldif", "node-xml"), default="json",
                        help="what to print (default json)")
    parser.add_argument("--pretty", action="store_true", help="indented JSON / XML for people")
    parser.add_argument("--no-hosts", action="store_true", help="with --format ldif: no GlueHost entries")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.cli import UsageError
    from glueinfo.commands.site_options import make_assembler, site_config

    config = site_config(args, config)
    assembler = make_assembler(args, config)
    assembler.open_state()
    result = assembler.gather()
    out = sys.stdout
    if args.format == "json":
        out.write(json.dumps(result.to_dict(), indent=2 if args.pretty else None, ensure_ascii=False) + "\n")
    elif args.format == "summary":
        for host in result.hosts:
            sources = ", ".join(f"{name} {max(0.0, result.started_at - at):.0f}s ago" for name, at in host.sources.items())
            out.write(f"{host.snapshot.hostname}\t{'stale' if host.stale else 'fresh'}\t{sources}\n")
        out.write(f"# {len(result.hosts)} hosts, {sum(h.stale for h in result.hosts)} stale, "
                  f"{len(result.failures)} failures, {result.duration_s:.2f} s\n")
    else:
        from glueinfo.glue.templates import TemplateError

        assembler.refresh_lrms()
        site = assembler.assemble()
        if args.format == "node-xml":
            from glueinfo.site.node_settings import node_settings
            from glueinfo.sss.node_xml import render_data

            out.flush()
            sys.stdout.buffer.write(render_data(site.snapshots(), site.assembled_at, node_settings(config),
                                                pretty=args.pretty))
        else:
            from glueinfo.glue.build import write_site
            from glueinfo.glue.glue2.ces import Glue2Error
            from glueinfo.glue.glue2.publish import glue2_ldif_tail, publishes

            problems: list[Any] = []
            glue13 = publishes(config, "1.3")
            try:
                if glue13:
                    build = write_site(site, out, publish_hosts=False if args.no_hosts else None)
                    for warning in build.warnings:
                        log.info("%s", warning)
                    problems.extend(build.errors)
                text, glue2 = glue2_ldif_tail(site, config, site.assembled_at, after_glue13=glue13)
            except (TemplateError, Glue2Error) as exc:
                raise UsageError(str(exc)) from None
            out.write(text)
            if glue2 is not None:
                for warning in glue2.warnings:
                    log.info("%s", warning)
                problems.extend(glue2.errors)
            for problem in problems:
                print(f"glueinfo: left out {problem}", file=sys.stderr)
    assembler.close()
    out.flush()
    return 1 if not result.hosts and result.failures else 0
