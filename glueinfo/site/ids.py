"""Stable SubCluster ids: an id, once given, belongs to its group of hosts.

Automatic SubClusters group hosts equal on the aggregation key, so a shared
fact that changes (an OS update, a RAM upgrade) moves hosts between keys.
If the id were derived from the key, the SubCluster would be renamed: BDII
deletes and re-adds it and every host below it, and for a while brokers see
both.  So ids are remembered with the site state ([run] state_dir,
``subclusters.json``) and handed on by these rules, for each cluster:

- **Membership decides.**  Each remembered id has its members (host names
  and when each joined).  After grouping, every id goes to the new group
  holding the largest part of its members (ties: the part holding its
  oldest member).  A group claimed by several ids keeps the one with the
  largest part there (ties: the oldest id); the others retire.
- So a group whose members all change a shared fact keeps its id (it is
  modified in place); in a rolling update, when a group splits, the larger
  part keeps the id and the other part gets a new one; a host that leaves
  a group changes only its own entries.
- **New ids** are readable but spell no fact that can change under them:
  ``<cluster id>-<platform>-<CPU vendor and model>`` (``ce01.example.org-
  x86_64-intel-xeon-gold-6126``), with ``-2``, ``-3``... for further groups
  of the same processor (different RAM or OS).  Never an OS release, RAM
  size or thread count, which upgrades and BIOS settings change; a host's
  processor model does not change short of replacing it.  A suffix once
  used in a cluster is not used again there, so a retired id never comes
  back meaning other hosts.  The readable summary of the current shared
  facts (OS included) is the SubCluster's Name, which may change in place.
- **Without a state** (no state directory) the same rules run on an empty
  memory: ids are derived deterministically from the hosts (groups of one
  processor numbered in the order of their first host name).
- **Adoption.**  Ids already published (by an earlier glueinfo, whatever
  their form) are adopted by membership when the state has none yet (see
  :func:`memberships_from_entries`), so an upgrade causes no churn.

The record is plain data (:meth:`SubClusterIds.to_json`); it never raises on
a bad file: :meth:`SubClusterIds.from_json` says what is wrong in one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from glueinfo.core.errors import InputError
from glueinfo.core.records import dataclass
from glueinfo.gather.identity import host_key

FORMAT = 1


class IdStateError(InputError, ValueError):
    """A subclusters.json that cannot be used (one line)."""


@dataclass
class IdRecord:
    """One SubCluster id and the hosts it belongs to."""

    unique_id: str
    created_at: float
    members: dict[str, float] = field(default_factory=dict)  # host key -> when it joined

    def oldest_member(self) -> str:
        return min(self.members.items(), key=lambda item: (item[1], item[0]))[0] if self.members else ""


@dataclass
class ClusterIds:
    """The ids of one cluster's automatic SubClusters, and the suffixes used so far per base."""

    records: dict[str, IdRecord] = field(default_factory=dict)  # id -> record
    used: dict[str, int] = field(default_factory=dict)  # id base -> highest suffix number given (1: the bare base)


