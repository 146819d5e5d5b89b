"""`glueinfo jobs-xml`: the CEs' batch jobs as SSS Job objects (a <Data> of <Job>).

Asks each CE's LRMS plugin (the [ce:NAME] sections; --ce picks some) for its
queue with the job list, and prints every job once (two CEs on one
partition list the same jobs).  A CE whose LRMS cannot be read is logged on
stderr and the exit code is 1; the jobs of the others are still printed.
Arguments, working directories and environments are printed only when
``[jobs] private_fields`` names them.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from glueinfo.core.config import Config

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ce", action="append", default=[], metavar="NAME",
                        help="only this CE: the NAME of its [ce:NAME] section, or its GlueCEUniqueID (repeatable)")
    parser.add_argument("--compact", action="store_true", help="no indentation")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.core.errors import UsageError
    from glueinfo.lrms.registry import site_jobs
    from glueinfo.run.job_objects import with_private_fields
    from glueinfo.site.assemble import default_local_fqdn
    from glueinfo.site.from_config import site_from_config
    from glueinfo.sss.job_xml import render_jobs

    site = site_from_config(config, default_local_fqdn(config))
    ces = list(site.ces)
    if args.ce:
        wanted = set(args.ce)
        ces = [ce for ce in ces if ce.section in wanted or ce.unique_id in wanted]
        unknown = wanted - {ce.section for ce in ces} - {ce.unique_id for ce in ces}
        if unknown:
            known = ", ".join(ce.section or ce.unique_id for ce in site.ces)
            raise UsageError(f"--ce {', '.join(sorted(unknown))}: no such CE (known: {known})")
    private = frozenset(config.get("jobs", "private_fields"))
    jobs, failed = site_jobs(with_private_fields(ces, private), clock=time.time)
    sys.stdout.buffer.write(render_jobs(jobs, pretty=not args.compact, private=private))
    return 1 if failed else 0
