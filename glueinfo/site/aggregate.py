"""Aggregation stage: hosts -> Clusters -> SubClusters, with the facts each group shares.

Rules (GLUE CE schema 1.1, "Sub-Clusters"):

- Every host goes to one cluster (site.assign_clusters) and, within it, to
  exactly one SubCluster: the admin's pin that names it ([subcluster:NAME],
  first in file order), or else the automatic group of hosts equal on the
  aggregation key ([glue] aggregation_key; RAM compared rounded to
  ``ram_granularity_mb``; accelerators by their kinds and counts,
  :func:`accelerator_key`, a host with none known alike whether it was
  read to have none or not read).
- Grouping is deterministic: the same hosts give the same groups whatever
  order they arrive in.  An automatic SubCluster's id is stable
  (glueinfo.site.ids: it belongs to its group of hosts, spells no fact that
  upgrades change, and is remembered in the state directory when there is
  one; a new one of hosts with accelerators also spells their model); its
  Name is a readable summary of its key (platform, CPU, logical CPUs, RAM,
  OS, accelerators), which may change in place.
- A SubCluster publishes only the facts every member shares (``shared``);
  RAM is the exception that makes the rounding useful: when all members'
  RAM falls in one granularity bucket the SubCluster publishes the smallest
  member's RAM, the amount every member has at least.  Run-time environment
  tags shared are the tags every member has.
- Over those, the facts its ``[subcluster:NAME]`` (else its
  ``[cluster:NAME]``) states for all its hosts (``inbound_ip = yes``;
  site.model.GROUP_FACTS): the admin's word wins over what hosts report.
- PhysicalCPUs (sockets) and LogicalCPUs (hardware threads) are sums over
  the members; unknown (None) as soon as one member's count is unknown,
  never an undercount.

Facts are named as in ``FACTS`` (the same names [glue] aggregation_key
uses); the renderer maps them to GLUE attributes.
"""

from __future__ import annotations

import binascii
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Optional

from glueinfo.core.model import HostSnapshot
from glueinfo.core.records import dataclass
from glueinfo.gather.identity import host_key as host_key_of
from glueinfo.site.ids import SubClusterIds
from glueinfo.site.model import ClusterSpec, HostMatcher, SiteModel, assign_clusters, rdn_too_long


def _cpu(attr: str) -> Callable[[HostSnapshot], Any]:
    def get(host: HostSnapshot) -> Any:
        return getattr(host.cpu, attr) if host.cpu is not None else None
    return get


def _mem(attr: str) -> Callable[[HostSnapshot], Any]:
    def get(host: HostSnapshot) -> Any:
        return getattr(host.memory, attr) if host.memory is not None else None
    return get


def _os(attr: str) -> Callable[[HostSnapshot], Any]:
    def get(host: HostSnapshot) -> Any:
        return getattr(host.os, attr) if host.os is not None else None
    return get


def _static(attr: str) -> Callable[[HostSnapshot], Any]:
    def get(host: HostSnapshot) -> Any:
        return getattr(host.static, attr) if host.static is not None else None
    return get


def accelerator_key(host: HostSnapshot) -> Optional[tuple[tuple[Any, ...], ...]]:
    """What a host's accelerators are for grouping: its kinds (type, vendor, model, partition
    profile) with the count of each, sorted; None when it has none known, so a host known to have
    none and one whose accelerators are unknown (an agent older than the accelerators collector)
    stay in one SubCluster.  Memory, driver and how they were read do not split a group."""
    if not host.accelerators:
        return None
    counts: dict[tuple[Any, ...], int] = {}
    for kind in host.accelerators:
        if kind.count > 0:
            key = (kind.type, kind.vendor, kind.model, kind.partition)
            counts[key] = counts.get(key, 0) + kind.count
    if not counts:
        return None
    return tuple(sorted(((*key, count) for key, count in counts.items()),
                        key=lambda row: tuple("" if part is None else str(part) for part in row)))


def _runtime_environment(host: HostSnapshot) -> Optional[tuple[str, ...]]:
    if host.static is None:
        return None
    return tuple(sorted(set(host.static.runtime_environment)))


