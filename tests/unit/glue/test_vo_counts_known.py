"""A VO's job counts are published only when something counts them (issue 13, "Jobs to VOs"):
a [vos] rule the batch system can match gives the VO 0 jobs when none is seen; a VO no rule
names, or only rules the batch system cannot match (Grid Engine has no group), has unknown
counts, left out of both GLUE 1.3 VOViews and GLUE 2 ComputingShares, never 0.  Both trees
publish the same counts, also when a side command (the node list) failed."""

from __future__ import annotations

from glue_sites import CLASSES, make_host

from glueinfo.core.config import parse_text
from glueinfo.core.model import QueueState, VoJobCounts
from glueinfo.glue.build import render_site
from glueinfo.glue.glue2 import glue2_entries
from glueinfo.lrms.registry import LrmsContext, LrmsPlugin, queue_state
from glueinfo.lrms.vo_map import VoMap
from glueinfo.publish.documents import glue2_options
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings

NOW = 1_700_000_100.0
CONFIG = """[site]
id = EXAMPLE
name = EXAMPLE
[glue]
versions = 1.3 2.0
[cluster:batch]
hosts = wn*
[ce:grid]
cluster = batch
lrms = sge
queue = grid
access = VO:atlas VO:cms VO:lhcb
"""
CE = "ce01.example.org:2119/jobmanager-sge-grid"
RULES = ["user:atlas*=atlas", "group:lhcb*=lhcb"]  # nothing names cms


def answer(error=None):
    """The batch system's answer: 2 atlas jobs, 1 local one, the node list failed when ``error``."""
    return QueueState(lrms_type="sge", status="Production", running_jobs=1, waiting_jobs=2, total_jobs=3,
                      free_job_slots=4, vo_counts={"atlas": VoJobCounts(1, 1, 2)}, error=error)


def asked(kinds, error=None):
    plugin = LrmsPlugin(name="sge", query=lambda ctx: answer(error), owner_kinds=kinds)
    ctx = LrmsContext(queue="grid", ce_config={}, hosts=[], clock=lambda: NOW, vo_map=VoMap.from_values(RULES))
    return queue_state("sge", ctx, plugins=[plugin])


def published(state):
    """(GLUE 1.3 VOView, GLUE 2 share) Running/Waiting/Total of each VO, as a broker reads them."""
    config = parse_text(CONFIG)
    hosts = [make_host(CLASSES[0][0], i) for i in range(2)]
    for host in hosts:
        host.hostname = host.hostname.replace("wn-xeon-", "wn")
    site = assemble_snapshots(config, hosts, lambda: NOW, local_fqdn="ce01.example.org", states={CE: state})
    views = {e.first("GlueVOViewLocalID"): tuple(e.first(f"GlueCEState{n}Jobs") for n in ("Running", "Waiting", "Total"))
             for e in render_site(site, schema=None).entries if "GlueVOView" in e.object_classes}
    shares = {e.first("GLUE2EntityName").split()[1]: tuple(e.first(f"GLUE2ComputingShare{n}Jobs")
                                                         for n in ("Running", "Waiting", "Total"))
              for e in glue2_entries(site, glue2_options(publish_settings(config))) if "GLUE2ComputingShare" in e.object_classes}
    return {vo: (tuple(None if v is None else int(v) for v in views[vo]),
                 tuple(None if v is None else int(v) for v in shares[vo])) for vo in views}


def test_a_vo_a_rule_gives_has_zero_jobs_and_a_vo_nothing_counts_has_none():
    state = asked(("user", "group", "account"))
    assert state.vo_counts == {"atlas": VoJobCounts(1, 1, 2), "lhcb": VoJobCounts()}
    assert published(state) == {"atlas": ((1, 1, 2), (1, 1, 2)), "lhcb": ((0, 0, 0), (0, 0, 0)),
                                "cms": ((None,) * 3, (None,) * 3)}


def test_a_rule_the_batch_system_cannot_match_counts_nothing():
    state = asked(("user", "account"))  # Grid Engine: no group, so group:lhcb* never matches
    assert state.vo_counts == {"atlas": VoJobCounts(1, 1, 2)}
    assert published(state)["lhcb"] == ((None,) * 3, (None,) * 3)


def test_a_failed_side_command_leaves_the_per_vo_counts_in_both_trees():
    state = asked(("user", "group", "account"), error="qhost: command not found")
    assert published(state)["atlas"] == ((1, 1, 2), (1, 1, 2))


def test_without_a_map_no_vo_count_is_published():
    plugin = LrmsPlugin(name="sge", query=lambda ctx: answer(), owner_kinds=("user", "account"))
    ctx = LrmsContext(queue="grid", ce_config={}, hosts=[], clock=lambda: NOW)  # the default: no [vos] map
    state = queue_state("sge", ctx, plugins=[plugin])
    state.vo_counts = {}  # and so no job has a VO
    assert all(counts == ((None,) * 3, (None,) * 3) for counts in published(state).values())



def test_a_plugin_that_declares_no_owners_gets_no_zero_counts():
    # a third-party plugin that counts no VO: nothing is known of any VO's jobs
    plugin = LrmsPlugin(name="site-local", query=lambda ctx: answer())
    ctx = LrmsContext(queue="grid", ce_config={}, hosts=[], clock=lambda: NOW, vo_map=VoMap.from_values(RULES))
    assert queue_state("site-local", ctx, plugins=[plugin]).vo_counts == {"atlas": VoJobCounts(1, 1, 2)}
