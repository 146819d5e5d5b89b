"""`glueinfo publish`: synchronise the site's GLUE trees into an LDAP server (ldap3).

    glueinfo publish --ldap ldap://HOST:PORT --bind-dn DN --password-file FILE

(or [ldap] url / bind_dn / password_file in the config).  The trees are the
ones `glueinfo ldif` prints ([glue] versions), made by the publish layer
(glueinfo.publish); each base is written bound as the identity for its
suffix (glueinfo.publish.outputs.ldap: ``--bind-dn 'o=grid; o=glue'`` with
one password file per DN, as BDII's server is laid out).  Then it adds, modifies only changed attributes
and deletes so the server's tree under the base ([glue] base_dn) equals it;
a run with nothing changed sends no writes.  --extra-base (or [ldap]
extra_bases) adds further subtrees, e.g. GLUE2GroupID=resource,o=glue, kept
equal to the entries below them in the same run.  Every write the server
refuses is printed with its DN, result code and message, and the exit code
is 1; the other writes still go ahead.  A CE whose queue its batch system
does not have is published (Closed, without counts) and makes the exit code
1 too, after its one ERROR line (glueinfo.lrms.queues).  An unreachable server is one line on
stderr and exit 1.

On a terminal (stderr a TTY) a progress line says what the command is doing
once it has run a second (gathering, asking the batch systems, assembling,
rendering: glueinfo.commands.progress), then counts the writes as the server
answers them and ends as the summary; otherwise only the one-line summary is
printed on stderr, after the refusals.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Optional

from glueinfo.core.config import Config
from glueinfo.site.assemble import AssembledSite, SiteAssembler

if TYPE_CHECKING:
    from glueinfo.glue.ldapsync import PublishReport
    from glueinfo.site.publish_settings import PublishSettings

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ldap", metavar="URL", help="LDAP server, e.g. ldap://127.0.0.1:2170 (config: [ldap] url)")
    parser.add_argument("--bind-dn", metavar="DN", help="DN to bind as, or one DN per suffix separated by ';' as BDII "
                                                        "lays its server out, e.g. 'o=grid; o=glue' (config: [ldap] bind_dn)")
    parser.add_argument("--password-file", metavar="FILE", help="file whose first line is the bind password: one for "
                                                                "all DNs or one per DN separated by ';' "
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


def adopt_from_server(assembler: SiteAssembler, settings: PublishSettings) -> None:
    """Adopt the SubCluster ids the server publishes (glueinfo.site.ids): the first publish by
    this glueinfo keeps them instead of renaming SubClusters.  A server that cannot be read
    is left to the sync to report."""
    from glueinfo.glue.ldap_connection import PublishError
    from glueinfo.publish.outputs.ldap import published_hosts

    try:
        entries = published_hosts(settings)
    except PublishError as exc:
        log.debug("SubCluster ids not adopted from %s: %s", settings.ldap.url, exc)
        return
    assembler.adopt_published(entries, settings.ldap.url)


def published_site(args: argparse.Namespace, config: Config, clock: Callable[[], float],
                   settings: PublishSettings, on_stage: Callable[[str], None] = lambda text: None) -> AssembledSite:
    """The site to publish: the --snapshots files, else every source once with the state
    directory; an upgrade (no SubCluster ids remembered) keeps the ids the server already has.
    ``on_stage``: told each step as it starts (the progress line)."""
    from glueinfo.commands.site_options import assemble_once, make_assembler

    if args.snapshots:
        return assemble_once(args, config, clock, args.snapshots, on_stage)

    def adopt(assembler: SiteAssembler) -> None:
        if assembler.ids.is_empty():
            on_stage("reading the SubCluster ids the server publishes")
            adopt_from_server(assembler, settings)

    return make_assembler(args, config, clock=clock).once(on_stage, after_state=adopt)


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
    from glueinfo.cli import long_lived_objects
    from glueinfo.commands.ldif import report_warnings
    from glueinfo.commands.progress import Progress
    from glueinfo.commands.site_options import clock_from_environment, publisher_for, site_config
    from glueinfo.core.errors import UsageError
    from glueinfo.core.gc_pause import collector_paused
    from glueinfo.glue.glue2.publish import load_times, save_times
    from glueinfo.glue.ldap_connection import PublishError
    from glueinfo.glue.ldap_state import default_state_file
    from glueinfo.lrms.queues import missing_queues
    from glueinfo.publish.outputs.ldap import infosys_target, ldap_targets, publish_bases, sync_site

    overrides = {key: value for key, value in (("url", args.ldap), ("bind_dn", args.bind_dn),
                                                 ("password_file", args.password_file)) if value is not None}
    if overrides:
        config = config.with_values("ldap", **overrides)
    if args.base:  # the tree is rendered under the base it is published under
        config = config.with_values("glue", base_dn=args.base)
    ldap = config.section("ldap")
    url = ldap["url"]
    if not url:
        raise UsageError("publish: no LDAP server: give --ldap ldap://HOST:PORT or [ldap] url")
    if ldap["bind_dn"] and not ldap["password_file"]:
        raise UsageError("publish: --bind-dn needs --password-file (or [ldap] password_file)")
    config = site_config(args, config)
    clock = clock_from_environment()
    state_file = None if args.no_state else (args.state_file or default_state_file(url, config.get("glue", "base_dn")))
    # GLUE 2 CreationTimes are kept beside the LDAP state: an unchanged entry is not renewed (rewritten) every run
    times_file = f"{state_file}.glue2-times" if state_file else None
    publisher = publisher_for(args, config, times=load_times(times_file) if times_file else None)
    settings = publisher.settings
    try:  # an unreadable password file or a base no bind DN can write: the config is wrong (exit 2, not 1)
        targets = ldap_targets(settings, publish_bases(settings, tuple(args.extra_base)), state_file)
    except PublishError as exc:
        raise UsageError(f"publish: {exc}") from None

    started = time.monotonic()
    with Progress("publish") as stages:  # on a terminal only, after a second; the writes' own line follows
        # The snapshots, and then the entries, live until the process ends: keep the cyclic GC from
        # walking their millions of objects again and again (as ldif does; at 10,000 hosts its full
        # collections while the trees were rendered took 2.6 s).
        with long_lived_objects():
            site = published_site(args, config, clock, settings, stages.stage)
        collected = time.monotonic()
        stages.stage("rendering the trees")
        with long_lived_objects():
            documents = publisher.documents(site)
            entries = documents.entries()  # TemplateError, Glue2Error: the config is wrong, exit 2
    if times_file and publisher.times is not None and documents.glue2 is not None:
        unsaved = save_times(times_file, publisher.times)
        if unsaved:
            log.warning("%s", unsaved)
    built = time.monotonic()
    report_warnings(documents.warnings, args.verbose)
    left_out = documents.errors
    for problem in left_out:
        print(f"glueinfo: left out {problem}", file=sys.stderr)
    progress = ProgressLine(sys.stderr) if sys.stderr.isatty() else None
    try:
        with collector_paused():  # the server's DNs and entryCSNs: acyclic, tens of thousands of them
            report = sync_site(entries, targets, progress=progress, stats=infosys_target(settings))
    except PublishError as exc:
        if progress is not None:
            progress.clear()
        print(f"glueinfo: publish: {exc}", file=sys.stderr)
        return 1
    if progress is not None:
        progress.clear()  # the refusals and the summary take its place
    for rejection in report.rejected:
        print(f"glueinfo: {rejection}", file=sys.stderr)
    bases = tuple(base for target in targets for base in target.bases)
    print(summary_line(url, bases, report), file=sys.stderr)
    log.info("published to %s under %s: %s", url, " + ".join(bases), report.summary())
    if args.stats:  # the sync's own figures, and how long reading the hosts and building the tree took
        print(json.dumps({**report.as_dict(), "hosts_s": round(collected - started, 3), "build_s": round(built - collected, 3)}))
    return 0 if report.ok and not left_out and not missing_queues(site.states.values()) else 1
