"""Render stage: the GLUE 1.3 resource tree, as glueinfo.core.ldif Entries.

Input: the site model (site.py), the aggregated groups (aggregate.py) and
each CE's QueueState (lrms.py).  Output, parents first::

    GlueSiteUniqueID=<site>,<base>                    (only when [site] id is set)
    GlueClusterUniqueID=<cluster>,<base>
      GlueSubClusterUniqueID=<sc>,GlueClusterUniqueID=...
        GlueHostUniqueID=<host>,GlueSubClusterUniqueID=...
          GlueHostLocalFileSystemName=<mount>,GlueHostUniqueID=...
          GlueHostRemoteFileSystemName=<mount>,GlueHostUniqueID=...
    GlueCEUniqueID=<host:port/jobmanager-lrms-queue>,<base>
      GlueCEJobLocalID=<id>,GlueCEUniqueID=...          (only with [ce:NAME] publish_jobs)

Site, cluster, SubCluster and CE entries come from templates (templates.py),
hosts, file systems and jobs from code (there may be 100,000 of them).
Every entry carries GlueSchemaVersion 1.3 and its abstract top class
(GlueClusterTop, GlueCETop, GlueTop).  Values are the facts as measured:
the schema normalisation (glueinfo.glue.schema: Schema.normalise) then makes them
slapd-safe (ASCII, TRUE/FALSE) and the schema check catches any mistake.

Reading of the schema (glue-schema 2.0.11, Glue-CE.schema):
- GlueHost itself only has GlueHostUniqueID/GlueHostName; all host facts
  live in the auxiliary classes, so a host entry lists all of them.
- GlueSubCluster's own MAY list carries the host facts a SubCluster may
  summarise (no caches, free memory, adapter name/address or loads): only
  those are published on it, with the matching auxiliary classes.
- File system Size/AvailableSpace are in bytes (the schema's DESC), from
  the snapshot's MB.
- ProcessorLoad and SMPLoad: (logical CPUs - load average) x 100 over 1, 5
  and 15 minutes (HostSnapshot.glue_load_figures), as the GLUE document
  defines both.
"""

from __future__ import annotations

import binascii
import re
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from glueinfo.core.ldif import Entry, make_dn
from glueinfo.core.model import FileSystem, HostSnapshot, QueueState
from glueinfo.glue.schema import to_ascii
from glueinfo.glue.services13 import cese_bind_entries, service_entries
from glueinfo.glue.templates import Template
from glueinfo.lrms.registry import glue_lrms_type
from glueinfo.site.accelerators import group_accelerators, runtime_tags
from glueinfo.site.access import vos_of, whole_vo_rule
from glueinfo.site.aggregate import ClusterGroup, SiteGroups, SubClusterGroup
from glueinfo.site.model import MAX_RDN_BYTES, CESpec, SiteModel, rdn_too_long

if TYPE_CHECKING:
    from glueinfo.core.job import JobInfo  # a CE's jobs come with its queue's state: one without jobs imports no job model
    from glueinfo.core.lastrun import LastRun  # the daemon's render cache's: a one-shot command imports it not

GLUE_MAJOR, GLUE_MINOR = 1, 3
MB = 1024 * 1024

HOST_CLASSES = ("GlueClusterTop", "GlueHost", "GlueHostArchitecture", "GlueHostProcessor", "GlueHostMainMemory",
                "GlueHostNetworkAdapter", "GlueHostProcessorLoad", "GlueHostSMPLoad", "GlueHostOperatingSystem",
                "GlueHostBenchmark", "GlueHostApplicationSoftware", "GlueKey", "GlueSchemaVersion")
LOCAL_FS_CLASSES = ("GlueClusterTop", "GlueHostLocalFileSystem", "GlueKey", "GlueSchemaVersion")
REMOTE_FS_CLASSES = ("GlueClusterTop", "GlueHostRemoteFileSystem", "GlueKey", "GlueSchemaVersion")
JOB_CLASSES = ("GlueCETop", "GlueCEJob", "GlueSchemaVersion")


def name_key(text: str) -> str:
    """How slapd compares GLUE names (caseIgnoreIA5Match after ASCII transliteration):
    two names with the same key would be the same DN."""
    return " ".join(to_ascii(text).casefold().split())


def cores_per_socket(physical_cores: Optional[int], sockets: Optional[int]) -> Optional[str]:
    """EGI's GlueHostProcessorOtherDescription convention: ``Cores=<cores per CPU>``."""
    if not physical_cores or not sockets:
        return None
    return f"Cores={physical_cores / sockets:g}"


def mailto(contact: str) -> str:
    """An e-mail contact as a mailto: URL, the form GLUE 1.3 (Glue-CORE.schema: "mailto: followed by a list
    of email addresses") and GLUE 2 (ContactDetail is a URI) give it: ``a@x.org`` -> ``mailto:a@x.org``;
    anything with a scheme already (``mailto:``, ``https:``) or no address is left as written."""
    return "mailto:" + contact if "@" in contact and ":" not in contact else contact


