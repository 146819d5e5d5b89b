"""The assembler reuses what did not change (the gatherer's merged hosts, the aggregation) and
what it reuses is what a fresh merge and aggregation give."""

from __future__ import annotations

import dataclasses

from glue_sites import synthetic_site

from glueinfo.core.config import parse_text
from glueinfo.core.model import QueueState
from glueinfo.gather.merge import merge
from glueinfo.gather.registry import Source, SourceReport
from glueinfo.site.aggregate import aggregate
from glueinfo.site.assemble import SiteAssembler

T0 = 1_800_000_000.0
CONFIG = "[node]\nstale_after = 300\n[sources]\ndrop_after = 3600\n[ce:grid]\nlrms = fork\n"


def test_assemblies_of_the_same_hosts_reuse_their_groups_and_equal_fresh_ones():
    now = [T0]
    reports: list[SourceReport] = []
    assembler = SiteAssembler(parse_text(CONFIG), clock=lambda: now[0], sources=[Source("spool", lambda ctx: reports[-1])],
                              state_dir="", local_fqdn="ce01.example.org", queue_state=lambda lrms, ctx: QueueState(lrms_type="fork"))
    hosts = synthetic_site(30)
    for host in hosts:
        host.collected_at = T0

    def report(snapshots):
        reports.append(SourceReport(snapshots=[dataclasses.replace(s) for s in snapshots]))

    steps = [
        ("first", lambda: None),
        ("the same files again", lambda: None),
        ("new loads", lambda: [setattr(h, "load", dataclasses.replace(h.load, load1=(h.load.load1 or 0) + 1)) for h in hosts]),
        ("an OS upgrade", lambda: setattr(hosts[3], "os", dataclasses.replace(hosts[3].os, release="99"))),
        ("a host goes stale", lambda: (hosts.__setitem__(slice(None), [*hosts[:5], *hosts[6:]]), now.__setitem__(0, now[0] + 30))),
    ]
    for what, change in steps:
        change()
        if what != "a host goes stale":
            for host in hosts:
                host.collected_at = now[0]
        now[0] += 400 if what == "a host goes stale" else 10
        report(hosts)
        assembler.gather()
        ids_before = assembler.ids.copy()
        site = assembler.assemble()
        assert site.groups == aggregate(assembler.model, site.snapshots(), ids_before, now[0]), what
        for gathered in site.hosts:
            kept = list(assembler.gatherer.last_good[gathered.snapshot.hostname].values())
            assert gathered.snapshot == merge(kept, now[0], 300), what
        assert assembler.assemble().groups is site.groups, what  # nothing new: reused
        assert assembler.refresh_lrms() is not None
        assert assembler.assemble().groups is site.groups, what
    assert any(h.stale for h in assembler.assemble().hosts)
