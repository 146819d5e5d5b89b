"""The GLUE attributes whose values change on their own from one publication to the next.

Loads, free memory and space, job and slot counts, waiting-time estimates,
states and health, and the times a GLUE 2 entity was made: a BDII serving
the values of its last cycle while glueinfo has published newer ones is
healthy.  ``glueinfo check --bdii`` compares every other attribute (the
static ones: names, sizes, limits, foreign keys) and never these, so a
healthy BDII never turns WARNING between two cycles.  This module is the one
list of them, for GLUE 1.3 (o=grid) and GLUE 2 (o=glue): the names are
GFD.147's (GLUE 2.0) and the GLUE 1.3 specification's.

Names are compared without regard to case, as LDAP does.  Whole families are
named by prefix where the schema makes a family dynamic as a whole
(GLUE 1.3's ``GlueCEState*``, which a VOView repeats).
"""

from __future__ import annotations

# GLUE 1.3: the CE's and VOView's state (GlueCEStateRunningJobs, FreeCPUs, FreeJobSlots, Status,
# Estimated/WorstResponseTime...), the SE's and SA's state.
GLUE13_PREFIXES = ("GlueCEState", "GlueSEState", "GlueSAState")
GLUE13_NAMES = (
    # a host's load and free memory (glueinfo.glue.render13.HOST_VOLATILE)
    "GlueHostProcessorLoadLast1Min", "GlueHostProcessorLoadLast5Min", "GlueHostProcessorLoadLast15Min",
    "GlueHostSMPLoadLast1Min", "GlueHostSMPLoadLast5Min", "GlueHostSMPLoadLast15Min",
    "GlueHostMainMemoryRAMAvailable", "GlueHostMainMemoryVirtualAvailable",
    # free space of its file systems
    "GlueHostLocalFileSystemAvailableSpace", "GlueHostRemoteFileSystemAvailableSpace",
    # a service's health
    "GlueServiceStatus", "GlueServiceStatusInfo",
)

GLUE2_NAMES = (
    # when the entity was made, for how long it holds
    "GLUE2EntityCreationTime", "GLUE2EntityValidity",
    # endpoint health and state, and when it started
    "GLUE2EndpointHealthState", "GLUE2EndpointHealthStateInfo", "GLUE2EndpointServingState", "GLUE2EndpointStartTime",
    # jobs of the service, its endpoints and shares
    "GLUE2ComputingServiceTotalJobs", "GLUE2ComputingServiceRunningJobs", "GLUE2ComputingServiceWaitingJobs",
    "GLUE2ComputingServiceStagingJobs", "GLUE2ComputingServiceSuspendedJobs", "GLUE2ComputingServicePreLRMSWaitingJobs",
    "GLUE2ComputingEndpointTotalJobs", "GLUE2ComputingEndpointRunningJobs", "GLUE2ComputingEndpointWaitingJobs",
    "GLUE2ComputingEndpointStagingJobs", "GLUE2ComputingEndpointSuspendedJobs",
    "GLUE2ComputingEndpointPreLRMSWaitingJobs",
    "GLUE2ComputingShareTotalJobs", "GLUE2ComputingShareRunningJobs", "GLUE2ComputingShareLocalRunningJobs",
    "GLUE2ComputingShareWaitingJobs", "GLUE2ComputingShareLocalWaitingJobs", "GLUE2ComputingShareSuspendedJobs",
    "GLUE2ComputingShareLocalSuspendedJobs", "GLUE2ComputingShareStagingJobs", "GLUE2ComputingSharePreLRMSWaitingJobs",
    # a share's slots, waiting times and state
    "GLUE2ComputingShareFreeSlots", "GLUE2ComputingShareFreeSlotsWithDuration", "GLUE2ComputingShareUsedSlots",
    "GLUE2ComputingShareRequestedSlots", "GLUE2ComputingShareEstimatedAverageWaitingTime",
    "GLUE2ComputingShareEstimatedWorstWaitingTime", "GLUE2ComputingShareServingState",
    # the manager's slots in use and free space
    "GLUE2ComputingManagerSlotsUsedByLocalJobs", "GLUE2ComputingManagerSlotsUsedByGridJobs",
    "GLUE2ComputingManagerWorkingAreaFree", "GLUE2ComputingManagerWorkingAreaMultiSlotFree",
    "GLUE2ComputingManagerCacheFree",
    # instances of an execution environment in use or down
    "GLUE2ExecutionEnvironmentUsedInstances", "GLUE2ExecutionEnvironmentUnavailableInstances",
)

_NAMES = frozenset(name.lower() for name in GLUE13_NAMES + GLUE2_NAMES)
_PREFIXES = tuple(prefix.lower() for prefix in GLUE13_PREFIXES)


def is_volatile(attribute: str) -> bool:
    """Whether ``attribute`` (any case) changes on its own between publications (module docstring)."""
    name = attribute.lower()
    return name in _NAMES or name.startswith(_PREFIXES)