# Fact name -> how to read it from a snapshot.  None means unknown.
FACTS: dict[str, Callable[[HostSnapshot], Any]] = {
    "platform": _os("platform_type"),
    "cpu_vendor": _cpu("vendor"),
    "cpu_model": _cpu("model_name"),
    "cpu_version": _cpu("version"),
    "cpu_clock": _cpu("clock_mhz"),
    "instruction_set": _cpu("instruction_set"),
    "logical_cpus": _cpu("logical_cpus"),
    "physical_cores": _cpu("physical_cores"),
    "sockets": _cpu("sockets"),
    "ram": _mem("ram_mb"),
    "virtual_memory": _mem("virtual_mb"),
    "os_name": _os("name"),
    "os_release": _os("release"),
    "os_version": _os("version"),
    "inbound_ip": _static("inbound_ip"),
    "outbound_ip": _static("outbound_ip"),
    "runtime_environment": _runtime_environment,
    "si00": _static("si00"),
    "sf00": _static("sf00"),
    "accelerators": accelerator_key,
}


FACT_NAMES = tuple(FACTS)
_RAM = FACT_NAMES.index("ram")
_RTE = FACT_NAMES.index("runtime_environment")


def host_facts(host: HostSnapshot) -> tuple[Any, ...]:
    """Every fact of FACTS for one host, in FACT_NAMES order (the same values, read in one go:
    aggregation reads them for 100,000 hosts)."""
    os_, cpu, mem, static = host.os, host.cpu, host.memory, host.static
    if cpu is None:
        cpu_facts: tuple[Any, ...] = (None,) * 8
    else:
        cpu_facts = (cpu.vendor, cpu.model_name, cpu.version, cpu.clock_mhz, cpu.instruction_set, cpu.logical_cpus,
                     cpu.physical_cores, cpu.sockets)
    ram, virtual = (None, None) if mem is None else (mem.ram_mb, mem.virtual_mb)
    if os_ is None:
        platform = name = release = version = None
    else:
        platform, name, release, version = os_.platform_type, os_.name, os_.release, os_.version
    if static is None:
        static_facts: tuple[Any, ...] = (None,) * 5
    else:
        static_facts = (static.inbound_ip, static.outbound_ip, tuple(sorted(set(static.runtime_environment))),
                        static.si00, static.sf00)
    return (platform, *cpu_facts, ram, virtual, name, release, version, *static_facts,
            accelerator_key(host) if host.accelerators else None)


def ram_bucket(ram_mb: Optional[int], granularity_mb: int) -> Optional[int]:
    """RAM rounded to the nearest multiple of the granularity, in MB."""
    if ram_mb is None:
        return None
    return int(round(ram_mb / granularity_mb)) * granularity_mb


def host_key(host: HostSnapshot, key_names: Sequence[str], ram_granularity_mb: int,
             facts: Optional[tuple[Any, ...]] = None) -> tuple[Any, ...]:
    """The aggregation key of one host: the values of the key facts, RAM rounded."""
    facts = facts if facts is not None else host_facts(host)
    return tuple([ram_bucket(facts[index], ram_granularity_mb) if index == _RAM else facts[index]
                  for index in _key_positions(tuple(key_names))])


@functools.cache
def _key_positions(key_names: tuple[str, ...]) -> tuple[int, ...]:
    """Where each key fact sits in host_facts' tuple (asked for every host of every aggregation)."""
    return tuple(FACT_NAMES.index(name) for name in key_names)


@dataclass
class SubClusterGroup:
    """Hosts published as one SubCluster, and the facts they share."""

    unique_id: str
    name: str
    cluster_id: str
    hosts: list[HostSnapshot]  # sorted by host name
    pinned: bool = False
    tmp_dir: str = ""
    wn_tmp_dir: str = ""
    shared: dict[str, Any] = field(default_factory=dict)  # fact name -> value every member has
    physical_cpus: Optional[int] = None  # sum of sockets
    logical_cpus: Optional[int] = None  # sum of hardware threads


