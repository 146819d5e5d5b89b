"""The site-assembly core: the one place that decides which hosts the site has.

Every command that publishes the site (``ldif``, ``gather``, ``node-xml
--site``, ``publish``, ``serve``) and the daemon (``run``) go through a
:class:`SiteAssembler`, so the same config, inputs, state directory and
clock give the same site everywhere.  What it does, in order:

1. **Hosts.**  One glueinfo.gather.Gatherer runs the enabled ``[sources]``
   (``local`` is this host through the collectors; ``run`` feeds this host
   in with :meth:`SiteAssembler.accept_local` instead, on its own fast and
   slow intervals).  Each (host, source) keeps its last good snapshot; one
   host seen by several sources is merged by the freshness rule
   (glueinfo.gather.merge); a host is stale after ``[node] stale_after``
   (published Unknown, out of free-CPU figures) and dropped after
   ``[sources] drop_after``.  Host identity is glueinfo.gather.identity's.
   The snapshot files an admin lists (``[node] site_snapshots``) add the
   hosts no source knows, with their own age, and are re-read only when
   they change.
2. **State.**  With a state directory (``[run] state_dir``, when it exists;
   ``run`` creates it) the last good snapshots and the SubCluster ids are
   read at start and written back after each assembly by the process that
   holds the directory's lock (glueinfo.site.state).
3. **Site model and aggregation**, once per assembly: the admin's site
   model (glueinfo.site.model) and the Clusters and SubClusters
   (glueinfo.site.aggregate) with stable ids (glueinfo.site.ids).
4. **LRMS state**, by :meth:`SiteAssembler.refresh_lrms` on its own
   interval (``[run] lrms_interval``; one-shot commands once): each CE's
   queue asked with the fresh hosts of its cluster.  Every assembly uses
   the latest answer.

Nothing here renders: glueinfo.glue and glueinfo.sss turn an
:class:`AssembledSite` into LDIF and Node XML.  Failures of sources, files
and the LRMS are reported (``failures``, logged) and never stop assembly.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Optional

from glueinfo.core.config import Config
from glueinfo.core.freshness import is_expired, is_stale, stale_after_s
from glueinfo.core.model import HostSnapshot, QueueState
from glueinfo.core.records import dataclass
from glueinfo.core.validate import validate_snapshot
from glueinfo.gather.gatherer import GatheredHost, Gatherer, GatherResult
from glueinfo.gather.identity import host_key, parse_aliases, restorable
from glueinfo.gather.registry import Source, enabled_sources
from glueinfo.gather.snapshot_files import SiteFiles
from glueinfo.site.aggregate import SiteGroups, aggregate, cluster_members
from glueinfo.site.from_config import site_from_config
from glueinfo.site.ids import SubClusterIds, memberships_from_entries
from glueinfo.site.model import SiteModel, assign_clusters
from glueinfo.site.state import SiteState

log = logging.getLogger(__name__)

LOCAL = "local"
FILE_SOURCE = "file"  # how hosts from [node] site_snapshots are labelled


def default_local_fqdn(config: Config) -> str:
    """This host's name as the collectors would publish it ([glueinfo] hostname, else the FQDN)."""
    from glueinfo.host.collect import CollectContext, local_hostname

    general = config.section("glueinfo")
    try:
        return local_hostname(CollectContext(host_root=general["host_root"], config={"hostname": general["hostname"]}))
    except Exception:  # a recorded tree without a readable name: fall back to this machine's
        return local_hostname(CollectContext(config={"hostname": general["hostname"]}))


STATE_RECHECK_S = 300.0  # an unchanged site's state is still handed to the store this often (its deferred writes)


def query_states(site: SiteModel, groups: SiteGroups | Mapping[str, list[HostSnapshot]], clock: Callable[[], float] = time.time,
                 queue_state: Optional[Callable[..., QueueState]] = None) -> dict[str, QueueState]:
    """Ask each CE's LRMS plugin for its queue's state (never raises: failures are states with an error).
    ``groups``: the site's aggregation, or only each cluster's hosts (aggregate.cluster_members)."""
    from glueinfo.lrms.registry import LrmsContext
    from glueinfo.lrms.registry import queue_state as default_queue_state

    ask = queue_state or default_queue_state
    states = {}
    for ce in site.ces:
        if isinstance(groups, SiteGroups):
            try:
                hosts = groups.cluster(ce.cluster).hosts
            except KeyError:
                hosts = []
        else:
            hosts = list(groups.get(ce.cluster, ()))
        ctx = LrmsContext(queue=ce.queue, ce_config=ce.options, hosts=hosts, clock=clock,
                          timeout_s=ce.lrms_timeout, with_jobs=ce.publish_jobs, vo_map=site.vo_map)
        states[ce.unique_id] = ask(ce.lrms, ctx)
    return states


