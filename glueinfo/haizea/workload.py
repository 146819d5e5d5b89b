"""The CEs' batch jobs as a Haizea lease workload (haizea-xml-and-lwf.txt, "LWF file format").

One ``<lease-request>`` per job the LRMS reports (current jobs, and finished
ones as long as the LRMS keeps them), in order of submission:

- ``arrival``: the job's submit time relative to the first submission of the
  workload;
- ``<realduration>``: the elapsed time of a finished job, its delivered wall
  time, else its end minus its start (left out for jobs still queued or
  running, and when the LRMS does not say);
- ``<lease id="N">``: N counts the leases from 1 in arrival order (Haizea's
  ids are integers; the LRMS's job id is in a comment before the request);
  ``preemptible`` is written only when it is known (see
  :func:`workload_element`);
- ``<nodes>``: one ``<node-set>`` of the requested node count, each node with
  CPU = 100 x the requested CPUs / nodes and Memory = the requested MB / nodes
  (both rounded up: the job asked for at least that much per node); Memory
  is left out when the LRMS does not report the request; GPU = the
  accelerators the job asked for / nodes (rounded up), only for a job that
  asked for some (``JobInfo.requested_accelerators``), and then ``GPU`` is
  one of the site's resource types (nodes that list none have none);
- ``<start/>`` (best effort), ``<duration>`` the time limit,
  ``<software><none/></software>``.

Every time is written ``DD:HH:MM:SS`` (four colon-separated fields, whole
seconds).  Left out, and counted in the description: jobs without a submit
time, a time limit, a node count or a CPU count (nothing is invented), and
finished jobs that never ran: no start time, wall time or node (Haizea cannot
withdraw a queued lease).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from lxml import etree

from glueinfo.core.job import JobInfo
from glueinfo.haizea.site import Capacity, SiteNodes, comment_text, format_moment, nodes_element, site_element, to_bytes
from glueinfo.sss.xml_text import xml_text

GPU = "GPU"  # the resource type of the accelerators a job asks for (the site's GPU type, glueinfo.haizea.site)
NO_SUBMIT, NO_LIMIT, NO_NODES, NO_CPUS, NEVER_RAN = (
    "no submit time", "no time limit", "no node count", "no CPU count", "finished without running")
REASONS = (NO_SUBMIT, NO_LIMIT, NO_NODES, NO_CPUS, NEVER_RAN)


def format_duration(seconds: float) -> str:
    """``DD:HH:MM:SS`` of a non-negative duration, rounded to whole seconds (days as many digits as needed)."""
    total = max(0, int(round(seconds)))
    minutes, secs = divmod(total, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days:02d}:{hours:02d}:{minutes:02d}:{secs:02d}"


@dataclass(frozen=True)
class LeaseRequest:
    """One job as a Haizea lease request; times in seconds."""

    job_id: str
    origin: str  # where the job comes from (its cluster), for the comment before its request
    arrival_s: float
    numnodes: int
    per_node: Capacity
    duration_s: int
    realduration_s: Optional[int]


def finished(job: JobInfo) -> bool:
    return job.sss_state == "Completed"


def _left_out_reason(job: JobInfo) -> Optional[str]:
    if job.submit_time is None:
        return NO_SUBMIT
    if job.requested_duration_s is None or job.requested_duration_s <= 0:
        return NO_LIMIT
    if not job.requested_nodes or job.requested_nodes <= 0:
        return NO_NODES
    if not job.requested_processors or job.requested_processors <= 0:
        return NO_CPUS
    if finished(job) and job.start_time is None and not job.delivered_wall_s and not job.nodes:
        return NEVER_RAN
    return None


def lease_requests(jobs: Sequence[tuple[JobInfo, str]]) -> tuple[list[LeaseRequest], dict[str, list[str]]]:
    """The lease requests of these (job, origin) pairs, in arrival order (then job id), and the
    jobs left out (reason -> job ids) by the rules of the module docstring.  Never raises."""
    usable: list[tuple[JobInfo, str]] = []
    left_out: dict[str, list[str]] = {}
    for job, origin in jobs:
        reason = _left_out_reason(job)
        if reason is None:
            usable.append((job, origin))
        else:
            left_out.setdefault(reason, []).append(job.local_id)
    first = min((job.submit_time for job, _ in usable if job.submit_time is not None), default=0.0)
    requests = []
    for job, origin in usable:
        nodes, cpus = job.requested_nodes or 1, job.requested_processors or 1
        memory = job.requested_memory_mb
        gpus = job.requested_accelerators
        per_node = Capacity(cpu=math.ceil(cpus * 100 / nodes),
                            memory_mb=math.ceil(memory / nodes) if memory and memory > 0 else None,
                            resources=((GPU, math.ceil(gpus / nodes)),) if gpus and gpus > 0 else ())
        real = _elapsed(job) if finished(job) else None
        requests.append(LeaseRequest(job_id=job.local_id, origin=origin, arrival_s=(job.submit_time or first) - first,
                                     numnodes=nodes, per_node=per_node, duration_s=int(job.requested_duration_s or 0),
                                     realduration_s=None if real is None else max(0, int(real))))
    requests.sort(key=lambda r: (r.arrival_s, _job_order(r.job_id)))
    return requests, {reason: left_out[reason] for reason in REASONS if reason in left_out}


def _elapsed(job: JobInfo) -> Optional[float]:
    """A finished job's elapsed time: its delivered wall time, else its end minus its start."""
    if job.delivered_wall_s is not None:
        return job.delivered_wall_s
    if job.start_time is not None and job.end_time is not None and not job.start_is_estimate:
        return job.end_time - job.start_time
    return None