# -- templated entries ----------------------------------------------------------------

def site_entry(site: SiteModel, template: Template) -> Optional[Entry]:
    info = site.site
    if not info.unique_id:
        return None
    return template.render({
        "SITE_ID": info.unique_id, "SITE_NAME": info.name, "PARENT_DN": site.glue.base_dn,
        "DESCRIPTION": info.description, "LOCATION": info.location, "LATITUDE": info.latitude,
        "LONGITUDE": info.longitude, "WEB": info.web, "EMAIL": mailto(info.email), "SYSADMIN_CONTACT": mailto(info.sysadmin_contact),
        "USER_SUPPORT_CONTACT": mailto(info.user_support_contact), "SECURITY_CONTACT": mailto(info.security_contact),
        "SPONSOR": list(info.sponsor), "OTHER_INFO": list(info.other_info), "INFO_URL": site.glue.information_service_url,
    })


def cluster_entry(site: SiteModel, cluster: ClusterGroup, template: Template) -> Entry:
    spec = cluster.spec
    return template.render({
        "CLUSTER_ID": spec.unique_id, "CLUSTER_NAME": spec.name, "PARENT_DN": site.glue.base_dn,
        "CE_UNIQUE_ID": [ce.unique_id for ce in site.ces_of(spec.unique_id)], "SITE_ID": site.site.unique_id,
        "TMP_DIR": spec.tmp_dir, "WN_TMP_DIR": spec.wn_tmp_dir, "INFO_URL": site.glue.information_service_url,
    })


def subcluster_variables(sc: SubClusterGroup) -> dict[str, Any]:
    """Template variables of a SubCluster: its identity and the facts all members share."""
    shared = sc.shared
    values: dict[str, Any] = {
        "SUBCLUSTER_ID": sc.unique_id, "SUBCLUSTER_NAME": sc.name, "CLUSTER_ID": sc.cluster_id,
        "TMP_DIR": sc.tmp_dir, "WN_TMP_DIR": sc.wn_tmp_dir,
        "PHYSICAL_CPUS": sc.physical_cpus, "LOGICAL_CPUS": sc.logical_cpus,
        "PLATFORM": shared.get("platform"), "SMP_SIZE": shared.get("logical_cpus"),
        "CPU_VENDOR": shared.get("cpu_vendor"), "CPU_MODEL": shared.get("cpu_model"),
        "CPU_VERSION": shared.get("cpu_version"), "CPU_CLOCK": shared.get("cpu_clock"),
        "INSTRUCTION_SET": shared.get("instruction_set"),
        "CPU_OTHER": cores_per_socket(shared.get("physical_cores"), shared.get("sockets")),
        "OS_NAME": shared.get("os_name"), "OS_RELEASE": shared.get("os_release"), "OS_VERSION": shared.get("os_version"),
        "RAM_SIZE": shared.get("ram"), "VIRTUAL_SIZE": shared.get("virtual_memory"),
        "SI00": shared.get("si00"), "SF00": shared.get("sf00"),
        "INBOUND_IP": shared.get("inbound_ip"), "OUTBOUND_IP": shared.get("outbound_ip"),
        # the tags all members have, and their accelerator types (GPU), the tag EGI's GPU sites publish
        "RUNTIME_ENVIRONMENT": list(dict.fromkeys((*(shared.get("runtime_environment") or ()),
                                                   *runtime_tags(group_accelerators(sc.hosts))))),
    }
    # The auxiliary class of each group of facts, when the SubCluster carries one of them.
    def has(*names: str) -> bool:
        return any(values.get(n) not in (None, "", []) for n in names)

    values["ARCHITECTURE"] = "yes" if has("PLATFORM", "SMP_SIZE") else None
    values["PROCESSOR"] = "yes" if has("CPU_VENDOR", "CPU_MODEL", "CPU_VERSION", "CPU_CLOCK", "INSTRUCTION_SET",
                                       "CPU_OTHER") else None
    values["OPERATING_SYSTEM"] = "yes" if has("OS_NAME", "OS_RELEASE", "OS_VERSION") else None
    values["MAIN_MEMORY"] = "yes" if has("RAM_SIZE", "VIRTUAL_SIZE") else None
    values["BENCHMARK"] = "yes" if has("SI00", "SF00") else None
    values["NETWORK"] = "yes" if has("INBOUND_IP", "OUTBOUND_IP") else None
    return values


def subcluster_entry(sc: SubClusterGroup, cluster_dn: str, template: Template, info_url: str = "") -> Entry:
    values = subcluster_variables(sc)
    values["PARENT_DN"] = cluster_dn
    values["INFO_URL"] = info_url
    return template.render(values)


