"""Source ``local``: this host, probed by the collectors (what `glueinfo probe` prints)."""

from __future__ import annotations

from glueinfo.core.errors import GlueinfoError
from glueinfo.gather.registry import Source, SourceContext, SourceFailure, SourceReport


def gather(ctx: SourceContext) -> SourceReport:
    """This host's snapshot; a probe that fails (a recorded tree that is not there, a host name
    that cannot be published) is one failure naming why, and the rest of the site goes on."""
    try:
        if ctx.probe is not None:
            snapshot = ctx.probe()
        else:
            from glueinfo.host.collect import probe

            snapshot = probe(ctx.config, clock=ctx.clock)
    except GlueinfoError as exc:
        return SourceReport(failures=[SourceFailure(target="this host", error=str(exc))])
    report = SourceReport(snapshots=[snapshot])
    for result in snapshot.collectors:
        if not result.success:  # the snapshot is still good; the failed part is unknown
            report.failures.append(SourceFailure(target=f"collector {result.name}", host=snapshot.hostname,
                                                 error=result.error or "failed"))
    return report


SOURCE = Source("local", gather, "this host, through the collectors")