class SubClusterIds:
    """The remembered ids of every cluster (see the module docstring).

    Not thread-safe: one assembly at a time calls :meth:`assign`.
    """

    def __init__(self, clusters: Mapping[str, ClusterIds] | None = None) -> None:
        self.clusters: dict[str, ClusterIds] = dict(clusters or {})
        self.changed = False  # since loaded or last marked saved

    # -- the rules -------------------------------------------------------------------------
    def assign(self, cluster_id: str, groups: Sequence[Sequence[str]], bases: Sequence[str], now: float,
               taken: Iterable[str] = ()) -> list[str]:
        """The id of each group of one cluster's automatic SubClusters, in order.

        ``groups``: each group's host keys; ``bases``: each group's readable id
        base (``<cluster>-<platform>-<cpu>``), used only for a group that
        inherits no id; ``taken``: ids in use otherwise (admin pins), never
        given.  Updates the memberships; ids that no group inherits retire.
        """
        memory = self.clusters.setdefault(cluster_id, ClusterIds())
        member_sets = [frozenset(group) for group in groups]
        order = sorted(range(len(groups)), key=lambda i: min(groups[i], default=""))
        # Each id's preferred group: the largest part of its members (ties: its oldest member's group).
        claims: dict[int, list[tuple[int, float, str]]] = {}
        for unique_id, record in memory.records.items():
            oldest = record.oldest_member()
            best = None
            for index in order:
                part = len(member_sets[index].intersection(record.members))
                if part == 0:
                    continue
                rank = (part, oldest in member_sets[index])
                if best is None or rank > best[0]:
                    best = (rank, index)
            if best is not None:
                claims.setdefault(best[1], []).append((best[0][0], record.created_at, unique_id))
        ids: list[str] = [""] * len(groups)
        for index, claimants in claims.items():
            # The largest part, then the oldest id, then the smallest id (deterministic).
            claimants.sort(key=lambda c: (-c[0], c[1], c[2]))
            ids[index] = claimants[0][2]
        blocked = {i.casefold() for i in taken} | {i.casefold() for i in ids if i}
        for index in order:
            if not ids[index]:
                ids[index] = self._new_id(memory, bases[index], blocked)
                blocked.add(ids[index].casefold())
        # Memberships as they are now; ids no group kept are forgotten (their suffix stays used).
        kept: dict[str, IdRecord] = {}
        for index, unique_id in enumerate(ids):
            old = memory.records.get(unique_id)
            joined = old.members if old is not None else {}
            record = IdRecord(unique_id=unique_id, created_at=old.created_at if old is not None else now,
                              members={host: joined.get(host, now) for host in groups[index]})
            if old is None or old.members.keys() != record.members.keys():
                self.changed = True
            kept[unique_id] = record
        if kept.keys() != memory.records.keys():
            self.changed = True
        memory.records = kept
        return ids

    def _new_id(self, memory: ClusterIds, base: str, blocked: set[str]) -> str:
        number = memory.used.get(base, 0) + 1
        while True:
            candidate = base if number == 1 else f"{base}-{number}"
            if candidate.casefold() not in blocked:
                memory.used[base] = number
                self.changed = True
                return candidate
            number += 1

    def forget_cluster_except(self, cluster_ids: Iterable[str]) -> None:
        """Drop the memory of clusters the site no longer has."""
        keep = set(cluster_ids)
        for cluster_id in [c for c in self.clusters if c not in keep]:
            del self.clusters[cluster_id]
            self.changed = True

    def adopt(self, cluster_id: str, memberships: Mapping[str, Iterable[str]]) -> None:
        """Take ids already published (id -> its host keys) as if remembered since long ago."""
        memory = self.clusters.setdefault(cluster_id, ClusterIds())
        for unique_id, hosts in memberships.items():
            if unique_id not in memory.records:
                memory.records[unique_id] = IdRecord(unique_id=unique_id, created_at=0.0,
                                                     members={host: 0.0 for host in hosts})
                self.changed = True

    def is_empty(self) -> bool:
        return not any(c.records for c in self.clusters.values())

    # -- on disk ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "clusters": {
            cluster_id: {"used": dict(sorted(memory.used.items())),
                         "subclusters": {r.unique_id: {"created_at": r.created_at, "members": dict(sorted(r.members.items()))}
                                         for r in sorted(memory.records.values(), key=lambda r: r.unique_id)}}
            for cluster_id, memory in sorted(self.clusters.items())}}

    @classmethod
    def from_json(cls, data: Any) -> SubClusterIds:
        """The ids of a ``to_json`` document; IdStateError (one line) when it is not one."""
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("clusters"), dict):
            raise IdStateError(f"not a glueinfo SubCluster id file (format {FORMAT} with 'clusters')")
        clusters: dict[str, ClusterIds] = {}
        try:
            for cluster_id, raw in data["clusters"].items():
                records = {}
                for unique_id, item in raw["subclusters"].items():
                    members = {str(host): float(joined) for host, joined in item["members"].items()}
                    records[str(unique_id)] = IdRecord(str(unique_id), float(item["created_at"]), members)
                used = {str(base): int(number) for base, number in raw.get("used", {}).items()}
                clusters[str(cluster_id)] = ClusterIds(records=records, used=used)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise IdStateError(f"malformed SubCluster id file: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}") from None
        return cls(clusters)

    def copy(self) -> SubClusterIds:
        return SubClusterIds({c: ClusterIds(records={i: dataclasses.replace(r, members=dict(r.members))
                                                     for i, r in m.records.items()}, used=dict(m.used))
                              for c, m in self.clusters.items()})


def memberships_from_entries(entries: Iterable[Any]) -> dict[str, dict[str, set[str]]]:
    """Published SubCluster ids and their hosts, from GLUE 1.3 entries (an LDIF file or an
    LDAP search): cluster id -> SubCluster id -> host keys.  Hosts are found by their DN
    (``GlueHostUniqueID=...,GlueSubClusterUniqueID=...,GlueClusterUniqueID=...``) and
    named by GlueHostName; anything else is ignored."""
    found: dict[str, dict[str, set[str]]] = {}
    for entry in entries:
        rdns = _leading_rdns(entry.dn, 3)
        if len(rdns) < 3 or rdns[0][0] != "gluehostuniqueid" or rdns[1][0] != "gluesubclusteruniqueid" \
                or rdns[2][0] != "glueclusteruniqueid":
            continue
        names = entry.get("GlueHostName")
        host = str(names[0]) if names else rdns[0][1]
        found.setdefault(rdns[2][1], {}).setdefault(rdns[1][1], set()).add(host_key(host))
    return found


def _leading_rdns(dn: str, count: int) -> list[tuple[str, str]]:
    from glueinfo.core.ldif import DNError, parse_dn

    try:
        parsed = parse_dn(dn)
    except DNError:
        return []
    rdns = []
    for rdn in parsed[:count]:
        attribute, value = rdn[0]
        rdns.append((attribute.lower(), value))
    return rdns
