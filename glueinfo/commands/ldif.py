"""`glueinfo ldif`: the site's GLUE trees as LDIF on stdout (a BDII provider): GLUE 1.3 (o=grid) and GLUE 2 (o=glue).

The site is assembled as every command assembles it (glueinfo.site.assemble:
the enabled [sources], this host among them when ``local`` is enabled, the
[node] site_snapshots files, the state directory's last good hosts and
SubCluster ids when it exists), each CE's LRMS is asked once, and the trees
``[glue] versions`` names (or ``--glue``) are made by the publish layer
(glueinfo.publish), checked against the installed GLUE schemas and printed.
``--snapshots`` renders exactly the given snapshot files instead.  Entries
left out are reported on stderr by DN, and the exit code is then 1.  So is a
CE whose queue its batch system does not have (a mistyped ``queue``): its
one ERROR line was logged when the LRMS was asked, and the LDIF is still
printed whole (the CE Closed, without counts), so a BDII keeps the rest of
the site (glueinfo.lrms.queues).

On a terminal, a progress line on stderr says what takes the time
(glueinfo.commands.progress); never in a pipe to BDII.

`glueinfo ldif --check FILE` only checks an LDIF file (any provider's) the
same way and prints one line per problem.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from glueinfo.core.config import Config
from glueinfo.core.model import HostSnapshot

log = logging.getLogger(__name__)

SHOWN_WARNINGS = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-hosts", action="store_true",
                        help="publish only site, cluster, SubCluster and CE entries (no GlueHost or file systems)")
    parser.add_argument("--check", metavar="FILE",
                        help="check an LDIF file ('-' for stdin) against the GLUE schema instead of rendering")
    parser.add_argument("--glue", choices=("1.3", "2.0"), action="append", metavar="VERSION",
                        help="print only this GLUE version's tree: 1.3 (o=grid) or 2.0 (o=glue); repeatable "
                             "(default: [glue] versions, both)")
    parser.add_argument("--snapshots", action="append", default=[], metavar="PATH",
                        help="host snapshots (JSON from `glueinfo probe`, one or a list, or Node XML; a directory: "
                             "its *.json and *.xml) rendered as the whole site instead of gathering it (repeatable)")


def read_snapshots(paths: list[str]) -> list[HostSnapshot]:
    """Every snapshot in these files and directories, read as [node] site_snapshots are
    (glueinfo.gather.snapshot_files: JSON or Node XML); the first one that cannot be read is a
    one-line UsageError."""
    from glueinfo.core.errors import UsageError
    from glueinfo.gather.snapshot_files import read_snapshot_file, snapshot_paths

    snapshots: list[HostSnapshot] = []
    for path in paths:
        if not os.path.exists(path):
            raise UsageError(f"--snapshots {path}: no such file")
        try:
            for name in snapshot_paths(path):
                snapshots.extend(read_snapshot_file(name, follow_symlinks=name == path))
        except OSError as exc:
            raise UsageError(f"--snapshots {path}: cannot list: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageError(f"--snapshots {exc}") from None
    return snapshots


def report_warnings(warnings: list[str], verbose: int) -> None:
    shown = warnings if verbose else warnings[:SHOWN_WARNINGS]
    for warning in shown:
        log.warning("%s", warning)
    if len(warnings) > len(shown):
        log.warning("... and %d more such warnings (-v shows all)", len(warnings) - len(shown))


def run_check(path: str, config: Config) -> int:
    from glueinfo.core.errors import UsageError
    from glueinfo.glue.schema import SchemaError, SchemaUnavailable, check_ldif_text, load_schema

    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--check {path}: cannot read: {exc}") from None
    schema_dir = config.get("glue", "schema_dir")
    try:
        schema = load_schema(schema_dir)
    except (SchemaUnavailable, SchemaError) as exc:
        raise UsageError(f"--check: {exc}") from None
    problems = check_ldif_text(text, schema)
    for problem in problems:
        print(problem)
    if problems:
        print(f"glueinfo: {path}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace, config: Config) -> int:
    if args.check:
        return run_check(args.check, config)

    from glueinfo.cli import long_lived_objects

    with long_lived_objects():  # modules: they live until the process ends (see below)
        from glueinfo.commands.progress import Progress
        from glueinfo.commands.site_options import assemble_once, clock_from_environment, print_documents, publisher_for, site_config
        from glueinfo.lrms.queues import missing_queues

    config = site_config(args, config)
    clock = clock_from_environment()
    with Progress("ldif") as progress:  # on a terminal only (never BDII's pipe), after a second
        # The modules, the snapshots and the publisher live until the process ends: keep the
        # cyclic GC from walking their millions of objects again and again while the tree is built.
        with long_lived_objects():
            site = assemble_once(args, config, clock, args.snapshots, progress.stage)
            documents = publisher_for(args, config, versions=tuple(args.glue) if args.glue else None).documents(site)
        progress.stage("rendering the LDIF")
        if sys.stdout.isatty():  # the LDIF is written as it is rendered: to this terminal, in place of the line
            progress.pause()
        print_documents(documents, "ldif")
    report_warnings(documents.warnings, args.verbose)
    for problem in documents.errors:
        print(f"glueinfo: left out {problem}", file=sys.stderr)
    return 1 if documents.errors or missing_queues(site.states.values()) else 0
