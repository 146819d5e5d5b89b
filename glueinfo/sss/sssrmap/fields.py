"""The fields each object class has: what a Get or Where name may select, and what kind of value it holds.

A query names fields by modified XPATH (request.py's :class:`Path`).  Whether
a name is a field of the class is decided by the class's *vocabulary*, never
by the data: an optional field that no current object carries (``Swap`` on
diskless hosts, ``EndTime`` while no job has finished) is still a legal name
and selects nothing, while a name outside the vocabulary (``Configured/Memroy``)
is a 315/316 Failure naming it.  The rule, step by step along the path:

- every element name (the part before ``[``) must be a child the vocabulary
  allows at that place (``Configured`` holds Processors, Memory, Disk, Swap,
  Network and Resource; ``Id`` holds nothing);
- ``[@attr='value']`` predicates are data, not vocabulary: ``Extension`` and
  ``Resource`` names are open (site extensions, collectors' facts, sites'
  consumables), so ``Extension[@name='Rack']`` is legal on any site.

Each field has a kind that decides how a Where compares (engine.py):

- ``number``: numbers in a unit family (``bytes``, ``rate``, ``None`` for a
  plain count or time, or ``OPEN`` for consumables whose units the data
  names, Resource); a comparison value must be a finite decimal number with
  an optional unit of that family;
- ``text``: compared as text, whatever the value looks like;
- ``any``: Extension values of no known name: a number compares with numeric
  values, text with text values (the engine's mixed rule);
- ``group``: holds other fields (Configured): only a truth test applies.

The Node vocabulary is the SSS Node object as glueinfo writes it
(glueinfo.sss.vocabulary, sss-node.xsd); the Job vocabulary is the SSS Job
object as sss-job.xsd describes it, the whole spec, of which
glueinfo.sss.job_xml writes part.  The unit tests hold both tables
to the two XML Schemas.  An object class without a vocabulary here (an
ObjectSet a plugin or a test builds under another name) accepts every name,
each of kind ``any``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from glueinfo.core.units import canonical
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.job_xml import EXTENSION_TYPE as JOB_EXTENSION_TYPE

NUMBER, TEXT, ANY, GROUP = "number", "text", "any", "group"
OPEN = "open"  # a number field whose unit family the data names (Resource units="...")
BYTES, RATE = "bytes", "rate"  # glueinfo.core.units.canonical families


@dataclass(frozen=True)
class Field:
    """One field of an object class: its kind, unit family (numbers) and children (groups)."""

    kind: str
    family: Optional[str] = None
    children: Mapping[str, Field] = field(default_factory=dict)
    # Extension kinds by name, and by (name, type) where a type predicate is given.
    extensions: Mapping[str, str] = field(default_factory=dict)
    extension_keys: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def describe(self) -> str:
        if self.kind == NUMBER:
            return {None: "a plain number", BYTES: "a number of bytes", RATE: "a rate",
                    OPEN: "a number in the units its values name"}.get(self.family, "a number")
        return {TEXT: "text", ANY: "text or a number", GROUP: "a group of fields"}[self.kind]


ANY_FIELD = Field(ANY)
_TEXT = Field(TEXT)
_COUNT = Field(NUMBER)  # processors, seconds, node counts: no units


def _extension_kind(kind: str) -> str:
    return NUMBER if kind in ("int", "float") else TEXT


def _node() -> Field:
    # Consumables with a default unit measure in that unit's family (Memory: bytes, Network: rate); Processors count.
    consumables = {tag: Field(NUMBER, canonical(sss_node.DEFAULT_UNITS[tag])[0] if tag in sss_node.DEFAULT_UNITS else None)
                   for tag in sss_node.CONSUMABLES}
    consumables["Resource"] = Field(NUMBER, OPEN)
    category = Field(GROUP, children=consumables)
    children: dict[str, Field] = {tag: _TEXT for tag in ("Id", "Name", "Opsys", "Arch", "Description", "State", "Feature")}
    children.update({tag: category for tag in sss_node.CATEGORIES})
    children["Extension"] = ANY_FIELD
    return Field(GROUP, children=children,
                 extensions={f.name: _extension_kind(f.kind) for f in sss_node.EXTENSIONS},
                 extension_keys={(f.name, f.type): _extension_kind(f.kind) for f in sss_node.EXTENSIONS})


# The SSS Job object's fields by kind (sss-job.xsd, which describes the whole spec; glueinfo writes
# part of it, docs/sss.md "Job XML"): a field no current job carries is still a legal name.
_JOB_TEXT = ("Name", "Project", "Account", "User", "Group", "GlobalUser", "GlobalId", "Application", "Architecture",
             "Arguments", "Executable", "Hold", "InitialWorkingDirectory", "Type", "Machine", "NetworkAdapter",
             "OperatingSystem", "Partition", "QualityOfService", "Queue", "Quote", "Reservation", "ResourceManager",
             "Shell", "State", "StatusMessage", "SubmitHost", "TimeCategory", "Feature", "OutputFile", "ErrorFile",
             "InputFile", "NotificationList", "TaskDistribution", "Dependency", "Node", "Checkpointable",
             "Interactive", "Restartable", "Suspendable")
# seconds since the epoch, seconds, counts and plain integers
_JOB_PLAIN = ("SubmitTime", "StartTime", "EndTime", "Deadline", "EligibleTime", "ReservationTime", "StagedTime",
              "CpuDuration", "SuspendDuration", "Duration", "ExitCode", "Priority", "NodeCount", "StartCount",
              "Processors")
_JOB_BYTES = ("Memory", "Disk", "VirtualMemory")
# What Requested and Delivered may hold (the properties the spec marks R/D, and Account).
_CATEGORISED = ("Architecture", "Machine", "NetworkAdapter", "NodeCount", "OperatingSystem", "Partition",
                "QualityOfService", "Queue", "Reservation", "ResourceManager", "Duration", "Project", "Account",
                "GlobalUser", "Group", "User", "Disk", "Memory", "Network", "Processors", "VirtualMemory", "Resource",
                "Feature", "Node")


def _job() -> Field:
    # Job Ids are the LRMS's: numbers for most, text for array jobs (123_4): compared by the mixed rule.
    properties: dict[str, Field] = {tag: _TEXT for tag in _JOB_TEXT}
    properties.update({tag: _COUNT for tag in _JOB_PLAIN})
    properties.update({tag: Field(NUMBER, BYTES) for tag in _JOB_BYTES})
    properties["Network"] = Field(NUMBER, RATE)
    properties["Resource"] = Field(NUMBER, OPEN)
    properties["Charge"] = Field(NUMBER, OPEN)  # its units (a currency) are whatever the data names
    properties["ResourceLimit"] = ANY_FIELD  # a limit's value is a number or text, by its name
    properties["Environment"] = Field(GROUP, children={"Variable": _TEXT})
    properties["Extension"] = ANY_FIELD
    category = Field(GROUP, children={tag: properties[tag] for tag in _CATEGORISED})
    properties["Requested"] = properties["Delivered"] = category
    task = Field(GROUP, children={**properties, "Id": ANY_FIELD, "Process": _COUNT})
    task_group = Field(GROUP, children={**properties, "Id": ANY_FIELD, "TaskCount": _COUNT, "Task": task,
                                        "TaskDefaults": task})
    children = {**properties, "Id": ANY_FIELD, "TaskGroup": task_group, "TaskGroupDefaults": task_group}
    kinds = {"LrmsState": TEXT, "ExpectedStartTime": NUMBER}
    return Field(GROUP, children=children, extensions=kinds,
                 extension_keys={(name, JOB_EXTENSION_TYPE): kind for name, kind in kinds.items()})


NODE = _node()
JOB = _job()
VOCABULARIES: Mapping[str, Field] = {"Node": NODE, "Job": JOB}


def vocabulary_of(object_name: str) -> Optional[Field]:
    """The built-in vocabulary of an object class, None when glueinfo has none for it (every name accepted)."""
    return VOCABULARIES.get(object_name)


def resolve(root: Optional[Field], steps: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]) -> Optional[Field]:
    """The field a compiled path selects, or None when ``steps`` leave the vocabulary.

    ``root`` None (no vocabulary) gives :data:`ANY_FIELD` for every path.
    """
    if root is None:
        return ANY_FIELD
    current = root
    for tag, _predicates in steps:
        child = current.children.get(tag)
        if child is None:
            return None
        current = child
    tag, predicates = steps[-1]
    if tag == "Extension":
        attributes = dict(predicates)
        name, etype = attributes.get("name"), attributes.get("type")
        if name is not None:  # a known Extension name has a kind; with a type predicate, (name, type) must be known
            kind = root.extension_keys.get((name, etype)) if etype is not None else root.extensions.get(name)
            if kind == NUMBER:
                return _COUNT
            if kind == TEXT:
                return _TEXT
    return current


def missing_step(root: Field, steps: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]) -> tuple[str, list[str]]:
    """For a path :func:`resolve` refused: the prefix that is not a field, and the names allowed there."""
    current = root
    names: list[str] = []
    for tag, _predicates in steps:
        names.append(tag)
        child = current.children.get(tag)
        if child is None:
            return "/".join(names), sorted(current.children)
        current = child
    return "/".join(names), []
