"""`glueinfo publish`: synchronise the GLUE 1.3 tree into an LDAP server (ldap3).

    glueinfo publish --ldap ldap://HOST:PORT --bind-dn DN --password-file FILE

(or [ldap] url / bind_dn / password_file in the config).  Builds the same
checked tree as `glueinfo ldif`, then adds, modifies only changed attributes
and deletes so the server's tree under the base ([glue] base_dn) equals it;
a run with nothing changed sends no writes.  --extra-base (or [ldap]
extra_bases) adds further subtrees, e.g. GLUE2GroupID=resource,o=glue, kept
equal to the entries below them in the same run.  Every write the server
refuses is printed with its DN, result code and message, and the exit code
is 1; the other writes still go ahead.  An unreachable server is one line on
stderr and exit 1.

On a terminal (stderr a TTY) a progress line counts the writes as the server
answers them and ends as the summary; otherwise only the one-line summary is
printed on stderr, after the refusals.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Optional

from glueinfo.core.config import Config
from glueinfo.site.assemble import SiteAssembler

if TYPE_CHECKING:
    from glueinfo.glue.ldapsync import PublishReport

log = logging.getLogger("glueinfo.publish")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ldap", metavar="URL", help="LDAP server, e.g. ldap://127.0.0.1:2170 (config: [ldap] url)")
    parser.add_argument("--bind-dn", metavar="DN", help="DN to bind as (config: [ldap] bind_dn)")
    parser.add_argument("--password-file", metavar="FILE", help="file whose first line is the bind password "
                                                                "(config: [ldap] password_file)")
    parser.add_argument("--base", metavar="DN", help="publish under this DN (config: [glue] base_dn)")
    parser.add_argument("--extra-base", action="append", default=[], metavar="DN",
                        help="also keep this subtree equal to the entries below it, e.g. GLUE2GroupID=resource,o=glue "
                             "(repeatable; config: [ldap] extra_bases)")
    parser.add_argument("--no-hosts", action="store_true", help="publish only site, cluster, SubCluster and CE entries")
    parser.add_argument("--snapshots", action="append", default=[], metavar="PATH",
                        help="host snapshots (JSON or Node XML files, or directories of them) rendered as the whole site "
                             "instead of gathering it (repeatable)")
    parser.add_argument("--state-file", metavar="FILE",
                        help="where to remember what was published (default: ~/.cache/glueinfo/publish-*.json)")
    parser.add_argument("--no-state", action="store_true", help="compare every entry with the server in full")
    parser.add_argument("--stats", action="store_true", help="print the outcome as one JSON line on stdout")


def read_password(path: str) -> str:
    from glueinfo.cli import UsageError

    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--password-file {path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def adopt_from_server(assembler: SiteAssembler, url: str, bind_dn: str, password: str, config: Config) -> None:
    """Adopt the SubCluster ids the server publishes (glueinfo.site.ids): the first publish by
    this glueinfo keeps them instead of renaming SubClusters.  A server that cannot be read
    is left to the sync to report."""
    from glueinfo.glue.ldapsync import LdapTarget, PublishError
    from glueinfo.glue.published import read_hosts

    target = LdapTarget(url=url, bind_dn=bind_dn, password=password, base_dn=config.get("glue", "base_dn"),
                        timeout_s=config.get("ldap", "timeout"), state_file=None)
    try:
        entries = read_hosts(target)
    except PublishError as exc:
        log.debug("SubCluster ids not adopted from %s: %s", url, exc)
        return
    assembler.adopt_published(entries, url)


class ProgressLine:
    """The writes answered so far, rewritten in place on a terminal at most every
    ``interval_s`` (the clock is passed in); ``clear`` blanks it for what follows."""

    def __init__(self, stream: IO[str], clock: Callable[[], float] = time.monotonic, interval_s: float = 0.2) -> None:
        self.stream, self.clock, self.interval_s = stream, clock, interval_s
        self.shown_at: Optional[float] = None
        self.width = 0

    def _show(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def __call__(self, answered: int, planned: int) -> None:
        now = self.clock()
        if answered < planned and self.shown_at is not None and now - self.shown_at < self.interval_s:
            return
        self.shown_at = now
        percent = 100 * answered // planned if planned else 100
        self._show(f"glueinfo: publish: {answered:,} of {planned:,} writes answered ({percent}%)")

    def clear(self) -> None:
        """Blank the line and go back to its start: what is printed next replaces it."""
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def summary_line(url: str, bases: tuple[str, ...], report: PublishReport) -> str:
    return (f"glueinfo: publish: {url} {' + '.join(bases)}: {report.added:,} added, {report.modified:,} modified, "
            f"{report.deleted:,} deleted, {report.unchanged:,} unchanged ({report.writes:,} writes, "
            f"{len(report.rejected):,} not accepted) in {report.seconds:.1f} s")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.cli import UsageError
    from glueinfo.commands.ldif import read_snapshots, report_warnings
    from glueinfo.glue.build import render_site
    from glueinfo.glue.glue2.publish import build_glue2, glue2_base, load_times, publishes, save_times
    from glueinfo.glue.ldapsync import LdapTarget, PublishError, default_state_file, split_bases, sync_tree
    from glueinfo.glue.templates import TemplateError

    settings = config.section("ldap")
    url = args.ldap or settings["url"]
    if not url:
        raise UsageError("publish: no LDAP server: give --ldap ldap://HOST:PORT or [ldap] url")
    bind_dn = args.bind_dn if args.bind_dn is not None else settings["bind_dn"]
    password_file = args.password_file or settings["password_file"]
    password = read_password(password_file) if password_file else ""
    if bind_dn and not password_file:
        raise UsageError("publish: --bind-dn needs --password-file (or [ldap] password_file)")
    if args.base:  # the tree is rendered under the base it is published under
        config = config.with_values("glue", base_dn=args.base)
    base = config.get("glue", "base_dn")

    started = time.monotonic()
    from glueinfo.commands.site_options import clock_from_environment, make_assembler, site_config

    config = site_config(args, config)
    clock = clock_from_environment()
    if args.snapshots:
        from glueinfo.site.assemble import assemble_snapshots

        site = assemble_snapshots(config, read_snapshots(args.snapshots), clock)
    else:
        assembler = make_assembler(args, config, clock=clock)
        assembler.open_state()
        if assembler.ids.is_empty():  # an upgrade: keep the SubCluster ids the server already has
            adopt_from_server(assembler, url, bind_dn, password, config)
        assembler.gather()
        assembler.refresh_lrms()
        site = assembler.assemble()
        assembler.close()
    collected = time.monotonic()
    # The snapshots live until the process ends: keep the cyclic GC from walking
    # their millions of objects again and again while the tree is built.
    gc.freeze()
    try:
        build = render_site(site, publish_hosts=False if args.no_hosts else None)
    except TemplateError as exc:
        raise UsageError(str(exc)) from None
    entries, left_out = list(build.entries), list(build.errors)
    state_file = None if args.no_state else (args.state_file or default_state_file(url, base))
    # GLUE 2 CreationTimes are kept beside the LDAP state: an unchanged entry is not renewed (rewritten) every run
    times_file = f"{state_file}.glue2-times" if state_file else None
    times = load_times(times_file) if times_file else None
    glue2 = build_glue2(site, config, site.assembled_at, times) if publishes(config, "2.0") else None
    if times_file and times is not None and glue2 is not None:
        unsaved = save_times(times_file, times)
        if unsaved:
            log.warning("%s", unsaved)
    if glue2 is not None:
        entries.extend(glue2.entries)
        left_out.extend(glue2.errors)
        report_warnings(glue2.warnings, args.verbose)
    built = time.monotonic()
    report_warnings(build.warnings, args.verbose)
    for problem in left_out:
        print(f"glueinfo: left out {problem}", file=sys.stderr)
    extra_bases = tuple(args.extra_base) or split_bases(settings["extra_bases"])
    if not extra_bases and (glue2_subtree := glue2_base(config)):
        extra_bases = (glue2_subtree,)  # o=glue kept equal like o=grid
    target = LdapTarget(url=url, bind_dn=bind_dn, password=password, base_dn=base, timeout_s=settings["timeout"],
                        state_file=state_file, extra_bases=extra_bases, window=settings["window"])
    progress = ProgressLine(sys.stderr) if sys.stderr.isatty() else None
    try:
        report = sync_tree(entries, target, progress=progress)
    except PublishError as exc:
        if progress is not None:
            progress.clear()
        print(f"glueinfo: publish: {exc}", file=sys.stderr)
        return 1
    if progress is not None:
        progress.clear()  # the refusals and the summary take its place
    for rejection in report.rejected:
        print(f"glueinfo: {rejection}", file=sys.stderr)
    print(summary_line(url, target.bases, report), file=sys.stderr)
    log.info("published to %s under %s: %s", url, base, report.summary())
    if args.stats:  # the sync's own figures, and how long reading the hosts and building the tree took
        print(json.dumps({**report.as_dict(), "hosts_s": round(collected - started, 3), "build_s": round(built - collected, 3)}))
    return 0 if report.ok and not left_out else 1