def ce_variables(site: SiteModel, ce: CESpec, state: Optional[QueueState],
                 cluster_logical_cpus: Optional[int]) -> dict[str, Any]:
    """Template variables of a CE: config identity, LRMS state, policies (LRMS first, then config,
    for the times, job counts and priority; config first, then LRMS, for the other limits)."""
    state = state or QueueState(lrms_type=glue_lrms_type(ce.lrms), error="not queried")
    policy_from_state = {
        "max_wall_clock_time": state.max_wall_clock_time_min, "max_cpu_time": state.max_cpu_time_min,
        "max_running_jobs": state.max_running_jobs, "max_total_jobs": state.max_total_jobs,
        "max_waiting_jobs": state.max_waiting_jobs, "priority": state.priority,
    }
    policies = {key: policy_from_state.get(key) if policy_from_state.get(key) is not None else value
                for key, value in ce.policies.items()}
    # The limits read from the batch system since (docs/batch-systems.md): a [ce:NAME] value stays
    # the admin's word.  The batch system's maximum is also the most a job can obtain on request.
    limits_from_state = {
        "max_obtainable_wall_clock_time": state.max_wall_clock_time_min, "max_obtainable_cpu_time": state.max_cpu_time_min,
        "max_slots_per_job": state.limits.max_slots_per_job,
    }
    for key, value in limits_from_state.items():
        if policies.get(key) is None:
            policies[key] = value
    status = state.status or ce.status
    # A batch system's CPUs are its own count (HTCondor's slots, LSF's job slots), never the hosts'
    # hardware threads (HTCondor-CE's old overcount): left out when it does not say; fork's are the threads.
    total_cpus = state.total_cpus if state.total_cpus is not None else (cluster_logical_cpus if ce.lrms == "fork" else None)
    values: dict[str, Any] = {
        "CE_UNIQUE_ID": ce.unique_id, "CE_NAME": ce.queue, "CE_HOST": ce.host, "CE_PORT": ce.port,
        "CE_JOBMANAGER": ce.lrms, "LRMS_TYPE": state.lrms_type or glue_lrms_type(ce.lrms), "CLUSTER_ID": ce.cluster,
        "PARENT_DN": site.glue.base_dn,
        "SITE_ID": site.site.unique_id, "LRMS_VERSION": state.lrms_version or ce.lrms_version,
        "IMPLEMENTATION_NAME": ce.implementation_name, "IMPLEMENTATION_VERSION": ce.implementation_version,
        "GRAM_VERSION": ce.gram_version, "CONTACT_STRING": list(ce.contact_string),
        "APPLICATION_DIR": ce.application_dir, "DATA_DIR": ce.data_dir, "DEFAULT_SE": ce.default_se,
        "CAPABILITY": list(ce.capability), "ACCESS_RULE": list(ce.access), "INFO_URL": site.glue.information_service_url,
        "TOTAL_CPUS": total_cpus, "FREE_CPUS": state.free_cpus, "STATUS": status,
        "RUNNING_JOBS": state.running_jobs, "WAITING_JOBS": state.waiting_jobs, "TOTAL_JOBS": state.total_jobs,
        "FREE_JOB_SLOTS": state.free_job_slots, "ESTIMATED_RESPONSE_TIME": state.estimated_response_time_s,
        "WORST_RESPONSE_TIME": state.worst_response_time_s,
    }
    for key, value in policies.items():
        values[key.upper()] = value
    return values


# -- hosts, file systems, jobs --------------------------------------------------------

Shapes = dict[tuple[str, ...], dict[str, str]]  # one run's cache: attribute names -> their lower-case index


def _first(items: Sequence[str]) -> Optional[str]:
    return items[0] if items else None


def _attributes(classes: tuple[str, ...], pairs: Iterable[tuple[str, Any]]) -> dict[str, list[Any]]:
    """objectClass and (attribute, value) pairs; None and "" (unknown) are left out."""
    attributes: dict[str, list[Any]] = {"objectClass": list(classes)}
    attributes.update({name: [value] for name, value in pairs if value is not None and value != ""})
    return attributes


def _entry(dn: str, classes: tuple[str, ...], pairs: Iterable[tuple[str, Any]], shapes: Optional[Shapes] = None) -> Entry:
    return _finish(dn, _attributes(classes, pairs), shapes)


def _finish(dn: str, attributes: dict[str, list[Any]], shapes: Optional[Shapes]) -> Entry:
    """Entry.from_lists, reusing the lower-case name index of entries of the same shape (``shapes``: one run's cache)."""
    if shapes is None:
        return Entry.from_lists(dn, attributes)
    keys = tuple(attributes)
    index = shapes.get(keys)
    if index is None:
        index = shapes[keys] = {name.lower(): name for name in keys}
    return Entry.from_lists(dn, attributes, index)


