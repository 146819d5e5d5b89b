"""``glueinfo crr-json``: the site's WLCG Computing Resource Reporting (CRR) document.

The site is assembled as `ldif` assembles it (glueinfo.site.assemble) and the
document is made by the publish layer (glueinfo.catalogs.crr, docs/crr.md),
the same bytes ``[run] crr_file`` holds and ``/crr.json`` serves.  A site with
neither ``[site] name`` nor ``id`` has no CRR document: nothing is printed, one
line on stderr says why, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys

from glueinfo.core.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snapshots", action="append", default=[], metavar="PATH",
                        help="build the site from these snapshot files (JSON, as `glueinfo probe` prints) instead of the sources")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.site_options import assemble_once, clock_from_environment, print_documents, publisher_for, site_config

    config = site_config(args, config)
    clock = clock_from_environment()
    site = assemble_once(args, config, clock, args.snapshots)
    # No endpoint is connected to: the CRR states no health, only what the GLUE 2 renderer resolves.
    documents = publisher_for(args, config, check_health=False).documents(site)
    print_documents(documents, "crr-json")
    if documents.crr_json is None:
        print("glueinfo: no CRR document: set [site] name (the site's GOCDB name) or [site] id", file=sys.stderr)
        return 1
    return 0
