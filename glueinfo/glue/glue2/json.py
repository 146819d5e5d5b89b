"""The GLUE 2 objects in the OGF GLUE 2 JSON rendering.

The same entries as the LDAP tree (glue2_entries), each object named by its
GLUE 2 class (``ComputingService``, ``ComputingEndpoint``...) with its
attributes without the ``GLUE2<Class>`` prefix, its foreign keys under
``Associations`` (``ComputingServiceID``, ``ExecutionEnvironmentID``...),
and its LDAP children nested by class, as lists.

The document validates against the OGF GLUE working group's JSON Schema of
GLUE 2.0 (github.com/OGF-GLUE/JSON, ``schema/``, ids
``http://schemas.ogf.org/glue/2014/11/spec_2.0_r1/``; glueinfo's own
statement of its rules, tests/fixtures/glue2-json-schema/, is what the tests
check).  So each value is typed by its attribute's name, as that schema
types it, where LDAP holds only text:

- integers (``MaxWallTime``, ``Validity``...) and numbers (``Latitude``,
  ``Value``, the scaling factors) are JSON numbers; a text that is not one
  is left out, as anything unknown (the config refuses a ``[site] latitude``
  such as ``46N`` before it gets here);
- GLUE's ExtendedBoolean_t (``ConnectivityIn``...: LDAP ``true``, ``false``,
  ``undefined``) is ``true``, ``false`` or ``null``: the schema's type is
  boolean or null, its words "no value implies undefined", and it requires
  ConnectivityIn and ConnectivityOut, so undefined is ``null``, never left out;
- the schema's multi-valued attributes (``OtherInfo``, ``Capability``,
  ``WWW``...) are lists even of one value, every other one a string (a
  version ``12`` or a queue named ``1`` stays text);
- each association has the schema's cardinality: a list (``EndpointID`` of a
  Share, ``DomainID`` of a Contact...) or one ID (``ServiceID`` of a Share,
  ``ExecutionEnvironmentID`` of a Benchmark); the specialised keys LDAP adds
  (``ComputingEndpointID`` of a Share) follow their general one.

The schema requires one direction of some associations that LDAP keeps the
other way; they are added from the same tree, nothing invented: a Domain's
``LocationID`` and a Service's ``LocationID`` and ``ContactID`` (the Location
and Contacts naming it), an Endpoint's ``ShareID`` (the Shares naming it), a
Manager's ``ResourceID`` (the ExecutionEnvironments naming it); where none
names it, ``[]`` or ``null`` (an AdminDomain's ``ParentDomainID``, a Service's
related ``ServiceID``).  A Policy's ``UserDomainID`` is the VOs its rules name
(``VO:atlas``, ``VOMS:/atlas/Role=pilot`` -> ``atlas``), as gLite's providers
set GLUE2PolicyUserDomainForeignKey.  Two rules of the schema a site can miss
without anything invented to meet them: a ComputingManager with no
ExecutionEnvironment (every one left out: platform, memory or OS unknown) has
``ResourceID: []`` where one is required, and a Policy none of whose rules
names a VO has ``UserDomainID: []``.

The rendering is GLUE 2.1's: beside the GLUE 2.0 objects, the accelerator
classes of the GLUE 2.1 draft (glueinfo.glue.glue2.accelerators) nest the
same way: ``AcceleratorEnvironment`` in its ExecutionEnvironment,
``ComputingManagerAccelerator`` in its ComputingManager,
``ComputingShareAccelerator`` in its ComputingShare, each with its
attributes by the draft's names (``Type``, ``Numbers``, ``Model``...,
``TotalSlots``, ``UsedSlots``, ``FreeSlots``, ``MaxSlotsPerJob``; the
figures integers) and its parent under ``Associations``
(``ExecutionEnvironmentID``...).  They are here whether or not the LDAP tree
carries them (``[glue] accelerator_schema``).  No JSON Schema of GLUE 2.1 is
published.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Optional, Union

from glueinfo.core.ldif import Entry, normalise_dn, parent_dn
from glueinfo.site.access import vo_of_rule

# The most specific class of each entry, as JSON names it (LDAP lists its superclasses too).
CLASSES = ("AdminDomain", "Location", "Contact", "ComputingService", "ComputingEndpoint", "AccessPolicy", "ComputingShare",
           "MappingPolicy", "ComputingManager", "ApplicationEnvironment", "ExecutionEnvironment", "Benchmark",
           "ToStorageService", "AcceleratorEnvironment", "ComputingManagerAccelerator", "ComputingShareAccelerator")
GLUE21_ONLY_ORDER = ("AcceleratorEnvironment", "ComputingManagerAccelerator", "ComputingShareAccelerator")
GLUE21_ONLY = set(GLUE21_ONLY_ORDER)
# The general class whose associations each one shares (the schema's allOf chains).
FAMILY = {"AdminDomain": "Domain", "ComputingService": "Service", "ComputingEndpoint": "Endpoint", "AccessPolicy": "Policy",
          "MappingPolicy": "Policy", "ComputingShare": "Share", "ComputingManager": "Manager",
          "ExecutionEnvironment": "Resource"}

# JSON types by attribute name, as the OGF schema has them (GLUE 2.1 draft figures: integers too).
INTEGERS = frozenset({
    "Validity",
    "TotalJobs", "RunningJobs", "WaitingJobs", "StagingJobs", "SuspendedJobs", "PreLRMSWaitingJobs",  # Service, Endpoint
    "MaxWallTime", "MaxMultiSlotWallTime", "DefaultWallTime", "MaxCPUTime", "MaxTotalCPUTime", "MinCPUTime",
    "DefaultCPUTime", "MaxTotalJobs", "MaxRunningJobs", "MaxWaitingJobs", "MaxPreLRMSWaitingJobs", "MaxUserRunningJobs",
    "MaxSlotsPerJob", "MaxStageInStreams", "MaxStageOutStreams", "MaxMainMemory", "GuaranteedMainMemory",
    "MaxVirtualMemory", "GuaranteedVirtualMemory", "MaxDiskSpace", "LocalRunningJobs", "LocalWaitingJobs",
    "LocalSuspendedJobs", "EstimatedAverageWaitingTime", "EstimatedWorstWaitingTime", "FreeSlots", "UsedSlots",
    "RequestedSlots",  # Share
    "TotalPhysicalCPUs", "TotalLogicalCPUs", "TotalSlots", "SlotsUsedByLocalJobs", "SlotsUsedByGridJobs",
    "WorkingAreaTotal", "WorkingAreaFree", "WorkingAreaLifeTime", "WorkingAreaMultiSlotTotal",
    "WorkingAreaMultiSlotFree", "WorkingAreaMultiSlotLifeTime", "CacheTotal", "CacheFree",  # Manager
    "TotalInstances", "UsedInstances", "UnavailableInstances", "PhysicalCPUs", "LogicalCPUs", "CPUClockSpeed",
    "MainMemorySize", "VirtualMemorySize",  # ExecutionEnvironment
    "MaxSlots", "MaxJobs", "MaxUserSeats", "FreeJobs", "FreeUserSeats",  # ApplicationEnvironment
    "Numbers", "ClockSpeed", "Memory", "TotalNumbers",  # the GLUE 2.1 accelerator classes
})
NUMBERS = frozenset({"Latitude", "Longitude", "Value", "CPUTimeScalingFactor", "WallTimeScalingFactor"})
EXTENDED_BOOLEANS = frozenset({"Distributed", "Reservation", "BulkSubmission", "Homogeneous", "LocalCPUDistribution",
                               "WorkingAreaShared", "WorkingAreaGuaranteed", "Preemption", "VirtualMachine",
                               "ConnectivityIn", "ConnectivityOut"})
EXTENDED_BOOLEAN = {"true": True, "false": False, "undefined": None}
LISTS = frozenset({"OtherInfo", "WWW", "Owner", "Capability", "StatusInfo", "InterfaceExtension", "WSDL",
                   "SupportedProfile", "Semantics", "TrustedCA", "JobDescription", "Rule", "NetworkInfo", "BestBenchmark",
                   "Tag", "ComputeCapability"})
# The associations that are lists, by class (every other one is one ID).
LIST_ASSOCIATIONS = {
    "Location": {"ServiceID", "DomainID"},
    "Contact": {"ServiceID", "DomainID"},
    "Domain": {"ContactID", "ServiceID", "ChildDomainID", "ComputingServiceID", "StorageServiceID"},
    "Service": {"EndpointID", "ShareID", "ManagerID", "ContactID", "ServiceID"},
    "Endpoint": {"ShareID", "AccessPolicyID", "ActivityID"},
    "Policy": {"UserDomainID"},
    "Share": {"EndpointID", "ComputingEndpointID", "ResourceID", "ExecutionEnvironmentID", "ActivityID", "MappingPolicyID"},
    "Manager": {"ResourceID", "ApplicationEnvironmentID", "BenchmarkID"},
    "Resource": {"ShareID", "ActivityID", "ApplicationEnvironmentID", "BenchmarkID"},
    "ApplicationEnvironment": {"ExecutionEnvironmentID", "ApplicationHandleID"},
    "AcceleratorEnvironment": {"ExecutionEnvironmentID"},  # as glueinfo has always written it
}
# (class naming, its association, class named, the association the schema requires there)
REVERSED = (("Location", "DomainID", "Domain", "LocationID"), ("Location", "ServiceID", "Service", "LocationID"),
            ("Contact", "ServiceID", "Service", "ContactID"), ("Share", "EndpointID", "Endpoint", "ShareID"),
            ("Resource", "ManagerID", "Manager", "ResourceID"))
# What a required association is when nothing names one: none (a list) or null.
REQUIRED = {"Domain": ("LocationID",), "AdminDomain": ("ParentDomainID",), "Service": ("ContactID", "LocationID", "ServiceID"),
            "Endpoint": ("ShareID",), "Share": ("ResourceID",), "Manager": ("ResourceID",),
            "Benchmark": ("ExecutionEnvironmentID", "ComputingManagerID")}
_ABSENT = object()


def _class(entry: Entry) -> str:
    names = {c[5:] for c in entry.object_classes if c.startswith("GLUE2")}
    return next((c for c in CLASSES if c in names), "Entity")


def _family(kind: str) -> str:
    return FAMILY.get(kind, kind)


def _strip(name: str) -> str:
    """GLUE2ComputingShareMaxWallTime -> MaxWallTime (the longest class prefix goes)."""
    rest = name[5:] if name.startswith("GLUE2") else name
    for prefix in sorted(("Entity", "Domain", "AdminDomain", "Location", "Contact", "Service", "ComputingService",
                          "Endpoint", "ComputingEndpoint", "Policy", "AccessPolicy", "MappingPolicy", "Share",
                          "ComputingShare", "Manager", "ComputingManager", "Resource", "ExecutionEnvironment",
                          "ApplicationEnvironment", "Benchmark", "ToStorageService", "AcceleratorEnvironment",
                          "ComputingManagerAccelerator", "ComputingShareAccelerator"), key=len, reverse=True):
        if rest.startswith(prefix) and len(rest) > len(prefix):
            return rest[len(prefix):]
    return rest


def _scalar(name: str, value: Union[str, int]) -> Any:
    """One value as the schema types ``name``; _ABSENT where the text is not of that type."""
    text = str(value).strip()
    try:
        if name in INTEGERS:
            return int(text)
        if name in NUMBERS:
            number = float(text)
            return number if number == number and abs(number) != float("inf") else _ABSENT  # JSON has no NaN
    except ValueError:
        return _ABSENT
    if name in EXTENDED_BOOLEANS:
        return EXTENDED_BOOLEAN.get(text.lower(), _ABSENT)
    return str(value)


def _value(name: str, values: Sequence[Union[str, int]]) -> Any:
    """The attribute's JSON value (module docstring), or _ABSENT when no value is of its type."""
    typed = [v for v in (_scalar(name, value) for value in values) if v is not _ABSENT]
    if name in LISTS:
        return typed
    if not typed:
        return _ABSENT
    return typed if len(typed) > 1 else typed[0]