def host_entry(host: HostSnapshot, dn: str, subcluster_id: str, info_url: str = "", host_id: Optional[str] = None,
               shapes: Optional[Shapes] = None) -> Entry:
    """One GlueHost entry with every host auxiliary class of the schema.

    Built as one dict (Entry.from_lists): a site may have 100,000 hosts.
    """
    osinfo, cpu, memory, static = host.os, host.cpu, host.memory, host.static
    adapter = host.primary_adapter()
    loads = host.glue_load_figures() or (None, None, None)
    raw = {
        "GlueHostUniqueID": host_id or host.hostname,
        "GlueHostName": host.hostname,
        "GlueHostArchitecturePlatformType": None if osinfo is None else osinfo.platform_type,
        "GlueHostArchitectureSMPSize": None if cpu is None else cpu.logical_cpus,
        "GlueHostProcessorVendor": None if cpu is None else cpu.vendor,
        "GlueHostProcessorModel": None if cpu is None else cpu.model_name,
        "GlueHostProcessorVersion": None if cpu is None else cpu.version,
        "GlueHostProcessorClockSpeed": None if cpu is None else cpu.clock_mhz,
        "GlueHostProcessorInstructionSet": None if cpu is None else cpu.instruction_set,
        "GlueHostProcessorOtherDescription": None if cpu is None else cores_per_socket(cpu.physical_cores, cpu.sockets),
        "GlueHostProcessorCacheL1": None if cpu is None else cpu.cache_l1_kb,
        "GlueHostProcessorCacheL1I": None if cpu is None else cpu.cache_l1i_kb,
        "GlueHostProcessorCacheL1D": None if cpu is None else cpu.cache_l1d_kb,
        "GlueHostProcessorCacheL2": None if cpu is None else cpu.cache_l2_kb,
        "GlueHostMainMemoryRAMSize": None if memory is None else memory.ram_mb,
        "GlueHostMainMemoryRAMAvailable": None if memory is None else memory.ram_available_mb,
        "GlueHostMainMemoryVirtualSize": None if memory is None else memory.virtual_mb,
        "GlueHostMainMemoryVirtualAvailable": None if memory is None else memory.virtual_available_mb,
        "GlueHostNetworkAdapterName": None if adapter is None else adapter.name,
        "GlueHostNetworkAdapterIPAddress": None if adapter is None else _first(adapter.ipv4 or adapter.ipv6),
        "GlueHostNetworkAdapterMTU": None if adapter is None else adapter.mtu,
        "GlueHostNetworkAdapterInboundIP": None if static is None else static.inbound_ip,
        "GlueHostNetworkAdapterOutboundIP": None if static is None else static.outbound_ip,
        "GlueHostProcessorLoadLast1Min": loads[0],
        "GlueHostProcessorLoadLast5Min": loads[1],
        "GlueHostProcessorLoadLast15Min": loads[2],
        "GlueHostSMPLoadLast1Min": loads[0],
        "GlueHostSMPLoadLast5Min": loads[1],
        "GlueHostSMPLoadLast15Min": loads[2],
        "GlueHostOperatingSystemName": None if osinfo is None else osinfo.name,
        "GlueHostOperatingSystemRelease": None if osinfo is None else osinfo.release,
        "GlueHostOperatingSystemVersion": None if osinfo is None else osinfo.version,
        "GlueHostBenchmarkSI00": None if static is None else static.si00,
        "GlueHostBenchmarkSF00": None if static is None else static.sf00,
    }
    attributes = _attributes(HOST_CLASSES + ("GlueInformationService",) if info_url else HOST_CLASSES, raw.items())
    if static is not None and static.runtime_environment:
        attributes["GlueHostApplicationSoftwareRunTimeEnvironment"] = sorted(set(static.runtime_environment))
    attributes["GlueChunkKey"] = ["GlueSubClusterUniqueID=" + subcluster_id]
    if info_url:
        attributes["GlueInformationServiceURL"] = [info_url]
    attributes["GlueSchemaVersionMajor"] = [GLUE_MAJOR]
    attributes["GlueSchemaVersionMinor"] = [GLUE_MINOR]
    return _finish(dn, attributes, shapes)


# Values that ldif.dn_escape would return unchanged (most host names and
# mount points): the DN is then built without the per-character escape loop.
_DN_PLAIN = re.compile(r"[A-Za-z0-9._:/@-]+")


def child_dn(attr: str, value: str, parent: str) -> str:
    """ldif.make_dn, skipping the escape for plain values."""
    if type(value) is str and _DN_PLAIN.fullmatch(value):
        return f"{attr}={value},{parent}"
    return make_dn(attr, value, parent)


def naming_value(attr: str, value: str) -> str:
    """The value an entry is named by: ``value`` itself, or, when ``attr=value``
    is too long for slapd (site.MAX_RDN_BYTES), its ASCII start and a hash of
    the whole (the full value is still published in a non-naming attribute)."""
    if len(value) < 100 and _DN_PLAIN.fullmatch(value):
        return value
    if not rdn_too_long(attr, to_ascii(value)):
        return value
    digest = f"~{binascii.crc32(value.encode('utf-8')):08x}"
    keep = to_ascii(value)[:MAX_RDN_BYTES]
    while keep and rdn_too_long(attr, keep + digest):
        keep = keep[:-8]
    return keep + digest


def _fs_order(fs: FileSystem) -> tuple[bool, str]:
    return fs.remote, fs.mount_point


_FS_NAMES = {remote: tuple(f"GlueHost{'Remote' if remote else 'Local'}FileSystem{part}"
                           for part in ("Name", "Root", "Type", "ReadOnly", "Size", "AvailableSpace", "Server"))
             for remote in (False, True)}


