"""The ``ldap`` output: the site's trees synchronised into an LDAP server, bound as BDII binds.

``[ldap] url`` is the server; ``bind_dn`` one DN, or one per suffix
separated by ';' (BDII's layout: ``o=grid; o=glue; o=infosys``, each
database with its own rootdn), with ``password_file`` one file for all or
one per DN.  Each base ([glue] base_dn, then ``extra_bases`` or the GLUE 2
subtree) is written bound as the DN that shares the longest suffix with it.
Writes the server refuses are reported by DN and reason
(:class:`~glueinfo.glue.ldapsync.Rejection`); ``glueinfo publish`` exits 1
on any, the daemon logs them and counts them in ``/metrics``.

In the daemon (:class:`LdapSync`) a server that cannot be used is retried
with doubling waits while the other outputs keep publishing, and fully
re-synchronised when it answers again.

After each synchronisation the server's BDII statistics entry is written as
bdii-update writes it each cycle (:func:`write_update_stats`):
``Hostname=<the URL's host>,o=infosys``, objectClass ``UpdateStats`` of
/etc/bdii/BDII.schema, every figure replaced, so its ``modifyTimestamp``
says when the tree was last brought up to date (ARGO's org.bdii.Freshness
reads it).  It is written bound as the identity for ``o=infosys``; a server
without an o=infosys database or without BDII's schema (not a BDII), or a
config with no identity for o=infosys, is skipped with a DEBUG line; any
other refusal is one WARNING and never fails the publish.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import urlsplit

from glueinfo.core.backoff import next_wait
from glueinfo.core.files import read_password_file
from glueinfo.core.ldif import DNError, dn_key, make_dn, parse_dn
from glueinfo.core.runstats import JobStats
from glueinfo.core.text import one_line
from glueinfo.glue.ldap_connection import LdapTarget, PublishError
from glueinfo.glue.ldapsync import PublishReport, Rejection, sync_keyed
from glueinfo.publish.outputs import OutputContext, OutputPlugin, OutputResult, Publication

if TYPE_CHECKING:
    from glueinfo.core.ldif import Entry
    from glueinfo.site.publish_settings import LdapBind, LdapSettings, PublishSettings

log = logging.getLogger(__name__)

INFOSYS = "o=infosys"  # BDII's third database: its own statistics


@dataclass
class LdapOutcome:
    """What one synchronisation did.  ``error`` set: the server could not be used at all."""

    added: int = 0
    modified: int = 0
    deleted: int = 0
    rejected: list[str] = field(default_factory=list)  # one line each, starting with the DN
    error: Optional[str] = None


def refusal_summary(rejected: Sequence[str]) -> str:
    """One line for a cycle's refusals: how many writes the server refused, how many entries below
    them were therefore not sent, and the first refusal by DN and reason."""
    not_sent = [line for line in rejected if ": add refused: notSent (0)" in line]
    refused = [line for line in rejected if line not in not_sent] or not_sent
    below = f" ({len(not_sent)} entries below them not sent)" if not_sent and refused is not not_sent else ""
    return f"{len(refused)} writes refused{below}, first: {refused[0]}"


class LdapSync:
    """Calls ``sync(entries)`` after each publish, backing off while the server fails.

    While the server is down, attempts are spaced ``retry_min`` doubling to
    ``retry_max`` seconds; publishes in between skip the LDAP step (the files
    are still written).  The sync compares the new tree with what the server
    holds, so the first attempt that succeeds after an outage is a full
    re-synchronisation.
    """

    def __init__(self, sync: Callable[[Sequence[Any]], LdapOutcome], retry_min_s: float, retry_max_s: float,
                 clock: Callable[[], float] = time.time, url: str = "") -> None:
        self.sync = sync
        self.retry_min_s, self.retry_max_s = retry_min_s, retry_max_s
        self.clock = clock
        self.url = url
        self.backoff_s = 0.0
        self.next_attempt_at = 0.0
        self.failing_since: Optional[float] = None
        self.stats = JobStats()
        self.last: Optional[LdapOutcome] = None
        self.refused_total = 0  # writes refused since start (/metrics)

    def maybe_sync(self, entries: Sequence[Any]) -> Optional[LdapOutcome]:
        now = self.clock()
        if now < self.next_attempt_at:
            log.debug("LDAP %s: next attempt in %.1f s", self.url, self.next_attempt_at - now)
            return None
        began = time.perf_counter()
        self.stats.runs += 1
        self.stats.last_started_at = now
        try:
            outcome = self.sync(entries)
        except Exception as exc:  # a bug or an unexpected library error must not stop the provider
            outcome = LdapOutcome(error=f"{type(exc).__name__}: {one_line(exc)}")
        self.stats.last_duration_s = time.perf_counter() - began
        self.last = outcome
        if outcome.error is not None:
            self.stats.failures += 1
            self.stats.last_error = outcome.error
            self.backoff_s = next_wait(self.backoff_s, self.retry_min_s, self.retry_max_s)
            self.next_attempt_at = self.clock() + self.backoff_s
            if self.failing_since is None:
                self.failing_since = now
            log.warning("LDAP %s: %s; local files keep being updated; next attempt in %.0f s",
                        self.url, outcome.error, self.backoff_s)
            return outcome
        if self.failing_since is not None:
            log.info("LDAP %s: answering again after %.0f s: full re-sync: %d added, %d modified, %d deleted",
                     self.url, now - self.failing_since, outcome.added, outcome.modified, outcome.deleted)
        self.failing_since = None
        self.backoff_s = 0.0
        self.next_attempt_at = 0.0
        self.refused_total += len(outcome.rejected)
        if outcome.rejected:  # one WARNING per cycle, every refusal at DEBUG
            log.warning("LDAP %s: %s", self.url, refusal_summary(outcome.rejected))
        for line in outcome.rejected:
            log.debug("LDAP %s: %s", self.url, line)
        if outcome.rejected:
            self.stats.failures += 1
            self.stats.last_error = f"{len(outcome.rejected)} entries rejected"
        else:
            self.stats.last_success_at = now
            self.stats.last_error = None
        return outcome

    def to_dict(self) -> dict[str, Any]:
        last = self.last
        return {"url": self.url, **self.stats.to_dict(),
                "state": "waiting" if self.next_attempt_at else "ok" if last is None or not last.rejected else "rejecting",
                "next_attempt_at": self.next_attempt_at or None,
                "rejected": list(last.rejected) if last is not None else [],
                "last": None if last is None else {"added": last.added, "modified": last.modified, "deleted": last.deleted}}


def _rdns(dn: str) -> list[str]:
    """The DN's RDNs as case-folded ``type=value`` texts, as the DN parser reads them (escaped
    commas stay inside their value); a DN that does not parse has none."""
    try:
        return ["+".join(f"{name}={value}".casefold() for name, value in rdn) for rdn in parse_dn(dn)]
    except DNError:
        return []


def identity_for(base: str, binds: tuple[LdapBind, ...]) -> LdapBind:
    """The identity that writes ``base``: the bind DN sharing the longest suffix of RDNs with it
    (``o=glue`` writes ``GLUE2GroupID=resource,o=glue``; ``cn=manager,o=grid`` writes
    ``mds-vo-name=resource,o=grid``); the only one when one is given.  PublishError when several
    are given and none shares a suffix with the base."""
    if len(binds) == 1:
        return binds[0]
    wanted = _rdns(base)[::-1]
    best, best_len = None, 0
    for bind in binds:
        shared = 0
        for mine, theirs in zip(wanted, _rdns(bind.dn)[::-1], strict=False):
            if mine != theirs:
                break
            shared += 1
        if shared > best_len:
            best, best_len = bind, shared
    if best is None:
        raise PublishError(f"no [ldap] bind_dn for the base {base}: none of {'; '.join(b.dn for b in binds)} "
                           "shares its suffix")
    return best


def read_password(path: str) -> str:
    """The first line of a password file ('' for no file); PublishError (one line) when unreadable."""
    try:
        return read_password_file(path, "[ldap] password_file")
    except ValueError as exc:
        raise PublishError(str(exc)) from None


def ldap_targets(settings: PublishSettings, bases: tuple[str, ...], state_file: Optional[str] = None) -> list[LdapTarget]:
    """The [ldap] server's :func:`targets_for` these bases."""
    return targets_for(settings.ldap, bases, state_file)


