"""Source ``local``: this host, probed by the collectors (what `glueinfo probe` prints)."""

from __future__ import annotations

from glueinfo.gather.registry import Source, SourceContext, SourceFailure, SourceReport


def gather(ctx: SourceContext) -> SourceReport:
    if ctx.probe is not None:
        snapshot = ctx.probe()
    else:
        from glueinfo.host.collect import probe

        snapshot = probe(ctx.config, clock=ctx.clock)
    report = SourceReport(snapshots=[snapshot])
    for result in snapshot.collectors:
        if not result.success:  # the snapshot is still good; the failed part is unknown
            report.failures.append(SourceFailure(target=f"collector {result.name}", host=snapshot.hostname,
                                                 error=result.error or "failed"))
    return report


SOURCE = Source("local", gather, "this host, through the collectors")
