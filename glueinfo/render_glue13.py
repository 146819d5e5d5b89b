"""Render stage: the GLUE 1.3 resource tree, as glueinfo.ldif Entries.

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
the schema normalisation (ldapschema.Schema.normalise) then makes them
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

from collections.abc import Iterator, Mapping
from typing import Any, Optional

from glueinfo.aggregate import ClusterGroup, SiteGroups, SubClusterGroup
from glueinfo.ldapschema import to_ascii
from glueinfo.ldif import Entry, make_dn
from glueinfo.model import FileSystem, HostSnapshot, JobInfo, QueueState
from glueinfo.site import CESpec, SiteModel
from glueinfo.templates import Template

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


# -- templated entries ----------------------------------------------------------------

def site_entry(site: SiteModel, template: Template) -> Optional[Entry]:
    info = site.site
    if not info.unique_id:
        return None
    return template.render({
        "SITE_ID": info.unique_id, "SITE_NAME": info.name, "PARENT_DN": site.glue.base_dn,
        "DESCRIPTION": info.description, "LOCATION": info.location, "LATITUDE": info.latitude,
        "LONGITUDE": info.longitude, "WEB": info.web, "EMAIL": info.email, "SYSADMIN_CONTACT": info.sysadmin_contact,
        "USER_SUPPORT_CONTACT": info.user_support_contact, "SECURITY_CONTACT": info.security_contact,
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
        "RUNTIME_ENVIRONMENT": list(shared.get("runtime_environment") or ()),
    }
    # The auxiliary class of each group of facts, when the SubCluster carries one of them.
    has = lambda *names: any(values.get(n) not in (None, "", []) for n in names)  # noqa: E731
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
    """Template variables of a CE: config identity, LRMS state, policies (LRMS first, then config)."""
    state = state or QueueState(lrms_type=ce.lrms, error="not queried")
    policy_from_state = {
        "max_wall_clock_time": state.max_wall_clock_time_min, "max_cpu_time": state.max_cpu_time_min,
        "max_running_jobs": state.max_running_jobs, "max_total_jobs": state.max_total_jobs,
        "max_waiting_jobs": state.max_waiting_jobs, "priority": state.priority,
    }
    policies = {key: policy_from_state.get(key) if policy_from_state.get(key) is not None else value
                for key, value in ce.policies.items()}
    status = state.status or ce.status
    total_cpus = state.total_cpus if state.total_cpus is not None else cluster_logical_cpus
    values: dict[str, Any] = {
        "CE_UNIQUE_ID": ce.unique_id, "CE_NAME": ce.queue, "CE_HOST": ce.host, "CE_PORT": ce.port,
        "CE_JOBMANAGER": ce.lrms, "LRMS_TYPE": ce.lrms, "CLUSTER_ID": ce.cluster, "PARENT_DN": site.glue.base_dn,
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

def host_entry(host: HostSnapshot, dn: str, subcluster_id: str, info_url: str = "") -> Entry:
    """One GlueHost entry with every host auxiliary class of the schema."""
    classes = list(HOST_CLASSES)
    if info_url:
        classes.append("GlueInformationService")
    entry = Entry(dn)
    add = entry.add
    add("objectClass", classes)
    add("GlueHostUniqueID", host.hostname)
    add("GlueHostName", host.hostname)
    osinfo, cpu, memory, static = host.os, host.cpu, host.memory, host.static
    if osinfo is not None:
        add("GlueHostArchitecturePlatformType", osinfo.platform_type)
    if cpu is not None:
        add("GlueHostArchitectureSMPSize", cpu.logical_cpus)
        add("GlueHostProcessorVendor", cpu.vendor)
        add("GlueHostProcessorModel", cpu.model_name)
        add("GlueHostProcessorVersion", cpu.version)
        add("GlueHostProcessorClockSpeed", cpu.clock_mhz)
        add("GlueHostProcessorInstructionSet", cpu.instruction_set)
        add("GlueHostProcessorOtherDescription", cores_per_socket(cpu.physical_cores, cpu.sockets))
        add("GlueHostProcessorCacheL1", cpu.cache_l1_kb)
        add("GlueHostProcessorCacheL1I", cpu.cache_l1i_kb)
        add("GlueHostProcessorCacheL1D", cpu.cache_l1d_kb)
        add("GlueHostProcessorCacheL2", cpu.cache_l2_kb)
    if memory is not None:
        add("GlueHostMainMemoryRAMSize", memory.ram_mb)
        add("GlueHostMainMemoryRAMAvailable", memory.ram_available_mb)
        add("GlueHostMainMemoryVirtualSize", memory.virtual_mb)
        add("GlueHostMainMemoryVirtualAvailable", memory.virtual_available_mb)
    adapter = host.primary_adapter()
    if adapter is not None:
        add("GlueHostNetworkAdapterName", adapter.name or None)
        address = (adapter.ipv4 or adapter.ipv6 or [None])[0]
        add("GlueHostNetworkAdapterIPAddress", address)
        add("GlueHostNetworkAdapterMTU", adapter.mtu)
    if static is not None:
        add("GlueHostNetworkAdapterInboundIP", static.inbound_ip)
        add("GlueHostNetworkAdapterOutboundIP", static.outbound_ip)
    loads = host.glue_load_figures()
    if loads is not None:
        add("GlueHostProcessorLoadLast1Min", loads[0])
        add("GlueHostProcessorLoadLast5Min", loads[1])
        add("GlueHostProcessorLoadLast15Min", loads[2])
        add("GlueHostSMPLoadLast1Min", loads[0])
        add("GlueHostSMPLoadLast5Min", loads[1])
        add("GlueHostSMPLoadLast15Min", loads[2])
    if osinfo is not None:
        add("GlueHostOperatingSystemName", osinfo.name)
        add("GlueHostOperatingSystemRelease", osinfo.release)
        add("GlueHostOperatingSystemVersion", osinfo.version)
    if static is not None:
        add("GlueHostBenchmarkSI00", static.si00)
        add("GlueHostBenchmarkSF00", static.sf00)
        add("GlueHostApplicationSoftwareRunTimeEnvironment", sorted(set(static.runtime_environment)))
    add("GlueChunkKey", "GlueSubClusterUniqueID=" + subcluster_id)
    add("GlueInformationServiceURL", info_url or None)
    add("GlueSchemaVersionMajor", GLUE_MAJOR)
    add("GlueSchemaVersionMinor", GLUE_MINOR)
    return entry


def filesystem_entry(fs: FileSystem, host_dn: str, hostname: str) -> Entry:
    kind = "Remote" if fs.remote else "Local"
    prefix = f"GlueHost{kind}FileSystem"
    entry = Entry(make_dn(prefix + "Name", fs.mount_point, host_dn))
    add = entry.add
    add("objectClass", REMOTE_FS_CLASSES if fs.remote else LOCAL_FS_CLASSES)
    add(prefix + "Name", fs.mount_point)
    add(prefix + "Root", fs.mount_point)
    add(prefix + "Type", fs.fs_type or None)
    add(prefix + "ReadOnly", fs.read_only)
    add(prefix + "Size", fs.size_mb * MB if fs.size_mb is not None else None)
    add(prefix + "AvailableSpace", fs.available_mb * MB if fs.available_mb is not None else None)
    if fs.remote:
        add(prefix + "Server", fs.server)
    add("GlueChunkKey", "GlueHostUniqueID=" + hostname)
    add("GlueSchemaVersionMajor", GLUE_MAJOR)
    add("GlueSchemaVersionMinor", GLUE_MINOR)
    return entry


def job_entry(job: JobInfo, ce: CESpec, ce_dn: str) -> Entry:
    entry = Entry(make_dn("GlueCEJobLocalID", job.local_id, ce_dn))
    add = entry.add
    add("objectClass", JOB_CLASSES)
    add("GlueCEJobLocalID", job.local_id)
    add("GlueCEJobGlobalID", f"{ce.unique_id}/{job.local_id}")
    add("GlueCEJobLocalOwner", job.local_owner)
    add("GlueCEJobGlobalOwner", job.global_owner)
    add("GlueCEJobStatus", job.glue_status)
    add("GlueCEJobSchedulerSpecific", job.scheduler_specific)
    add("GlueSchemaVersionMajor", GLUE_MAJOR)
    add("GlueSchemaVersionMinor", GLUE_MINOR)
    return entry


# -- the whole tree -------------------------------------------------------------------

def iter_glue13(site: SiteModel, groups: SiteGroups, states: Mapping[str, QueueState], templates: Mapping[str, Template],
                publish_hosts: Optional[bool] = None, warnings: Optional[list[str]] = None) -> Iterator[Entry]:
    """Every entry of the tree, parents before children (see the module docstring).

    ``states`` maps CE unique id -> QueueState.  ``publish_hosts`` (default:
    [glue] publish_hosts) adds the GlueHost and file system entries.  Hosts or
    file systems whose names slapd would take for the same DN are published
    once; the others are reported in ``warnings``.
    """
    warnings = warnings if warnings is not None else []
    if publish_hosts is None:
        publish_hosts = site.glue.publish_hosts
    info_url = site.glue.information_service_url
    entry = site_entry(site, templates["site"])
    if entry is not None:
        yield entry
    for cluster in groups.clusters:
        cluster_dn = make_dn("GlueClusterUniqueID", cluster.unique_id, site.glue.base_dn)
        yield cluster_entry(site, cluster, templates["cluster"])
        for sc in cluster.subclusters:
            sc_dn = make_dn("GlueSubClusterUniqueID", sc.unique_id, cluster_dn)
            yield subcluster_entry(sc, cluster_dn, templates["subcluster"], info_url)
            if not publish_hosts:
                continue
            seen_hosts: dict[str, str] = {}
            for host in sc.hosts:
                key = name_key(host.hostname)
                if key in seen_hosts or not key:
                    warnings.append(f"host {host.hostname!r}: same LDAP name as {seen_hosts.get(key, '')!r} "
                                    f"(names compare as ASCII, ignoring case and extra spaces); published once")
                    continue
                seen_hosts[key] = host.hostname
                host_dn = make_dn("GlueHostUniqueID", host.hostname, sc_dn)
                yield host_entry(host, host_dn, sc.unique_id, info_url)
                seen_fs: dict[tuple[bool, str], str] = {}
                for fs in host.filesystems or ():
                    fs_key = (fs.remote, name_key(fs.mount_point))
                    if fs_key in seen_fs or not fs_key[1]:
                        warnings.append(f"host {host.hostname}: file system {fs.mount_point!r} has the same LDAP name as "
                                        f"{seen_fs.get(fs_key, '')!r}; published once")
                        continue
                    seen_fs[fs_key] = fs.mount_point
                    yield filesystem_entry(fs, host_dn, host.hostname)
    logical = {cluster.unique_id: cluster.logical_cpus for cluster in groups.clusters}
    for ce in site.ces:
        state = states.get(ce.unique_id)
        yield templates["ce"].render(ce_variables(site, ce, state, logical.get(ce.cluster)))
        if ce.publish_jobs and state is not None:
            ce_dn = make_dn("GlueCEUniqueID", ce.unique_id, site.glue.base_dn)
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
