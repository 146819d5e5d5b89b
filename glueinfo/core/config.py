"""Configuration: one INI file, every key optional, checked whole before use.

Every section and key glueinfo knows is declared in ``SCHEMA`` below with its
type, default and a one-line doc; etc/glueinfo.conf.example is the admin's
copy of the same list.  A file with an unknown section or key, or a value of
the wrong type, is rejected as a whole with ``FILE:LINE: [section] key: why``,
so nothing is ever half-applied; a name one letter off a known one says
which was probably meant ("did you mean").  An error found later, by the code
that reads a value (``[sources] enabled`` naming no source, a busy ``[serve]
listen``), is written ``[section] key: why`` and gets the file and line in
front from :meth:`Config.located`.

A ``#`` after white space starts a comment, on a value's line too
(``listen = 127.0.0.1:7170  # loopback only``); a ``#`` that belongs to a
value is written without white space before it.

Sections named ``kind:NAME`` (``cluster:main``, ``ce:long``) are declared
once as ``kind:*``.  Sections in ``FREEFORM`` take any key (string values).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, Optional

from glueinfo.core.errors import ConfigurationError
from glueinfo.core.options import Option, parse_value
from glueinfo.core.records import dataclass
from glueinfo.core.suggest import did_you_mean

DEFAULT_PATH = "/etc/glueinfo/glueinfo.conf"
ENV_PATH = "GLUEINFO_CONFIG"


def check_named_list(text: str) -> None:
    """glueinfo.core.hostrange.check_named_list, for a key that lists hosts by name or range.  The
    range parser is imported only when a file sets such a key: a command whose config names no
    hosts (a probe) does not load it."""
    from glueinfo.core.hostrange import check_named_list as check

    check(text)


def degrees_within(limit: float) -> Callable[[str], None]:
    """A check for a coordinate: empty, or a decimal number of degrees within +-limit (GLUE's
    Latitude and Longitude are numbers; ``46N`` would reach brokers as text, or JSON not at all)."""

    def check(text: str) -> None:
        if not text:
            return
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number of degrees (e.g. 46.2, south and west negative)") from None
        if not -limit <= value <= limit:
            raise ValueError(f"{text} is outside -{limit:g} to {limit:g} degrees")

    return check


# The longest interval a job may have: APScheduler's triggers are datetimes, and a site whose
# facts are refreshed less than weekly is not published.
MAX_INTERVAL_S = 7 * 86400.0


def within_a_week(value: float) -> None:
    """A check for an interval in seconds: at most :data:`MAX_INTERVAL_S`."""
    if value > MAX_INTERVAL_S:
        raise ValueError(f"must be at most {MAX_INTERVAL_S:g} seconds (a week), got {value:g}")


def _group_facts(whose: str, unset: str) -> dict[str, Option]:
    """The host facts a [cluster:NAME] or [subcluster:NAME] may state for all its hosts (named as in
    [glue] aggregation_key; glueinfo/site/from_config.py reads them): what the GLUE 2
    ExecutionEnvironment and the GLUE 1.3 SubCluster publish, over what the hosts report."""
    def fact(kind: str, says: str, minimum: Optional[int] = None) -> Option:
        return Option(kind, "" if kind == "str" else None, f"Every host of {whose} {says}; unset: {unset}", minimum=minimum)

    return {
        "inbound_ip": fact("bool", "accepts inbound connections (GLUE2 ConnectivityIn, GlueHostNetworkAdapterInboundIP; "
                                   "not known: GLUE 2 undefined)"),
        "outbound_ip": fact("bool", "may open outbound connections (GLUE2 ConnectivityOut, GlueHostNetworkAdapterOutboundIP; "
                                    "not known: GLUE 2 undefined)"),
        "platform": fact("str", "has this platform, e.g. x86_64 (GLUE2 Platform, GlueHostArchitecturePlatformType)"),
        "os_name": fact("str", "runs this OS, e.g. AlmaLinux (GLUE2 OSName, GlueHostOperatingSystemName)"),
        "os_release": fact("str", "has this OS release, e.g. 9.4 (GLUE2 OSVersion, GlueHostOperatingSystemRelease)"),
        "os_version": fact("str", "has this OS version text (GlueHostOperatingSystemVersion)"),
        "ram": fact("int", "has at least this much RAM in MB (GLUE2 MainMemorySize, GlueHostMainMemoryRAMSize)", 1),
        "virtual_memory": fact("int", "has at least this much virtual memory in MB (GLUE2 VirtualMemorySize, "
                                      "GlueHostMainMemoryVirtualSize)", 1),
        "cpu_vendor": fact("str", "has CPUs of this vendor (GLUE2 CPUVendor, GlueHostProcessorVendor)"),
        "cpu_model": fact("str", "has this CPU model (GLUE2 CPUModel, GlueHostProcessorModel)"),
        "cpu_version": fact("str", "has this CPU version (GLUE2 CPUVersion, GlueHostProcessorVersion)"),
        "cpu_clock": fact("int", "has CPUs of this clock speed in MHz (GLUE2 CPUClockSpeed, GlueHostProcessorClockSpeed)", 1),
        "logical_cpus": fact("int", "has this many logical CPUs (GLUE2 LogicalCPUs, GlueHostArchitectureSMPSize)", 1),
        "physical_cores": fact("int", "has this many physical cores (GLUE2 CPUMultiplicity)", 1),
        "sockets": fact("int", "has this many CPU sockets (GLUE2 PhysicalCPUs, CPUMultiplicity)", 1),
    }


# section -> key -> Option.  Keep etc/glueinfo.conf.example in step with it.
SCHEMA: dict[str, dict[str, Option]] = {
    "glueinfo": {
        "host_root": Option("path", "/", "Read /proc, /sys and /etc below this directory instead of this machine's (a recorded host tree)"),
        "hostname": Option("str", "", "Publish this host under this name instead of its FQDN"),
    },
    "collectors": {
        "enable": Option("list", [], "Collectors to run although they are off by default"),
        "disable": Option("list", [], "Collectors not to run"),
        "timeout": Option("float", 5.0, "Seconds a collector may take before it is abandoned", minimum=0.01),
        "utilisation_interval": Option("float", 0.0, "Measure CPU utilisation over this many seconds (0: do not)", minimum=0.0),
    },
    "static": {
        "si00": Option("int", None, "SpecInt2000 benchmark of this host", minimum=0),
        "sf00": Option("int", None, "SpecFloat2000 benchmark of this host", minimum=0),
        "runtime_environment": Option("list", [], "Run-time environment tags (GlueHostApplicationSoftwareRunTimeEnvironment)"),
        "features": Option("list", [], "Node features (SSS Node Feature elements)"),
        "inbound_ip": Option("bool", None, "Worker nodes accept inbound connections"),
        "outbound_ip": Option("bool", None, "Worker nodes may open outbound connections"),
    },
    # -- SSS Node XML (glueinfo/sss/node_xml.py; glueinfo/site/node_settings.py reads these) and `glueinfo serve` --
    "node": {
        "stale_after": Option("float", 300.0, "Seconds after which a host's snapshot is too old: its State is Unknown", minimum=1.0),
        "offline_hosts": Option("list", [], "Host names or shell patterns an admin has taken out of service: their State is Offline"),
        "busy_threshold": Option("float", 0.9, "Busy processors / processors at or above which a host is Busy (below: Idle)", minimum=0.0),
        "resources": Option("list", [], "This host's extensible consumables as NAME[:TYPE]=AMOUNT, e.g. GPU:A100=4 License:MATLAB=2"),
        "disk_mounts": Option("list", [], "Mount points counted in the Disk figures (default: every local writable filesystem)"),
        "description": Option("str", "", "Node Description (default: built from the OS and CPU facts)"),
        "site_snapshots": Option("list", [], "Snapshot JSON files (or directories of *.json) of other hosts, for <Data>"),
    },
    "serve": {
        "listen": Option("str", "127.0.0.1:7170", "HOST:PORT `glueinfo serve` listens on (loopback unless told otherwise)"),
        "refresh_interval": Option("float", 60.0, "Seconds between refreshes of what glueinfo serve answers (this host's fast "
                                   "collectors, the sources, the batch systems; the slow collectors: [run] slow_interval); "
                                   "requests are served from memory", minimum=1.0, check=within_a_week),
        "max_body": Option("int", 1048576, "Largest request body accepted, in bytes", minimum=1024),
        "timeout": Option("float", 10.0, "Seconds a connection may stay silent before it is closed", minimum=0.1),
        "max_connections": Option("int", 4096, "Connections held open at once (idle ones cost no thread); more are answered "
                                  "503 at once", minimum=1),
        "max_per_address": Option("int", 32, "Connections one client address may hold at once; more are answered 503 at once",
                                  minimum=1),
        "request_deadline": Option("float", 30.0, "Seconds a request may take to arrive in full (request line, headers and "
                                   "body), however busy the client keeps the connection", minimum=0.1),
        "query_budget": Option("float", 2.0, "Seconds of work an SSSRMAP query may take before it is answered with a "
                               "Failure", minimum=0.01),
        "allow": Option("list", [], "Client networks served (CIDR or addresses, or `any`); a non-loopback listen without "
                        "key_file refuses to start unless this is set"),
        "key_file": Option("path", "", "File holding the shared HMAC-SHA1 key: when set, SSSRMAP requests must be signed"),
    },
    # -- GLUE 1.3 site model (glueinfo/site/from_config.py reads these) ---------------
    "site": {
        "id": Option("str", "", "GlueSiteUniqueID; empty: no GlueSite entry and no site links are published"),
        "name": Option("str", "", "GlueSiteName (default: the id)"),
        "description": Option("str", "", "GlueSiteDescription"),
        "location": Option("str", "", "GlueSiteLocation, e.g. 'Geneva, Switzerland'"),
        "latitude": Option("str", "", "GlueSiteLatitude in degrees, -90 to 90 (north positive)",
                           check=degrees_within(90)),
        "longitude": Option("str", "", "GlueSiteLongitude in degrees, -180 to 180 (east positive)",
                            check=degrees_within(180)),
        "web": Option("str", "", "GlueSiteWeb URL"),
        "email": Option("str", "", "GlueSiteEmailContact"),
        "sysadmin_contact": Option("str", "", "GlueSiteSysAdminContact, e.g. mailto:grid-admin@example.org"),
        "user_support_contact": Option("str", "", "GlueSiteUserSupportContact"),
        "security_contact": Option("str", "", "GlueSiteSecurityContact"),
        "sponsor": Option("list", [], "GlueSiteSponsor values, e.g. wlcg:50"),
        "other_info": Option("list", [], "GlueSiteOtherInfo values, e.g. TIER=2"),
    },
    "cluster:*": {
        "unique_id": Option("str", "", "GlueClusterUniqueID (default: the section name)"),
        "name": Option("str", "", "GlueClusterName (default: the unique id)"),
        "hosts": Option("list", [], "Host names or shell patterns this cluster covers (default: every host no other cluster names)"),
        "tmp_dir": Option("str", "", "GlueClusterTmpDir (and SubCluster TmpDir)"),
        "wn_tmp_dir": Option("str", "", "GlueClusterWNTmpDir (and SubCluster WNTmpDir)"),
        **_group_facts("this cluster", "what all its hosts report"),
    },
    "subcluster:*": {
        "cluster": Option("str", "", "The [cluster:NAME] this SubCluster belongs to (default: the only cluster)"),
        "hosts": Option("list", [], "Host names or shell patterns pinned to this SubCluster instead of automatic grouping"),
        "unique_id": Option("str", "", "GlueSubClusterUniqueID (default: the section name)"),
        "name": Option("str", "", "GlueSubClusterName (default: the unique id)"),
        "tmp_dir": Option("str", "", "GlueSubClusterTmpDir (default: the cluster's)"),
        "wn_tmp_dir": Option("str", "", "GlueSubClusterWNTmpDir (default: the cluster's)"),
        **_group_facts("this SubCluster", "its cluster's, else what all its hosts report"),
    },
    "ce:*": {
        "cluster": Option("str", "", "The [cluster:NAME] whose hosts serve this CE (default: the only cluster)"),
        "host": Option("str", "", "Gatekeeper host name (default: this host's FQDN)"),
        "port": Option("int", 2119, "Gatekeeper port", minimum=1),
        "jobmanager": Option("str", "jobmanager", "Job manager prefix of the CE id: HOST:PORT/JOBMANAGER-LRMS-QUEUE"),
        "lrms": Option("str", "fork", "LRMS plugin that reports the queue state (fork, slurm, htcondor, pbs, sge, lsf, ...)"),
        "lrms_version": Option("str", "", "GlueCEInfoLRMSVersion when the LRMS plugin does not report it"),
        "lrms_timeout": Option("float", 10.0, "Seconds the LRMS query may take", minimum=0.1),
        "lrms_max_output_bytes": Option("int", None, "Bytes one LRMS command may print; past them its processes are killed "
                                        "and nothing is read from it (default: per batch system, for 100,000 jobs; "
                                        "see batch-systems.md)", minimum=4096),
        "slurm_bin_dir": Option("path", "", "Directory holding sinfo/squeue/scontrol/sacctmgr (default: found on PATH)"),
        "slurm_conf": Option("path", "", "slurm.conf the Slurm commands read (sets SLURM_CONF; default: theirs)"),
        "slurm_json": Option("str", "auto", "Read nodes with sinfo --json: auto (Slurm >= 21.08, text format if it fails), yes, no",
                             choices=("auto", "yes", "no")),
        "lrms_command_prefix": Option("list", [], "Words put before every LRMS command, e.g. ssh slurm-head"),
        "condor_bin_dir": Option("path", "", "Directory holding condor_status/condor_q (default: found on PATH)"),
        "condor_config": Option("path", "", "HTCondor config the commands read (sets CONDOR_CONFIG; default: theirs)"),
        "condor_queue_by": Option("str", "schedd", "What this CE's queue names in HTCondor: schedd (a schedd's Name, "
                                  "or all schedds when the queue is 'all') or accounting_group (a group's prefix)",
                                  choices=("schedd", "accounting_group")),
        "pbs_bin_dir": Option("path", "", "Directory holding qstat/pbsnodes (default: found on PATH)"),
        "pbs_flavour": Option("str", "auto", "PBS family: auto (asks qstat --version), openpbs (OpenPBS / PBS Pro, "
                              "JSON output), torque (XML output)", choices=("auto", "openpbs", "torque")),
        "sge_bin_dir": Option("path", "", "Directory holding qstat/qhost/qconf (default: found on PATH)"),
        "sge_root": Option("path", "", "SGE_ROOT for the Grid Engine commands (default: theirs)"),
        "sge_cell": Option("str", "", "SGE_CELL for the Grid Engine commands (default: theirs)"),
        "sge_gpu_complex": Option("str", "", "Grid Engine consumable complex that counts a host's GPUs (e.g. gpu: "
                                  "complex_values gpu=4 on each exec host, jobs ask -l gpu=1); unset: no GPU is read"),
        "lsf_bin_dir": Option("path", "", "Directory holding bqueues/bjobs/bhosts (default: found on PATH)"),
        "lsf_envdir": Option("path", "", "LSF_ENVDIR for the LSF commands (default: theirs)"),
        "queue": Option("str", "", "Queue / partition name (default: the section name)"),
        "unique_id": Option("str", "", "GlueCEUniqueID (default: HOST:PORT/JOBMANAGER-LRMS-QUEUE)"),
        "status": Option("str", None, "GlueCEStateStatus when the LRMS does not report one",
                         choices=("Queueing", "Production", "Closed", "Draining")),
        "implementation_name": Option("str", "", "The CE's middleware, e.g. HTCondorCE, ARC-CE, CREAM (GlueCEImplementationName; "
                                    "its GLUE 2 type, interface and URL); unset: none is claimed, GLUE 2 publishes "
                                    "place-holders"),
        "implementation_version": Option("str", "", "GlueCEImplementationVersion"),
        "gram_version": Option("str", "", "GlueCEInfoGRAMVersion"),
        "contact_string": Option("list", [], "GlueCEInfoContactString values (default with implementation_name: "
                                 "HOST:PORT/JOBMANAGER-LRMS; without: none)"),
        "application_dir": Option("str", "", "GlueCEInfoApplicationDir"),
        "data_dir": Option("str", "", "GlueCEInfoDataDir"),
        "default_se": Option("str", "", "GlueCEInfoDefaultSE"),
        "capability": Option("list", [], "GlueCECapability values"),
        "access": Option("list", [], "GlueCEAccessControlBaseRule values, e.g. VO:atlas VOMS:/atlas/Role=pilot; one "
                                     "GLUE 1.3 VOView and one GLUE 2 ComputingShare per VO they name (a VO named only by "
                                     "FQANs too: its VOView's rules are those FQANs)"),
        "max_wall_clock_time": Option("int", None, "GlueCEPolicyMaxWallClockTime in minutes, when the LRMS does not report it", minimum=0),
        "max_cpu_time": Option("int", None, "GlueCEPolicyMaxCPUTime in minutes, when the LRMS does not report it", minimum=0),
        "max_obtainable_wall_clock_time": Option("int", None,
                        "GlueCEPolicyMaxObtainableWallClockTime in minutes (wins over the batch system's maximum)", minimum=0),
        "max_obtainable_cpu_time": Option("int", None,
                        "GlueCEPolicyMaxObtainableCPUTime in minutes (wins over the batch system's maximum)", minimum=0),
        "max_running_jobs": Option("int", None, "GlueCEPolicyMaxRunningJobs, when the LRMS does not report it", minimum=0),
        "max_total_jobs": Option("int", None, "GlueCEPolicyMaxTotalJobs, when the LRMS does not report it", minimum=0),
        "max_waiting_jobs": Option("int", None, "GlueCEPolicyMaxWaitingJobs, when the LRMS does not report it", minimum=0),
        "max_slots_per_job": Option("int", None,
                        "GlueCEPolicyMaxSlotsPerJob, GLUE2ComputingShareMaxSlotsPerJob (wins over the batch system's)", minimum=0),
        "assigned_job_slots": Option("int", None, "GlueCEPolicyAssignedJobSlots", minimum=0),
        "priority": Option("int", None, "GlueCEPolicyPriority, when the LRMS does not report it"),
        "publish_jobs": Option("bool", False, "Publish one GlueCEJob entry per job under the CE"),
        "pool_accounts": Option("list", [], "fork: the Unix accounts (shell patterns) grid jobs run as on this host, e.g. "
                                "atlas* cms*; each session of their processes counts as one running job"),
        # GLUE 2 (glueinfo/glue/glue2, docs/glue2-mapping.md): values the CE type's defaults do not give
        "endpoint_url": Option("str", "", "GLUE2EndpointURL (default from implementation_name: HTCondorCE condor://HOST:PORT, "
                               "ARC-CE https://HOST:PORT/arex, CREAM https://HOST:PORT/ce-cream/services; else the place-holder "
                               "https://your-ce.example.org/, not health-checked)"),
        "interface_name": Option("str", "", "GLUE2EndpointInterfaceName (default from implementation_name; else UNDEFINEDVALUE)"),
        "interface_version": Option("str", "", "GLUE2EndpointInterfaceVersion"),
        "service_type": Option("str", "", "GLUE2ServiceType (default from implementation_name; else UNDEFINEDVALUE)"),
        "quality_level": Option("str", "production", "GLUE2 Service and Endpoint QualityLevel",
                                choices=("development", "testing", "pre-production", "production")),
        "daemon_process": Option("str", "", "Process name of the CE daemon, looked for when the CE runs on this host "
                                 "(default from implementation_name: HTCondorCE condor_master, ARC-CE arched)"),
        "health_timeout": Option("float", 3.0, "Seconds the GLUE 2 health check's TCP connect to the endpoint may take",
                                 minimum=0.1),
        "close_se": Option("list", [], "Close storage services: SERVICE_ID or SERVICE_ID=LOCAL_PATH[:REMOTE_PATH] "
                           "(GLUE 2 ToStorageService)"),
        "benchmarks": Option("list", [], "Benchmarks of this CE's worker nodes, TYPE=VALUE, e.g. HEP-SPEC06=12.5 HEPscore23=14"),
        "cpu_scaling_factor": Option("float", None, "GLUE2ExecutionEnvironmentCPUTimeScalingFactor of this CE's nodes",
                                     minimum=0.0),
        "wall_scaling_factor": Option("float", None, "GLUE2ExecutionEnvironmentWallTimeScalingFactor of this CE's nodes",
                                      minimum=0.0),
        "default_wall_clock_time": Option("int", None, "GLUE2ComputingShareDefaultWallTime in minutes (wins over the batch system's)",
            minimum=0),
        "default_cpu_time": Option("int", None, "GLUE2ComputingShareDefaultCPUTime in minutes (wins over the batch system's)", minimum=0),
        "max_main_memory": Option("int", None, "GLUE2ComputingShareMaxMainMemory in MB (wins over the batch system's)", minimum=0),
        "guaranteed_main_memory": Option("int", None, "GLUE2ComputingShareGuaranteedMainMemory in MB (wins over the batch system's)",
            minimum=0),
        "max_virtual_memory": Option("int", None, "GLUE2ComputingShareMaxVirtualMemory in MB (wins over the batch system's)", minimum=0),
        "guaranteed_virtual_memory": Option("int", None, "GLUE2ComputingShareGuaranteedVirtualMemory in MB (wins over the batch system's)",
            minimum=0),
    },
    # -- CEs found on this host, not declared (glueinfo/site/discovery/) --
    "discovery": {
        "enabled": Option("list", ["htcondor-ce", "arc"], "CE middleware looked for on this host: htcondor-ce (its Job "
                          "Router routes), arc (arc.conf's queues); each CE found is published as a [ce:NAME], which a "
                          "declared [ce:NAME] overrides key by key; empty: none", choices=("htcondor-ce", "arc")),
        "condor_ce_bin_dir": Option("path", "", "Directory holding condor_ce_config_val (default: found on PATH; "
                                    "HTCondor-CE is asked only when it is there)"),
        "arc_conf": Option("path", "/etc/arc.conf", "ARC-CE's arc.conf (read only when it exists and has [arex])"),
        "arc_bin_dir": Option("path", "", "Directory holding arched, asked for ARC's version (default: found on PATH)"),
        "timeout": Option("float", 10.0, "Seconds all discovery commands together may take", minimum=0.1),
    },
    # -- jobs to VOs (glueinfo/lrms/vo_map.py): per-VO counts of every LRMS plugin ------------
    "vos": {
        "map": Option("list", [], "Rules KIND:PATTERN=VO, first match wins: KIND user, group, account, or for jobs "
                      "that came with a token issuer or token_group, PATTERN a shell pattern, e.g. group:atlas*=atlas "
                      "user:cms???=cms account:dteam=dteam issuer:https://atlas-auth.web.cern.ch/=atlas "
                      "token_group:/cms=cms; unmapped jobs are local"),
        "proxy_vo": Option("bool", True, "Take the VO the LRMS reports from a job's proxy (HTCondor x509userproxyvoname) "
                           "before the rules"),
    },
    # -- SSS Job XML (`glueinfo jobs-xml`, `glueinfo serve`'s <Object>Job</Object>): glueinfo/sss/job_xml.py --
    "jobs": {
        "private_fields": Option("list", [], "Job fields written only when named here, as they can hold secrets or "
                                 "private paths and `glueinfo serve` answers anyone its allow list admits: arguments, "
                                 "environment, working_directory (SSS Arguments, Environment, InitialWorkingDirectory)",
                                 choices=("arguments", "environment", "working_directory")),
    },
    "glue": {
        "base_dn": Option("str", "mds-vo-name=resource,o=grid", "DN the GLUE 1.3 tree is published under"),
        "aggregation_key": Option("list", ["platform", "cpu_vendor", "cpu_model", "cpu_clock", "logical_cpus", "ram",
                                           "os_name", "os_release", "os_version", "inbound_ip", "outbound_ip",
                                           "runtime_environment", "accelerators"],
                                  "Host facts that must be equal for hosts to share an automatic SubCluster"),
        "ram_granularity_mb": Option("int", 1024, "RAM sizes are compared rounded to this many MB", minimum=1),
        "publish_hosts": Option("bool", True, "Publish one GlueHost entry (with file systems) per host"),
        "schema_dir": Option("path", "/etc/ldap/schema", "Directory with the glue-schema .schema files the output is checked against"),
        "templates_dir": Option("path", "", "Directory with site/cluster/subcluster/ce templates (default: the built-in ones)"),
        "static_ldif_dir": Option("path", "", "Directory of *.ldif files published as they are (like BDII's gip/ldif)"),
        "information_service_url": Option("str", "", "GlueInformationServiceURL, e.g. ldap://ce.example.org:2170/mds-vo-name=resource,o=grid"),
        "versions": Option("list", ["1.3", "2.0"], "GLUE versions `ldif` prints and `publish`/`run` synchronise: 1.3 (o=grid), "
                           "2.0 (o=glue) or both"),
        "dit": Option("str", "resource", "GLUE 2 tree form: resource (under GLUE2GroupID=resource,o=glue, for a resource "
                      "BDII) or site (under GLUE2DomainID=<[site] id>,o=glue, for a site BDII fed directly)",
                      choices=("resource", "site")),
        "validity": Option("int", 10800, "GLUE2EntityValidity in seconds; CreationTime is renewed when an entry changes "
                           "or is older than half of it", minimum=600),
        "accelerator_schema": Option("bool", False, "Publish the GLUE 2.1 accelerator classes (AcceleratorEnvironment, "
                                     "ComputingManagerAccelerator, ComputingShareAccelerator) in o=glue too: only when the "
                                     "site's slapd loads glueinfo's GLUE21-accelerators.schema (docs/glue2-mapping.md); "
                                     "the JSON rendering always has them"),
    },
    "ldap": {
        "url": Option("str", "", "LDAP server `glueinfo publish` synchronises, e.g. ldap://127.0.0.1:2170"),
        "bind_dn": Option("str", "", "DN to bind as, or one DN per suffix separated by ';' as BDII lays its server out "
                          "(e.g. o=grid; o=glue; o=infosys): each base is written bound as the DN sharing its suffix, "
                          "BDII's statistics entry (Hostname=HOST,o=infosys) as the one for o=infosys"),
        "password_file": Option("path", "", "File holding the bind password (first line); with several bind DNs, one "
                                "file for all or one per DN in the same order, separated by ';'"),
        "timeout": Option("float", 10.0, "Seconds to wait for the server", minimum=0.1),
        "extra_bases": Option("str", "", "Further subtrees kept equal to what glueinfo publishes below them, besides [glue] "
                              "base_dn, separated by ';' (DNs hold commas), e.g. GLUE2GroupID=resource,o=glue; everything "
                              "else below them is deleted"),
        "window": Option("int", 64, "Writes sent before their answers are read (1: one at a time); keep it under slapd's "
                         "conn_max_pending_auth (1000)", minimum=1),
    },
    # -- the amqp output (glueinfo/publish/outputs/amqp.py): [run] outputs = amqp --
    "amqp": {
        "url": Option("str", "", "AMQP 0-9-1 broker the amqp output pushes to: amqp://USER@HOST[:PORT][/VHOST], or amqps:// "
                      "with ca_file (and cert_file, key_file for a client certificate; without a USER the certificate's "
                      "subject logs in, EXTERNAL); never a password"),
        "password_file": Option("path", "", "File holding USER's password (first line)"),
        "exchange": Option("str", "glueinfo", "Exchange the documents are published to, declared as a durable topic "
                           "exchange; routing keys are DOCUMENT.SITE, e.g. glue21.json.EXAMPLE-SITE"),
        "documents": Option("list", ["glue21-json"], "Documents pushed at every publish: glue21-json (the GLUE 2.1 JSON of "
                            "the site, as glue2-json prints it), node-xml (the site's Node XML, as node-xml --site prints it), "
                            "glue-ldif (both LDAP trees as ldif prints them, gzip-compressed: what glueinfo federate loads "
                            "into its LDAP server), crr-json (WLCG's CRR document)",
                            choices=("glue21-json", "node-xml", "glue-ldif", "crr-json")),
        "user_id": Option("str", "", "Name stamped on every message as its user_id, which RabbitMQ checks against the login "
                          "and federation views trust: default the url's USER; for a certificate login, the name the "
                          "broker derives from the certificate"),
        "ca_file": Option("path", "", "CA certificates the broker's certificate is checked against (amqps; default: the "
                          "system's)"),
        "cert_file": Option("path", "", "Client certificate (PEM) presented to the broker (amqps)"),
        "key_file": Option("path", "", "Its private key, when cert_file does not hold it"),
        "timeout": Option("float", 10.0, "Seconds to connect, and to wait for a blocked connection, before trying again",
                          minimum=0.1),
        "retry_min": Option("float", 1.0, "Seconds before trying again after the broker failed; doubled after each failure "
                            "(documents wait in the outbox, in [run] state_dir, the newest per routing key)", minimum=0.1),
        "retry_max": Option("float", 20.0, "Longest wait between attempts (short: a site's documents reach a "
                            "federation view at its next attempt after the broker's return, not sooner)", minimum=0.1),
        "resend": Option("float", 600.0, "A document unchanged since it was confirmed is sent again after this many seconds, "
                         "so consumers see the site alive", minimum=1.0),
        "drain_timeout": Option("float", 5.0, "At stop (and after run --once), seconds spent sending what waits; what is "
                                "left is sent after the next start", minimum=0.0),
    },
    # -- the federation view: glueinfo/federate/ (glueinfo federate; the broker is [amqp], the LDAP server [ldap]) --
    "federate": {
        "queue": Option("str", "", "This view's own durable queue on the [amqp] exchange (one per view: several views "
                        "consuming the same exchange each get every document), e.g. federate-egi"),
        "documents": Option("list", ["glue21-json", "glue-ldif", "crr-json"], "Documents kept from the sites: "
                            "glue21-json (served as JSON), glue-ldif (written into [ldap] url), crr-json (served as JSON)",
                            choices=("glue21-json", "glue-ldif", "crr-json")),
        "state_dir": Option("path", "/var/lib/glueinfo/federate", "Where each site's newest documents are kept (a "
                            "restart loses nothing)"),
        "senders_file": Option("path", "/etc/glueinfo/federate-senders", "Which broker user (a message's user_id) may "
                               "publish for which site id: lines SITE-ID SENDER; read again when it changes"),
        "listen": Option("str", "127.0.0.1:8180", "HOST:PORT the view serves /sites, /glue2.json, /health and /metrics on"),
        "allow": Option("list", [], "Client networks served when listen is not loopback (e.g. 10.0.0.0/8), or any"),
        "stale_after": Option("float", 1800.0, "Seconds without a document after which a site is marked stale (its "
                              "documents are still served)", minimum=1.0),
        "withdraw_after": Option("float", 43200.0, "Seconds without a document after which a site is withdrawn from "
                                 "LDAP and JSON (BDII's default delete delay)", minimum=1.0),
        "max_message_bytes": Option("int", 8388608, "Messages larger than this are refused, never loaded", minimum=1),
        "max_unpacked_bytes": Option("int", 268435456, "A compressed LDIF larger than this once unpacked is refused",
                                     minimum=1),
        "grid_base": Option("str", "mds-vo-name=local,o=grid", "Where the sites' GLUE 1.3 trees go in [ldap] url "
                            "(each below mds-vo-name=SITE), as a top-level BDII lays them out"),
        "glue_base": Option("str", "GLUE2GroupID=grid,o=glue", "Where the sites' GLUE 2 trees go in [ldap] url "
                            "(each as GLUE2DomainID=SITE below it)"),
        "full_sync": Option("float", 3600.0, "Seconds between comparisons of the whole LDAP tree with what the sites "
                            "sent (in between only changes are written)", minimum=1.0),
        "prefetch": Option("int", 64, "Messages the broker hands over before they are acknowledged", minimum=1),
    },
    # -- the htcondor-ce output (glueinfo/publish/outputs/htcondor_ce.py): [run] outputs = htcondor-ce --
    "htcondor-ce": {
        "resource_catalog_file": Option("path", "/etc/condor-ce/config.d/99-glueinfo-resource-catalog.conf",
                                        "HTCondor-CE config file the htcondor-ce output keeps the site's OSG_ResourceCatalog "
                                        "in (one pilot entry per CE queue and SubCluster: measured CPUs, memory, GPUs, "
                                        "wall time, VOs, OS), rewritten atomically when it changes"),
        "reconfig_command": Option("str", "", "Command run after the file changed, so the CE advertises the new catalog, "
                                   "e.g. condor_ce_reconfig (words split as a shell would, no shell run; empty: none); "
                                   "its failure is the output's error and it is run again at the next publish"),
        "reconfig_timeout": Option("float", 30.0, "Seconds reconfig_command may take; then its processes are killed",
                                   minimum=0.1),
    },
    # -- many hosts: glueinfo/gather/ and its sources (glueinfo/gather/sources/) -----
    "sources": {
        "enabled": Option("list", ["local"], "Where host snapshots come from: local, agents, spool, ganglia, prometheus, "
                          "node_exporter (or a plugin's)"),
        "agents": Option("str", "", "Worker agents to pull /node.xml from: names or ranges, e.g. wn[001-250].example.org:7170; "
                         "an address may carry its host's name: 10.1.0.[1-250]=wn[001-250].example.org",
                         check=check_named_list),
        "agents_file": Option("path", "", "File of agents, one name or range a line, # comments"),
        "aliases": Option("list", [], "Other Node Ids a listed host may report, NAME=ALIAS, e.g. "
                          "wn017.example.org=wn017-ib.example.org (any other Id is refused as a claim)"),
        "agent_port": Option("int", 7170, "Port of `glueinfo serve` on agents written without one", minimum=1),
        "agent_path": Option("str", "/node.xml", "URL path pulled from each agent"),
        "pool_size": Option("int", 64, "Agent pulls in flight at once", minimum=1),
        "timeout": Option("float", 5.0, "Seconds one agent (retries included) or Ganglia port may take", minimum=0.01),
        "retries": Option("int", 2, "Extra attempts after a refused/reset connection or a 5xx answer, within the timeout", minimum=0),
        "retry_backoff": Option("float", 0.1, "Seconds before the first retry; doubled for each further one", minimum=0.0),
        "gather_timeout": Option("float", 30.0, "Seconds a whole gather may take; what is still running then is abandoned", minimum=0.1),
        "max_body": Option("int", 4194304, "Largest Node XML accepted from one agent or spool file, in bytes", minimum=1024),
        "spool_dir": Option("path", "", "Directory of HOST.xml Node XML files written by workers (cron: glueinfo node-xml)"),
        "ganglia": Option("list", [], "gmond or gmetad XML ports to read, HOST[:PORT] (default port 8649)"),
        "ganglia_max_body": Option("int", 536870912, "Largest Ganglia XML document accepted, in bytes", minimum=1024),
        "prometheus_url": Option("str", "", "Prometheus server whose node_exporter series describe the workers, "
                                 "e.g. https://prometheus.example.org:9090"),
        "prometheus_selector": Option("str", "", "Label selector for the workers' series, e.g. job=\"node\" "
                                      "(default: every node_exporter series the server has)"),
        "prometheus_identity": Option("str", "nodename", "Which name a Prometheus target's host has: nodename "
                                     "(node_uname_info), instance (the target, port cut off), or label:NAME"),
        "prometheus_token_file": Option("path", "", "File holding a bearer token for the Prometheus API"),
        "prometheus_user": Option("str", "", "Basic-auth user for the Prometheus API"),
        "prometheus_password_file": Option("path", "", "File holding the basic-auth password for the Prometheus API"),
        "prometheus_ca_file": Option("path", "", "CA certificates to verify the Prometheus server's TLS certificate"),
        "prometheus_max_body": Option("int", 268435456, "Largest Prometheus API answer accepted, in bytes", minimum=1024),
        "node_exporters": Option("str", "", "node_exporters to pull /metrics from, names or ranges as for agents "
                                 "(ADDRESS=NAME too), e.g. wn[001-250].example.org:9100", check=check_named_list),
        "node_exporters_file": Option("path", "", "File of node_exporters, one name or range a line, # comments"),
        "node_exporter_port": Option("int", 9100, "Port of node_exporter on targets written without one", minimum=1),
        "node_exporter_identity": Option("str", "target", "Which name a node_exporter's host has: target (its listed "
                                         "name) or nodename (node_uname_info)", choices=("target", "nodename")),
        "drop_after": Option("float", 3600.0, "Seconds after which a host not heard from is dropped (Unknown: [node] stale_after)",
                             minimum=1.0),
    },
    # -- the periodic provider `glueinfo run` (glueinfo/run/) --
    "run": {
        "fast_interval": Option("float", 60.0, "Seconds between runs of the fast collectors on this host, each followed by a publish",
                                minimum=1.0, check=within_a_week),
        "lrms_interval": Option("float", 60.0, "Seconds between queries of every CE's batch system (LRMS), each followed by a "
                                "publish (or carried by the publish of a job still at work); runs whatever [sources] "
                                "are enabled", minimum=1.0, check=within_a_week),
        "slow_interval": Option("float", 3600.0, "Seconds between runs of the other collectors (CPU model, OS, caches, adapters); "
                                "SIGHUP runs them too", minimum=1.0, check=within_a_week),
        "gather_interval": Option("float", 60.0, "Seconds between gathers from the [sources] other than local, each followed by a publish",
                                  minimum=1.0, check=within_a_week),
        "fast_collectors": Option("list", ["load", "memory", "filesystems"],
                                  "Collectors run every fast_interval; every other enabled collector runs every slow_interval"),
        "jitter": Option("float", 0.0, "Up to this many seconds of random delay added to each run", minimum=0.0),
        "misfire_grace": Option("float", 30.0, "A run this many seconds late (suspended process, busy machine) still runs; "
                                "later ones are skipped and logged", minimum=1.0),
        "ldif_file": Option("path", "/var/lib/glueinfo/glue.ldif", "GLUE 1.3 LDIF rewritten atomically after every refresh "
                            "(empty: none); providers/glueinfo-provider prints it for BDII"),
        "node_xml_file": Option("path", "/var/lib/glueinfo/nodes.xml", "SSS Node XML <Data> of every host, rewritten atomically after "
                                "every refresh (empty: none)"),
        "crr_file": Option("path", "", "WLCG Computing Resource Reporting (CRR) JSON of the site, what crr-json prints "
                           "(docs/crr.md), rewritten atomically when it changes (empty: none)"),
        "state_dir": Option("path", "/var/lib/glueinfo/state", "Each host's last good snapshot, so a restart publishes at once "
                            "(empty: keep no state)"),
        "ldap_sync": Option("bool", False, "Synchronise the tree into the [ldap] server after every refresh"),
        "ldap_retry_min": Option("float", 5.0, "Seconds before retrying an LDAP server that failed; doubled after each failure",
                                 minimum=0.1),
        "ldap_retry_max": Option("float", 300.0, "Longest wait between LDAP retries", minimum=0.1),
        "serve": Option("bool", False, "Answer HTTP on [serve] listen from this process, with the state just published"),
        "outputs": Option("list", [], "Further outputs every publish goes to: amqp ([amqp]), htcondor-ce ([htcondor-ce]), "
                          "or an installed output plugin's name (its keys in [output:NAME]); file always, ldap and "
                          "http as ldap_sync and serve say"),
        "shutdown_grace": Option("float", 5.0, "Seconds SIGTERM waits for a running job before abandoning it", minimum=0.0),
        "provider_max_age": Option("float", 600.0, "providers/glueinfo-provider refuses (prints nothing, exits 1) an ldif_file "
                                   "older than this many seconds", minimum=1.0),
    },
    # An output plugin's own section: the keys are the ones the plugin declares (glueinfo.publish.outputs).
    "output:*": {},
}

# Sections whose keys are the admin's own names.
FREEFORM = {"extensions"}


class ConfigError(ConfigurationError, ValueError):
    """A bad config file; the message is one line naming file, line and key."""


@dataclass
class Config:
    """A parsed config file (or all defaults): typed values by section."""

    path: Optional[str] = None
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (section, key) and (section, None) -> line number, for errors found after parsing
    lines: dict[tuple[str, Optional[str]], int] = field(default_factory=dict)
    # Keys installed plugins declare (PluginKeys), when the file uses any: their defaults apply too.
    plugin_schema: Mapping[str, Mapping[str, Option]] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, Any]:
        """Typed values of a section, with defaults for keys not in the file."""
        declared = _declared(name, self.plugin_schema)
        result = {key: opt.default for key, opt in (declared or {}).items()}
        result.update(self.values.get(name, {}))
        return result

    def sections(self, kind: str) -> dict[str, dict[str, Any]]:
        """All ``kind:NAME`` sections, as NAME -> typed values, in file order."""
        prefix = kind + ":"
        return {name[len(prefix):]: self.section(name) for name in self.values if name.startswith(prefix)}

    def get(self, section: str, key: str) -> Any:
        return self.section(section)[key]

    def where(self, section: str, key: Optional[str] = None) -> Optional[str]:
        """``FILE:LINE`` of ``[section] key`` (or of the section's header) in the file; None when
        the file does not write it (a default, a command-line value, no file)."""
        line = self.lines.get((section, key.lower() if key else None))
        return f"{self.path}:{line}" if self.path and line else None

    def located(self, message: str) -> str:
        """``message`` about one key, written ``[section] key: why``, with ``FILE:LINE: `` in front
        when the file writes that key; any other message as it is."""
        match = _ABOUT_KEY.match(message)
        where = self.where(match.group(1), match.group(2)) if match else None
        return f"{where}: {message}" if where else message

    def with_values(self, section: str, **values: Any) -> Config:
        """This config with some keys of one section set (a command line overriding the file)."""
        return Config(path=self.path, values={**self.values, section: {**self.values.get(section, {}), **values}},
                      lines=self.lines, plugin_schema=self.plugin_schema)


# "[section] key: why", the form of an error about one key (Config.located).
_ABOUT_KEY = re.compile(r"\[([^\]\s]+)\] ([A-Za-z0-9_.-]+): ")

# Section (``ce:*``, ``sources``, ``output:NAME``) -> the keys installed plugins declare for it.
PluginKeys = Mapping[str, Mapping[str, Option]]


def _declared(section: str, plugin_schema: PluginKeys | None = None) -> Optional[dict[str, Option]]:
    kind = section.split(":", 1)[0] + ":*" if ":" in section else None
    declared = SCHEMA.get(section) if section in SCHEMA else SCHEMA.get(kind) if kind else None
    if plugin_schema:
        extra = {**(plugin_schema.get(kind, {}) if kind else {}), **plugin_schema.get(section, {})}
        if extra:
            return {**extra, **(declared or {})}  # glueinfo's own declaration of a key wins
    return dict(declared) if declared is not None else None


def _line_numbers(text: str) -> dict[tuple[str, Optional[str]], int]:
    """Map (section, key) and (section, None) to the line they are written on."""
    lines: dict[tuple[str, Optional[str]], int] = {}
    section = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        match = re.match(r"\[([^\]]+)\]", stripped)
        if match:
            section = match.group(1).strip()
            lines.setdefault((section, None), number)
            continue
        if section is not None and not line[:1].isspace():
            key = re.split(r"[=:]", stripped, maxsplit=1)[0].strip().lower()
            lines.setdefault((section, key), number)
    return lines


def parse_text(text: str, path: str = "<config>", plugin_keys: Optional[Callable[[], PluginKeys]] = None) -> Config:
    """The file's text, checked whole (module docstring).  ``plugin_keys``: the keys installed
    plugins declare, asked for only when the file has a key or section glueinfo itself does not
    declare (finding plugins costs a command's start-up), so a third-party LRMS plugin's
    ``[ce:x] myplugin_bin_dir`` is accepted with its declared type and default."""
    import configparser  # only when there is a file: without one, a fresh `glueinfo probe` skips its 3 ms import

    # inline_comment_prefixes: configparser cuts a value at a "#" only after white space
    parser = configparser.ConfigParser(interpolation=None, strict=True, empty_lines_in_values=False,
                                       inline_comment_prefixes=("#",))
    try:
        parser.read_string(text, source=path)
    except configparser.DuplicateSectionError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: section [{exc.section}] appears twice") from None
    except configparser.DuplicateOptionError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: [{exc.section}] {exc.option}: key appears twice") from None
    except configparser.MissingSectionHeaderError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: a key before any [section] header") from None
    except configparser.ParsingError as exc:
        lineno, bad_line = exc.errors[0] if exc.errors else (0, "")
        raise ConfigError(f"{path}:{lineno}: cannot parse line {bad_line.strip()!r}") from None

    lines = _line_numbers(text)
    values: dict[str, dict[str, Any]] = {}
    plugin_schema: dict[str, Mapping[str, Option]] = {}

    def ask_plugins() -> None:
        if plugin_keys is not None and not plugin_schema:
            plugin_schema.update(plugin_keys())
            plugin_schema.setdefault("", {})  # asked: never again, even when no plugin declares anything

    for section in parser.sections():
        where = lines.get((section, None), 0)
        declared = _declared(section, plugin_schema)
        if section not in FREEFORM and (declared is None or any(key not in declared for key in parser[section])):
            ask_plugins()
            declared = _declared(section, plugin_schema)
        if declared is None and section not in FREEFORM:
            raise ConfigError(f"{path}:{where}: unknown section [{section}]{_unknown_section_hint(section)}")
        if ":" in section and not section.split(":", 1)[1].strip():
            raise ConfigError(f"{path}:{where}: section [{section}] needs a name after the colon")
        typed: dict[str, Any] = {}
        for key, raw in parser.items(section, raw=True):
            line = lines.get((section, key), where)
            if section in FREEFORM:
                typed[key] = raw.strip()
                continue
            assert declared is not None
            if key not in declared:
                hint = did_you_mean(key, declared) or f"known: {', '.join(sorted(declared))}"
                raise ConfigError(f"{path}:{line}: [{section}] {key}: unknown key ({hint})")
            try:
                typed[key] = parse_value(declared[key], raw)
            except ValueError as exc:
                raise ConfigError(f"{path}:{line}: [{section}] {key}: {exc}") from None
        values[section] = typed
    return Config(path=path, values=values, lines=lines, plugin_schema={k: v for k, v in plugin_schema.items() if k})


def load(path: Optional[str] = None, plugin_keys: Optional[Callable[[], PluginKeys]] = None) -> Config:
    """Read the config file.  No file at the default path means all defaults;
    a file named explicitly (argument or $GLUEINFO_CONFIG) must exist.  ``plugin_keys``: as
    for :func:`parse_text`."""
    explicit = path or os.environ.get(ENV_PATH)
    target = explicit or DEFAULT_PATH
    try:
        with open(target, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{target}: no such config file") from None
        return Config(path=None)
    except OSError as exc:
        raise ConfigError(f"{target}: cannot read config file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{target}: cannot read config file: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_text(text, target, plugin_keys)


def _unknown_section_hint(section: str) -> str:
    """" (did you mean [X]?)" for a section one letter off a known one (``[source]``,
    ``[clusters:main]`` for ``[cluster:main]``), else " (known: ...)"."""
    kind, colon, name = section.partition(":")
    if colon:
        hint = did_you_mean(kind, [known[:-2] for known in SCHEMA if known.endswith(":*")], lambda k: f"[{k}:{name}]")
    else:
        hint = did_you_mean(section, [known for known in set(SCHEMA) | FREEFORM if not known.endswith(":*")],
                            lambda k: f"[{k}]")
    return f" ({hint})" if hint else f" (known: {', '.join(sorted(set(SCHEMA) | FREEFORM))})"
