"""Render batch jobs (QueueState.jobs) as SSS Job objects (Job Object Specification 3.1.0).

Output is ``<Data>`` holding one ``<Job>`` per job, valid against
glueinfo/sss/xsd/sss-job.xsd.  Per job, in this order and only when known
(docs/sss.md, "Job XML", says which batch system tells what):

- ``Id`` (the LRMS's job id), ``Name``, ``Project`` (the account), ``User``,
  ``Group``, ``GlobalUser`` (the proxy's subject), ``Executable``;
  ``Arguments`` and ``InitialWorkingDirectory`` only when asked for (see
  below); ``Machine`` (the GLUE cluster the CE runs on), ``QualityOfService``,
  ``Queue``;
- ``State``: Idle, Hold, Running, Suspended or Completed (the plugin's
  mapping); ``Priority`` (the LRMS's own scale), one ``Hold`` per hold;
  ``SubmitHost``;
- ``SubmitTime``, ``StartTime`` (only for a job that started: a forecast is
  not a start time, and a job cancelled while it waited never started) and
  ``EndTime`` (only for finished jobs): DateTime as the spec defines it,
  whole seconds since the epoch (GMT);
- ``ExitCode`` (finished jobs that exited by themselves), ``CpuDuration``
  (CPU seconds);
- ``StatusMessage``: why a waiting job waits, in the LRMS's words; how a
  finished job ended ("Succeeded", "Failed: exit code 3", "Failed: killed by
  signal 9", "Cancelled before it started", with the LRMS's reason in
  brackets): State stays Completed, which is all the spec's states can say;
- ``Dependency`` (``condition`` OnSuccess, OnFailure or OnExit, the other
  job's id), ``ResourceLimit name="CPUTime"`` (a CPU time limit, seconds);
- ``Requested``: Processors, Memory (``units="MB"``), Duration (the time
  limit, seconds), NodeCount, ``Resource name="GPU"`` (the accelerators the
  job asked for, in all: the spec's extensible consumable resource, named as
  Node XML's ``Configured/Resource``), Feature (the LRMS's own notation);
- ``Delivered`` for started jobs: Processors, Memory (``units="MB"``),
  Duration (wall seconds so far or in all), NodeCount and the ``Node`` the
  job runs on, a plain node name, or for several nodes one Node with
  ``aggregation="List"`` (the spec allows the Node property once per set);
- ``Environment`` with one ``Variable`` per variable, only when asked for;
- ``Extension`` elements of type ``Scheduler``: ``LrmsState`` (the LRMS's own
  state word) and ``ExpectedStartTime`` (a waiting job's forecast start);
- a ``TaskGroup`` for a job on several nodes or of several tasks: its
  ``TaskCount`` when the LRMS says, ``NodeCount``, and one ``Task`` per node
  the job holds (``Node``, and ``Processors`` where the LRMS tells how many
  it holds there).  The LRMS does not say which of its processes runs where,
  so a Task stands for the job's share of one node.

Arguments, InitialWorkingDirectory and Environment can hold secrets and
private paths, and ``glueinfo serve`` answers without authentication by
default: they are written only for the names in ``private`` (a subset of
glueinfo.core.job.PRIVATE_FIELDS), which the command or daemon takes from
``[jobs] private_fields``; this module reads no config.

Text the LRMS reports (job names are anything a user typed) is carried as
is, except characters XML 1.0 cannot hold, which become U+FFFD.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any, Optional

from lxml import etree

from glueinfo.core.job import DEPENDENCY_CONDITIONS, JobInfo, environment_items

XML_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>\n'
_NOT_XML_CHAR = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

SSS_STATES = ("Idle", "Hold", "Running", "Suspended", "Completed")
# Units of unit-less numbers, for the SSSRMAP engine (Memory is always written with units="MB").
JOB_DEFAULT_UNITS = {"Memory": "MB"}
EXTENSION_TYPE = "Scheduler"
# The Resource name of a job's requested accelerators (JobInfo.requested_accelerators), as Node XML
# names a node's GPUs (Configured/Resource name="GPU").
ACCELERATOR_RESOURCE = "GPU"

_ENDED = {"success": "Succeeded", "failed": "Failed", "cancelled": "Cancelled"}
_NO_PRIVATE: frozenset[str] = frozenset()


def xml_text(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable():  # the usual case, and cheap to prove safe
        return text
    return _NOT_XML_CHAR.sub("\ufffd", text)


def _sub(parent: etree._Element, tag: str, value: Any, **attributes: str) -> Optional[etree._Element]:
    if value is None or value == "":
        return None
    if attributes:
        element = etree.SubElement(parent, tag, {k: xml_text(v) for k, v in attributes.items()})
    else:
        element = etree.SubElement(parent, tag)
    element.text = str(value) if type(value) is int else xml_text(value)
    return element


def _text(value: Optional[str]) -> Optional[str]:
    """A name the XSD wants non-empty: None for an empty or blank one."""
    return value if value and not value.isspace() else None


def _seconds(value: Optional[float]) -> Optional[int]:
    # None, NaN, negative, beyond the spec's 32-bit unsigned DateTime: not a time
    if value is None or value != value or value < 0 or value >= 2**32:
        return None
    return int(round(value))


def _count(value: Optional[int]) -> Optional[int]:
    return value if isinstance(value, int) and value >= 0 else None


def _integer(value: Optional[int]) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def status_message(job: JobInfo) -> Optional[str]:
    """StatusMessage: a waiting job's reason; how a finished job ended; None when nothing is known."""
    if job.sss_state != "Completed":
        return job.scheduler_specific
    word = _ENDED.get(job.completion or "")
    if word is None:
        return job.scheduler_specific
    details = []
    if job.exit_signal:
        details.append(f"killed by signal {job.exit_signal}")
    elif job.exit_code is not None and job.completion != "success":
        details.append(f"exit code {job.exit_code}")
    if job.start_time is None and job.completion == "cancelled":
        word += " before it started"
    message = f"{word}: {', '.join(details)}" if details else word
    return f"{message} ({job.scheduler_specific})" if job.scheduler_specific else message


