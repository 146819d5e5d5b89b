"""A host's State in its Node: glueinfo's judgement of the host (:func:`node_state`) and the State
its Node carries (:func:`document_state`), which for a Node other software published is what its
publisher meant.

- ``State`` by :func:`node_state`, first rule that applies:
  1. the host matches ``[node] offline_hosts`` (name or shell pattern) -> Offline;
  2. no collection time, or the snapshot is more than ``stale_after`` seconds
     old (or that far in the future: a wrong clock) -> Unknown;
  3. a CE's batch system knows the node (:func:`scheduler_view`) -> its view:
     Busy (no processor free for a new job), Idle, Offline (drained, draining,
     down) or Unknown (lost, or the batch system does not answer);
  4. processor utilisation known -> Busy when busy processors / processors
     >= ``busy_threshold``, else Idle;
  5. configured facts (processors or memory) known but not utilisation -> Configured;
  6. otherwise Unknown.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any, Optional

from glueinfo.core.freshness import is_stale
from glueinfo.core.model import HostSnapshot
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_figures import processor_use
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.vocabulary import short_name

LRMS_EXTRA = "lrms"  # the batch system's view of the node (glueinfo.site.assemble attaches it; see scheduler_view)


def _matches(hostname: str, patterns: Sequence[str]) -> bool:
    if not patterns:
        return False
    names = {hostname.lower(), short_name(hostname).lower()}
    return any(fnmatch.fnmatchcase(name, pattern.lower()) for pattern in patterns for name in names)


def scheduler_view(snapshot: HostSnapshot) -> Optional[dict[str, Any]]:
    """The batch system's view of this node (``extra["lrms"]``: state, lrms_state, total_cpus,
    allocated_cpus, free_cpus, reason, ce), when a CE's LRMS knows it; None otherwise."""
    view = snapshot.extra.get(LRMS_EXTRA)
    return view if isinstance(view, dict) else None


def node_state(snapshot: HostSnapshot, now: float, settings: NodeSettings) -> str:
    """Idle / Busy / Offline / Unknown / Configured by the rules in this module's docstring: glueinfo's
    judgement of the host (Haizea, the status page), whatever its Node says (:func:`document_state`)."""
    if _matches(snapshot.hostname, settings.offline_hosts):
        return "Offline"
    if snapshot.published is not None:
        given = _given_state(snapshot, now, settings)
        if given in sss_node.NODE_STATES:
            return given
    if is_stale(snapshot, now, settings.stale_after_s):  # the one staleness rule, shared with glueinfo.gather.gatherer
        return "Unknown"
    view = scheduler_view(snapshot)
    if view is not None and view.get("state") in ("Idle", "Busy", "Offline", "Unknown"):
        return str(view["state"])
    use = processor_use(snapshot)
    if use is not None and snapshot.cpu and snapshot.cpu.logical_cpus:  # processor_use needs the CPU count too
        return "Busy" if use[0] / snapshot.cpu.logical_cpus >= settings.busy_threshold else "Idle"
    if (snapshot.cpu and snapshot.cpu.logical_cpus) or (snapshot.memory and snapshot.memory.ram_mb):
        return "Configured"
    return "Unknown"


def _given_state(snapshot: HostSnapshot, now: float, settings: NodeSettings) -> Optional[str]:
    """The State other software gave its Node, as it stands now: Unknown once the report is older
    than ``stale_after`` (by a known collection time); None when none was given."""
    published = snapshot.published
    if published is None or published.state is None:
        return None
    if snapshot.collected_at > 0 and is_stale(snapshot, now, settings.stale_after_s):
        return "Unknown"
    return published.state


def document_state(snapshot: HostSnapshot, now: float, settings: NodeSettings) -> Optional[str]:
    """The State a host's Node carries (None: no State element).  A Node glueinfo writes:
    :func:`node_state`.  A Node other software published (``snapshot.published``): what its publisher
    meant, not glueinfo's reading of the load: (1) Offline when the host matches ``[node]
    offline_hosts``; (2) Unknown when its collection time is known and older than ``stale_after``;
    (3) its given State, any word; (4) none given: the CE's batch system's view when one knows the
    node; (5) otherwise none (docs/sss-node-reader.md)."""
    if snapshot.published is None:
        return node_state(snapshot, now, settings)
    if _matches(snapshot.hostname, settings.offline_hosts):
        return "Offline"
    given = _given_state(snapshot, now, settings)
    if given is not None:
        return given
    if snapshot.collected_at > 0 and is_stale(snapshot, now, settings.stale_after_s):
        return "Unknown"
    view = scheduler_view(snapshot)
    if view is not None and view.get("state") in ("Idle", "Busy", "Offline", "Unknown"):
        return str(view["state"])
    return None