def targets_for(ldap: LdapSettings, bases: tuple[str, ...], state_file: Optional[str] = None) -> list[LdapTarget]:
    """One LdapTarget per identity, holding the bases it writes (in order), its password read now
    (a changed password applies without a restart).  With several identities each keeps its own
    state file beside ``state_file``."""
    grouped: dict[LdapBind, list[str]] = {}
    for base in bases:
        grouped.setdefault(identity_for(base, ldap.binds), []).append(base)
    targets = []
    for index, (bind, own) in enumerate(grouped.items()):
        state = state_file if state_file is None or len(grouped) == 1 else f"{state_file}.{index}"
        targets.append(LdapTarget(url=ldap.url, bind_dn=bind.dn, password=read_password(bind.password_file),
                                  base_dn=own[0], timeout_s=ldap.timeout_s, state_file=state,
                                  extra_bases=tuple(own[1:]), window=ldap.window))
    return targets


def published_hosts(settings: PublishSettings) -> list[Entry]:
    """The GlueHost entries the [ldap] server holds under [glue] base_dn, read bound as the
    identity of that base (an upgrade adopts their SubCluster ids); PublishError (one line) when
    the server or the password file cannot be read."""
    from glueinfo.glue.published import read_hosts

    return read_hosts(ldap_targets(settings, (settings.base_dn,))[0])