def job_element(job: JobInfo, machine: Optional[str] = None, private: Collection[str] = _NO_PRIVATE) -> etree._Element:
    """One ``<Job>``; raises ValueError for a job without an id (the one property the spec requires).

    ``private``: which of glueinfo.core.job.PRIVATE_FIELDS to write.
    """
    if not job.local_id or not job.local_id.strip():
        raise ValueError("a job without an id cannot be an SSS Job")
    element = etree.Element("Job")
    _sub(element, "Id", job.local_id)
    _sub(element, "Name", job.name)
    _sub(element, "Project", _text(job.account))
    _sub(element, "User", _text(job.local_owner))
    _sub(element, "Group", _text(job.local_group))
    _sub(element, "GlobalUser", _text(job.global_owner))
    _sub(element, "Executable", _text(job.executable))
    if private:
        if "arguments" in private:
            _sub(element, "Arguments", job.arguments)
        if "working_directory" in private:
            _sub(element, "InitialWorkingDirectory", _text(job.working_directory))
    _sub(element, "Machine", _text(machine))
    _sub(element, "QualityOfService", _text(job.qos))
    _sub(element, "Queue", _text(job.queue))
    finished = job.sss_state == "Completed"
    _sub(element, "State", job.sss_state if job.sss_state in SSS_STATES else None)
    _sub(element, "Priority", _integer(job.priority))
    for hold in job.holds:
        _sub(element, "Hold", _text(hold))
    _sub(element, "SubmitHost", _text(job.submit_host))
    _sub(element, "SubmitTime", _seconds(job.submit_time))
    if not job.start_is_estimate:
        _sub(element, "StartTime", _seconds(job.start_time))
    if finished:
        _sub(element, "EndTime", _seconds(job.end_time))
        _sub(element, "ExitCode", _integer(job.exit_code))
    _sub(element, "CpuDuration", _count(job.cpu_duration_s))
    _sub(element, "StatusMessage", status_message(job))
    for condition, other in job.dependencies:
        if condition in DEPENDENCY_CONDITIONS:
            _sub(element, "Dependency", _text(other), condition=condition)
    _sub(element, "ResourceLimit", _count(job.cpu_time_limit_s), name="CPUTime")

    requested = etree.Element("Requested")
    _sub(requested, "Processors", _count(job.requested_processors))
    _sub(requested, "Memory", _count(job.requested_memory_mb), units="MB")
    _sub(requested, "Duration", _count(job.requested_duration_s))
    _sub(requested, "NodeCount", _count(job.requested_nodes))
    _sub(requested, "Resource", _count(job.requested_accelerators), name=ACCELERATOR_RESOURCE)
    _sub(requested, "Feature", _text(job.features))
    if len(requested):
        element.append(requested)

    delivered = etree.Element("Delivered")
    _sub(delivered, "Processors", _count(job.delivered_processors))
    _sub(delivered, "Memory", _count(job.delivered_memory_mb), units="MB")
    _sub(delivered, "Duration", _count(job.delivered_wall_s))
    nodes = [n for n in job.nodes if n]
    if nodes:
        _sub(delivered, "NodeCount", len(nodes))
        if len(nodes) == 1:
            _sub(delivered, "Node", nodes[0])
        else:
            _sub(delivered, "Node", ",".join(nodes), aggregation="List")
    if len(delivered):
        element.append(delivered)

    if job.environment is not None and "environment" in private:
        environment = etree.SubElement(element, "Environment")
        for name, value in environment_items(job.environment):
            if _text(name):
                variable = etree.SubElement(environment, "Variable", name=xml_text(name))
                variable.text = xml_text(value) if value else None

    _sub(element, "Extension", job.lrms_state, name="LrmsState", type=EXTENSION_TYPE)
    if job.start_is_estimate:
        _sub(element, "Extension", _seconds(job.start_time), name="ExpectedStartTime", type=EXTENSION_TYPE)

    task_count = _count(job.task_count)
    if len(nodes) > 1 or (task_count is not None and task_count > 1):
        _task_group(element, job, nodes, task_count)
    return element