def _job_order(job_id: str) -> tuple[int, str]:
    head = job_id.split("_", 1)[0].split(".", 1)[0]
    return (int(head), job_id) if head.isdigit() else (0, job_id)


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def workload_element(name: str, description: str, site: SiteNodes, requests: Sequence[LeaseRequest],
                     preemptible: Optional[bool] = None) -> etree._Element:
    """``<lease-workload name=...>`` with ``<description>``, the ``<site>`` and one
    ``<lease-request>`` per request.  ``preemptible``: the site's answer for every lease
    (``yes``/``no``), or None to leave the attribute out, as no LRMS plugin reports a job's
    preemptibility yet.  Raises glueinfo.haizea.site.HaizeaError when the site has no host left
    to describe."""
    workload = etree.Element("lease-workload", name=xml_text(name))
    etree.SubElement(workload, "description").text = xml_text(description)
    workload.append(site_element(site))
    holder = etree.SubElement(workload, "lease-requests")
    for number, request in enumerate(requests, 1):
        holder.append(etree.Comment(comment_text(f"job {request.job_id} of {request.origin}")))
        item = etree.SubElement(holder, "lease-request", arrival=format_duration(request.arrival_s))
        if request.realduration_s is not None:
            etree.SubElement(item, "realduration", time=format_duration(request.realduration_s))
        lease = etree.SubElement(item, "lease", id=str(number))
        if preemptible is not None:
            lease.set("preemptible", yes_no(preemptible))
        lease.append(nodes_element([(request.numnodes, request.per_node)]))
        etree.SubElement(lease, "start")
        etree.SubElement(lease, "duration", time=format_duration(request.duration_s))
        etree.SubElement(etree.SubElement(lease, "software"), "none")
    return workload


def workload_description(ces: Sequence[str], at: float, requests: Sequence[LeaseRequest],
                         left_out: dict[str, list[str]]) -> str:
    """The ``<description>`` text: where the jobs come from, when, and which were left out."""
    text = (f"The batch jobs of {', '.join(ces) or 'no CE'} as their batch systems reported them at "
            f"{format_moment(at)} UTC: the current jobs, and finished jobs as long as each batch system keeps them "
            f"(Slurm without accounting: MinJobAge seconds). {len(requests)} lease request(s); arrival is relative "
            f"to the first submission; times are DD:HH:MM:SS.")
    if left_out:
        parts = [f"{reason}: {len(ids)} ({', '.join(ids[:10])}{' ...' if len(ids) > 10 else ''})"
                 for reason, ids in left_out.items()]
        text += " Jobs left out: " + "; ".join(parts) + "."
    return text


def workload_document(name: str, ces: Sequence[str], site: SiteNodes, jobs: Sequence[tuple[JobInfo, str]],
                      at: float, preemptible: Optional[bool] = None) -> bytes:
    """The LWF document of these (job, origin) pairs on this site, as asked at ``at``.  Raises
    glueinfo.haizea.site.HaizeaError when the site has no host left to describe."""
    requests, left_out = lease_requests(jobs)
    # A type a lease asks for must be one of the site's: a site none of whose nodes has GPUs still lists it.
    asked = sorted({name for r in requests for name, _ in r.per_node.resources} - set(site.resource_types))
    if asked:
        site = dataclasses.replace(site, resource_types=(*site.resource_types[:2],  # CPU Memory, then the rest sorted
                                                         *sorted({*site.resource_types[2:], *asked})))
    return to_bytes(workload_element(name, workload_description(ces, at, requests, left_out), site, requests, preemptible))
