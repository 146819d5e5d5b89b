"""`glueinfo haizea`: the site as a Haizea ``<site>``; with --lwf, its batch jobs as a Haizea lease workload.

The site is assembled as every command assembles it (glueinfo.commands.site_options
make_assembler, glueinfo.site.assemble: the enabled [sources], the [node]
site_snapshots files, the state directory, each CE's LRMS asked once), then
made by the publish layer (glueinfo.publish.documents, through
glueinfo.haizea.site): one ``<node-set>`` per distinct capacity,
hosts Offline or Unknown left out and named in the document's comment.

``--lwf`` adds the CEs' batch jobs (glueinfo.lrms.registry.site_jobs: every
non-fork CE's jobs once, current and finished as long as the LRMS keeps
them) as a ``<lease-workload>`` (glueinfo.haizea.workload).  A CE whose LRMS
cannot list its jobs is logged on stderr and the exit code is 1; the others'
jobs are still printed.  A site with no host left to describe is a one-line
error, exit 1, and nothing on stdout.  docs/haizea.md has the details.
"""

from __future__ import annotations

import argparse
import sys

from glueinfo.core.config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lwf", action="store_true",
                        help="print a Haizea <lease-workload> (LWF) of the CEs' batch jobs on the site, not only the <site>")
    parser.add_argument("--name", metavar="NAME",
                        help="the workload's name (--lwf; default: [site] name, else the site's unique id, else glueinfo)")
    parser.add_argument("--preemptible", choices=("yes", "no"),
                        help="write preemptible=\"yes\"/\"no\" on every lease (--lwf): this site's preemption policy, "
                             "which no batch system plugin reports; by default the attribute is left out")


def run(args: argparse.Namespace, config: Config) -> int:
    from glueinfo.cli import long_lived_objects
    from glueinfo.commands.site_options import clock_from_environment, make_assembler, publisher_for, site_config

    config = site_config(args, config)
    clock = clock_from_environment()
    with long_lived_objects():
        site = make_assembler(args, config, clock=clock).once()
    documents = publisher_for(args, config).documents(site)
    now = clock()
    failed: list[str] = []
    # no host left to describe: HaizeaError (a PublicationError), one line and exit 1
    if not args.lwf:
        document = documents.haizea_site(now)
    else:
        from glueinfo.lrms.registry import site_jobs

        jobs, failed = site_jobs(site.model.ces, clock=clock)  # each failure is logged once by the registry
        preemptible = None if args.preemptible is None else args.preemptible == "yes"
        document = documents.haizea_workload(now, jobs, args.name or "", preemptible)
    sys.stdout.buffer.write(document)
    sys.stdout.flush()
    return 1 if failed else 0
