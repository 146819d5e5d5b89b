"""The ``OSG_ResourceCatalog`` an HTCondor-CE advertises, made from what glueinfo measured.

glideinWMS's OSG_autoconf reads the ``OSG_ResourceCatalog`` ClassAd list of every HTCondor-CE
from the OSG collector and makes one pilot entry per ClassAd with ``IsPilotEntry = True``
(``Name``, ``CPUs``, ``Memory``, ``GPUs``, ``MaxWallTime``, ``AllowedVOs``, ``OS``, ``Queue``).
Sites write it by hand in osg-configure's ``[Pilot NAME]`` sections, which osg-configure turns
into HTCondor-CE config.  This module writes the same config from the site glueinfo assembled:

- one ClassAd per CE queue (``[ce:NAME]``, fork CEs left out: a pilot is a batch job) and
  SubCluster of the queue's cluster, the shapes a pilot can be given there;
- ``CPUs``: the SubCluster's hardware threads per host (SMPSize, what the batch system
  schedules on); ``Memory``: its RAM per host in MB as the site model has it (the smallest
  member's, or the admin's ``ram`` in ``[subcluster:NAME]`` / ``[cluster:NAME]``);
- ``GPUs``: the GPUs on each of its hosts (glueinfo.site.accelerators.group_accelerators),
  only when the queue's batch system counts GPUs (QueueState.accelerators has a GPU entry: a
  pilot that asks for a GPU the batch system does not schedule never starts), at most what
  one job of the queue may have (``max_per_job``) when it says; left out when there are none
  (OSG_autoconf takes an entry with ``GPUs`` for a GPU entry, whatever its value);
- ``MaxWallTime``: the queue's longest wall time in minutes, the batch system's, else the
  ``[ce:NAME] max_wall_clock_time`` (the GLUE 1.3 rule for GlueCEPolicyMaxWallClockTime);
- ``AllowedVOs``: the VOs the CE's ``access`` rules name (glueinfo.site.access);
- ``OS``: ``rhel<major>`` or ``ubuntu<major>`` (osg-configure's words) from the hosts'
  /etc/os-release, when every host of the SubCluster runs the same one;
- ``Queue``: the batch queue (OSG_autoconf's ``batch_queue``), except for an HTCondor
  pool, where a CE's queue names a schedd or accounting group;
- ``Name``: the queue's name, followed by ``-<SubCluster id>`` when its cluster has several
  SubClusters (ids are stable: glueinfo.site.ids); a name two CEs would share is made unique
  with the CE's id in place of the queue name.

A figure that is not known is left out, never guessed.  Policies no measurement gives
(``MaxPilots``, ``WholeNode``, ``RequireSingularity``, ``SendTests``) are not written: OSG_autoconf
then uses its factory's defaults.  A CE whose batch system has no such queue
(QueueState.queue_missing) gets no entry.  The text is osg-configure's layout (entries sorted by
``Name``, attributes by name, one per line, continued with ``\\``), then ``SCHEDD_ATTRS`` naming
the attribute so the CE's schedd advertises it.  Strings are written so neither HTCondor's
config reader nor the ClassAd parser can read anything but the string (:func:`classad_string`).
No time, and nothing volatile, is written: the same site gives the same bytes, so the file
changes only when the site does.  Never raises on the site's data.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from glueinfo.core.model import QueueState
from glueinfo.site.accelerators import group_accelerators
from glueinfo.site.access import vos_of
from glueinfo.site.aggregate import SubClusterGroup
from glueinfo.site.assemble import AssembledSite
from glueinfo.site.model import CESpec

ATTRIBUTE = "OSG_ResourceCatalog"
HEADER = ("# OSG_ResourceCatalog written by glueinfo (the htcondor-ce output) from what it measured of the site:\n"
          "# do not edit, it is rewritten when the site changes (docs/htcondor-ce.md).\n")
EMPTY = "# No CE queue of this site has a host to describe: OSG_ResourceCatalog is not set here.\n"

# /etc/os-release NAME (lower case) of the distributions osg-configure's ``os`` names: Red Hat
# Enterprise Linux and its rebuilds are ``rhel<major>``, Ubuntu ``ubuntu<major>``.
OS_FAMILIES = {"red hat enterprise linux": "rhel", "red hat enterprise linux server": "rhel", "centos linux": "rhel",
               "centos stream": "rhel", "rocky linux": "rhel", "almalinux": "rhel", "scientific linux": "rhel",
               "scientific linux cern slc": "rhel", "oracle linux server": "rhel", "ubuntu": "ubuntu"}

# A batch system whose CE "queue" is no queue a job asks for (HTCondor: a schedd or accounting group).
NO_BATCH_QUEUE = frozenset({"htcondor", "condor"})


@dataclass(frozen=True)
class CatalogEntry:
    """One ClassAd of the catalog; None (or no VOs) is a figure left out."""

    name: str
    queue: Optional[str]
    cpus: Optional[int]
    memory_mb: Optional[int]
    gpus: Optional[int]
    max_wall_time_min: Optional[int]
    allowed_vos: tuple[str, ...]
    os: Optional[str]

    def attributes(self) -> dict[str, str]:
        """Attribute name -> its ClassAd text, the unknown ones left out."""
        values: dict[str, Optional[str]] = {
            "AllowedVOs": classad_list(self.allowed_vos) if self.allowed_vos else None,
            "CPUs": _integer(self.cpus), "GPUs": _integer(self.gpus), "IsPilotEntry": "True",
            "MaxWallTime": _integer(self.max_wall_time_min), "Memory": _integer(self.memory_mb),
            "Name": classad_string(self.name), "OS": classad_string(self.os) if self.os else None,
            "Queue": classad_string(self.queue) if self.queue else None,
        }
        return {key: value for key, value in values.items() if value is not None}


def classad_string(text: str) -> str:
    """``text`` as a ClassAd string literal that also survives HTCondor's config reader: ``"`` and
    ``\\`` escaped; printable ASCII as it is except ``$`` (the config reader would expand
    ``$(NAME)``, ``$ENV(NAME)``...), which, like every control and non-ASCII character, is written
    as the octal escapes of its UTF-8 bytes (``\\044``).  NUL, which no ClassAd string may hold,
    and a lone surrogate become U+FFFD.  The result holds no ``$``, no line break and nothing
    outside printable ASCII."""
    parts = ['"']
    for char in text:
        if char == '"' or char == "\\":
            parts.append("\\" + char)
        elif " " <= char <= "~" and char != "$":
            parts.append(char)
        else:
            if char == "\0" or "\ud800" <= char <= "\udfff":
                char = "\ufffd"
            parts.extend(f"\\{byte:03o}" for byte in char.encode("utf-8"))
    parts.append('"')
    return "".join(parts)


def classad_list(texts: Iterable[str]) -> str:
    """``{ "a", "b" }``: a ClassAd list of strings."""
    return "{ " + ", ".join(classad_string(text) for text in texts) + " }"


def _integer(value: Optional[int]) -> Optional[str]:
    return None if value is None else str(int(value))


def osg_os(name: Optional[str], release: Optional[str]) -> Optional[str]:
    """osg-configure's word for an OS (``rhel9``, ``ubuntu22``) from os-release NAME and VERSION_ID;
    None for a distribution outside those families or a release without a major number."""
    family = OS_FAMILIES.get(str(name or "").strip().lower())
    major = str(release or "").split(".", 1)[0]
    if family is None or not major.isdigit():
        return None
    return f"{family}{int(major)}"


def max_wall_time(ce: CESpec, state: Optional[QueueState]) -> Optional[int]:
    """The queue's longest wall time in minutes: the batch system's, else ``[ce:NAME]
    max_wall_clock_time``; None when neither says (no limit, or not known)."""
    from_state = state.max_wall_clock_time_min if state is not None else None
    return from_state if from_state is not None else ce.policies.get("max_wall_clock_time")


def gpus(sc: SubClusterGroup, state: Optional[QueueState]) -> Optional[int]:
    """GPUs a pilot on one host of ``sc`` can be given through this queue (module docstring);
    None when it can be given none, or that is not known."""
    kinds = group_accelerators(sc.hosts)
    per_host = sum(kind.count for kind in kinds if kind.type == "GPU") if kinds else 0
    queue_gpus = [entry for entry in (state.accelerators if state is not None else ()) if entry.type == "GPU"]
    if per_host <= 0 or not queue_gpus:
        return None
    caps = [entry.max_per_job for entry in queue_gpus]
    if all(cap is not None for cap in caps):
        per_host = min(per_host, sum(cap for cap in caps if cap is not None))
    return per_host or None


def entries(site: AssembledSite) -> list[CatalogEntry]:
    """Every entry of the site's catalog, sorted by name (module docstring)."""
    drafts: list[tuple[CESpec, str, CatalogEntry]] = []  # (CE, "-<SubCluster id>" or "", entry)
    for ce in site.model.ces:
        if ce.lrms == "fork":
            continue
        state = site.states.get(ce.unique_id)
        if state is not None and state.queue_missing:
            continue
        try:
            cluster = site.groups.cluster(ce.cluster)
        except KeyError:
            continue
        subclusters = [sc for sc in cluster.subclusters if sc.hosts]
        vos = tuple(vos_of(ce.access))
        wall = max_wall_time(ce, state)
        queue = None if ce.lrms.lower() in NO_BATCH_QUEUE else ce.queue
        for sc in subclusters:
            shared = sc.shared
            suffix = "" if len(subclusters) == 1 else f"-{sc.unique_id}"
            drafts.append((ce, suffix, CatalogEntry(
                name=ce.queue + suffix, queue=queue, cpus=shared.get("logical_cpus"), memory_mb=shared.get("ram"),
                gpus=gpus(sc, state), max_wall_time_min=wall, allowed_vos=vos,
                os=osg_os(shared.get("os_name"), shared.get("os_release")))))
    # OSG_autoconf keys a CE's entries by Name: two CEs with one queue name are told apart by their ids.
    taken = Counter(entry.name for _, _, entry in drafts)
    result = []
    for ce, suffix, entry in drafts:
        if taken[entry.name] > 1:
            entry = dataclasses.replace(entry, name=ce.unique_id + suffix)
        result.append(entry)
    return sorted(result, key=lambda entry: entry.name)