def publish_bases(settings: PublishSettings, extra_bases: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The subtrees kept equal to what glueinfo publishes: [glue] base_dn when GLUE 1.3 is
    published, then ``extra_bases`` (else [ldap] extra_bases, else the GLUE 2 subtree when GLUE 2
    is published).  A tree ``versions`` leaves out is never touched."""
    from glueinfo.publish.documents import glue2_base

    extra = extra_bases or settings.ldap.extra_bases
    if not extra and (glue2_subtree := glue2_base(settings)):
        extra = (glue2_subtree,)  # o=glue kept equal like o=grid
    # A base in the suffix of a tree the versions leave out would be emptied: it is not synced.
    left_out = {suffix for suffix, version in (("o=grid", "1.3"), ("o=glue", "2.0")) if not settings.publishes(version)}
    skipped = [base for base in extra if _rdns(base)[-1:] and _rdns(base)[-1] in left_out]
    if skipped:
        log.info("[ldap] extra_bases %s: not synchronised, [glue] versions leaves that tree out",
                 "; ".join(skipped))
    extra = tuple(base for base in extra if base not in skipped)
    bases = ((settings.base_dn,) if settings.publishes("1.3") else ()) + extra
    seen: dict[str, str] = {}
    for base in bases:
        seen.setdefault(dn_key(base), base)
    return tuple(seen.values())


def sync_site(entries: Sequence[Entry], targets: Sequence[LdapTarget],
              progress: Optional[Callable[[int, int], None]] = None, stats: Optional[LdapTarget] = None) -> PublishReport:
    """Make each target's bases equal to the entries below them, bound as that target's identity,
    one after the other; one report for all.  Entries below none of the bases are not sent and
    are reported as refused.  PublishError when a server or identity cannot be used at all (the
    targets synchronised before it stay written).  ``stats`` (:func:`infosys_target`): where the
    BDII statistics entry of this synchronisation is then written (:func:`write_update_stats`)."""
    total = PublishReport()
    keyed = [(dn_key(entry.dn), entry) for entry in entries]
    below_any = tuple("," + dn_key(base) for target in targets for base in target.bases)
    bases = [base for target in targets for base in target.bases]
    where = f"the base {bases[0]}" if len(bases) == 1 else f"any of the bases {', '.join(bases)}"
    for key, entry in keyed:
        if not key.endswith(below_any):
            total.rejected.append(Rejection(entry.dn, "add", 0, "notSent", f"not below {where}"))
    for target in targets:
        own = tuple("," + dn_key(base) for base in target.bases)
        report = sync_keyed([(key, entry) for key, entry in keyed if key.endswith(own)], target, progress=progress)
        for name in ("added", "modified", "deleted", "unchanged", "compared_in_full", "writes"):
            setattr(total, name, getattr(total, name) + getattr(report, name))
        total.rejected.extend(report.rejected)
        total.seconds += report.seconds
    if stats is not None:
        write_update_stats(stats, total)
    return total


def infosys_target(settings: PublishSettings) -> Optional[LdapTarget]:
    """The [ldap] server's :func:`infosys_for`."""
    return infosys_for(settings.ldap)


def infosys_for(ldap: LdapSettings) -> Optional[LdapTarget]:
    """The identity that writes BDII's statistics under o=infosys (as :func:`identity_for` picks
    one for a base), or None, said at DEBUG, when the [ldap] bind DNs have none for it; None after
    one WARNING when its password file cannot be read."""
    try:
        bind = identity_for(INFOSYS, ldap.binds)
    except PublishError:
        log.debug("LDAP %s: no [ldap] bind_dn writes %s: BDII statistics not kept", ldap.url, INFOSYS)
        return None
    try:
        password = read_password(bind.password_file)
    except PublishError as exc:
        log.warning("LDAP %s: BDII statistics (%s) not kept: %s", ldap.url, INFOSYS, one_line(exc))
        return None
    return LdapTarget(url=ldap.url, bind_dn=bind.dn, password=password, base_dn=INFOSYS, timeout_s=ldap.timeout_s)


def update_stats(report: PublishReport) -> dict[str, int]:
    """The UpdateStats figures (BDII.schema's MUST attributes) of one synchronisation, as bdii-update
    counts a cycle: the entries the server now holds below the bases (TotalEntries), those added,
    modified and deleted, the writes refused by kind, and whole seconds.  bdii-update's phases glueinfo
    does not have (running providers and plugins, querying the result) took 0 s; reading what the
    server held is part of the synchronisation (DBUpdateTime)."""
    refused = {kind: sum(1 for r in report.rejected if r.operation == kind and r.result != "notSent")
               for kind in ("add", "modify", "delete")}
    seconds = int(report.seconds)
    return {"TotalEntries": report.added + report.modified + report.unchanged, "UpdateTime": seconds,
            "DBUpdateTime": seconds, "NewEntries": report.added, "ModifiedEntries": report.modified,
            "DeletedEntries": report.deleted, "FailedAdds": refused["add"], "FailedModifies": refused["modify"],
            "FailedDeletes": refused["delete"], "QueryTime": 0, "ProvidersTime": 0, "PluginsTime": 0, "ReadTime": 0}


def write_update_stats(target: LdapTarget, report: PublishReport) -> bool:
    """Write ``Hostname=<the URL's host>,o=infosys`` (objectClass UpdateStats) with this
    synchronisation's figures: every value replaced, so slapd renews its modifyTimestamp; added
    when missing, as bdii-update does.  Returns whether it was written.  Never raises: a server
    that is no BDII (no o=infosys, no BDII.schema) is skipped at DEBUG, any other failure is one
    WARNING."""
    import ldap3
    from ldap3.core.exceptions import LDAPException

    from glueinfo.glue.ldap_connection import connect

    host = urlsplit(target.url).hostname or "localhost"
    dn = make_dn("Hostname", host, INFOSYS)
    figures = update_stats(report)
    try:
        conn = connect(target)
    except PublishError as exc:
        log.warning("LDAP %s: BDII statistics %s not written: %s", target.url, dn, one_line(exc))
        return False
    try:
        # Read before writing: a server that is no BDII gets no write at all (its Hostname is no attribute
        # there, so the DN does not parse: invalidDNSyntax; without o=infosys nothing matches above the entry).
        conn.search(dn, "(objectClass=*)", search_scope=ldap3.BASE, attributes=["1.1"])
        result = conn.result or {}
        code = result.get("result")
        if code == 0:
            conn.modify(dn, {name: [(ldap3.MODIFY_REPLACE, [str(value)])]  # type: ignore[no-untyped-call]  # types-ldap3
                             for name, value in figures.items()})
        elif code == 32 and dn_key(str(result.get("dn") or "")) == dn_key(INFOSYS):  # the first time, bdii-update adds it
            conn.add(dn, ["UpdateStats"],  # type: ignore[no-untyped-call]  # types-ldap3 leaves add unannotated
                     {"Hostname": host, **{name: str(value) for name, value in figures.items()}})
        else:
            log.debug("LDAP %s: BDII statistics not kept, the server is no BDII (no %s database or no BDII.schema): "
                      "%s (%s)", target.url, INFOSYS, result.get("description"), code)
            return False
        result = conn.result or {}
    except (LDAPException, OSError) as exc:  # a connection lost midway: said, not the publish's concern
        log.warning("LDAP %s: BDII statistics %s not written: %s: %s", target.url, dn, type(exc).__name__, one_line(exc))
        return False
    finally:
        try:
            conn.unbind()
        except (LDAPException, OSError):  # the connection may already be gone; nothing to clean up
            pass
    code = result.get("result")
    if code == 0:
        return True
    log.warning("LDAP %s: BDII statistics %s not written, bound as %s: %s (%s) %s", target.url, dn,
                target.bind_dn or "anonymous", result.get("description", "error"), code, result.get("message", ""))
    return False


def make_ldap_sync(settings: PublishSettings, state_dir: str) -> Callable[[Sequence[Any]], LdapOutcome]:
    """The daemon's synchronisation step into [ldap] url (see the module docstring); the state
    file lives in [run] state_dir."""
    state_file = os.path.join(state_dir, "ldap-publish.json") if state_dir else None

    def sync(entries: Sequence[Any]) -> LdapOutcome:
        try:
            report = sync_site(entries, ldap_targets(settings, publish_bases(settings), state_file),
                               stats=infosys_target(settings))
        except PublishError as exc:
            return LdapOutcome(error=one_line(exc))
        return LdapOutcome(added=report.added, modified=report.modified, deleted=report.deleted,
                           rejected=[one_line(r) for r in report.rejected])

    return sync


class LdapOutput:
    """The daemon's ``ldap`` output: every entry synchronised after each publish, with backoff
    while the server fails; an unchanged publish only retries a server that is waiting."""

    name = "ldap"

    def __init__(self, sync: LdapSync) -> None:
        self.sync = sync
        self.last_entries: list[Any] = []  # kept only for a server that comes back to be retried with

    def publish(self, publication: Publication) -> OutputResult:
        documents = publication.documents
        if documents is None:
            if self.sync.next_attempt_at and self.last_entries:
                outcome = self.sync.maybe_sync(self.last_entries)  # a server coming back need not wait for news
                return self._result(outcome)
            last = self.sync.last
            if last is not None and (last.rejected or last.error is not None):
                # Nothing new to write, but what the server refused is still missing there.
                return OutputResult(error=last.error or refusal_summary(last.rejected))
            return OutputResult()
        self.last_entries = documents.entries()
        return self._result(self.sync.maybe_sync(self.last_entries))

    @staticmethod
    def _result(outcome: Optional[LdapOutcome]) -> OutputResult:
        if outcome is None:
            return OutputResult(note="LDAP waiting to retry", error="waiting to retry the LDAP server")
        if outcome.error is not None:
            return OutputResult(note="LDAP failed", error=outcome.error)
        note = f"LDAP +{outcome.added} ~{outcome.modified} -{outcome.deleted}"
        if outcome.rejected:
            return OutputResult(note=f"{note} ({len(outcome.rejected)} refused)", written=True,
                                error=refusal_summary(outcome.rejected))
        return OutputResult(note=note, written=bool(outcome.added or outcome.modified or outcome.deleted))


def _make(context: OutputContext) -> LdapOutput:
    settings = context.settings
    if not settings.ldap.url:
        raise ValueError("[ldap] url is not set")
    run = context.sections.get("run", {})
    factory = context.options.get("ldap_sync_factory")
    sync = factory(settings, context.clock) if factory is not None else make_ldap_sync(settings, run.get("state_dir", ""))
    return LdapOutput(LdapSync(sync, float(run.get("ldap_retry_min", 5.0)),
                               max(float(run.get("ldap_retry_max", 300.0)), float(run.get("ldap_retry_min", 5.0))),
                               context.clock, url=settings.ldap.url))


OUTPUT = OutputPlugin("ldap", _make, description="synchronise the trees into [ldap] url, bound per suffix as BDII binds",
                      needs_entries=True)
