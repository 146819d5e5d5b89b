"""load: 1/5/15-minute load averages, runnable tasks, and CPU utilisation when asked.

The GLUE ProcessorLoad / SMPLoad figures ("(available CPUs - runnable
tasks) x 100") are derived from these and the CPU count by
HostSnapshot.glue_load_figures, so every renderer computes them alike.
"""

from __future__ import annotations

from glueinfo.core.model import LoadInfo
from glueinfo.host.collect import CollectContext, Collector
from glueinfo.host.linux import LinuxHost


def collect(ctx: CollectContext) -> LoadInfo:
    host = LinuxHost(ctx.host_root)
    avg = host.load()
    info = LoadInfo(load1=avg.load1, load5=avg.load5, load15=avg.load15,
                    runnable_tasks=avg.running, total_tasks=avg.total)
    if ctx.utilisation_interval_s:
        percent = host.cpu_utilisation(ctx.utilisation_interval_s)
        if percent is not None:
            info.cpu_utilisation_percent = percent
            info.utilisation_interval_s = ctx.utilisation_interval_s
    return info


COLLECTOR = Collector(name="load", collect=collect, default_enabled=True, field="load",
                      description="load averages, runnable tasks, CPU utilisation over [collectors] utilisation_interval")
