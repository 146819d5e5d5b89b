"""LDAP synchronisation for ``glueinfo run``: retries with backoff, a full re-sync when the server is back."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.config import Config
from glueinfo.run.stats import JobStats, _one_line

log = logging.getLogger("glueinfo.run")


@dataclass
class LdapOutcome:
    """What one synchronisation did.  ``error`` set: the server could not be used at all."""

    added: int = 0
    modified: int = 0
    deleted: int = 0
    rejected: list[str] = field(default_factory=list)  # one line each, starting with the DN
    error: Optional[str] = None


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
            outcome = LdapOutcome(error=f"{type(exc).__name__}: {_one_line(exc)}")
        self.stats.last_duration_s = time.perf_counter() - began
        self.last = outcome
        if outcome.error is not None:
            self.stats.failures += 1
            self.stats.last_error = outcome.error
            self.backoff_s = self.retry_min_s if self.backoff_s <= 0 else min(self.retry_max_s, self.backoff_s * 2)
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
        for line in outcome.rejected:
            log.warning("LDAP %s: %s", self.url, line)
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


def config_target(config: Config, state_file: Optional[str] = None) -> Any:
    """The [ldap] server as a glueinfo.glue.ldapsync.LdapTarget under [glue] base_dn (and [ldap]
    extra_bases, with [ldap] window writes in flight), its password
    file read now (a changed password applies without a restart); PublishError (one line) when
    that file cannot be read."""
    from glueinfo.glue.glue2.publish import glue2_base
    from glueinfo.glue.ldapsync import LdapTarget, PublishError, split_bases

    ldap = config.section("ldap")
    password = ""
    if ldap["password_file"]:
        try:
            with open(ldap["password_file"], encoding="utf-8") as handle:
                password = handle.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise PublishError(f"[ldap] password_file {ldap['password_file']}: cannot read: {why}") from None
    extra_bases = split_bases(ldap["extra_bases"])
    if not extra_bases and (glue2_subtree := glue2_base(config)):
        extra_bases = (glue2_subtree,)  # o=glue kept equal like o=grid
    return LdapTarget(url=ldap["url"], bind_dn=ldap["bind_dn"], password=password, base_dn=config.get("glue", "base_dn"),
                      timeout_s=ldap["timeout"], state_file=state_file, extra_bases=extra_bases, window=ldap["window"])


def make_ldap_sync(config: Config, clock: Callable[[], float]) -> Callable[[Sequence[Any]], LdapOutcome]:
    """The synchronisation step: glueinfo.glue.ldapsync.sync_tree into [ldap] url under [glue] base_dn.

    The password file is read at every attempt (a changed password applies
    without a restart); publish_ldap's state file lives in [run] state_dir.
    """
    from glueinfo.glue.ldapsync import PublishError, sync_tree

    state_dir = config.get("run", "state_dir")
    state_file = os.path.join(state_dir, "ldap-publish.json") if state_dir else None

    def sync(entries: Sequence[Any]) -> LdapOutcome:
        try:
            report = sync_tree(entries, config_target(config, state_file))
        except PublishError as exc:
            return LdapOutcome(error=_one_line(exc))
        return LdapOutcome(added=report.added, modified=report.modified, deleted=report.deleted,
                           rejected=[_one_line(r) for r in report.rejected])

    return sync
