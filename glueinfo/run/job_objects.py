"""Publish stage: the CEs' batch jobs as SSSRMAP ``Job`` objects, for the HTTP server.

The server (``glueinfo serve``, ``glueinfo run`` with ``[run] serve``)
answers ``<Object>Node</Object>`` from memory; this gives it
``<Object>Job</Object>`` the same way, through the same Where/Get engine
(glueinfo/sss/sssrmap/)::

    jobs = JobObjects(config)            # the [ce:NAME] sections' batch systems
    service.register("Job", jobs.object_set)
    jobs.refresh()                       # by the provider's lrms job, after the CEs' state

A request never waits for Slurm: it reads the last finished refresh (an
empty set before the first).  A CE whose LRMS cannot be read contributes no
jobs to that refresh rather than its old ones (a job list from minutes ago
would show jobs that may have ended); the failure is logged once per
refresh by glueinfo.lrms.registry and its CE id kept in ``failed``.
Arguments, working directories and environments are in the objects only
when ``[jobs] private_fields`` names them: the server answers without
authentication unless ``[serve] key_file`` is set.  The plugins are told
too (:func:`with_private_fields`), so they read those fields only then.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, Optional

from glueinfo.core.config import Config
from glueinfo.core.job import PRIVATE_FIELDS_OPTION
from glueinfo.sss.object_sets import job_object_set

log = logging.getLogger(__name__)


def with_private_fields(ces: Sequence[Any], private: Collection[str]) -> list[Any]:
    """The CEs (site.CESpec values) with ``private`` in their options under PRIVATE_FIELDS_OPTION,
    which tells their LRMS plugins to read those fields of each job (none: the CEs as they are)."""
    if not private:
        return list(ces)
    return [dataclasses.replace(ce, options={**ce.options, PRIVATE_FIELDS_OPTION: tuple(sorted(private))}) for ce in ces]


class JobObjects:
    """The current Job ObjectSet of a site, swapped whole after each refresh."""

    def __init__(self, config: Config, clock: Callable[[], float] = time.time, local_fqdn: Optional[str] = None):
        self.reconfigure(config, local_fqdn)
        self.clock = clock
        self._objects = job_object_set([])
        self.failed: list[str] = []  # CE ids whose LRMS could not be read in the last refresh
        self.refreshed_at: Optional[float] = None

    @property
    def site(self) -> Any:
        return self._spec[0]

    @property
    def private(self) -> frozenset[str]:
        return self._spec[1]

    @property
    def serves_jobs(self) -> bool:
        """False for a fork-only site: nothing to ask."""
        return any(ce.lrms != "fork" for ce in self.site.ces)

    def refresh(self) -> None:
        """Read every CE's jobs now (a CE that fails contributes none, its id in ``failed``; a
        fork-only site has none, and no batch system is asked)."""
        from glueinfo.lrms.registry import site_jobs

        site, private = self._spec  # one read: a reload swaps both together
        if not any(ce.lrms != "fork" for ce in site.ces):
            self._objects, self.failed, self.refreshed_at = job_object_set([]), [], self.clock()
            return
        jobs, failed = site_jobs(with_private_fields(site.ces, private), clock=self.clock)
        self._objects = job_object_set(jobs, private)  # one assignment: readers see the old set or the new one
        self.failed = failed
        self.refreshed_at = self.clock()

    def object_set(self) -> Any:
        """The last refresh's Job ObjectSet (empty before the first)."""
        return self._objects

    def reconfigure(self, config: Config, local_fqdn: Optional[str] = None) -> None:
        """Follow a new config (a reload): its CEs and private fields from the next refresh on; the
        last refresh's objects stay served until then."""
        from glueinfo.site.assemble import default_local_fqdn
        from glueinfo.site.from_config import site_from_config

        self._spec = (site_from_config(config, local_fqdn or default_local_fqdn(config)),
                      frozenset(config.get("jobs", "private_fields")))

    def register(self, service: Any) -> None:
        """Answer ``<Object>Job</Object>`` on a glueinfo.sss.sssrmap.QueryService from the last refresh."""
        service.register("Job", self.object_set)
