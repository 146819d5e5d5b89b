"""glueinfo's object classes as SSSRMAP ObjectSets, so the Where/Get engine can query them.

The renderers (node_xml, job_xml) build the elements and know nothing of the
engine; this module puts the two together.  ``QueryService.register("Job",
lambda: current_set)`` then serves ``<Object>Job</Object>``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Optional

from glueinfo.core.job import JobInfo
from glueinfo.sss.job_xml import JOB_DEFAULT_UNITS, data_element
from glueinfo.sss.sssrmap.engine import ObjectSet


def job_object_set(jobs: Iterable[JobInfo | tuple[JobInfo, Optional[str]]],
                   private: Collection[str] = frozenset()) -> ObjectSet:
    """The jobs as an SSSRMAP ObjectSet of ``Job`` objects; items are jobs or (job, machine) pairs.

    ``private``: which of glueinfo.core.job.PRIVATE_FIELDS the objects hold (none by
    default: what an object does not hold, no query can select).  Raises
    ValueError for a job without an id, as job_xml.job_element does.
    """
    return ObjectSet("Job", list(data_element(jobs, private)), default_units=JOB_DEFAULT_UNITS)
