"""`glueinfo jobs-xml`: the CEs' batch jobs as SSS Job objects (a <Data> of <Job>).

Asks each CE's LRMS plugin (the [ce:NAME] sections; --ce picks some) for its
queue with the job list, and prints every job once (two CEs on one
partition list the same jobs).  A CE whose LRMS cannot be read is logged on
stderr and the exit code is 1; the jobs of the others are still printed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from glueinfo.config import Config

log = logging.getLogger("glueinfo.jobs_xml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ce", action="append", default=[], metavar="NAME",
                        help="only this CE: the NAME of its [ce:NAME] section, or its GlueCEUniqueID (repeatable)")
    parser.add_argument("--compact", action="store_true", help="no indentation")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.cli import UsageError
    from glueinfo.lrms import LrmsContext, queue_state
    from glueinfo.pipeline import default_local_fqdn
    from glueinfo.render_job_xml import render_jobs
    from glueinfo.site import site_from_config

    site = site_from_config(config, default_local_fqdn(config))
    ces = list(site.ces)
    if args.ce:
        wanted = set(args.ce)
        ces = [ce for ce in ces if ce.section in wanted or ce.unique_id in wanted]
        unknown = wanted - {ce.section for ce in ces} - {ce.unique_id for ce in ces}
        if unknown:
            known = ", ".join(ce.section or ce.unique_id for ce in site.ces)
            raise UsageError(f"--ce {', '.join(sorted(unknown))}: no such CE (known: {known})")
    failed = False
    seen: set[tuple[str, str, str]] = set()
    jobs = []
    for ce in ces:
        if ce.lrms == "fork":  # processes, not jobs: nothing to list
            continue
        # Job lists need no host snapshots: batch systems know their own jobs.
        ctx = LrmsContext(queue=ce.queue, ce_config=ce.options, hosts=[], clock=time.time,
                          timeout_s=ce.lrms_timeout, with_jobs=True)
        state = queue_state(ce.lrms, ctx)  # logs its own failure once
        if state.error and state.total_jobs is None:
            failed = True
        for job in state.jobs:
            key = (ce.lrms, str(ce.options.get("slurm_conf") or ""), job.local_id)
            if key not in seen:
                seen.add(key)
                jobs.append((job, ce.cluster))
    sys.stdout.buffer.write(render_jobs(jobs, pretty=not args.compact))
    return 1 if failed else 0