@dataclass
class ClusterGroup:
    """A Cluster's SubClusters."""

    spec: ClusterSpec
    subclusters: list[SubClusterGroup]

    @property
    def unique_id(self) -> str:
        return self.spec.unique_id

    @property
    def hosts(self) -> list[HostSnapshot]:
        return [host for sc in self.subclusters for host in sc.hosts]

    @property
    def physical_cpus(self) -> Optional[int]:
        return sum_known(sc.physical_cpus for sc in self.subclusters)

    @property
    def logical_cpus(self) -> Optional[int]:
        return sum_known(sc.logical_cpus for sc in self.subclusters)


@dataclass
class SiteGroups:
    """Every Cluster of the site with its SubClusters, and what did not fit."""

    clusters: list[ClusterGroup]
    uncovered: list[str] = field(default_factory=list)  # hosts no cluster covers
    warnings: list[str] = field(default_factory=list)

    def cluster(self, unique_id: str) -> ClusterGroup:
        for cluster in self.clusters:
            if cluster.unique_id == unique_id:
                return cluster
        raise KeyError(unique_id)


def sum_known(values: Iterable[Optional[int]]) -> Optional[int]:
    """The sum, or None when any value is unknown (a total of what is known would be invented)."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


def shared_facts(hosts: Sequence[HostSnapshot], ram_granularity_mb: int,
                 facts: Optional[Sequence[tuple[Any, ...]]] = None) -> dict[str, Any]:
    """The facts every host of the group has, with the same value (RAM: see the module docstring).
    ``facts``: the hosts' host_facts, when already read."""
    shared: dict[str, Any] = {}
    if not hosts:
        return shared
    rows = facts if facts is not None else [host_facts(h) for h in hosts]
    count = len(rows)
    for index, column in enumerate(zip(*rows)):  # noqa: B905 - rows have one length
        name = FACT_NAMES[index]
        if index == _RTE:
            if None not in column:
                common = set(column[0]).intersection(*column[1:]) if count > 1 else set(column[0])
                if common:
                    shared[name] = tuple(sorted(common))
            continue
        first = column[0]
        if first is None:
            continue
        if index == _RAM:
            if None not in column:
                low, high = min(column), max(column)
                if ram_bucket(low, ram_granularity_mb) == ram_bucket(high, ram_granularity_mb):
                    shared[name] = low
            continue
        if column.count(first) == count:
            shared[name] = first
    return shared


# -- readable ids ---------------------------------------------------------------

_MODEL_NOISE = re.compile(r"\((?:r|tm|c)\)|\bcpu\b|\bprocessor\b|@.*$|\bintel\b|\bamd\b|\d+-core", re.I)
_VENDORS = {"genuineintel": "intel", "authenticamd": "amd", "hygongenuine": "hygon", "centaurhauls": "centaur"}


def slug(text: Any) -> str:
    """Lower-case ASCII words joined by '-', from any text."""
    raw = str(text).replace("™", " ").replace("®", " ")
    ascii_text = raw
    if not raw.isascii():  # (ASCII text is its own NFKD form: most names need no unicodedata)
        import unicodedata

        ascii_text = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9._]+", "-", ascii_text.lower()).strip("-._")


def hardware_summary(key_facts: dict[str, Any]) -> str:
    """``x86_64-intel-xeon-gold-6130``: the facts of a key that no upgrade changes (platform,
    processor vendor and model), the readable part of a new SubCluster id."""
    parts = []
    if key_facts.get("platform"):
        parts.append(slug(key_facts["platform"]))
    vendor = key_facts.get("cpu_vendor")
    if vendor:
        parts.append(_VENDORS.get(str(vendor).lower()) or slug(vendor))
    model = key_facts.get("cpu_model")
    if model:
        parts.append(slug(_MODEL_NOISE.sub(" ", str(model)))[:40].strip("-._"))
    parts.extend(_accelerator_words(key_facts.get("accelerators"), counted=False))
    return "-".join(p for p in parts if p) or "hosts"


def _accelerator_words(kinds: Any, counted: bool) -> list[str]:
    """``nvidia-h100-80gb-hbm3`` (``2x...`` when ``counted``) per kind of an accelerator key; none
    for hosts without accelerators, whose ids and names stay as they were."""
    words = []
    for kind_type, vendor, model, partition, count in kinds or ():
        label = slug(model or f"{vendor or ''} {kind_type}")[:40].strip("-._")
        if partition:
            label = f"{label}-{slug(partition)}"
        words.append(f"{count}x{label}" if counted else label)
    return words


