"""The site model: what the admin declares about the site, typed and cross-checked.

Built once from the config (``site_from_config``) and passed down the
pipeline.  It holds no measured facts: those come from host snapshots and
the LRMS.  Without any config the site is one host: a cluster named after
this host's FQDN covering every host, and one fork CE
``<fqdn>:2119/jobmanager-fork-default`` on it, so ``glueinfo ldif`` works
right after install.

Sections (declared in glueinfo.core.config.SCHEMA):
``[site]`` (GlueSite), ``[cluster:NAME]`` (GlueCluster and the hosts it
covers), ``[subcluster:NAME]`` (admin pins: hosts grouped by hand),
``[ce:NAME]`` (GlueCE: identity, LRMS, policies, access rules) and
``[glue]`` (aggregation key, RAM granularity, base DN, ...).
"""

from __future__ import annotations

import binascii
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Optional

from glueinfo.core.ldif import dn_escape
from glueinfo.core.records import dataclass
from glueinfo.lrms.vo_map import VoMap

DEFAULT_QUEUE = "default"

# slapd's mdb backend keeps each entry's RDN twice in one LMDB key of at most
# 511 bytes: an RDN much over 220 bytes is refused with "Other error (80)".
# Ids that name entries must fit, with room to spare.
MAX_RDN_BYTES = 200

# Names usable in [glue] aggregation_key; aggregate.KEY_FACTS maps each to a host fact.
KEY_NAMES = ("platform", "cpu_vendor", "cpu_model", "cpu_version", "cpu_clock", "instruction_set", "logical_cpus",
             "physical_cores", "sockets", "ram", "virtual_memory", "os_name", "os_release", "os_version",
             "inbound_ip", "outbound_ip", "runtime_environment", "si00", "sf00", "accelerators")

# Facts a [cluster:NAME] or [subcluster:NAME] may state for all its hosts (the keys of those names),
# published for its SubClusters over what the hosts report (glueinfo.site.aggregate).
GROUP_FACTS = ("inbound_ip", "outbound_ip", "platform", "os_name", "os_release", "os_version", "ram", "virtual_memory",
               "cpu_vendor", "cpu_model", "cpu_version", "cpu_clock", "logical_cpus", "physical_cores", "sockets")


@dataclass(frozen=True)
class SiteInfo:
    """The [site] section: the GlueSite entry's values."""

    unique_id: str = ""  # empty: no GlueSite entry
    name: str = ""
    description: str = ""
    location: str = ""
    latitude: str = ""
    longitude: str = ""
    web: str = ""
    email: str = ""
    sysadmin_contact: str = ""
    user_support_contact: str = ""
    security_contact: str = ""
    sponsor: tuple[str, ...] = ()
    other_info: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterSpec:
    """One GLUE Cluster: a [cluster:NAME] section, or the implicit one."""

    section: str  # NAME of [cluster:NAME]; "" for the implicit cluster
    unique_id: str
    name: str
    host_patterns: tuple[str, ...] = ()  # empty: every host no other cluster names
    tmp_dir: str = ""
    wn_tmp_dir: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict)  # GROUP_FACTS the admin states for all its hosts


@dataclass(frozen=True)
class SubClusterPin:
    """A [subcluster:NAME] section: hosts pinned to a named SubCluster."""

    section: str
    cluster: str  # ClusterSpec.unique_id
    unique_id: str
    name: str
    host_patterns: tuple[str, ...]
    tmp_dir: str = ""
    wn_tmp_dir: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict)  # GROUP_FACTS stated for its hosts, its cluster's included


@dataclass(frozen=True)
class CESpec:
    """One ComputingElement: a [ce:NAME] section, or the implicit fork CE."""

    section: str  # NAME of [ce:NAME]; "" for the implicit fork CE
    cluster: str  # ClusterSpec.unique_id
    unique_id: str
    host: str
    port: int
    jobmanager: str
    lrms: str
    queue: str
    lrms_version: str = ""
    lrms_timeout: float = 10.0
    status: Optional[str] = None
    implementation_name: str = ""
    implementation_version: str = ""
    gram_version: str = ""
    contact_string: tuple[str, ...] = ()
    application_dir: str = ""
    data_dir: str = ""
    default_se: str = ""
    capability: tuple[str, ...] = ()
    access: tuple[str, ...] = ()
    policies: Mapping[str, Optional[int]] = field(default_factory=dict)  # key as in POLICY_KEYS -> minutes / counts
    publish_jobs: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)  # the whole typed [ce:NAME] section, for the LRMS plugin