def catalog_value(catalog: list[CatalogEntry]) -> str:
    """The catalog's ClassAd list as osg-configure lays it out: ``{ \\`` then one ``[ \\`` block per
    entry, one ``Attr = value; \\`` line per attribute, ``}``; ``{}`` when empty."""
    if not catalog:
        return "{}"
    blocks = []
    for entry in catalog:
        lines = [f"    {key} = {value}; \\\n" for key, value in sorted(entry.attributes().items())]
        blocks.append("  [ \\\n" + "".join(lines) + "  ]")
    return "{ \\\n" + ", \\\n".join(blocks) + " \\\n}"


def resource_catalog(site: AssembledSite) -> bytes:
    """The HTCondor-CE config file: ``OSG_ResourceCatalog = { ... }`` and ``SCHEDD_ATTRS =
    $(SCHEDD_ATTRS), OSG_ResourceCatalog``, after a comment; a comment alone when no CE queue
    has an entry (an empty catalog would be an entry-less CE to OSG_autoconf; without the
    attribute it is skipped, or another file's catalog stays in force).  ASCII, deterministic."""
    catalog = entries(site)
    if not catalog:
        return (HEADER + EMPTY).encode("ascii")
    text = f"{HEADER}{ATTRIBUTE} = {catalog_value(catalog)}\nSCHEDD_ATTRS = $(SCHEDD_ATTRS), {ATTRIBUTE}\n"
    return text.encode("ascii")