def _task_group(parent: etree._Element, job: JobInfo, nodes: list[str], task_count: Optional[int]) -> None:
    group = etree.SubElement(parent, "TaskGroup")
    _sub(group, "TaskCount", task_count)
    if not nodes:
        return
    _sub(group, "NodeCount", len(nodes))
    processors = job.node_processors if len(job.node_processors) == len(job.nodes) else ()
    for i, name in enumerate(job.nodes):
        if not name:
            continue
        task = etree.SubElement(group, "Task")
        _sub(task, "Node", name)
        if processors:
            _sub(task, "Processors", _count(processors[i]))


def data_element(jobs: Iterable[JobInfo | tuple[JobInfo, Optional[str]]],
                 private: Collection[str] = _NO_PRIVATE) -> etree._Element:
    """``<Data>`` with one ``<Job>`` per job; items are jobs or (job, machine) pairs.

    ``private``: which of glueinfo.core.job.PRIVATE_FIELDS to write (none by default).
    """
    data = etree.Element("Data")
    for item in jobs:
        job, machine = item if isinstance(item, tuple) else (item, None)
        data.append(job_element(job, machine, private))
    return data


def to_bytes(element: etree._Element, pretty: bool = True) -> bytes:
    return XML_DECLARATION + etree.tostring(element, encoding="UTF-8", pretty_print=pretty)


def render_jobs(jobs: Iterable[JobInfo | tuple[JobInfo, Optional[str]]], pretty: bool = True,
                private: Collection[str] = _NO_PRIVATE) -> bytes:
    return to_bytes(data_element(jobs, private), pretty)