# [ce:NAME] policy keys, in the order GLUE lists them.
POLICY_KEYS = ("max_wall_clock_time", "max_cpu_time", "max_obtainable_wall_clock_time", "max_obtainable_cpu_time",
               "max_total_jobs", "max_running_jobs", "max_waiting_jobs", "max_slots_per_job", "assigned_job_slots",
               "priority")


@dataclass(frozen=True)
class GlueOptions:
    """The [glue] section: how the tree is built, checked and published."""

    base_dn: str = "mds-vo-name=resource,o=grid"
    aggregation_key: tuple[str, ...] = ("platform", "cpu_vendor", "cpu_model", "cpu_clock", "logical_cpus", "ram",
                                        "os_name", "os_release", "os_version", "inbound_ip", "outbound_ip",
                                        "runtime_environment", "accelerators")
    ram_granularity_mb: int = 1024
    publish_hosts: bool = True
    schema_dir: str = "/etc/ldap/schema"
    templates_dir: str = ""
    static_ldif_dir: str = ""
    information_service_url: str = ""
    accelerator_schema: bool = False  # the site's slapd loads glueinfo's GLUE 2.1 accelerator schema


@dataclass(frozen=True)
class SiteModel:
    """The whole site as the config describes it, defaults filled in."""

    site: SiteInfo
    clusters: tuple[ClusterSpec, ...]
    pins: tuple[SubClusterPin, ...]
    ces: tuple[CESpec, ...]
    glue: GlueOptions
    vo_map: VoMap = VoMap()  # jobs to VOs, applied by every CE's LRMS plugin ([vos])

    def cluster(self, unique_id: str) -> ClusterSpec:
        for cluster in self.clusters:
            if cluster.unique_id == unique_id:
                return cluster
        raise KeyError(unique_id)

    def ces_of(self, cluster_id: str) -> list[CESpec]:
        return [ce for ce in self.ces if ce.cluster == cluster_id]


def ce_unique_id(host: str, port: int, jobmanager: str, lrms: str, queue: str) -> str:
    """The EDG/gLite CE id: ``host:port/jobmanager-lrms-queue``."""
    return f"{host}:{port}/{jobmanager}-{lrms}-{queue}"


# -- host patterns ----------------------------------------------------------------

class HostMatcher:
    """Matches host names against names and shell patterns, case-insensitively;
    a pattern without a dot also matches the short name of an FQDN."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(p.lower() for p in patterns if p)
        self._exact = {p for p in self.patterns if not any(c in p for c in "*?[")}
        globs = [fnmatch.translate(p) for p in self.patterns if p not in self._exact]
        self._glob = re.compile("|".join(f"(?:{g})" for g in globs)) if globs else None

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def matches(self, hostname: str) -> bool:
        name = hostname.lower()
        short = name.split(".", 1)[0]
        if name in self._exact or short in self._exact:
            return True
        if self._glob is not None:
            return bool(self._glob.match(name) or self._glob.match(short))
        return False


# -- building the model -----------------------------------------------------------

def rdn_too_long(attr: str, value: str) -> bool:
    """Would ``attr=value`` be too long a DN component for slapd (MAX_RDN_BYTES)?"""
    return len(f"{attr}={dn_escape(value)}".encode()) > MAX_RDN_BYTES


def derived_id(attr: str, value: str) -> str:
    """An id glueinfo derives from a host name (a CE's ``host:port/...``, the default cluster's
    name): ``value`` itself, or, when slapd would refuse ``attr=value`` as an RDN, its ASCII
    start and ``~`` with a CRC-32 of the whole, the prefix-plus-hash rule of long host names.
    Ids an admin writes are never shortened: they are refused with the key named."""
    if not rdn_too_long(attr, value):
        return value
    digest = f"~{binascii.crc32(value.encode('utf-8')):08x}"
    keep = value.encode("ascii", "replace").decode("ascii")[:MAX_RDN_BYTES]
    while keep and rdn_too_long(attr, keep + digest):
        keep = keep[:-8]
    return keep + digest


def assign_clusters(site: SiteModel, hostnames: Sequence[str]) -> dict[str, str]:
    """hostname -> cluster unique id.  A host goes to the first cluster (config
    order) that names it, else to the cluster without a host list; hosts no
    cluster covers are left out of the result."""
    named = [(c.unique_id, HostMatcher(c.host_patterns)) for c in site.clusters if c.host_patterns]
    catch_all = next((c.unique_id for c in site.clusters if not c.host_patterns), None)
    result: dict[str, str] = {}
    for hostname in hostnames:
        for unique_id, matcher in named:
            if matcher.matches(hostname):
                result[hostname] = unique_id
                break
        else:
            if catch_all is not None:
                result[hostname] = catch_all
    return result
