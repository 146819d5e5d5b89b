"""Render batch jobs (QueueState.jobs) as SSS Job objects (Job Object Specification 3.1.0).

Output is ``<Data>`` holding one ``<Job>`` per job, valid against
glueinfo/data/sss-job.xsd.  Per job, in this order and only when known:

- ``Id`` (the LRMS's job id), ``Name``, ``User``, ``Project`` (the account),
  ``Machine`` (the GLUE cluster the CE runs on), ``Queue``;
- ``State``: Idle, Hold, Running, Suspended or Completed (the plugin's
  mapping, e.g. README "Batch systems" for Slurm);
- ``SubmitTime``, ``StartTime`` (only once the job has started: a forecast is
  not a start time) and ``EndTime`` (only for finished jobs): DateTime as the
  spec defines it, whole seconds since the epoch (GMT);
- ``StatusMessage``: why a waiting job waits, in the LRMS's words;
- ``Requested``: Processors, Memory (``units="MB"``), Duration (the time
  limit, seconds), NodeCount;
- ``Delivered`` for started jobs: Processors, Duration (wall seconds so far or
  in all), NodeCount and the ``Node`` the job runs on, a plain node name, or
  for several nodes one Node with ``aggregation="List"`` (the spec allows the
  Node property once per property set);
- ``Extension`` elements of type ``Scheduler``: ``LrmsState`` (the LRMS's own
  state word) and ``ExpectedStartTime`` (a waiting job's forecast start).

Text the LRMS reports (job names are anything a user typed) is carried as
is, except characters XML 1.0 cannot hold, which become U+FFFD.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Optional

from lxml import etree

from glueinfo.core.job import JobInfo

XML_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>\n'
_NOT_XML_CHAR = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

SSS_STATES = ("Idle", "Hold", "Running", "Suspended", "Completed")
# Units of unit-less numbers, for the SSSRMAP engine (Memory is always written with units="MB").
JOB_DEFAULT_UNITS = {"Memory": "MB"}
EXTENSION_TYPE = "Scheduler"


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


def _seconds(value: Optional[float]) -> Optional[int]:
    if value is None or value != value or value < 0:  # None, NaN, negative: not a time
        return None
    return int(round(value))


def _count(value: Optional[int]) -> Optional[int]:
    return value if isinstance(value, int) and value >= 0 else None


def job_element(job: JobInfo, machine: Optional[str] = None) -> etree._Element:
    """One ``<Job>``; raises ValueError for a job without an id (the one property the spec requires)."""
    if not job.local_id or not job.local_id.strip():
        raise ValueError("a job without an id cannot be an SSS Job")
    element = etree.Element("Job")
    _sub(element, "Id", job.local_id)
    _sub(element, "Name", job.name)
    _sub(element, "User", job.local_owner)
    _sub(element, "Project", job.account)
    _sub(element, "Machine", machine)
    _sub(element, "Queue", job.queue)
    _sub(element, "State", job.sss_state if job.sss_state in SSS_STATES else None)
    _sub(element, "SubmitTime", _seconds(job.submit_time))
    if not job.start_is_estimate:
        _sub(element, "StartTime", _seconds(job.start_time))
    if job.sss_state == "Completed":
        _sub(element, "EndTime", _seconds(job.end_time))
    _sub(element, "StatusMessage", job.scheduler_specific)

    requested = etree.Element("Requested")
    _sub(requested, "Processors", _count(job.requested_processors))
    _sub(requested, "Memory", _count(job.requested_memory_mb), units="MB")
    _sub(requested, "Duration", _count(job.requested_duration_s))
    _sub(requested, "NodeCount", _count(job.requested_nodes))
    if len(requested):
        element.append(requested)

    delivered = etree.Element("Delivered")
    _sub(delivered, "Processors", _count(job.delivered_processors))
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

    _sub(element, "Extension", job.lrms_state, name="LrmsState", type=EXTENSION_TYPE)
    if job.start_is_estimate:
        _sub(element, "Extension", _seconds(job.start_time), name="ExpectedStartTime", type=EXTENSION_TYPE)
    return element


def data_element(jobs: Iterable[JobInfo | tuple[JobInfo, Optional[str]]]) -> etree._Element:
    """``<Data>`` with one ``<Job>`` per job; items are jobs or (job, machine) pairs."""
    data = etree.Element("Data")
    for item in jobs:
        job, machine = item if isinstance(item, tuple) else (item, None)
        data.append(job_element(job, machine))
    return data


def to_bytes(element: etree._Element, pretty: bool = True) -> bytes:
    return XML_DECLARATION + etree.tostring(element, encoding="UTF-8", pretty_print=pretty)


def render_jobs(jobs: Iterable[JobInfo | tuple[JobInfo, Optional[str]]], pretty: bool = True) -> bytes:
    return to_bytes(data_element(jobs), pretty)
