"""The GLUE 2.0 LDAP tree (o=glue) of an assembled site, as glueinfo.core.ldif Entries.

Input: the AssembledSite (site model, SubClusters, each CE's QueueState),
typed options (:class:`Glue2Options`), the endpoints' health (checked by the
publish step with glueinfo.glue.glue2.health, never here) and the time.
Output, parents before children (docs/glue2-mapping.md has every attribute's
source)::

    GLUE2DomainID=<site>,<base>                       AdminDomain, Location, Contacts
    GLUE2ServiceID=<service>,<base>                   ComputingService per CE host
      GLUE2EndpointID=...                             ComputingEndpoint per endpoint URL
        GLUE2PolicyID=...                             AccessPolicy
      GLUE2ShareID=...                                ComputingShare per queue and VO
        GLUE2PolicyID=...                             MappingPolicy
      GLUE2ManagerID=...                              ComputingManager per LRMS
        GLUE2ApplicationEnvironmentID=...             run-time environment tags
      GLUE2ResourceID=...                             ExecutionEnvironment per SubCluster
        GLUE2BenchmarkID=...
        (and, GLUE 2.1, AcceleratorEnvironment here, ComputingManagerAccelerator below the Manager,
        ComputingShareAccelerator below the Share: glueinfo.glue.glue2.accelerators)
      GLUE2ToStorageServiceID=...                     close storage

``<base>`` is ``GLUE2GroupID=resource,o=glue`` (``[glue] dit = resource``),
or ``GLUE2GroupID=resource,GLUE2DomainID=<site>,o=glue`` below the
AdminDomain at ``GLUE2DomainID=<site>,o=glue`` (``dit = site``).

Unknown values are left out, never replaced by an invented one.  Where the
schema requires a value glueinfo cannot know, GLUE's own word for unknown is
published (GLUE 2.1 Appendix A, the place-holders for unknown data), so no
entity others point at is dropped: ExecutionEnvironment ConnectivityIn/Out
``undefined`` (A.3, ExtendedBoolean_t), and for a CE whose type is neither
declared nor found (no ``[ce:NAME] implementation_name``) ServiceType and
EndpointInterfaceName ``UNDEFINEDVALUE`` (A.4), EndpointURL
``https://your-ce.example.org/`` (A.5, A.11: a value not configured) and
HealthState ``unknown``, with one warning naming the keys that set them: no
middleware is claimed.  No number is ever a place-holder (A.8's all-nines
are what EGI's profile flags): an entity that cannot be written without an
unknown number, or without platform, main memory or OS (an
ExecutionEnvironment, unless ``[cluster:NAME]``/``[subcluster:NAME]`` state
them), a Share or Endpoint without a serving state, is left out with a
warning and nothing refers to it.  Without ``[site] id`` no GLUE 2 tree is
published (every Service must name its AdminDomain): one warning, no entries.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Optional

from glueinfo.core.ldif import Entry, make_dn
from glueinfo.core.model import QueueLimits, QueueState, VoJobCounts
from glueinfo.core.records import dataclass
from glueinfo.glue.glue2 import accelerators
from glueinfo.glue.glue2.ces import CeView, ce_views
from glueinfo.glue.glue2.health import EndpointHealth
from glueinfo.glue.glue2.ids import Ids
from glueinfo.glue.glue2.times import CreationTimes
from glueinfo.glue.render13 import mailto
from glueinfo.lrms.registry import glue_lrms_type
from glueinfo.site.accelerators import group_accelerators, runtime_tags
from glueinfo.site.access import vos_of
from glueinfo.site.aggregate import SubClusterGroup, sum_known
from glueinfo.site.assemble import AssembledSite

PROFILE_NAME = "EGI"
PROFILE_VERSION = "1.0"  # the EGI GLUE 2.0 profile version gLite's and ARC's providers published
JOB_EXECUTION = "executionmanagement.jobexecution"
POLICY_SCHEME = "org.glite.standard"
RESOURCE_GROUP = "GLUE2GroupID=resource,o=glue"

# /etc/os-release NAME -> the OSName vocabulary of EGI's profile (glue-validator's OSName_t, W037/W044), where it
# has the distribution under an older name: Fedora Core became Fedora, SUSE LINUX became openSUSE and SUSE Linux
# Enterprise (os-release NAME "SLES", "SLED").  A distribution the list does not name (AlmaLinux, Rocky Linux) is
# published as its os-release NAME: giving it another distribution's name would be false.
OS_NAMES = {"debian gnu/linux": "Debian", "centos linux": "CentOS", "centos stream": "CentOS", "ubuntu": "Ubuntu",
            "scientific linux": "ScientificSL", "scientific linux cern slc": "ScientificCERNSLC",
            "red hat enterprise linux": "RedhatEnterpriseAS", "red hat enterprise linux server": "RedhatEnterpriseAS",
            "fedora": "Fedoracore", "fedora linux": "Fedoracore", "gentoo": "Gentoo", "suse linux": "SUSE LINUX",
            "opensuse": "SUSE LINUX", "opensuse leap": "SUSE LINUX", "opensuse tumbleweed": "SUSE LINUX",
            "sles": "SUSE LINUX", "sled": "SUSE LINUX"}
# GLUE 2.1 Appendix A: a required string (A.4) and a URL not configured (A.5, A.11) whose value is unknown.
UNDEFINED = "UNDEFINEDVALUE"
UNDEFINED_URL = "https://your-ce.example.org/"
SERVING = {"production": "production", "queueing": "queueing", "closed": "closed", "draining": "draining"}
SERVING_ORDER = ("production", "queueing", "draining", "closed")  # an endpoint serves as its best queue


@dataclass(frozen=True)
class Glue2Options:
    """How the GLUE 2 tree is laid out and stamped ([glue] dit and validity)."""

    dit: str = "resource"  # resource | site
    validity_s: int = 10800


def serving_state(state: Optional[QueueState], configured: Optional[str]) -> Optional[str]:
    """The LRMS's status, else the configured one, else production when the LRMS answered
    without error (it takes jobs as far as anyone can tell), else unknown (None)."""
    for value in ((state.status if state else None), configured):
        if value:
            return SERVING.get(value.lower())
    if state is not None and state.error is None:
        return "production"
    return None


def _seconds(minutes: Optional[int]) -> Optional[int]:
    return None if minutes is None else minutes * 60


def _policy(state: Optional[QueueState], ce: CeView, key: str, from_state: Optional[int]) -> Optional[int]:
    return from_state if from_state is not None else ce.spec.policies.get(key)


def _limit_s(ce: CeView, key: str, seconds: Optional[int], minutes: Optional[int]) -> Optional[int]:
    """A time limit in seconds: the batch system's own seconds when it gives them, else its minutes,
    else the ``[ce:NAME]`` key's (minutes), x 60."""
    if seconds is not None:
        return seconds
    return _seconds(minutes if minutes is not None else ce.spec.policies.get(key))


