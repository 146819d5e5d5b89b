"""``glueinfo glue2-json``: the site's GLUE 2 objects in the OGF GLUE 2 JSON rendering.

The site is assembled as `ldif` assembles it (glueinfo.site.assemble), the
endpoints are checked (glueinfo.glue.glue2.health), and the same entries as
the o=glue tree, checked against GLUE20.schema, are printed as JSON
(glueinfo.glue.glue2.json).  Entries the schema check leaves out are named
on stderr and make the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys

from glueinfo.core.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snapshots", action="append", default=[], metavar="PATH",
                        help="build the site from these snapshot files (JSON, as `glueinfo probe` prints) instead of the sources")
    parser.add_argument("--no-health-check", action="store_true",
                        help="do not connect to the endpoints (HealthState unknown, 'not checked')")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.commands.ldif import read_snapshots, report_warnings
    from glueinfo.commands.site_options import clock_from_environment, make_assembler, site_config
    from glueinfo.glue.glue2 import check_endpoints, check_glue2, glue2_entries, glue2_options, load_glue2_schema
    from glueinfo.glue.glue2.ces import health_targets
    from glueinfo.glue.glue2.json import glue2_json
    from glueinfo.site.assemble import assemble_snapshots, default_local_fqdn

    config = site_config(args, config)
    clock = clock_from_environment()
    if args.snapshots:
        site = assemble_snapshots(config, read_snapshots(args.snapshots), clock)
    else:
        site = make_assembler(args, config, clock=clock).once()
    health = {} if args.no_health_check else check_endpoints(health_targets(site.model, default_local_fqdn(config)))
    warnings: list[str] = []
    entries = glue2_entries(site, glue2_options(config), health=health, now=clock(), warnings=warnings)
    build = check_glue2(entries, load_glue2_schema(site.model.glue.schema_dir))
    json.dump(glue2_json(build.entries), sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    report_warnings([*warnings, *build.warnings], args.verbose)
    for problem in build.errors:
        print(f"glueinfo: left out {problem}", file=sys.stderr)
    return 1 if build.errors else 0