def readable_summary(key_facts: dict[str, Any], ram_granularity_mb: int) -> str:
    """``x86_64-intel-xeon-gold-6130-64cpu-192gb-debian12`` from the key's facts."""
    parts = []
    if key_facts.get("platform"):
        parts.append(slug(key_facts["platform"]))
    vendor = key_facts.get("cpu_vendor")
    if vendor:
        parts.append(_VENDORS.get(str(vendor).lower()) or slug(vendor))
    model = key_facts.get("cpu_model")
    if model:
        parts.append(slug(_MODEL_NOISE.sub(" ", str(model)))[:40].strip("-._"))
    if key_facts.get("logical_cpus"):
        parts.append(f"{key_facts['logical_cpus']}cpu")
    if key_facts.get("ram"):
        parts.append(f"{key_facts['ram'] / 1024:g}gb")
    os_name = key_facts.get("os_name")
    if os_name:
        release = key_facts.get("os_release") or ""
        parts.append(slug(str(os_name).split()[0][:20] + str(release)[:12]))
    parts.extend(_accelerator_words(key_facts.get("accelerators"), counted=True))
    text = "-".join(p for p in parts if p)
    return text or "hosts"


def _key_hash(key: tuple[Any, ...]) -> str:
    # CRC-32, not hashlib: importing hashlib loads OpenSSL, a tenth of `glueinfo ldif`'s start-up; binascii's
    # (zlib's, the same numbers) since binascii is loaded anyway and zlib is not
    return f"{binascii.crc32(repr(key).encode('utf-8')):08x}"


# -- the grouping ---------------------------------------------------------------

def _unique_hosts(snapshots: Iterable[HostSnapshot], warnings: list[str]) -> list[HostSnapshot]:
    """One snapshot per host name (case-insensitive): the most recent wins."""
    latest: dict[str, HostSnapshot] = {}
    for host in snapshots:
        key = host.hostname.casefold()
        seen = latest.get(key)
        if seen is None:
            latest[key] = host
            continue
        warnings.append(f"host {host.hostname}: two snapshots; the one collected last is used")
        if (host.collected_at, host.hostname) > (seen.collected_at, seen.hostname):
            latest[key] = host
    return sorted(latest.values(), key=lambda h: (h.hostname.casefold(), h.hostname))


def cluster_members(site: SiteModel, snapshots: Iterable[HostSnapshot]) -> dict[str, list[HostSnapshot]]:
    """Cluster unique id -> its hosts (one per name, sorted by name), by the same rule as
    :func:`aggregate` but without grouping them into SubClusters: what an LRMS query needs."""
    hosts = _unique_hosts(snapshots, [])
    cluster_of = assign_clusters(site, [h.hostname for h in hosts])
    members: dict[str, list[HostSnapshot]] = {c.unique_id: [] for c in site.clusters}
    for host in hosts:
        cluster_id = cluster_of.get(host.hostname)
        if cluster_id is not None:
            members[cluster_id].append(host)
    return members


def _finish(group: SubClusterGroup, ram_granularity_mb: int, facts: dict[int, tuple[Any, ...]],
            stated: Mapping[str, Any]) -> SubClusterGroup:
    """The group's shared facts, then what the admin states for all its hosts (``stated``, its
    [subcluster:NAME] or [cluster:NAME] facts) over them; its CPU sums."""
    group.shared = shared_facts(group.hosts, ram_granularity_mb, [facts[id(h)] for h in group.hosts])
    group.shared.update(stated)
    group.physical_cpus = sum_known(h.cpu.sockets if h.cpu else None for h in group.hosts)
    group.logical_cpus = sum_known(h.cpu.logical_cpus if h.cpu else None for h in group.hosts)
    return group