def _limits(ce: CeView, state: Optional[QueueState]) -> dict[str, Optional[int]]:
    """A share's limits other than the maximum times and job counts: the ``[ce:NAME]`` key's value
    (times in minutes, made seconds), else the batch system's (QueueState.limits: seconds, MB,
    slots).  The admin's value wins: the batch system's are read under them (docs/batch-systems.md)."""
    lrms = state.limits if state is not None else QueueLimits()
    configured = ce.limits
    return {
        "default_wall_clock_time": _first_known(_seconds(configured.get("default_wall_clock_time")),
                                                lrms.default_wall_clock_time_s),
        "default_cpu_time": _first_known(_seconds(configured.get("default_cpu_time")), lrms.default_cpu_time_s),
        "max_slots_per_job": _first_known(ce.spec.policies.get("max_slots_per_job"), lrms.max_slots_per_job),
        "max_main_memory": _first_known(configured.get("max_main_memory"), lrms.max_main_memory_mb),
        "guaranteed_main_memory": _first_known(configured.get("guaranteed_main_memory"), lrms.guaranteed_main_memory_mb),
        "max_virtual_memory": _first_known(configured.get("max_virtual_memory"), lrms.max_virtual_memory_mb),
        "guaranteed_virtual_memory": _first_known(configured.get("guaranteed_virtual_memory"),
                                                  lrms.guaranteed_virtual_memory_mb),
    }


def _first_known(*values: Optional[int]) -> Optional[int]:
    return next((value for value in values if value is not None), None)


def _at_most(default: Optional[int], limit: Optional[int]) -> Optional[int]:
    """A configured default capped at the limit published beside it: a job never gets more than the
    batch system's maximum, so a larger default is not what it gets (EGI profile W015/W018)."""
    if default is None or limit is None:
        return default
    return min(default, limit)


def share_limits(ce: CeView, state: Optional[QueueState]) -> dict[str, Optional[int]]:
    """What one job of this CE's queue may have, as its ComputingShares publish it (GLUE 2 units:
    seconds, MB, slots, jobs), read once for every document that states a queue's limits (the
    GLUE 2 tree, the CRR document): ``max_wall_time`` and ``max_cpu_time`` (the batch system's
    seconds, else its minutes, else the ``[ce:NAME]`` key's minutes), ``default_wall_time`` and
    ``default_cpu_time`` (capped at those), ``max_running_jobs``, ``max_waiting_jobs``,
    ``max_total_jobs``, ``max_slots_per_job`` and the memory figures ``max_main_memory``,
    ``guaranteed_main_memory``, ``max_virtual_memory``, ``guaranteed_virtual_memory``
    (:func:`_limits`: the admin's value wins).  None where not known; never raises."""
    limits = _limits(ce, state)
    max_wall = _limit_s(ce, "max_wall_clock_time", state.max_wall_clock_time_s if state else None,
                        state.max_wall_clock_time_min if state else None)
    max_cpu = _limit_s(ce, "max_cpu_time", state.max_cpu_time_s if state else None,
                       state.max_cpu_time_min if state else None)
    return {
        "max_wall_time": max_wall, "max_cpu_time": max_cpu,
        "default_wall_time": _at_most(limits["default_wall_clock_time"], max_wall),
        "default_cpu_time": _at_most(limits["default_cpu_time"], max_cpu),
        "max_running_jobs": _policy(state, ce, "max_running_jobs", state.max_running_jobs if state else None),
        "max_waiting_jobs": _policy(state, ce, "max_waiting_jobs", state.max_waiting_jobs if state else None),
        "max_total_jobs": _policy(state, ce, "max_total_jobs", state.max_total_jobs if state else None),
        "max_slots_per_job": limits["max_slots_per_job"],
        "max_main_memory": limits["max_main_memory"], "guaranteed_main_memory": limits["guaranteed_main_memory"],
        "max_virtual_memory": limits["max_virtual_memory"],
        "guaranteed_virtual_memory": limits["guaranteed_virtual_memory"],
    }