@dataclass
class AssembledSite:
    """The site at one moment: what every renderer and publisher reads."""

    assembled_at: float
    model: SiteModel
    hosts: list[GatheredHost]  # every host published, stale ones included, sorted by host key
    local: Optional[HostSnapshot]  # this host among them (merged with other sources' reports of it)
    groups: SiteGroups
    states: dict[str, QueueState]  # CE unique id -> the latest LRMS answer
    failures: list[str] = field(default_factory=list)  # one line each: sources, files, state

    def snapshots(self) -> list[HostSnapshot]:
        return [h.snapshot for h in self.hosts]


def with_scheduler_views(hosts: list[GatheredHost], model: SiteModel, states: dict[str, QueueState]) -> list[GatheredHost]:
    """The hosts, each one a CE's batch system knows carrying its view in ``extra["lrms"]``
    (glueinfo.sss.node_xml.scheduler_view: state, lrms_state, total_cpus, allocated_cpus, free_cpus,
    reason, ce), which Node XML's State and Available/Utilized Processors then follow.  CEs whose LRMS is
    not fork, in config order: the first that knows a node gives its view.  A CE whose LRMS gave no
    node list and an error makes the other hosts of its cluster Unknown (it does not answer for
    them).  Snapshots are copied, never changed."""
    views: dict[str, dict[str, Any]] = {}
    silent: dict[str, str] = {}  # cluster -> why its batch system gave no answer
    for ce in model.ces:
        state = states.get(ce.unique_id)
        if ce.lrms == "fork" or state is None:
            continue
        if not state.nodes and state.error:
            silent.setdefault(ce.cluster, f"the batch system does not answer: {state.error}")
        for node in state.nodes:
            known: dict[str, Any] = {"state": node.state, "lrms_state": node.lrms_state, "total_cpus": node.total_cpus,
                                     "allocated_cpus": node.allocated_cpus, "free_cpus": node.free_cpus,
                                     "reason": node.reason, "ce": ce.unique_id}
            views.setdefault(host_key(node.name), {k: v for k, v in known.items() if v is not None})
    if not views and not silent:
        return hosts
    cluster_of = assign_clusters(model, [h.snapshot.hostname for h in hosts]) if silent else {}
    result = []
    for host in hosts:
        snapshot = host.snapshot
        view = views.get(host_key(snapshot.hostname))
        if view is None and cluster_of.get(snapshot.hostname) in silent:
            view = {"state": "Unknown", "reason": silent[cluster_of[snapshot.hostname]]}
        if view is not None:
            host = dataclasses.replace(host, snapshot=dataclasses.replace(snapshot, extra={**snapshot.extra, "lrms": view}))
        result.append(host)
    return result


def valid_snapshots(snapshots: Iterable[HostSnapshot], now: float, problems: list[str]) -> list[HostSnapshot]:
    """The snapshots glueinfo.core.validate lets in (bad fields dropped); one line per refusal or
    dropped field is added to ``problems``."""
    kept = []
    for snapshot in snapshots:
        checked = validate_snapshot(snapshot, now)
        if checked.snapshot is None:
            problems.append(f"snapshot refused: {checked.refused}")
            continue
        problems.extend(checked.dropped)
        kept.append(checked.snapshot)
    return kept


