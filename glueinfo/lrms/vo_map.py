"""Jobs to VOs: the one map every LRMS plugin applies (``[vos]``).

A grid site runs each VO's jobs under its own Unix accounts, groups or
batch accounts (``atlas001``..``atlas099`` in group ``atlas``; a Slurm
account ``cms``), and some batch systems also know the VO of the job's
proxy (HTCondor's ``x509userproxyvoname``).  The map says which VO a job
belongs to, in this order:

1. the proxy's VO, when the LRMS reports one and ``[vos] proxy_vo`` is on;
2. the ``[vos] map`` rules, in the order written, first match wins:
   ``user:PATTERN=VO``, ``group:PATTERN=VO``, ``account:PATTERN=VO`` with
   shell patterns (``*``, ``?``, ``[...]``) matched case-sensitively, as
   Unix names are; and, for jobs that came with a token (HTCondor-CE sets
   ``AuthTokenIssuer`` and ``AuthTokenGroups`` on the jobs it routes, as X.509
   VO names disappear), ``issuer:PATTERN=VO`` on the token's issuer (a
   trailing ``/`` on either side is ignored:
   ``issuer:https://atlas-auth.web.cern.ch/=atlas``) and
   ``token_group:PATTERN=VO`` matching any one of its groups
   (``token_group:/cms=cms``);
3. otherwise the job is local: counted in the queue's totals, in no VO's.

The per-VO counts (running, waiting, total) feed GLUE 1.3 VOViews and GLUE 2
ComputingShares.  Nothing here asks the batch system.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Optional

from glueinfo.core.errors import ConfigurationError
from glueinfo.core.model import VoJobCounts
from glueinfo.core.records import dataclass
from glueinfo.lrms.figures import FINISHED_STATES

if TYPE_CHECKING:  # the jobs are the plugin's: a fork CE or a site without [vos] imports no job model
    from glueinfo.core.job import JobInfo

KINDS = ("user", "group", "account")  # who owns a job: what every batch system can tell
TOKEN_KINDS = ("issuer", "token_group")  # what the job's token says: only where the LRMS keeps it (HTCondor)
RULE_KINDS = KINDS + TOKEN_KINDS
# GLUE job states that count as running and as waiting (the rest: held, suspended, done...).
_RUNNING = {"RUNNING"}
_WAITING = {"SUBMITTED", "WAITING", "READY", "SCHEDULED"}


class VoMapError(ConfigurationError, ValueError):
    """A ``[vos] map`` rule that cannot be read; the message names it."""


@dataclass(frozen=True)
class VoRule:
    """One ``[vos] map`` rule: jobs whose ``kind`` (user, group, ...) matches ``pattern`` belong to ``vo``."""

    kind: str  # one of RULE_KINDS
    pattern: str
    vo: str
    matcher: Any  # compiled pattern: re.Pattern


@dataclass(frozen=True)
class VoMap:
    """The site's jobs-to-VO map (see the module docstring); the empty map makes every job local."""

    rules: tuple[VoRule, ...] = ()
    proxy_vo: bool = True

    @classmethod
    def from_values(cls, rules: Iterable[str], proxy_vo: bool = True) -> VoMap:
        """Rules as written in ``[vos] map``; VoMapError naming the first bad one."""
        parsed = []
        for text in rules:
            kind, colon, rest = text.partition(":")
            pattern, equals, vo = rest.rpartition("=")
            kind, pattern, vo = kind.strip().lower(), pattern.strip(), vo.strip()
            if not colon or not equals or kind not in RULE_KINDS or not pattern or not vo:
                raise VoMapError(f"[vos] map: {text!r} is not KIND:PATTERN=VO with KIND one of {', '.join(RULE_KINDS)}")
            if kind == "issuer":
                pattern = pattern.rstrip("/") or pattern
            parsed.append(VoRule(kind, pattern, vo, re.compile(fnmatch.translate(pattern))))
        return cls(tuple(parsed), proxy_vo)

    @classmethod
    def from_config(cls, config: Any) -> VoMap:
        section = config.section("vos")
        return cls.from_values(section["map"], section["proxy_vo"])

    def matches_by(self, kind: str) -> bool:
        """Has a rule of this kind (user, group or account): a plugin that reads that owner only at
        extra cost reads it then."""
        return any(rule.kind == kind for rule in self.rules)

    def vos_by(self, kinds: Iterable[str]) -> list[str]:
        """The VOs rules of these kinds give, in the order written (each once): the VOs whose job
        counts a batch system that tells those owners can know, 0 included."""
        wanted = set(kinds)
        return list(dict.fromkeys(rule.vo for rule in self.rules if rule.kind in wanted))

    def vo_of(self, *, user: Optional[str] = None, group: Optional[str] = None, account: Optional[str] = None,
              proxy_vo: Optional[str] = None, token_issuer: Optional[str] = None,
              token_groups: Sequence[str] = ()) -> Optional[str]:
        """The VO of a job with these owners and token (None: a local job)."""
        if self.proxy_vo and proxy_vo:
            return proxy_vo
        issuer = token_issuer.rstrip("/") if token_issuer else None
        values = {"user": (user,), "group": (group,), "account": (account,), "issuer": (issuer,),
                  "token_group": tuple(token_groups)}
        for rule in self.rules:
            if any(value is not None and rule.matcher.match(value) for value in values[rule.kind]):
                return rule.vo
        return None

    def assign(self, jobs: Iterable[JobInfo]) -> None:
        """Set each job's ``vo`` from its owner, group, account, proxy VO and token."""
        for job in jobs:
            job.vo = self.vo_of(user=job.local_owner, group=job.local_group, account=job.account, proxy_vo=job.proxy_vo,
                                token_issuer=job.token_issuer, token_groups=job.token_groups)


def count_by_vo(jobs: Iterable[JobInfo]) -> dict[str, VoJobCounts]:
    """Running, waiting and total (not finished) jobs per VO, from jobs whose ``vo`` is set
    (VoMap.assign); local jobs are in no VO's counts.  Sorted by VO name."""
    counts: dict[str, VoJobCounts] = {}
    for job in jobs:
        if job.vo is None or job.glue_status in FINISHED_STATES:
            continue
        entry = counts.setdefault(job.vo, VoJobCounts())
        entry.total += 1
        if job.glue_status in _RUNNING:
            entry.running += 1
        elif job.glue_status in _WAITING:
            entry.waiting += 1
    return dict(sorted(counts.items()))
