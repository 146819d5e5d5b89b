"""The federation view's LDAP server kept equal to what the sites pushed, writing only what changed.

At its start, after any failure and after any write the server refused, the
view reconciles the whole of both bases with the server
(glueinfo.glue.ldapsync.sync_tree: what is there and should not be is
deleted, what is missing added, what differs modified) and writes BDII's
statistics entry under o=infosys.  In between, when sites send, only the
difference between what a site had and what it has now is written
(glueinfo.glue.ldapsync.write_delta): a site whose CE changed its running
jobs costs one modify, not a comparison of every site's entries.  A
reconciliation also runs every ``full_sync_s`` seconds, so an entry someone
else changed is put right.

Binding follows the ``[ldap]`` section as the ldap output reads it: one
identity, or one per suffix as BDII lays out its server (``o=grid; o=glue;
o=infosys``).

Failure behaviour: a server that cannot be used is one WARNING (then INFO
while it lasts), tried again after ``retry_min`` doubling to ``retry_max``
seconds, and reconciled in full when it answers; the JSON side of the view
is never held up by it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.backoff import next_wait
from glueinfo.core.ldif import Entry, dn_key
from glueinfo.core.text import one_line
from glueinfo.glue.ldap_connection import ConnectionLost, LdapTarget, PublishError, connect
from glueinfo.glue.ldapsync import PublishReport, write_delta
from glueinfo.publish.outputs.ldap import infosys_for, sync_site, targets_for
from glueinfo.site.publish_settings import LdapSettings

log = logging.getLogger(__name__)


@dataclass
class LdapViewState:
    """What /metrics and /health show of the LDAP side."""

    writes_total: int = 0
    refused_total: int = 0
    full_syncs_total: int = 0
    last_success_at: Optional[float] = None
    last_error: Optional[str] = None
    failing_since: Optional[float] = None
    last_report: dict[str, int | float] = field(default_factory=dict)


EntriesOf = Callable[[Optional[set[str]]], Mapping[str, Mapping[str, Entry]]]  # site ids (None: all) -> their entries


class LdapView:
    """See the module docstring.  ``write(changed, entries_of)`` is called by the federation's loop
    with the ids of the sites that changed since the last call and where to get the placed
    entries of sites (of those only, unless a whole reconciliation is due)."""

    def __init__(self, ldap: LdapSettings, bases: tuple[str, str], state_file: Optional[str], retry_min_s: float = 5.0,
                 retry_max_s: float = 300.0, full_sync_s: float = 3600.0, clock: Callable[[], float] = time.time) -> None:
        self.ldap, self.bases, self.state_file = ldap, bases, state_file
        self.retry_min_s, self.retry_max_s, self.full_sync_s = retry_min_s, max(retry_min_s, retry_max_s), full_sync_s
        self.clock = clock
        self.held: dict[str, list[dict[str, Entry]]] = {}  # site -> per target: DN key -> entry as the server holds it
        self.needs_full = True
        self.last_full_at = 0.0
        self.next_attempt_at = 0.0
        self.backoff_s = 0.0
        self.state = LdapViewState()
        self._targets: Optional[list[LdapTarget]] = None  # made at each full reconciliation (passwords read then)
        self._connections: dict[str, Any] = {}  # bind DN -> a bound connection kept between writes

    def due(self) -> bool:
        """Whether a write should be tried now (not while backing off)."""
        return self.clock() >= self.next_attempt_at

    def write(self, changed: set[str], entries_of: EntriesOf) -> None:
        """Bring the server up to date (module docstring); never raises."""
        now = self.clock()
        if now < self.next_attempt_at:
            return
        if now - self.last_full_at >= self.full_sync_s:
            self.needs_full = True
        try:
            report = self._full(entries_of(None)) if self.needs_full else self._delta(entries_of(changed), changed)
        except PublishError as exc:
            self.close()
            self._failed(one_line(exc))
            return
        except Exception as exc:  # a bug must not stop the view; the next attempt reconciles in full
            log.warning("federation LDAP %s: %s: %s", self.ldap.url, type(exc).__name__, one_line(exc), exc_info=True)
            self.close()
            self._failed(f"{type(exc).__name__}: {one_line(exc)}")
            return
        if report is None:
            return
        self.state.writes_total += report.writes
        self.state.last_report = report.as_dict()
        if report.rejected:
            self.state.refused_total += len(report.rejected)
            self.state.last_error = f"{len(report.rejected)} writes refused, first: {report.rejected[0]}"
            log.warning("federation LDAP %s: %s", self.ldap.url, self.state.last_error)
            self.needs_full = True  # what the server holds is no longer what we think: compare it next time
            self.backoff_s = 0.0
            self.next_attempt_at = now + self.retry_min_s
            return
        if self.state.failing_since is not None:
            log.info("federation LDAP %s: answering again after %.0f s", self.ldap.url, now - self.state.failing_since)
        self.state.failing_since, self.state.last_error, self.state.last_success_at = None, None, self.clock()
        self.backoff_s, self.next_attempt_at = 0.0, 0.0

    def close(self) -> None:
        """Unbind the connections kept between writes (the view's stop, or a failure)."""
        for conn in self._connections.values():
            try:
                conn.unbind()
            except Exception:  # the connection may already be gone; nothing to clean up
                pass
        self._connections.clear()

    def _connection(self, target: LdapTarget) -> Callable[[], Any]:
        def bound() -> Any:
            conn = self._connections.get(target.bind_dn)
            if conn is None or conn.closed:
                conn = self._connections[target.bind_dn] = connect(target)
            return conn
        return bound

    def _full(self, sites: Mapping[str, Mapping[str, Entry]]) -> PublishReport:
        everything = [entry for site in sorted(sites) for entry in sites[site].values()]
        self.close()
        self._targets = targets_for(self.ldap, self.bases, self.state_file)  # passwords read again: a changed one applies
        report = sync_site(everything, self._targets, stats=infosys_for(self.ldap))
        self.held = {site: self._by_target(entries) for site, entries in sites.items()}
        self.needs_full = False
        self.last_full_at = self.clock()
        self.state.full_syncs_total += 1
        log.info("federation LDAP %s: reconciled %d sites: %s", self.ldap.url, len(sites), report.summary())
        return report

    def _by_target(self, entries: Mapping[str, Entry]) -> list[dict[str, Entry]]:
        """A site's entries (by DN key) split by the target whose bases hold them, in target order."""
        targets = self._targets or targets_for(self.ldap, self.bases, None)
        suffixes = [tuple("," + dn_key(base) for base in target.bases) for target in targets]
        split: list[dict[str, Entry]] = [{} for _ in targets]
        for key, entry in entries.items():
            for index, ends in enumerate(suffixes):
                if key.endswith(ends):
                    split[index][key] = entry
                    break
        return split

    def _delta(self, sites: Mapping[str, Mapping[str, Entry]], changed: set[str]) -> Optional[PublishReport]:
        """Every changed site's differences, one pipelined write per LDAP target for all of them."""
        if not changed:
            return None
        total = PublishReport()
        targets = self._targets or targets_for(self.ldap, self.bases, None)
        old_all: list[dict[str, Entry]] = [{} for _ in targets]
        new_all: list[dict[str, Entry]] = [{} for _ in targets]
        split_new: dict[str, list[dict[str, Entry]]] = {}
        for site in sorted(changed):
            new = split_new[site] = self._by_target(sites.get(site, {}))
            old = self.held.get(site) or [{} for _ in targets]
            for index in range(len(targets)):
                old_all[index].update(old[index])
                new_all[index].update(new[index])  # sites never share a DN: each has its own subtree
        for target, mine_old, mine_new in zip(targets, old_all, new_all, strict=True):
            if not mine_old and not mine_new:
                continue
            ordered = dict(sorted(mine_new.items(), key=lambda item: item[1].dn.count(",")))  # parents first
            mine_old, ordered = narrowed(mine_old, ordered)
            try:
                report = write_delta(target, mine_old, ordered, self._connection(target))
            except ConnectionLost:  # a kept connection the server closed meanwhile (its idle timeout)
                self.close()
                report = write_delta(target, mine_old, ordered, self._connection(target))
            for name in ("added", "modified", "deleted", "unchanged", "writes"):
                setattr(total, name, getattr(total, name) + getattr(report, name))
            total.rejected.extend(report.rejected)
            total.seconds += report.seconds
        for site, new in split_new.items():
            if site in sites:
                self.held[site] = new
            else:
                self.held.pop(site, None)
        return total

    def _failed(self, error: str) -> None:
        now = self.clock()
        first = self.state.failing_since is None
        self.backoff_s = next_wait(self.backoff_s, self.retry_min_s, self.retry_max_s)
        self.next_attempt_at = now + self.backoff_s
        self.needs_full = True
        if first:
            self.state.failing_since = now
        level = logging.WARNING if first or error != self.state.last_error else logging.INFO
        self.state.last_error = error
        log.log(level, "federation LDAP %s: %s; the JSON view goes on; next attempt in %.0f s", self.ldap.url, error,
                self.backoff_s)


def narrowed(old: Mapping[str, Entry], new: Mapping[str, Entry]) -> tuple[dict[str, Entry], dict[str, Entry]]:
    """``old`` and ``new`` (DN key -> entry) for glueinfo.glue.ldapsync.write_delta, each entry that
    is in both with other values (its object classes the same) cut down to the attributes whose
    values differ, and objectClass: the modify write_delta makes of them is the one it makes of the
    whole entries (an attribute it compares equal is left out either way), but comparing a CE's
    sixty attributes value by value as LDAP texts, for the one that changed, was most of a
    changed site's write.  Entries added, deleted, unchanged (the same object: a record the site
    sent again) or whose object classes changed (a structural change is a delete and a whole add)
    are passed as they are."""
    old_out, new_out = dict(old), dict(new)
    for key, entry in new.items():
        before = old.get(key)
        if before is None or before is entry:
            continue
        classes = entry.get("objectClass")
        if before.get("objectClass") != classes or not classes:
            continue
        ours, theirs = entry.attributes, before.attributes
        changed_new = {name: values for name, values in ours.items() if theirs.get(name) != values}
        changed_old = {name: values for name, values in theirs.items() if ours.get(name) != values}
        for changed in (changed_new, changed_old):
            for name in [name for name in changed if name.lower() == "objectclass"]:  # the same values, spelt apart
                del changed[name]
            changed["objectClass"] = classes
        new_out[key] = Entry.from_lists(entry.dn, changed_new)
        old_out[key] = Entry.from_lists(before.dn, changed_old)
    return old_out, new_out