class SiteAssembler:
    """Keeps what assembly needs between cycles (one per process; see the module docstring).

    ``sources``: the sources to gather (default: those ``[sources] enabled``
    names; ``run`` passes them without ``local``).  ``probe``: how the
    ``local`` source probes this host.  ``state_dir``: the state directory
    (default ``[run] state_dir`` when it exists; "" for none).  ``clock``:
    the time every freshness decision is made at.  ``queue_state``: the LRMS
    query (tests pass their own).  Raises SourceError for unknown source
    names, ConfigError for a bad site model.
    """

    def __init__(self, config: Config, *, clock: Callable[[], float] = time.time,
                 sources: Optional[Sequence[Source]] = None, probe: Optional[Callable[[], HostSnapshot]] = None,
                 state_dir: Optional[str] = None, local_fqdn: Optional[str] = None,
                 queue_state: Optional[Callable[..., QueueState]] = None) -> None:
        self.config = config
        self.clock = clock
        self.queue_state = queue_state
        self.local_fqdn = local_fqdn or default_local_fqdn(config)
        self.model = site_from_config(config, self.local_fqdn)
        if sources is None:
            sources = enabled_sources(config, on_error=lambda message: log.warning("%s", message))
        self._lock = threading.RLock()  # one assembly (or LRMS refresh, or feed) at a time; the gatherer's too
        # This head node's name is no target's to claim when it is a host of the site itself.
        reserved = [self.local_fqdn] if LOCAL in config.get("sources", "enabled") else []
        self.gatherer = Gatherer(config, clock=clock, sources=sources, probe=probe, lock=self._lock, reserved=reserved)
        self.site_files = SiteFiles(config.section("node")["site_snapshots"])
        self.ids = SubClusterIds()
        self.states: Optional[dict[str, QueueState]] = None
        self.failures: list[str] = []
        # The last aggregation of each kind (with the ids: assemble; without: refresh_lrms): its hosts
        # and groups, reused while the same snapshot objects come in the same order.
        self._groups: dict[str, tuple[list[HostSnapshot], Optional[SubClusterIds], SiteGroups]] = {}
        # What the last save_state saw: the gatherer's generation, the site's groups, and when.
        self._saved_generation: Optional[int] = None
        self._saved_groups: Optional[SiteGroups] = None
        self._saved_at = float("-inf")
        directory = config.get("run", "state_dir") if state_dir is None else state_dir
        self.state = SiteState(directory, clock=clock) if directory else None

    # -- state ---------------------------------------------------------------------------------
    def open_state(self, writer: bool = False) -> int:
        """Read the state directory: hosts' last good snapshots (with their real age) and the
        SubCluster ids.  ``writer`` (the daemon) creates the directory and takes its lock:
        StateLocked (exit 2) when another ``glueinfo run`` holds it, a warning when it cannot be
        written (SiteState.lock_daemon); otherwise it is read only when it exists, and written back
        only if its lock is free.  Returns how many hosts were restored."""
        state = self.state
        if state is None:
            return 0
        if not writer and not os.path.isdir(state.directory):
            return 0
        if writer:
            state.lock_daemon()
        else:
            state.lock(create=False)
        with self._lock:
            ids = state.load_ids()
            if ids is not None:
                self.ids = ids
                self._groups.clear()
            return self._restore_hosts(state.load_hosts())

    def _restore_hosts(self, states: dict[str, dict[str, HostSnapshot]]) -> int:
        now = self.clock()
        drop_after = float(self.config.get("sources", "drop_after"))
        known = {s.name for s in self.gatherer.sources}
        if LOCAL in self.config.get("sources", "enabled"):
            known.add(LOCAL)  # `run` feeds this host in itself rather than through a source
        restored = 0
        listed = self._listed_hosts()
        try:
            aliases = parse_aliases(self.config.get("sources", "aliases")) if listed else {}
        except ValueError:
            aliases = {}  # the gather reports the bad entry
        for key, sources in states.items():
            kept = False
            for source, snapshot in sources.items():
                if source not in known or is_expired(snapshot, now, drop_after):
                    continue
                if source in listed:  # brought by a pin, perhaps: held to the rule a new pin is
                    why = restorable(key, source, listed[source], sources, self.gatherer.reserved, aliases)
                    if why is not None:
                        log.warning("state of %s from %s ignored: %s", key, source, why)
                        continue
                checked = validate_snapshot(snapshot, now)
                if checked.snapshot is None:
                    log.warning("state of %s from %s ignored: %s", key, source, checked.refused)
                    continue
                for line in checked.dropped:
                    log.warning("state of %s from %s: %s", key, source, line)
                snapshot = checked.snapshot
                snapshot.source = source
                self.gatherer.last_good.setdefault(key, {})[source] = snapshot
                kept = True
            restored += kept
        self.gatherer.changed()
        if restored:
            log.info("restored %d hosts from %s (published with their age until refreshed)", restored,
                     self.state.directory if self.state else "")
        return restored

    def _listed_hosts(self) -> dict[str, frozenset[str]]:
        """Source name -> the hosts its listed targets name, for each source that binds targets to
        hosts (an unreadable list: none, so every saved snapshot from it is checked)."""
        listed = {}
        for source in self.gatherer.sources:
            if source.listed_hosts is not None:
                try:
                    listed[source.name] = source.listed_hosts(self.config)
                except (ValueError, OSError):
                    listed[source.name] = frozenset()
        return listed

    def adopt_published(self, entries: Iterable[Any], origin: str) -> int:
        """Adopt the SubCluster ids of an earlier publication (GLUE 1.3 entries: the last LDIF
        file, or the LDAP server's tree) when no ids are remembered yet; returns how many."""
        with self._lock:
            if not self.ids.is_empty():
                return 0
            adopted = 0
            for cluster, subclusters in memberships_from_entries(entries).items():
                self.ids.adopt(cluster, subclusters)
                adopted += len(subclusters)
            self._groups.clear()  # made with the ids before
        if adopted:
            log.info("adopted %d SubCluster id(s) already published in %s", adopted, origin)
        return adopted

    def save_state(self) -> None:
        """Write the hosts' last good snapshots and the ids back (only with the state's lock)."""
        if self.state is None or not self.state.writable:
            return
        with self._lock:
            # Nothing gathered and no new aggregation (which alone assigns ids) since the last save,
            # made less than STATE_RECHECK_S ago: nothing to write (an LRMS-only publish).
            last = self._groups.get("site")
            groups = last[2] if last is not None else None
            generation, now = self.gatherer.generation, self.clock()
            if generation == self._saved_generation and groups is self._saved_groups and now - self._saved_at < STATE_RECHECK_S:
                return
            self._saved_generation, self._saved_groups, self._saved_at = generation, groups, now
            hosts = {k: dict(v) for k, v in self.gatherer.last_good.items()}
            ids = self.ids.copy()
        for error in self.state.save(hosts, ids):
            log.warning("state: %s", error)

    def close(self) -> None:
        self.save_state()
        if self.state is not None:
            self.state.release()

    # -- the inputs ----------------------------------------------------------------------------
    def gather(self, list_hosts: bool = True) -> GatherResult:
        """Run the sources once (glueinfo.gather.Gatherer.gather) and keep what they brought;
        ``list_hosts`` as there (the daemon's cycle assembles right after: no list needed)."""
        result = self.gatherer.gather(list_hosts)
        with self._lock:
            self.failures = [str(f) for f in result.failures]
        return result

    def accept_local(self, snapshot: HostSnapshot) -> None:
        """This host's snapshot, probed outside gather() (``run``'s fast and slow jobs)."""
        with self._lock:
            for failure in self.gatherer.accept(LOCAL, [snapshot]):
                log.warning("%s", failure)

    def refresh_lrms(self) -> dict[str, QueueState]:
        """Ask every CE's LRMS now, with the fresh hosts of its cluster; kept for every later assembly."""
        now = self.clock()
        with self._lock:
            hosts = [h.snapshot for h in self._hosts(now) if not h.stale]
            members = cluster_members(self.model, hosts)  # which hosts each cluster has: no SubClusters needed
        states = query_states(self.model, members, self.clock, self.queue_state)
        with self._lock:
            self.states = states
        return states

    # -- assembly ------------------------------------------------------------------------------
    def _hosts(self, now: float, errors: Optional[list[str]] = None) -> list[GatheredHost]:
        """Every host now: the gatherer's, and the site files' hosts no source knows (their
        problems logged and added to ``errors``)."""
        hosts = self.gatherer.hosts(now)
        if self.site_files.paths:
            stale_after = stale_after_s(self.config)
            known = {host_key(h.snapshot.hostname) for h in hosts}
            problems: list[str] = []
            for snapshot in valid_snapshots(self.site_files.load(on_error=problems.append), now, problems):
                key = host_key(snapshot.hostname)
                if key in known:
                    continue  # a file never replaces what a source reports about a host
                known.add(key)
                hosts.append(GatheredHost(snapshot=snapshot, stale=is_stale(snapshot, now, stale_after),
                                          age_s=now - snapshot.collected_at, sources={FILE_SOURCE: snapshot.collected_at}))
            for message in problems:
                log.warning("%s", message)
            if errors is not None:
                errors.extend(problems)
            hosts.sort(key=lambda h: host_key(h.snapshot.hostname))
        return hosts

    def _aggregate(self, kind: str, snapshots: list[HostSnapshot], ids: Optional[SubClusterIds], now: float) -> SiteGroups:
        """glueinfo.site.aggregate.aggregate, or the groups it gave last time for the very same
        snapshot objects in the same order and the same ids object: aggregation reads only the
        snapshots (never changed once gathered), and with the same members each id is assigned
        again as it was, so it would give equal groups.  ``now`` only dates new members.
        Called with the lock held."""
        last = self._groups.get(kind)
        if last is not None and last[1] is ids and len(last[0]) == len(snapshots) \
                and all(a is b for a, b in zip(last[0], snapshots, strict=True)):
            return last[2]
        groups = aggregate(self.model, snapshots, ids, now)
        self._groups[kind] = (snapshots, ids, groups)
        return groups

    def assemble(self) -> AssembledSite:
        """The site now: hosts, aggregation with stable ids, and the latest LRMS state (asked
        first if it never was)."""
        if self.states is None:
            self.refresh_lrms()
        with self._lock:
            now = self.clock()
            self.gatherer.forget_expired(now)
            failures = list(self.failures)  # the last gather's
            hosts = with_scheduler_views(self._hosts(now, failures), self.model, self.states or {})
            local = next((h.snapshot for h in hosts if LOCAL in h.sources), None)
            groups = self._aggregate("site", [h.snapshot for h in hosts], self.ids, now)
            return AssembledSite(assembled_at=now, model=self.model, hosts=hosts, local=local, groups=groups,
                                 states=dict(self.states or {}), failures=failures)

    def once(self, on_stage: Callable[[str], None] = lambda text: None,
             after_state: Optional[Callable[[SiteAssembler], None]] = None) -> AssembledSite:
        """What a one-shot command publishes: state read, every source once, the LRMS once,
        assembled, state written back when this process may.  ``on_stage`` is told each step as
        it starts ("gathering hosts", "asking the batch systems about 30,000 hosts"...), for a
        command's progress line; ``after_state`` runs once the state is read, before the gather
        (``publish`` adopts the server's SubCluster ids there)."""
        on_stage("reading the state directory")
        self.open_state()
        if after_state is not None:
            after_state(self)
        on_stage("gathering hosts")
        count = len(self.gather().hosts)
        on_stage(f"asking the batch systems about {count:,} host{'' if count == 1 else 's'}")
        self.refresh_lrms()
        on_stage(f"assembling {count:,} host{'' if count == 1 else 's'}")
        site = self.assemble()
        on_stage("writing the state directory")
        self.close()
        return site


