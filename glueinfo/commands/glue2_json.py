"""``glueinfo glue2-json``: the site's GLUE 2 objects in the OGF GLUE 2 JSON rendering.

The site is assembled as `ldif` assembles it (glueinfo.site.assemble), the
endpoints are checked (glueinfo.glue.glue2.health), and the same entries as
the o=glue tree, checked against GLUE20.schema, are printed as JSON
(glueinfo.glue.glue2.json), made by the publish layer as every output makes
them.  Entries the schema check leaves out are named
on stderr and make the exit status 1.
"""

from __future__ import annotations

import argparse
import sys

from glueinfo.core.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snapshots", action="append", default=[], metavar="PATH",
                        help="build the site from these snapshot files (JSON, as `glueinfo probe` prints) instead of the sources")
    parser.add_argument("--no-health-check", action="store_true",
                        help="do not connect to the endpoints (HealthState unknown, 'not checked')")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.ldif import report_warnings
    from glueinfo.commands.site_options import assemble_once, clock_from_environment, print_documents, publisher_for, site_config

    config = site_config(args, config)
    clock = clock_from_environment()
    site = assemble_once(args, config, clock, args.snapshots)
    documents = publisher_for(args, config, check_health=not args.no_health_check).documents(site)
    print_documents(documents, "glue2-json")
    if documents.glue2 is None:
        print("glueinfo: [glue] versions leaves GLUE 2 out: no GLUE 2 objects", file=sys.stderr)
        return 1
    report_warnings(documents.glue2.warnings, args.verbose)
    for problem in documents.glue2.errors:
        print(f"glueinfo: left out {problem}", file=sys.stderr)
    return 1 if documents.glue2.errors else 0
