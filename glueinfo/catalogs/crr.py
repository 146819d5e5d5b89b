"""WLCG's Computing Resource Reporting (CRR) document of an assembled site.

The WLCG Information System Evolution task force agreed a JSON document a
site publishes instead of BDII, which CRIC reads (docs/crr.md names the
sources and every field's origin).  This renderer writes one per site::

    {"computingresource": {
        "name": ..., "site": ...,
        "capacity": {"hosts", "processors", "physical_cores", "sockets", "main_memory", "accelerators"},
        "accesspoints": [{"name", "endpoint_url", "interface_name", "interface_version", "flavour",
                          "version", "shares"}],
        "computingshares": [{"name", "queue", "access_point", "batch_system", "batch_system_version",
                             "serving_state", "vos", "max_wall_time", ...}]}}

Input: the AssembledSite (the hosts measured, the clusters they form, each
CE's QueueState), the typed PublishSettings, and, per CE, what the GLUE 2
renderer resolves for it (:class:`ShareFacts`: the endpoint, the serving
state, the VOs, the limits), which the publish layer hands in because this
package sits beside glueinfo.glue and does not import it: the access points
are the GLUE 2 endpoints and the limits the ComputingShares', by the same
functions.

Only what is known is written: a figure that is not known for every host or
queue it covers is left out (never a zero, a place-holder or a partial sum);
a CE whose endpoint URL is not known has no access point (GLUE 2 publishes a
place-holder URL there; CRR has none).  No clock is read and no count that
changes with the jobs is written, so the same site gives the same bytes
(outputs then resend nothing).  Never raises on data.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from glueinfo.lrms.registry import glue_lrms_type
from glueinfo.site.accelerators import group_accelerators
from glueinfo.site.aggregate import ClusterGroup, sum_known

if TYPE_CHECKING:
    from glueinfo.core.model import HostSnapshot
    from glueinfo.site.assemble import AssembledSite
    from glueinfo.site.publish_settings import PublishSettings

# A share's limits as ShareFacts.limits carries them (GLUE 2 units), in the order they are written.
LIMIT_KEYS = ("max_wall_time", "max_cpu_time", "max_main_memory", "max_virtual_memory", "max_running_jobs",
              "max_waiting_jobs", "max_total_jobs", "max_slots_per_job")


@dataclass(frozen=True)
class AccessPoint:
    """A CE's endpoint as GLUE 2 publishes it: ``name`` its GLUE 2 EndpointID, ``url`` its
    EndpointURL; ``flavour`` the CE type as CRIC names CE flavours (HTCONDOR-CE, ARC-CE,
    CREAM-CE), "" when not known; ``version`` the CE's implementation version ("": not known)."""

    name: str
    url: str
    interface_name: str = ""
    interface_version: str = ""
    flavour: str = ""
    version: str = ""


@dataclass(frozen=True)
class ShareFacts:
    """One CE (its queue) as the GLUE 2 renderer resolves it: its ``access_point`` (None when its
    URL is not known), its ``serving_state`` (production, queueing, draining, closed; None:
    unknown), the ``vos`` its access rules admit, and its ``limits`` (LIMIT_KEYS, GLUE 2 units:
    seconds, MB, slots, jobs; None or absent: not known)."""

    access_point: Optional[AccessPoint]
    serving_state: Optional[str] = None
    vos: tuple[str, ...] = ()
    limits: Mapping[str, Optional[int]] = field(default_factory=dict)


def _known(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The pairs whose value is known (not None, not "")."""
    return {key: value for key, value in pairs if value is not None and value != ""}


def served_clusters(site: AssembledSite) -> Optional[list[ClusterGroup]]:
    """The clusters the site's CEs submit to, each once; None when one of them has no host (or
    is not found): the site's capacity is then not known, as GLUE 2's ComputingManager says."""
    clusters: list[ClusterGroup] = []
    for cluster_id in dict.fromkeys(ce.cluster for ce in site.model.ces):
        try:
            cluster = site.groups.cluster(cluster_id)
        except KeyError:
            return None
        if not cluster.hosts:
            return None
        clusters.append(cluster)
    return clusters or None


def _accelerators(clusters: list[ClusterGroup]) -> Optional[list[dict[str, Any]]]:
    """Every accelerator of the clusters' hosts, one entry per kind (type, vendor, model,
    partition) with its total ``count``; ``[]`` when every host is known to have none; None when
    one SubCluster's are not known (glueinfo.site.accelerators.group_accelerators)."""
    totals: dict[tuple[str, str, str, str], int] = {}
    for cluster in clusters:
        for sc in cluster.subclusters:
            kinds = group_accelerators(sc.hosts)
            if kinds is None:
                return None
            for kind in kinds:
                key = (kind.type, kind.vendor or "", kind.model or "", kind.partition or "")
                totals[key] = totals.get(key, 0) + kind.count * len(sc.hosts)
    return [_known((("type", kind_type), ("vendor", vendor), ("model", model), ("partition", partition),
                    ("count", count)))
            for (kind_type, vendor, model, partition), count in sorted(totals.items())]


