"""`glueinfo gather`: run every enabled source once and print the site's hosts.

The site is assembled as every command assembles it (glueinfo.site.assemble).
``--format json`` (default) prints every host with its freshness, sources
and merged snapshot, and every failure; ``summary`` one line a host;
``ldif`` the GLUE trees ``[glue] versions`` names, byte for byte what ``glueinfo ldif`` prints
(stale hosts kept out of free-CPU figures); ``node-xml`` a ``<Data>`` with
every host's Node (stale ones State Unknown), what ``node-xml --site`` prints;
both made by the publish layer (glueinfo.publish).  Failures are logged on stderr with the host's name;
the exit code is 1 only when no host at all could be gathered.  On a terminal, a
progress line on stderr says what takes the time (glueinfo.commands.progress).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from glueinfo.core.config import Config

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("json", "summary", "ldif", "node-xml"), default="json",
                        help="what to print (default json)")
    parser.add_argument("--pretty", action="store_true", help="indented JSON / XML for people")
    parser.add_argument("--no-hosts", action="store_true", help="with --format ldif: no GlueHost entries")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.progress import Progress, hosts
    from glueinfo.commands.site_options import make_assembler, site_config

    config = site_config(args, config)
    assembler = make_assembler(args, config)
    out = sys.stdout
    with Progress("gather") as progress:  # on a terminal only, after a second
        progress.stage("reading the state directory")
        assembler.open_state()
        progress.stage("gathering hosts")
        result = assembler.gather()
        if args.format in ("json", "summary"):
            progress.stage(f"writing {hosts(len(result.hosts))}")
            if out.isatty():
                progress.pause()
        if args.format == "json":
            out.write(json.dumps(result.to_dict(), indent=2 if args.pretty else None, ensure_ascii=False) + "\n")
        elif args.format == "summary":
            for host in result.hosts:
                sources = ", ".join(f"{name} {max(0.0, result.started_at - at):.0f}s ago" for name, at in host.sources.items())
                out.write(f"{host.snapshot.hostname}\t{'stale' if host.stale else 'fresh'}\t{sources}\n")
            out.write(f"# {len(result.hosts)} hosts, {sum(h.stale for h in result.hosts)} stale, "
                      f"{len(result.failures)} failures, {result.duration_s:.2f} s\n")
        else:
            from glueinfo.commands.site_options import print_documents, publisher_for

            progress.stage(f"asking the batch systems about {hosts(len(result.hosts))}")
            assembler.refresh_lrms()
            progress.stage(f"assembling {hosts(len(result.hosts))}")
            documents = publisher_for(args, config).documents(assembler.assemble())
            progress.stage("rendering the Node XML" if args.format == "node-xml" else "rendering the LDIF")
            if out.isatty():
                progress.pause()
            if args.format == "node-xml":
                print_documents(documents, "node-xml", pretty=args.pretty)
            else:
                print_documents(documents, "ldif")
        progress.stage("writing the state directory")
        assembler.close()
        out.flush()
    if args.format == "ldif":
        for warning in documents.warnings:
            log.info("%s", warning)
        for problem in documents.errors:
            print(f"glueinfo: left out {problem}", file=sys.stderr)
    return 1 if not result.hosts and result.failures else 0