def _id_base(cluster_id: str, hardware: str) -> str:
    """``<cluster id>-<hardware summary>``, shortened (start plus a hash) when slapd would refuse it as an RDN."""
    base = f"{cluster_id}-{hardware}"
    while rdn_too_long("GlueSubClusterUniqueID", base + "-99"):  # room for a suffix
        base = f"{base[:len(base) - 16]}-{_key_hash((base,))}"
    return base


def aggregate(site: SiteModel, snapshots: Iterable[HostSnapshot], ids: Optional[SubClusterIds] = None,
              now: float = 0.0) -> SiteGroups:
    """Group the hosts of a site into clusters and SubClusters (see the module docstring).

    ``ids``: the remembered SubCluster ids (updated in place; see
    glueinfo.site.ids); None derives them afresh, deterministically.
    ``now``: when new members join (recorded in ``ids``)."""
    memory = ids if ids is not None else SubClusterIds()
    warnings: list[str] = []
    hosts = _unique_hosts(snapshots, warnings)
    cluster_of = assign_clusters(site, [h.hostname for h in hosts])
    per_cluster: dict[str, list[HostSnapshot]] = {c.unique_id: [] for c in site.clusters}
    uncovered = []
    for host in hosts:
        cluster_id = cluster_of.get(host.hostname)
        if cluster_id is None:
            uncovered.append(host.hostname)
        else:
            per_cluster[cluster_id].append(host)
    if uncovered:
        warnings.append(f"{len(uncovered)} host(s) covered by no [cluster:*] hosts list, not published: "
                        f"{', '.join(uncovered[:5])}{' ...' if len(uncovered) > 5 else ''}")

    facts = {id(host): host_facts(host) for host in hosts}  # read once; hosts stay alive meanwhile
    glue = site.glue
    key_names = glue.aggregation_key
    granularity = glue.ram_granularity_mb
    clusters = []
    for spec in site.clusters:
        members = per_cluster[spec.unique_id]
        pins = [(pin, HostMatcher(pin.host_patterns)) for pin in site.pins if pin.cluster == spec.unique_id]
        pinned: dict[str, list[HostSnapshot]] = {pin.unique_id: [] for pin, _ in pins}
        automatic: dict[tuple[Any, ...], list[HostSnapshot]] = {}
        for host in members:
            for pin, matcher in pins:
                if matcher.matches(host.hostname):
                    pinned[pin.unique_id].append(host)
                    break
            else:
                automatic.setdefault(host_key(host, key_names, granularity, facts[id(host)]), []).append(host)

        groups: list[SubClusterGroup] = []
        for pin, _ in pins:
            if not pinned[pin.unique_id]:
                warnings.append(f"[subcluster:{pin.section}]: no host matches {' '.join(pin.host_patterns)}; not published")
                continue
            groups.append(_finish(SubClusterGroup(unique_id=pin.unique_id, name=pin.name, cluster_id=spec.unique_id,
                                                  hosts=pinned[pin.unique_id], pinned=True, tmp_dir=pin.tmp_dir,
                                                  wn_tmp_dir=pin.wn_tmp_dir), granularity, facts, pin.facts))

        keys = sorted(automatic, key=lambda k: min(h.hostname.casefold() for h in automatic[k]))
        names = [readable_summary(dict(zip(key_names, key, strict=True)), granularity) for key in keys]
        bases = [_id_base(spec.unique_id, hardware_summary(dict(zip(key_names, key, strict=True)))) for key in keys]
        member_keys = [[host_key_of(h.hostname) for h in automatic[key]] for key in keys]
        given = memory.assign(spec.unique_id, member_keys, bases, now, taken=[g.unique_id for g in groups])
        for key, name, unique_id in zip(keys, names, given, strict=True):
            groups.append(_finish(SubClusterGroup(unique_id=unique_id, name=name, cluster_id=spec.unique_id,
                                                  hosts=automatic[key], tmp_dir=spec.tmp_dir, wn_tmp_dir=spec.wn_tmp_dir),
                                  granularity, facts, spec.facts))
        groups.sort(key=lambda g: g.unique_id.casefold())
        clusters.append(ClusterGroup(spec=spec, subclusters=groups))
    memory.forget_cluster_except(c.unique_id for c in site.clusters)
    return SiteGroups(clusters=clusters, uncovered=uncovered, warnings=warnings)