def filesystem_entry(fs: FileSystem, host_dn: str, host_id: str, fs_name: Optional[str] = None,
                     shapes: Optional[Shapes] = None) -> Entry:
    """A file system entry under its host; named by its mount point (shortened when too long, see naming_value)."""
    name, root, fs_type, read_only, size, available, server = _FS_NAMES[fs.remote]
    fs_name = fs_name or naming_value(name, fs.mount_point)
    attributes: dict[str, list[Any]] = {"objectClass": list(REMOTE_FS_CLASSES if fs.remote else LOCAL_FS_CLASSES),
                                        name: [fs_name], root: [fs.mount_point]}
    if fs.fs_type:
        attributes[fs_type] = [fs.fs_type]
    attributes[read_only] = [fs.read_only]
    if fs.size_mb is not None:
        attributes[size] = [fs.size_mb * MB]
    if fs.available_mb is not None:
        attributes[available] = [fs.available_mb * MB]
    if fs.remote and fs.server:
        attributes[server] = [fs.server]
    attributes["GlueChunkKey"] = ["GlueHostUniqueID=" + host_id]
    attributes["GlueSchemaVersionMajor"] = [GLUE_MAJOR]
    attributes["GlueSchemaVersionMinor"] = [GLUE_MINOR]
    return _finish(child_dn(name, fs_name, host_dn), attributes, shapes)


def voview_entries(ce: CESpec, state: Optional[QueueState], ce_dn: str, template: Template) -> Iterator[Entry]:
    """One GlueVOView per VO the CE admits, by a ``VO:`` or a ``VOMS:`` rule, as GLUE 2 has one
    ComputingShare (glueinfo.site.access; lcg-info --vo and brokers select CEs by them): the
    VO's own job counts when they are known (QueueState.counts_of_vo: left out when the queue's
    jobs were not counted or nothing maps a job to the VO), the VO's own waiting times when its
    jobs told them, else the CE's (QueueState.response_times_of_vo), and the CE's free slots and
    status."""
    state = state or QueueState(error="not queried")
    for vo, rules in vos_of(ce.access).items():
        counts = state.counts_of_vo(vo)
        estimated, worst = state.response_times_of_vo(vo)  # its own jobs' waits, else the queue's
        published = whole_vo_rule(vo, rules)
        if "ACCESS_RULE" not in template.multi:  # a site's own template from before FQAN VOViews: one rule
            published = published[:1]
        yield template.render({
            "VO_LOCAL_ID": vo, "ACCESS_RULE": published, "CE_UNIQUE_ID": ce.unique_id, "CE_DN": ce_dn,
            "STATUS": state.status or ce.status,
            "RUNNING_JOBS": counts.running if counts else None, "WAITING_JOBS": counts.waiting if counts else None,
            "TOTAL_JOBS": counts.total if counts else None, "FREE_JOB_SLOTS": state.free_job_slots,
            "ESTIMATED_RESPONSE_TIME": estimated, "WORST_RESPONSE_TIME": worst,
            "DEFAULT_SE": ce.default_se, "APPLICATION_DIR": ce.application_dir, "DATA_DIR": ce.data_dir})


def job_entry(job: JobInfo, ce: CESpec, ce_dn: str) -> Entry:
    local_id = naming_value("GlueCEJobLocalID", job.local_id)
    return _entry(make_dn("GlueCEJobLocalID", local_id, ce_dn), JOB_CLASSES, (
        ("GlueCEJobLocalID", local_id), ("GlueCEJobGlobalID", f"{ce.unique_id}/{job.local_id}"),
        ("GlueCEJobLocalOwner", job.local_owner), ("GlueCEJobGlobalOwner", job.global_owner),
        ("GlueCEJobStatus", job.glue_status), ("GlueCEJobSchedulerSpecific", job.scheduler_specific),
        ("GlueSchemaVersionMajor", GLUE_MAJOR), ("GlueSchemaVersionMinor", GLUE_MINOR)))


# -- the whole tree -------------------------------------------------------------------

def host_entries(host: HostSnapshot, host_id: str, subcluster_id: str, sc_dn: str, info_url: str, shapes: Optional[Shapes],
                 warnings: list[str]) -> list[Entry]:
    """One host's GlueHost entry and its file systems' entries (mount points that slapd would
    take for the same DN are published once, the others reported in ``warnings``)."""
    host_dn = child_dn("GlueHostUniqueID", host_id, sc_dn)
    entries = [host_entry(host, host_dn, subcluster_id, info_url, host_id, shapes)]
    seen_fs: dict[tuple[bool, str], str] = {}
    for fs in sorted(host.filesystems or (), key=_fs_order):  # stable output whatever the mount order
        fs_name = naming_value(_FS_NAMES[fs.remote][0], fs.mount_point)
        fs_key = (fs.remote, name_key(fs_name))
        if fs_key in seen_fs or not fs_key[1]:
            warnings.append(f"host {host.hostname}: file system {fs.mount_point!r} has the same LDAP name as "
                            f"{seen_fs.get(fs_key, '')!r}; published once")
            continue
        seen_fs[fs_key] = fs.mount_point
        entries.append(filesystem_entry(fs, host_dn, host_id, fs_name, shapes))
    return entries