def _association(kind: str, name: str, values: Sequence[Union[str, int]]) -> Any:
    ids = [str(v) for v in values]
    many = LIST_ASSOCIATIONS.get(_family(kind), set()) | LIST_ASSOCIATIONS.get(kind, set())
    return ids if name in many or len(ids) > 1 else ids[0]


def _object(kind: str, entry: Entry) -> dict[str, Any]:
    """The entry's attributes and ``Associations`` (always there, filled in by :func:`_complete`)."""
    obj: dict[str, Any] = {}
    associations: dict[str, Any] = {}
    for name, values in entry.attributes.items():
        if name == "objectClass" or not values:
            continue
        short = _strip(name)
        if short.endswith("ForeignKey"):
            target = short[: -len("ForeignKey")]
            target = target[len(kind):] if target.startswith(kind) and target != kind else target
            key = "ParentDomainID" if kind == "AdminDomain" and target == "AdminDomain" else target + "ID"
            associations[key] = _association(kind, key, values)
        else:
            value = _value(short, values)
            if value is not _ABSENT:
                obj[short] = value
    obj["Associations"] = associations
    return obj


def _complete(placed: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """The associations the schema requires in the direction LDAP does not keep (module docstring)."""
    by_id = {(_family(kind), obj.get("ID")): obj for kind, obj in placed}
    for kind, obj in placed:
        for naming, key, named, reverse in REVERSED:
            if _family(kind) != naming:
                continue
            targets = obj["Associations"].get(key, [])
            for target_id in [targets] if isinstance(targets, str) else targets:
                target = by_id.get((named, target_id))
                if target is None:
                    continue
                if reverse in LIST_ASSOCIATIONS.get(named, set()):
                    target["Associations"].setdefault(reverse, []).append(obj["ID"])
                else:
                    target["Associations"].setdefault(reverse, obj["ID"])  # the first: the primary one
    for kind, obj in placed:
        associations = obj["Associations"]
        if _family(kind) == "Policy" and "UserDomainID" not in associations:
            vos = (vo_of_rule(rule) for rule in obj.get("Rule", []))
            associations["UserDomainID"] = list(dict.fromkeys(vo for vo in vos if vo))
        for owner in dict.fromkeys((_family(kind), kind)):
            many = LIST_ASSOCIATIONS.get(owner, set())
            for key in REQUIRED.get(owner, ()):
                associations.setdefault(key, [] if key in many else None)
        if not associations:
            del obj["Associations"]


def glue2_json(entries: Sequence[Entry], json_only: Sequence[Entry] = ()) -> dict[str, Any]:
    """``{"AdminDomain": [...], "ComputingService": [...]}`` with the children nested (module docstring).
    ``json_only``: entries the LDAP tree does not carry (glueinfo.glue.glue2.check.Glue2Build), each
    nested in its parent among ``entries``; one whose parent is not there is left out.  Never raises
    for a value: one not of its attribute's type is left out."""
    objects: dict[str, dict[str, Any]] = {}
    roots: dict[str, list[dict[str, Any]]] = {}
    placed: list[tuple[str, dict[str, Any]]] = []
    with_glue21: list[dict[str, Any]] = []  # parents of GLUE 2.1 objects
    for entry in (*entries, *json_only):
        kind = _class(entry)
        if kind == "Entity":
            continue  # the GLUE2Group of the site form: a container, not an object
        obj = _object(kind, entry)
        parent: Optional[dict[str, Any]] = objects.get(normalise_dn(parent_dn(entry.dn)))
        if parent is None and kind in GLUE21_ONLY:
            continue  # a GLUE 2.1 object whose parent was left out: nothing to attach it to
        objects[normalise_dn(entry.dn)] = obj
        placed.append((kind, obj))
        if parent is not None:
            parent.setdefault(kind, []).append(obj)
            if kind in GLUE21_ONLY:
                with_glue21.append(parent)
        else:
            roots.setdefault(kind, []).append(obj)
    _complete(placed)
    # The GLUE 2.1 objects last in their parent, wherever the tree had them: the same document whether
    # they came with the LDAP entries or after them.
    for parent in with_glue21:
        for kind in GLUE21_ONLY_ORDER:
            if kind in parent:
                parent[kind] = parent.pop(kind)
    return roots


def glue2_json_document(entries: Sequence[Entry], json_only: Sequence[Entry] = ()) -> bytes:
    """The document ``glueinfo glue2-json`` prints and ``/glue2.json`` serves: :func:`glue2_json` of
    the entries, indented by one, UTF-8, ending in a newline."""
    return json.dumps(glue2_json(entries, json_only), indent=1).encode() + b"\n"
