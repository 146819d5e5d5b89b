"""The GLUE 2 objects in the OGF GLUE 2 JSON rendering.

The same entries as the LDAP tree (glue2_entries), each object named by its
GLUE 2 class (``ComputingService``, ``ComputingEndpoint``...) with its
attributes without the ``GLUE2<Class>`` prefix, its foreign keys under
``Associations`` (``ComputingServiceID``, ``ExecutionEnvironmentID``...),
and its LDAP children nested by class, as lists.  Single-valued attributes
are strings or numbers, multi-valued ones lists; nothing is added.

The rendering is GLUE 2.1's: beside the GLUE 2.0 objects, whose keys stay as
they were, the accelerator classes of the GLUE 2.1 draft
(glueinfo.glue.glue2.accelerators) nest the same way: ``AcceleratorEnvironment``
in its ExecutionEnvironment, ``ComputingManagerAccelerator`` in its
ComputingManager, ``ComputingShareAccelerator`` in its ComputingShare, each
with its attributes by the draft's names (``Type``, ``Numbers``, ``Model``...,
``TotalSlots``, ``UsedSlots``, ``FreeSlots``, ``MaxSlotsPerJob``) and its
parent under ``Associations`` (``ExecutionEnvironmentID``...).  They are here
whether or not the LDAP tree carries them (``[glue] accelerator_schema``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from glueinfo.core.ldif import Entry, normalise_dn, parent_dn

# The most specific class of each entry, as JSON names it (LDAP lists its superclasses too).
CLASSES = ("AdminDomain", "Location", "Contact", "ComputingService", "ComputingEndpoint", "AccessPolicy", "ComputingShare",
           "MappingPolicy", "ComputingManager", "ApplicationEnvironment", "ExecutionEnvironment", "Benchmark",
           "ToStorageService", "AcceleratorEnvironment", "ComputingManagerAccelerator", "ComputingShareAccelerator")
INTEGER = re.compile(r"-?[0-9]+")
GLUE21_ONLY_ORDER = ("AcceleratorEnvironment", "ComputingManagerAccelerator", "ComputingShareAccelerator")
GLUE21_ONLY = set(GLUE21_ONLY_ORDER)
MULTI = {"OtherInfo", "Capability", "Rule", "JobDescription", "ExecutionEnvironmentForeignKey", "ResourceForeignKey",
         "ComputeCapability"}


def _class(entry: Entry) -> str:
    names = {c[5:] for c in entry.object_classes if c.startswith("GLUE2")}
    return next((c for c in CLASSES if c in names), "Entity")


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


def _value(name: str, values: list[Any]) -> Any:
    converted = [int(v) if isinstance(v, str) and INTEGER.fullmatch(v) and not name.endswith("ID") else v for v in values]
    return converted if len(converted) > 1 or name in MULTI else converted[0]


def glue2_json(entries: Sequence[Entry], json_only: Sequence[Entry] = ()) -> dict[str, Any]:
    """``{"AdminDomain": [...], "ComputingService": [...]}`` with the children nested (module docstring).
    ``json_only``: entries the LDAP tree does not carry (glueinfo.glue.glue2.check.Glue2Build), each
    nested in its parent among ``entries``; one whose parent is not there is left out."""
    objects: dict[str, dict[str, Any]] = {}
    roots: dict[str, list[dict[str, Any]]] = {}
    with_glue21: list[dict[str, Any]] = []  # parents of GLUE 2.1 objects
    for entry in (*entries, *json_only):
        kind = _class(entry)
        if kind == "Entity":
            continue  # the GLUE2Group of the site form: a container, not an object
        obj: dict[str, Any] = {}
        associations: dict[str, Any] = {}
        for name, values in entry.attributes.items():
            if name == "objectClass":
                continue
            short = _strip(name)
            if short.endswith("ForeignKey"):
                target = short[: -len("ForeignKey")]
                target = target[len(kind):] if target.startswith(kind) and target != kind else target
                associations[target + "ID"] = _value(short, list(values))
            else:
                obj[short] = _value(short, list(values))
        if associations:
            obj["Associations"] = associations
        key = normalise_dn(entry.dn)
        parent = objects.get(normalise_dn(parent_dn(entry.dn)))
        if parent is None and kind in GLUE21_ONLY:
            continue  # a GLUE 2.1 object whose parent was left out: nothing to attach it to
        objects[key] = obj
        if parent is not None:
            parent.setdefault(kind, []).append(obj)
            if kind in GLUE21_ONLY:
                with_glue21.append(parent)
        else:
            roots.setdefault(kind, []).append(obj)
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