# A host entry's attributes that change from one report to the next (integers, single-valued):
# HostEntryCache changes only these in an entry whose lasting facts are as last time.
HOST_VOLATILE = ("GlueHostMainMemoryRAMAvailable", "GlueHostMainMemoryVirtualAvailable",
                 "GlueHostProcessorLoadLast1Min", "GlueHostProcessorLoadLast5Min", "GlueHostProcessorLoadLast15Min",
                 "GlueHostSMPLoadLast1Min", "GlueHostSMPLoadLast5Min", "GlueHostSMPLoadLast15Min")


_VOLATILE_NAMES = {name: name for name in HOST_VOLATILE}


def host_volatile(host: HostSnapshot) -> tuple[Optional[int], ...]:
    """The values of HOST_VOLATILE for a host, in that order (None: not published)."""
    memory = host.memory
    loads = host.glue_load_figures() or (None, None, None)
    return (None if memory is None else memory.ram_available_mb, None if memory is None else memory.virtual_available_mb,
            *loads, *loads)


def _lasting_key(host: HostSnapshot, host_id: str, sc: SubClusterGroup, sc_dn: str, info_url: str) -> tuple[Any, ...]:
    """What a host's entries read besides HOST_VOLATILE: the fact objects themselves, so keys compare
    by identity first (the gatherer hands unchanged facts over as the same objects), by value
    otherwise, and keep them alive.  The CPU count is read by the load figures too."""
    memory = host.memory
    return (host.hostname, host_id, sc.unique_id, sc_dn, info_url, host.cpu,
            None if memory is None else (memory.ram_mb, memory.virtual_mb), host.network, host.filesystems, host.os, host.static)


# Where an entry's HOST_VOLATILE lines are in its LDIF text: the start and end offset of each line
# (newline included, in text order, flat in one array of C ints), and their attribute names.
# Offsets, not the text between them (a copy of every host entry's text beside the text itself
# cost 10 MB at 10,000 hosts), and an array, not tuples of ints (9 MB more).
Layout = tuple["array[int]", tuple[str, ...]]


def volatile_layout(checked: Entry, text: str) -> Optional[Layout]:
    """Where an entry's HOST_VOLATILE lines are in its LDIF text (``text``, the formatted
    ``checked``); None when one of them is not a single integer on a plain line of its own."""
    offsets = array("I")
    names: list[str] = []
    position = 0
    for line in text.split("\n"):
        name, colon, value = line.partition(": ")
        if colon and name in HOST_VOLATILE:
            values = checked.attributes.get(name)
            if values is None or len(values) != 1 or type(values[0]) is not int or value != str(values[0]) or name in names:
                return None
            offsets.append(position)
            offsets.append(position + len(line) + 1)
            names.append(_VOLATILE_NAMES[name])  # the constant, not the copy partition() made: 6 MB at 10,000 hosts
        position += len(line) + 1
    present = [name for name in HOST_VOLATILE if name in checked.attributes]
    if len(names) != len(present) or any(len(f"{name}: -{2**63}") > 76 for name in present):
        return None  # an attribute spelled otherwise, or a line that could be folded
    return offsets, tuple(names)


def patch_volatile(text: str, layout: Layout, value_of: Mapping[str, Any]) -> Optional[tuple[str, Layout]]:
    """``text`` (laid out as ``layout`` says) with its HOST_VOLATILE lines holding ``value_of[name]``,
    and the new text's layout; None when a value is not a single int (only then is the line
    the schema check and the LDIF writer would make known without them)."""
    offsets, names = layout
    parts = []
    new_offsets = array("I")
    last = length = 0
    for index, name in enumerate(names):
        value = value_of[name]
        if type(value) is not int:
            return None
        start = offsets[2 * index]
        kept = text[last:start]
        line = f"{name}: {value}\n"
        parts.append(kept)
        parts.append(line)
        length += len(kept)
        new_offsets.append(length)
        length += len(line)
        new_offsets.append(length)
        last = offsets[2 * index + 1]
    parts.append(text[last:])
    return "".join(parts), (new_offsets, names)


class HostBlock:
    """One host's entries in a text-keeping HostEntryCache (``keep_entries=False``): made anew
    (``entries`` set, ``texts`` None until the RenderCache checked and formatted them all
    cleanly, see :meth:`HostEntryCache.settle`), or taken from the last render (``texts``, one
    LDIF text per entry, and ``dns``, as checked), its host entry's volatile lines put in again
    when only they changed.  ``layout``: where those lines are in the host entry's text (None:
    such a block is reused only as it is)."""

    __slots__ = ("lasting", "volatile", "entries", "texts", "dns", "layout", "warnings")

    def __init__(self, lasting: tuple[Any, ...], volatile: tuple[Optional[int], ...], entries: Optional[list[Entry]],
                 warnings: list[str], texts: Optional[tuple[str, ...]] = None, dns: tuple[str, ...] = (),
                 layout: Optional[Layout] = None) -> None:
        self.lasting, self.volatile, self.entries, self.warnings = lasting, volatile, entries, warnings
        self.texts, self.dns, self.layout = texts, dns, layout