def assemble_snapshots(config: Config, snapshots: Sequence[HostSnapshot], clock: Callable[[], float] = time.time, *,
                       local_fqdn: Optional[str] = None, states: Optional[dict[str, QueueState]] = None,
                       queue_state: Optional[Callable[..., QueueState]] = None) -> AssembledSite:
    """The site made of exactly these snapshots (``--snapshots`` files, tests, benchmarks): no
    sources, no state, ids derived afresh.  The snapshots are a recorded site replayed, so the
    LRMS is asked with all of them, whatever their age (a live site asks with its fresh hosts
    only); it is not asked at all when ``states`` is given."""
    assembler = SiteAssembler(config, clock=clock, sources=[], state_dir="", local_fqdn=local_fqdn,
                              queue_state=queue_state)
    now = clock()
    unique: dict[str, HostSnapshot] = {}
    problems: list[str] = []
    for snapshot in valid_snapshots(snapshots, now, problems):  # the newest of one host's, as the gatherer keeps
        key = host_key(snapshot.hostname)
        if key not in unique or snapshot.collected_at > unique[key].collected_at:
            unique[key] = snapshot
    stale_after = stale_after_s(config)
    hosts = [GatheredHost(snapshot=s, stale=is_stale(s, now, stale_after), age_s=now - s.collected_at,
                          sources={s.source or LOCAL: s.collected_at})
             for s in sorted(unique.values(), key=lambda s: host_key(s.hostname))]
    if states is None:  # asked with every host: only which hosts each cluster has is needed
        states = query_states(assembler.model, cluster_members(assembler.model, [h.snapshot for h in hosts]),
                              clock, queue_state)
    hosts = with_scheduler_views(hosts, assembler.model, states)
    # Grouped after the views, as SiteAssembler.assemble does: GLUE 2's Used/UnavailableInstances read them.
    groups = aggregate(assembler.model, [h.snapshot for h in hosts], None, now)
    local = next((h.snapshot for h in hosts if host_key(h.snapshot.hostname) == host_key(assembler.local_fqdn)), None)
    for message in problems:
        log.warning("%s", message)
    return AssembledSite(assembled_at=now, model=assembler.model, hosts=hosts, local=local, groups=groups,
                         states=dict(states), failures=problems)