def capacity(site: AssembledSite) -> dict[str, Any]:
    """What the hosts behind the site's CEs have, each figure only when every host tells it:
    ``hosts``, ``processors`` (logical CPUs: the hardware threads jobs are given), ``physical_cores``,
    ``sockets``, ``main_memory`` (MB of RAM), ``accelerators``; ``{}`` when a cluster has no host."""
    clusters = served_clusters(site)
    if clusters is None:
        return {}
    hosts: list[HostSnapshot] = [host for cluster in clusters for host in cluster.hosts]
    return _known((
        ("hosts", len(hosts)),
        ("processors", sum_known(cluster.logical_cpus for cluster in clusters)),
        ("physical_cores", sum_known(host.cpu.physical_cores if host.cpu else None for host in hosts)),
        ("sockets", sum_known(cluster.physical_cpus for cluster in clusters)),
        ("main_memory", sum_known(host.memory.ram_mb if host.memory else None for host in hosts)),
        ("accelerators", _accelerators(clusters)),
    ))


def crr(site: AssembledSite, settings: PublishSettings, shares: Mapping[str, ShareFacts]) -> Optional[dict[str, Any]]:
    """The CRR document as a dict (module docstring), or None when the site has neither ``[site]
    name`` nor ``id`` (a CRR names its site; none is invented).  ``shares``: CE unique id -> its
    ShareFacts (a CE not in it is written with what the site itself tells of it)."""
    info = site.model.site
    site_id = settings.site_id or info.unique_id
    site_name = info.name or site_id
    if not site_name:
        return None
    access_points: dict[str, dict[str, Any]] = {}
    computing_shares = []
    for ce in site.model.ces:
        facts = shares.get(ce.unique_id, ShareFacts(access_point=None))
        state = site.states.get(ce.unique_id)
        point = facts.access_point
        if point is not None:
            entry = access_points.setdefault(point.name, _known((
                ("name", point.name), ("endpoint_url", point.url), ("interface_name", point.interface_name),
                ("interface_version", point.interface_version), ("flavour", point.flavour), ("version", point.version))))
            entry.setdefault("shares", []).append(ce.unique_id)
        computing_shares.append(_known((
            ("name", ce.unique_id), ("queue", ce.queue), ("access_point", point.name if point else None),
            # the batch system as GLUE 2's ComputingManager names it: its own answer, else the plugin's GLUE name
            ("batch_system", (state.lrms_type if state is not None and state.lrms_type else glue_lrms_type(ce.lrms))),
            ("batch_system_version", (state.lrms_version if state is not None else None) or ce.lrms_version),
            ("serving_state", facts.serving_state), ("vos", sorted(facts.vos) or None),
            *((key, facts.limits.get(key)) for key in LIMIT_KEYS))))
    for entry in access_points.values():
        entry["shares"].sort()
    resource = _known((
        ("name", site_id or site_name), ("site", site_name), ("capacity", capacity(site) or None),
        ("accesspoints", [access_points[name] for name in sorted(access_points)] or None),
        ("computingshares", sorted(computing_shares, key=lambda share: str(share["name"])))))
    return {"computingresource": resource}


def crr_document(site: AssembledSite, settings: PublishSettings, shares: Mapping[str, ShareFacts]) -> Optional[bytes]:
    """The document ``glueinfo crr-json`` prints, ``[run] crr_file`` holds and ``/crr.json`` serves:
    :func:`crr` as JSON, keys sorted, indented by one, UTF-8, ending in a newline; None as :func:`crr`."""
    document = crr(site, settings, shares)
    if document is None:
        return None
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False).encode() + b"\n"