class HostEntryCache:
    """Each host's entries as last rendered, reused while nothing they read has changed.

    A host's entries read its snapshot's facts, its SubCluster and the
    information service URL.  Entries whose lasting facts and volatile
    figures (HOST_VOLATILE) are as last time are reused as they are: a
    publish in which only the batch system's figures changed builds no host
    entry.  When only the volatile figures changed, the file systems'
    entries are reused and the host's entry is the last one with those
    values replaced (``derived_from`` tells the RenderCache, which then
    neither checks nor formats it again).  Facts are compared by identity,
    then by value; snapshots are never changed once gathered.  Only the last
    render is kept (glueinfo.core.lastrun).

    With ``keep_entries=False`` no entry outlives the render that made it:
    what is kept of a host is a :class:`HostBlock` of LDIF texts (at 10,000
    hosts, entries and their lists cost about 80 MB more than their texts),
    and the render yields that block in place of the host's entries, for a
    RenderCache of the same mode (see glueinfo.glue.build.RenderCache).
    """

    def __init__(self, keep_entries: bool = True) -> None:
        from glueinfo.core.lastrun import LastRun

        self.keep_entries = keep_entries
        self._hosts: LastRun[str, tuple[tuple[Any, ...], tuple[Optional[int], ...], list[Entry], list[str]]] = LastRun()
        self._blocks: LastRun[str, HostBlock] = LastRun()
        self._derived: dict[str, tuple[Entry, Entry]] = {}  # DN -> (entry of this render, the last render's it was made from)
        self.block_entries = [0, 0]  # entries of this render's blocks: [made or changed, reused as they were]

    def start(self) -> None:
        self._hosts.start()
        self._blocks.start()
        self._derived = {}
        self.block_entries = [0, 0]

    def finish(self) -> None:
        """The render is done: let the last render's entries go (only this one's are kept)."""
        self._hosts.finish()
        self._blocks.finish()
        self._derived = {}

    def derived_from(self, entry: Entry) -> Optional[Entry]:
        """The last render's entry that ``entry`` (of this render) was made from by changing
        only the values of HOST_VOLATILE attributes, or None."""
        pair = self._derived.get(entry.dn)
        return pair[1] if pair is not None and pair[0] is entry else None

    def entries(self, host: HostSnapshot, host_id: str, sc: SubClusterGroup, sc_dn: str, info_url: str,
                shapes: Optional[Shapes], warnings: list[str]) -> list[Entry]:
        lasting = _lasting_key(host, host_id, sc, sc_dn, info_url)
        volatile = host_volatile(host)
        hit = self._hosts.previous(host.hostname)
        if hit is not None and hit[0] == lasting:
            if hit[1] == volatile:
                warnings.extend(self._hosts.reuse(host.hostname, hit)[3])
                return hit[2]
            before = hit[2][0]
            if [v is None for v in volatile] == [v is None for v in hit[1]]:  # the same attributes published
                attributes = dict(before.attributes)
                for name, value in zip(HOST_VOLATILE, volatile):  # noqa: B905 - same length by construction
                    if value is not None:
                        attributes[name] = [value]
                entry = Entry.from_lists(before.dn, attributes, before._index)
                self._derived[entry.dn] = (entry, before)
                made = [entry, *hit[2][1:]]
                warnings.extend(hit[3])
                self._hosts.keep(host.hostname, (hit[0], volatile, made, hit[3]))
                return made
        own: list[str] = []
        made = host_entries(host, host_id, sc.unique_id, sc_dn, info_url, shapes, own)
        warnings.extend(own)
        self._hosts.keep(host.hostname, (lasting, volatile, made, own))
        return made

    def block(self, host: HostSnapshot, host_id: str, sc: SubClusterGroup, sc_dn: str, info_url: str,
              shapes: Optional[Shapes], warnings: list[str]) -> HostBlock:
        """The host's block (``keep_entries=False``): the last one as it was, the last one with new
        volatile figures, or one to be checked (its ``entries`` made anew)."""
        lasting = _lasting_key(host, host_id, sc, sc_dn, info_url)
        volatile = host_volatile(host)
        hit = self._blocks.previous(host.hostname)
        if hit is not None and hit.texts is not None and hit.lasting == lasting:
            if hit.volatile == volatile:
                warnings.extend(hit.warnings)
                self.block_entries[1] += len(hit.dns)
                return self._blocks.reuse(host.hostname, hit)
            if hit.layout is not None and [v is None for v in volatile] == [v is None for v in hit.volatile]:
                patched = patch_volatile(hit.texts[0], hit.layout, dict(zip(HOST_VOLATILE, volatile, strict=True)))
                if patched is not None:
                    warnings.extend(hit.warnings)
                    self.block_entries[0] += 1
                    self.block_entries[1] += len(hit.dns) - 1
                    return self._blocks.keep(host.hostname, HostBlock(hit.lasting, volatile, None, hit.warnings,
                                                                      (patched[0], *hit.texts[1:]), hit.dns, patched[1]))
        own: list[str] = []
        made = host_entries(host, host_id, sc.unique_id, sc_dn, info_url, shapes, own)
        warnings.extend(own)
        return self._blocks.keep(host.hostname, HostBlock(lasting, volatile, made, own))

    @staticmethod
    def settle(block: HostBlock, texts: list[str], dns: list[str], layout: Optional[Layout]) -> None:
        """A new block's entries were all checked and formatted with nothing left out, changed or
        warned about: keep their texts (and let the entries go) for the next render to reuse.  A
        block never settled is made anew next time, its entries checked again."""
        block.texts, block.dns, block.layout, block.entries = tuple(texts), tuple(dns), layout, None