def cpu_multiplicity(sockets: Optional[int], cores: Optional[int]) -> Optional[str]:
    if not sockets or not cores:
        return None
    per_socket = cores / sockets
    return f"{'multicpu' if sockets > 1 else 'singlecpu'}-{'multicore' if per_socket > 1 else 'singlecore'}"


def extended_bool(value: Optional[bool]) -> str:
    """GLUE 2's ExtendedBoolean_t: ``true``, ``false``, or ``undefined`` when not known."""
    return "undefined" if value is None else ("true" if value else "false")


class _Tree:
    """Entries as they are made, with the profile's OtherInfo on every entity."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add(self, dn: str, classes: Sequence[str], pairs: Iterable[tuple[str, Any]], other_info: Sequence[str] = ()) -> Entry:
        attributes: dict[str, list[Any]] = {"objectClass": list(classes)}
        for name, value in pairs:
            if value is None or value == "" or value == []:
                continue
            values = value if isinstance(value, list) else [value]
            attributes.setdefault(name, []).extend(str(v) for v in values)
        if "GLUE2Entity" in classes:
            attributes["GLUE2EntityOtherInfo"] = [*other_info, f"ProfileName={PROFILE_NAME}", f"ProfileVersion={PROFILE_VERSION}"]
        entry = Entry.from_lists(dn, attributes)
        self.entries.append(entry)
        return entry


def glue2_entries(site: AssembledSite, options: Glue2Options = Glue2Options(), *,
                  health: Optional[Mapping[str, EndpointHealth]] = None, now: Optional[float] = None,
                  times: Optional[CreationTimes] = None, warnings: Optional[list[str]] = None) -> list[Entry]:
    """Every GLUE 2 entry of the site, parents before children (module docstring).

    ``health``: endpoint URL -> its checked health (missing: HealthState
    unknown, "not checked").  ``now``: the render time (default: the
    assembly's).  ``times``: the caller's CreationTimes memory (default: a
    fresh one, so every entry is stamped ``now``).  ``warnings`` collects
    one line per entity left out.  Raises Glue2Error for malformed GLUE 2
    CE settings.
    """
    warnings = warnings if warnings is not None else []
    model = site.model
    site_id = model.site.unique_id
    if not site_id:
        warnings.append("GLUE 2: no [site] id; every ComputingService must name its AdminDomain, so no o=glue tree is published")
        return []
    now = site.assembled_at if now is None else now
    health = health or {}
    tree = _Tree()
    if options.dit == "site":
        domain_dn = make_dn("GLUE2DomainID", site_id, "o=glue")
        base = "GLUE2GroupID=resource," + domain_dn
    else:
        base = RESOURCE_GROUP
        domain_dn = make_dn("GLUE2DomainID", site_id, base)
    _admin_domain(tree, model, domain_dn, warnings)
    if options.dit == "site":
        tree.add(base, ("GLUE2Group",), [("GLUE2GroupID", "resource")])

    views = ce_views(model)
    _warn_unknown_types(views, warnings)
    services: dict[tuple[str, str], list[CeView]] = {}
    for view in views:
        services.setdefault((view.spec.host.lower(), view.kind.key), []).append(view)
    unbenchmarked: list[str] = []
    for ces in services.values():
        _service(tree, site, ces, base, site_id, health, warnings, views, unbenchmarked)
    if unbenchmarked:
        warnings.append(f"GLUE 2: no Benchmark for {len(unbenchmarked)} ExecutionEnvironment(s) ({unbenchmarked[0]}"
                        f"{', ...' if len(unbenchmarked) > 1 else ''}): nothing states one; set [ce:NAME] benchmarks, "
                        f"e.g. HEP-SPEC06=12.5")
    entries = tree.entries
    return (times or CreationTimes()).stamp(entries, now, options.validity_s)


def _warn_unknown_types(views: Sequence[CeView], warnings: list[str]) -> None:
    """One warning for every CE whose type is not known (their endpoints carry GLUE's place-holders),
    naming the keys that set it."""
    unknown = [f"[ce:{v.spec.section}]" if v.spec.section else "the implicit fork CE" for v in views if not v.known]
    if unknown:
        warnings.append(f"GLUE 2: CE type not known for {', '.join(unknown)}: no middleware claimed, ServiceType, "
                        f"EndpointInterfaceName and EndpointURL published as GLUE's place-holders ({UNDEFINED}, "
                        f"{UNDEFINED_URL}); set [ce:NAME] implementation_name (HTCondorCE, ARC-CE), or "
                        f"service_type, interface_name and endpoint_url")


def _admin_domain(tree: _Tree, model: Any, dn: str, warnings: list[str]) -> None:
    """The AdminDomain with its Location and Contacts; a warning when it has neither of one kind
    (EGI's profile wants both: glue-validator E025), naming the [site] keys that give them."""
    info = model.site
    site_id = info.unique_id
    lacking = []
    if not (info.location or info.latitude or info.longitude):
        lacking.append("Location ([site] location, latitude, longitude)")
    if not any((info.email, info.sysadmin_contact, info.user_support_contact, info.security_contact)):
        lacking.append("Contact ([site] email, sysadmin_contact, user_support_contact, security_contact)")
    if lacking:
        warnings.append(f"GLUE 2: AdminDomain {site_id} has no {' and no '.join(lacking)}: EGI's profile requires them")
    tree.add(dn, ("GLUE2Entity", "GLUE2Domain", "GLUE2AdminDomain"), [
        ("GLUE2DomainID", site_id), ("GLUE2EntityName", info.name), ("GLUE2DomainDescription", info.description),
        ("GLUE2DomainWWW", info.web)], other_info=list(info.other_info))
    if info.location or info.latitude or info.longitude:
        place, _, country = info.location.rpartition(",")
        tree.add(make_dn("GLUE2LocationID", f"{site_id}_location", dn), ("GLUE2Entity", "GLUE2Location"), [
            ("GLUE2LocationID", f"{site_id}_location"), ("GLUE2LocationPlace", place.strip() or info.location),
            ("GLUE2LocationCountry", country.strip() if place else None),
            ("GLUE2LocationLatitude", info.latitude), ("GLUE2LocationLongitude", info.longitude),
            ("GLUE2LocationDomainForeignKey", site_id)])
    for kind, detail in (("general", info.email), ("sysadmin", info.sysadmin_contact),
                         ("usersupport", info.user_support_contact), ("security", info.security_contact)):
        if not detail:
            continue
        detail = mailto(detail)
        contact_id = f"{site_id}_{kind}_contact"
        tree.add(make_dn("GLUE2ContactID", contact_id, dn), ("GLUE2Entity", "GLUE2Contact"), [
            ("GLUE2ContactID", contact_id), ("GLUE2ContactDetail", detail), ("GLUE2ContactType", kind),
            ("GLUE2ContactDomainForeignKey", site_id)])


class _Service:
    """One ComputingService as it is written: its CEs (one host, one kind of CE), its ids and DN, and
    each CE's queue state by unique id."""

    __slots__ = ("ces", "ids", "id", "dn", "states")

    def __init__(self, site: AssembledSite, ces: list[CeView], base: str) -> None:
        first = ces[0]
        self.ces = ces
        self.ids = Ids(first.kind, first.spec.host)
        self.id = self.ids.service
        self.dn = make_dn("GLUE2ServiceID", self.id, base)
        self.states: dict[str, Optional[QueueState]] = {view.spec.unique_id: site.states.get(view.spec.unique_id) for view in ces}


NOT_CHECKABLE = EndpointHealth("unknown", "not checked: the CE's URL is not known ([ce:NAME] implementation_name or endpoint_url)")


class _Endpoint(NamedTuple):
    """A ComputingEndpoint to write: one per URL, served as its best queue."""

    id: str
    lead: CeView  # the first CE at the URL
    serving: str
    health: EndpointHealth
    rules: list[str]


def _service(tree: _Tree, site: AssembledSite, ces: list[CeView], base: str, site_id: str,
             health: Mapping[str, EndpointHealth], warnings: list[str], every_ce: list[CeView],
             unbenchmarked: list[str]) -> None:
    """The ComputingService of ``ces`` (the CEs of one host and kind) and every entity below it, in
    the module docstring's order; an entity the schema cannot take is left out with a warning.
    ``unbenchmarked`` collects the ExecutionEnvironments written without a Benchmark."""
    service = _Service(site, ces, base)
    managers = _managers(service)
    environments = _environments(site, service)
    published_ees = _publishable_environments(environments, warnings)
    cluster_ees = _environments_of_ces(site, service, published_ees)
    endpoints = _endpoints(service, health, warnings)
    _service_entry(tree, service, site_id, len(endpoints), len(published_ees))
    for endpoint in endpoints:
        _endpoint_entry(tree, service, endpoint)
    _shares(tree, service, {endpoint.lead.url: endpoint.id for endpoint in endpoints}, cluster_ees, warnings)
    for lrms, manager_id in managers.items():
        manager_dn = _manager(tree, site, service, lrms, manager_id)
        _application_environments(tree, service, manager_id, manager_dn, managers, environments, published_ees)
    # ExecutionEnvironments with their Benchmarks
    for ee_id, sc in published_ees.items():
        view = environments[ee_id][1]
        if not _environment(tree, service.ids, ee_id, sc, view, managers[view.spec.lrms], service.dn, every_ce):
            unbenchmarked.append(ee_id)
    _close_storage(tree, service, warnings)


def _managers(service: _Service) -> dict[str, str]:
    """LRMS -> the id of its ComputingManager (one per LRMS), in the CEs' order."""
    managers: dict[str, str] = {}
    for view in service.ces:
        managers.setdefault(view.spec.lrms, service.ids.manager(view.spec.lrms))
    return managers


def _environments(site: AssembledSite, service: _Service) -> dict[str, tuple[SubClusterGroup, CeView]]:
    """EE id -> (SubCluster, first CE on it): one ExecutionEnvironment per SubCluster of the CEs' clusters."""
    environments: dict[str, tuple[SubClusterGroup, CeView]] = {}
    for view in service.ces:
        try:
            cluster = site.groups.cluster(view.spec.cluster)
        except KeyError:
            continue
        for sc in cluster.subclusters:
            ee_id = service.ids.execution_environment(sc.unique_id)
            environments.setdefault(ee_id, (sc, view))
    return environments


def _publishable_environments(environments: dict[str, tuple[SubClusterGroup, CeView]],
                              warnings: list[str]) -> dict[str, SubClusterGroup]:
    """The ExecutionEnvironments the schema can take (EE id -> SubCluster); each other one left out
    with a warning naming what is not known and the keys that can state it.  Unknown connectivity
    is no reason: it is published ``undefined``."""
    published_ees: dict[str, SubClusterGroup] = {}
    for ee_id, (sc, _lead) in environments.items():
        missing = [key for key in ("platform", "ram", "os_name") if sc.shared.get(key) is None]
        if missing:
            keys = ", ".join(missing)
            warnings.append(f"GLUE 2: ExecutionEnvironment {ee_id} left out: {keys} not known for all its hosts (the "
                            f"schema requires them); state them with {keys} in [cluster:{sc.cluster_id}] or a "
                            f"[subcluster:NAME] for its hosts")
            continue
        published_ees[ee_id] = sc
    return published_ees


def _environments_of_ces(site: AssembledSite, service: _Service, published_ees: Mapping[str, SubClusterGroup]) -> dict[str, list[str]]:
    """CE unique id -> the published ExecutionEnvironments of its cluster (a CE whose cluster is not found has none)."""
    cluster_ees: dict[str, list[str]] = {}
    for view in service.ces:
        try:
            cluster = site.groups.cluster(view.spec.cluster)
        except KeyError:
            continue
        cluster_ees[view.spec.unique_id] = [e for e in (service.ids.execution_environment(sc.unique_id) for sc in cluster.subclusters)
                                            if e in published_ees]
    return cluster_ees


def _endpoints(service: _Service, health: Mapping[str, EndpointHealth], warnings: list[str]) -> list[_Endpoint]:
    """The Endpoints to write, one per URL; one without a serving state is left out with a warning."""
    by_url: dict[str, list[CeView]] = {}
    for view in service.ces:
        by_url.setdefault(view.url, []).append(view)
    endpoints = []
    for url, members in by_url.items():
        lead = members[0]
        states_here = [serving_state(service.states[m.spec.unique_id], m.spec.status) for m in members]
        known = [s for s in states_here if s]
        if not known:
            warnings.append(f"GLUE 2: endpoint {url} left out: no serving state (its batch system did not answer "
                            f"and [ce:...] status is not set)")
            continue
        checked = health.get(url, EndpointHealth("unknown", "not checked") if url else NOT_CHECKABLE)
        rules = list(dict.fromkeys(rule for m in members for rule in m.spec.access))
        endpoints.append(_Endpoint(service.ids.endpoint(url, lead.interface_name or UNDEFINED), lead,
                                   min(known, key=SERVING_ORDER.index), checked, rules))
    return endpoints


def _service_entry(tree: _Tree, service: _Service, site_id: str, endpoints: int, environments: int) -> None:
    """The ComputingService entry: its job counts, and its complexity (``endpoints`` and ``environments``
    published, every Share planned)."""
    ces, states = service.ces, service.states
    first = ces[0]
    counted = [states[v.spec.unique_id] for v in ces]
    answered = all(s is not None for s in counted)
    # A job waiting for several queues of one batch system is counted in each (Grid Engine): the
    # service's waiting and total jobs are left out rather than summed more than once.
    queues_of = Counter(v.spec.lrms for v in ces)
    overcounted = any((s := states[v.spec.unique_id]) is not None and s.waiting_shared and queues_of[v.spec.lrms] > 1
                      for v in ces)
    shares_planned = sum(len(vos_of(v.spec.access)) for v in ces)
    tree.add(service.dn, ("GLUE2Entity", "GLUE2Service", "GLUE2ComputingService"), [
        ("GLUE2ServiceID", service.id), ("GLUE2EntityName", f"Computing Service {first.spec.host}"),
        ("GLUE2ServiceCapability", JOB_EXECUTION), ("GLUE2ServiceType", first.service_type or UNDEFINED),
        ("GLUE2ServiceQualityLevel", first.quality_level),
        ("GLUE2ServiceComplexity", f"endpointType={endpoints}, share={shares_planned}, "
                                   f"resource={environments}"),
        ("GLUE2ServiceAdminDomainForeignKey", site_id),
        ("GLUE2ComputingServiceTotalJobs",
         sum_known(s.total_jobs for s in counted if s) if answered and not overcounted else None),
        ("GLUE2ComputingServiceRunningJobs", sum_known(s.running_jobs for s in counted if s) if answered else None),
        ("GLUE2ComputingServiceWaitingJobs",
         sum_known(s.waiting_jobs for s in counted if s) if answered and not overcounted else None)])


def _endpoint_entry(tree: _Tree, service: _Service, endpoint: _Endpoint) -> None:
    """A ComputingEndpoint, with its AccessPolicy when its CEs have access rules."""
    endpoint_id, lead, serving, checked, rules = endpoint
    service_id = service.id
    endpoint_dn = make_dn("GLUE2EndpointID", endpoint_id, service.dn)
    interface = lead.interface_name or UNDEFINED
    tree.add(endpoint_dn, ("GLUE2Entity", "GLUE2Endpoint", "GLUE2ComputingEndpoint"), [
        ("GLUE2EndpointID", endpoint_id), ("GLUE2EntityName", f"{lead.spec.host} {interface}"),
        ("GLUE2EndpointURL", lead.url or UNDEFINED_URL), ("GLUE2EndpointCapability", JOB_EXECUTION),
        ("GLUE2EndpointTechnology", lead.kind.technology), ("GLUE2EndpointInterfaceName", interface),
        ("GLUE2EndpointInterfaceVersion", lead.interface_version), ("GLUE2EndpointImplementor", lead.kind.implementor),
        ("GLUE2EndpointImplementationName", lead.implementation_name),
        ("GLUE2EndpointImplementationVersion", lead.implementation_version),
        ("GLUE2EndpointQualityLevel", lead.quality_level), ("GLUE2EndpointHealthState", checked.state),
        ("GLUE2EndpointHealthStateInfo", checked.info), ("GLUE2EndpointServingState", serving),
        ("GLUE2ComputingEndpointJobDescription", list(lead.kind.job_description)),
        ("GLUE2EndpointServiceForeignKey", service_id), ("GLUE2ComputingEndpointComputingServiceForeignKey", service_id)])
    if rules:
        policy_id = service.ids.access_policy(endpoint_id)
        tree.add(make_dn("GLUE2PolicyID", policy_id, endpoint_dn), ("GLUE2Entity", "GLUE2Policy", "GLUE2AccessPolicy"), [
            ("GLUE2PolicyID", policy_id), ("GLUE2PolicyScheme", POLICY_SCHEME), ("GLUE2PolicyRule", rules),
            ("GLUE2AccessPolicyEndpointForeignKey", endpoint_id)])


def _shares(tree: _Tree, service: _Service, endpoint_ids: Mapping[str, str], cluster_ees: Mapping[str, list[str]],
            warnings: list[str]) -> None:
    """The ComputingShares: one per CE (queue) and VO of its access rules; one without a serving
    state (or a published Endpoint) is left out with a warning."""
    one_queue = len({view.spec.queue for view in service.ces}) == 1
    for view in service.ces:
        share_endpoint = endpoint_ids.get(view.url)
        state = service.states[view.spec.unique_id]
        share_serving = serving_state(state, view.spec.status)
        vos = vos_of(view.spec.access)
        if not vos:
            warnings.append(f"GLUE 2: CE {view.spec.unique_id}: no VO in its access rules, so no ComputingShare")
        for vo, rules in vos.items():
            if share_endpoint is None or share_serving is None:
                warnings.append(f"GLUE 2: share of {vo} on queue {view.spec.queue} left out: no serving state")
                continue
            _share(tree, service.ids, view, state, vo, rules, share_serving, share_endpoint, service.id, service.dn,
                   cluster_ees.get(view.spec.unique_id, []), one_queue)


def _manager(tree: _Tree, site: AssembledSite, service: _Service, lrms: str, manager_id: str) -> str:
    """The ComputingManager of ``lrms`` (its CEs' clusters' CPUs and slots); returns its DN."""
    states = service.states
    members = [v for v in service.ces if v.spec.lrms == lrms]
    cluster_ids = list(dict.fromkeys(v.spec.cluster for v in members))
    clusters = []
    for cluster_id in cluster_ids:
        try:
            clusters.append(site.groups.cluster(cluster_id))
        except KeyError:
            pass
    # A cluster without a known host (or not found) has an unknown CPU count, not none: the totals are left out.
    cpus_known = bool(clusters) and len(clusters) == len(cluster_ids) and all(c.hosts for c in clusters)
    lead_state = states[members[0].spec.unique_id]
    slots = []
    for cluster_id in cluster_ids:
        # CEs of one cluster share its slots: each cluster counted once, by the largest TotalCPUs
        # of its queues (what the manager has at least), whatever order the CEs are configured in.
        # A queue that did not say leaves the cluster's figure unknown, never a partial one.
        totals = [s.total_cpus if (s := states[v.spec.unique_id]) is not None else None
                  for v in members if v.spec.cluster == cluster_id]
        slots.append(None if not totals or None in totals else max(t for t in totals if t is not None))
    manager_dn = make_dn("GLUE2ManagerID", manager_id, service.dn)
    service_id = service.id
    manager = tree.add(manager_dn, ("GLUE2Entity", "GLUE2Manager", "GLUE2ComputingManager"), [
        ("GLUE2ManagerID", manager_id), ("GLUE2EntityName", f"{glue_lrms_type(lrms)} on {service.ces[0].spec.host}"),
        ("GLUE2ManagerProductName", (lead_state.lrms_type if lead_state and lead_state.lrms_type else glue_lrms_type(lrms))),
        ("GLUE2ManagerProductVersion", (lead_state.lrms_version if lead_state else None) or members[0].spec.lrms_version),
        ("GLUE2ComputingManagerTotalPhysicalCPUs", sum_known(c.physical_cpus for c in clusters) if cpus_known else None),
        ("GLUE2ComputingManagerTotalLogicalCPUs", sum_known(c.logical_cpus for c in clusters) if cpus_known else None),
        ("GLUE2ComputingManagerTotalSlots", sum_known(slots)),
        ("GLUE2ManagerServiceForeignKey", service_id), ("GLUE2ComputingManagerComputingServiceForeignKey", service_id)])
    # its accelerators: the clusters' hosts' devices, the queues' slots (glueinfo.glue.glue2.accelerators)
    accelerators.add_manager(tree, service.ids, manager, manager_id, accelerators.manager_figures(
        clusters, len(clusters) == len(cluster_ids),
        {c: [states[v.spec.unique_id] for v in members if v.spec.cluster == c] for c in cluster_ids}))
    return manager_dn


def _application_environments(tree: _Tree, service: _Service, manager_id: str, manager_dn: str, managers: Mapping[str, str],
                              environments: Mapping[str, tuple[SubClusterGroup, CeView]],
                              published_ees: Mapping[str, SubClusterGroup]) -> None:
    """One ApplicationEnvironment per run-time environment tag of the manager's published ExecutionEnvironments."""
    tags: dict[str, list[str]] = {}
    for ee_id, sc in published_ees.items():
        if managers.get(environments[ee_id][1].spec.lrms) != manager_id:
            continue
        # the hosts' tags, and their accelerator types (GPU), as GLUE 1.3 publishes them
        for tag in dict.fromkeys((*(sc.shared.get("runtime_environment") or ()), *runtime_tags(group_accelerators(sc.hosts)))):
            tags.setdefault(tag, []).append(ee_id)
    for tag, ee_ids in sorted(tags.items()):
        app_id = service.ids.application_environment(tag)
        tree.add(make_dn("GLUE2ApplicationEnvironmentID", app_id, manager_dn),
                 ("GLUE2Entity", "GLUE2ApplicationEnvironment"), [
                     ("GLUE2ApplicationEnvironmentID", app_id), ("GLUE2ApplicationEnvironmentAppName", tag),
                     ("GLUE2ApplicationEnvironmentComputingManagerForeignKey", manager_id),
                     ("GLUE2ApplicationEnvironmentExecutionEnvironmentForeignKey", ee_ids)])


def _close_storage(tree: _Tree, service: _Service, warnings: list[str]) -> None:
    """A ToStorageService per close storage service of the CEs (each once); one without a local path
    is left out with a warning."""
    seen: set[str] = set()
    for view in service.ces:
        for storage in view.close_storage:
            if storage.service_id in seen:
                continue
            seen.add(storage.service_id)
            if not storage.local_path:
                warnings.append(f"GLUE 2: close storage {storage.service_id} of CE {view.spec.unique_id} left out: "
                                f"no local path (close_se = ID=LOCAL_PATH[:REMOTE_PATH])")
                continue
            link_id = service.ids.to_storage(storage.service_id)
            tree.add(make_dn("GLUE2ToStorageServiceID", link_id, service.dn), ("GLUE2Entity", "GLUE2ToStorageService"), [
                ("GLUE2ToStorageServiceID", link_id), ("GLUE2ToStorageServiceLocalPath", storage.local_path),
                ("GLUE2ToStorageServiceRemotePath", storage.remote_path),
                ("GLUE2ToStorageServiceComputingServiceForeignKey", service.id),
                ("GLUE2ToStorageServiceStorageServiceForeignKey", storage.service_id)])


def _share(tree: _Tree, ids: Ids, view: CeView, state: Optional[QueueState], vo: str, rules: list[str], serving: str,
           endpoint_id: str, service_id: str, service_dn: str, ee_ids: list[str], one_queue: bool) -> None:
    spec = view.spec
    share_id = ids.share(spec.queue, vo, one_queue)
    # The same counts as the GLUE 1.3 VOView's, known or not by one rule (QueueState.counts_of_vo).
    counts: Optional[VoJobCounts] = state.counts_of_vo(vo) if state is not None else None
    limits = share_limits(view, state)
    share_dn = make_dn("GLUE2ShareID", share_id, service_dn)
    share = tree.add(share_dn, ("GLUE2Entity", "GLUE2Share", "GLUE2ComputingShare"), [
        ("GLUE2ShareID", share_id), ("GLUE2EntityName", f"{spec.queue} {vo}"),
        ("GLUE2ShareDescription", f"Share of {vo} on queue {spec.queue}"),
        ("GLUE2ComputingShareMappingQueue", spec.queue), ("GLUE2ComputingShareServingState", serving),
        ("GLUE2ComputingShareMaxWallTime", limits["max_wall_time"]), ("GLUE2ComputingShareMaxCPUTime", limits["max_cpu_time"]),
        ("GLUE2ComputingShareDefaultWallTime", limits["default_wall_time"]),
        ("GLUE2ComputingShareDefaultCPUTime", limits["default_cpu_time"]),
        ("GLUE2ComputingShareMaxRunningJobs", limits["max_running_jobs"]),
        ("GLUE2ComputingShareMaxWaitingJobs", limits["max_waiting_jobs"]),
        ("GLUE2ComputingShareMaxTotalJobs", limits["max_total_jobs"]),
        ("GLUE2ComputingShareMaxSlotsPerJob", limits["max_slots_per_job"]),
        ("GLUE2ComputingShareMaxMainMemory", limits["max_main_memory"]),
        ("GLUE2ComputingShareGuaranteedMainMemory", limits["guaranteed_main_memory"]),
        ("GLUE2ComputingShareMaxVirtualMemory", limits["max_virtual_memory"]),
        ("GLUE2ComputingShareGuaranteedVirtualMemory", limits["guaranteed_virtual_memory"]),
        ("GLUE2ComputingShareRunningJobs", counts.running if counts else None),
        ("GLUE2ComputingShareWaitingJobs", counts.waiting if counts else None),
        ("GLUE2ComputingShareTotalJobs", counts.total if counts else None),
        ("GLUE2ComputingShareUsedSlots", counts.running if counts else None),
        ("GLUE2ComputingShareFreeSlots", state.free_job_slots if state else None),
        # the VO's own jobs' waits, else the queue's (glueinfo.lrms.waiting)
        ("GLUE2ComputingShareEstimatedAverageWaitingTime", state.response_times_of_vo(vo)[0] if state else None),
        ("GLUE2ComputingShareEstimatedWorstWaitingTime", state.response_times_of_vo(vo)[1] if state else None),
        ("GLUE2ShareServiceForeignKey", service_id), ("GLUE2ShareEndpointForeignKey", endpoint_id),
        ("GLUE2ShareResourceForeignKey", ee_ids),
        ("GLUE2ComputingShareComputingServiceForeignKey", service_id),
        ("GLUE2ComputingShareComputingEndpointForeignKey", endpoint_id),
        ("GLUE2ComputingShareExecutionEnvironmentForeignKey", ee_ids)])
    accelerators.add_share(tree, ids, share, share_id, accelerators.share_figures(state, len(vos_of(spec.access)) == 1))
    policy_id = ids.mapping_policy(share_id, spec.queue, vo)
    tree.add(make_dn("GLUE2PolicyID", policy_id, share_dn), ("GLUE2Entity", "GLUE2Policy", "GLUE2MappingPolicy"), [
        ("GLUE2PolicyID", policy_id), ("GLUE2PolicyScheme", POLICY_SCHEME), ("GLUE2PolicyRule", rules),
        ("GLUE2MappingPolicyShareForeignKey", share_id)])


def _instances(sc: SubClusterGroup) -> tuple[Optional[int], Optional[int]]:
    """(used, unavailable) instances from the batch system's view of each host (Busy; Offline or
    Unknown), or (None, None) when some host has no view."""
    used = unavailable = 0
    for host in sc.hosts:
        view = host.extra.get("lrms") if isinstance(host.extra, dict) else None
        if not isinstance(view, dict) or not view.get("state"):
            return None, None
        state = view["state"]
        used += state == "Busy"
        unavailable += state in ("Offline", "Unknown")
    return used, unavailable


def _environment(tree: _Tree, ids: Ids, ee_id: str, sc: SubClusterGroup, view: CeView, manager_id: str, service_dn: str,
                 ces: list[CeView]) -> bool:
    """The ExecutionEnvironment with its Benchmarks; returns whether it has any."""
    shared = sc.shared
    used, unavailable = _instances(sc)
    os_name = shared.get("os_name")
    # The site's CEs on this cluster give benchmarks and scaling factors; the first (config order) that sets each wins.
    on_cluster = [v for v in ces if v.spec.cluster == sc.cluster_id]
    cpu_scaling = next((v.cpu_scaling for v in on_cluster if v.cpu_scaling is not None), None)
    wall_scaling = next((v.wall_scaling for v in on_cluster if v.wall_scaling is not None), None)
    ee_dn = make_dn("GLUE2ResourceID", ee_id, service_dn)
    environment = tree.add(ee_dn, ("GLUE2Entity", "GLUE2Resource", "GLUE2ExecutionEnvironment"), [
        ("GLUE2ResourceID", ee_id), ("GLUE2EntityName", sc.name),
        ("GLUE2ExecutionEnvironmentPlatform", shared.get("platform")),
        ("GLUE2ExecutionEnvironmentTotalInstances", len(sc.hosts)),
        ("GLUE2ExecutionEnvironmentUsedInstances", used), ("GLUE2ExecutionEnvironmentUnavailableInstances", unavailable),
        ("GLUE2ExecutionEnvironmentPhysicalCPUs", shared.get("sockets")),
        ("GLUE2ExecutionEnvironmentLogicalCPUs", shared.get("logical_cpus")),
        ("GLUE2ExecutionEnvironmentCPUMultiplicity", cpu_multiplicity(shared.get("sockets"), shared.get("physical_cores"))),
        ("GLUE2ExecutionEnvironmentCPUVendor", shared.get("cpu_vendor")),
        ("GLUE2ExecutionEnvironmentCPUModel", shared.get("cpu_model")),
        ("GLUE2ExecutionEnvironmentCPUVersion", shared.get("cpu_version")),
        ("GLUE2ExecutionEnvironmentCPUClockSpeed", shared.get("cpu_clock")),
        ("GLUE2ExecutionEnvironmentCPUTimeScalingFactor", None if cpu_scaling is None else f"{cpu_scaling:g}"),
        ("GLUE2ExecutionEnvironmentWallTimeScalingFactor", None if wall_scaling is None else f"{wall_scaling:g}"),
        ("GLUE2ExecutionEnvironmentMainMemorySize", shared.get("ram")),
        ("GLUE2ExecutionEnvironmentVirtualMemorySize", shared.get("virtual_memory")),
        # The OS facts come from /etc/os-release, which only Linux has.
        ("GLUE2ExecutionEnvironmentOSFamily", "linux" if os_name else None),
        ("GLUE2ExecutionEnvironmentOSName", OS_NAMES.get(str(os_name).lower(), os_name) if os_name else None),
        ("GLUE2ExecutionEnvironmentOSVersion", shared.get("os_release")),
        ("GLUE2ExecutionEnvironmentConnectivityIn", extended_bool(shared.get("inbound_ip"))),
        ("GLUE2ExecutionEnvironmentConnectivityOut", extended_bool(shared.get("outbound_ip"))),
        ("GLUE2ResourceManagerForeignKey", manager_id),
        ("GLUE2ExecutionEnvironmentComputingManagerForeignKey", manager_id)])
    accelerators.add_environment(tree, ids, environment, ee_id, group_accelerators(sc.hosts))
    benchmarks: dict[str, str] = {}
    for v in on_cluster:
        for kind, number in v.benchmarks:
            benchmarks.setdefault(kind.lower(), f"{number:g}")
    if shared.get("si00") is not None:
        benchmarks.setdefault("specint2000", str(shared["si00"]))
    for kind, text in benchmarks.items():
        benchmark_id = ids.benchmark(ee_id, kind)
        tree.add(make_dn("GLUE2BenchmarkID", benchmark_id, ee_dn), ("GLUE2Entity", "GLUE2Benchmark"), [
            ("GLUE2BenchmarkID", benchmark_id), ("GLUE2EntityName", f"Benchmark {kind}"),
            ("GLUE2BenchmarkType", kind), ("GLUE2BenchmarkValue", text),
            ("GLUE2BenchmarkExecutionEnvironmentForeignKey", ee_id),
            ("GLUE2BenchmarkComputingManagerForeignKey", manager_id)])
    return bool(benchmarks)