def iter_glue13(site: SiteModel, groups: SiteGroups, states: Mapping[str, QueueState], templates: Mapping[str, Template],
                publish_hosts: Optional[bool] = None, warnings: Optional[list[str]] = None,
                host_cache: Optional[HostEntryCache] = None) -> Iterator[Union[Entry, HostBlock]]:
    """Every entry of the tree, parents before children (see the module docstring); with a
    text-keeping ``host_cache`` (``keep_entries=False``) each host's entries come as one HostBlock.

    ``states`` maps CE unique id -> QueueState.  ``publish_hosts`` (default:
    [glue] publish_hosts) adds the GlueHost and file system entries.  Hosts or
    file systems whose names slapd would take for the same DN are published
    once; the others are reported in ``warnings``.  ``host_cache``: the
    publisher's HostEntryCache (the same entries, fewer built).
    """
    warnings = warnings if warnings is not None else []
    if publish_hosts is None:
        publish_hosts = site.glue.publish_hosts
    info_url = site.glue.information_service_url
    base = site.glue.base_dn
    # Templated entries first, before anything is yielded: a template error
    # (a custom template missing a variable) must stop the run before any
    # output is written, not half-way through 100,000 hosts.
    logical = {cluster.unique_id: cluster.logical_cpus for cluster in groups.clusters}
    shapes: Shapes = {}  # attribute names of an entry -> their lower-case index (Entry.from_lists)
    site_templated = site_entry(site, templates["site"])
    clusters = []
    for cluster in groups.clusters:
        cluster_dn = make_dn("GlueClusterUniqueID", cluster.unique_id, base)
        subclusters = [(sc, make_dn("GlueSubClusterUniqueID", sc.unique_id, cluster_dn),
                        subcluster_entry(sc, cluster_dn, templates["subcluster"], info_url)) for sc in cluster.subclusters]
        clusters.append((cluster_entry(site, cluster, templates["cluster"]), subclusters))
    ces = [(ce, templates["ce"].render(ce_variables(site, ce, states.get(ce.unique_id), logical.get(ce.cluster))))
           for ce in site.ces]

    if site_templated is not None:
        yield site_templated
    for cluster_templated, subclusters in clusters:
        yield cluster_templated
        for sc, sc_dn, sc_templated in subclusters:
            yield sc_templated
            if not publish_hosts:
                continue
            seen_hosts: dict[str, str] = {}
            for host in sc.hosts:
                host_id = naming_value("GlueHostUniqueID", host.hostname)
                key = name_key(host_id)
                if key in seen_hosts or not key:
                    warnings.append(f"host {host.hostname!r}: same LDAP name as {seen_hosts.get(key, '')!r} "
                                    f"(names compare as ASCII, ignoring case and extra spaces); published once")
                    continue
                seen_hosts[key] = host.hostname
                if host_cache is not None and not host_cache.keep_entries:
                    yield host_cache.block(host, host_id, sc, sc_dn, info_url, shapes, warnings)
                elif host_cache is not None:
                    yield from host_cache.entries(host, host_id, sc, sc_dn, info_url, shapes, warnings)
                else:
                    yield from host_entries(host, host_id, sc.unique_id, sc_dn, info_url, shapes, warnings)
    for ce, ce_templated in ces:
        yield ce_templated
        state = states.get(ce.unique_id)
        yield from voview_entries(ce, state, make_dn("GlueCEUniqueID", ce.unique_id, base), templates["voview"])
        if ce.publish_jobs and state is not None:
            ce_dn = make_dn("GlueCEUniqueID", ce.unique_id, base)
            seen_jobs: set[str] = set()
            for job in state.jobs:
                key = name_key(job.local_id)
                if not key or key in seen_jobs:
                    continue
                seen_jobs.add(key)
                yield job_entry(job, ce, ce_dn)
        if not ce.access:
            warnings.append(f"CE {ce.unique_id}: no access rules ([ce:{ce.section or 'NAME'}] access = VO:name ...); "
                            f"brokers match CEs to VOs by them")
    # the CE services, the resource BDII and the CE-SE bindings (glueinfo.glue.services13)
    yield from service_entries(site)
    yield from cese_bind_entries(site)
