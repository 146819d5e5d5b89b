"""Accelerators in monitoring (issue 27 item 5): /metrics and the status page show each CE's
accelerators as its batch system counts them and each SubCluster's from its hosts, read from the
site the daemon last assembled (glueinfo.run.http.NodeStore.status); unknown is left out.  The
site is test_glue2_accelerators.py's: two nodes with two H100 each, two known to have none, and
Slurm's 4 GPUs, 1 in use."""

from __future__ import annotations

import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "glue"))
from test_glue2_accelerators import (  # noqa: E402
    BATCH_CE,
    CONFIG,
    GPU_CE,
    GPU_HOSTS,
    GPU_QUEUE,
    H100,
    NOW,
    hosts_with,
    queue,
)

from glueinfo.core.config import parse_text  # noqa: E402
from glueinfo.run.http import NodeStore  # noqa: E402
from glueinfo.run.metrics import exposition, make_registry  # noqa: E402
from glueinfo.run.stats import Observed  # noqa: E402
from glueinfo.run.status_page import render  # noqa: E402
from glueinfo.site.assemble import assemble_snapshots  # noqa: E402


def status_of(hosts, states):
    config = parse_text(CONFIG.format(switch="no"))
    site = assemble_snapshots(config, hosts, lambda: NOW, local_fqdn="ce1.example.org", states=states)
    return NodeStore(lambda: None, observed=Observed(site=site), clock=lambda: NOW).status()


def samples(status):
    text = exposition(make_registry(lambda: status)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_give_each_ces_accelerators_and_each_subclusters():
    status = status_of(hosts_with(), {GPU_CE: queue((GPU_QUEUE,)), BATCH_CE: queue()})
    got = samples(status)
    for state, value in (("total", 4), ("used", 1), ("free", 3)):
        assert got[("glueinfo_ce_accelerators", (("ce", GPU_CE), ("model", "h100"), ("state", state), ("type", "GPU")))] == value
    assert not any(name == "glueinfo_ce_accelerators" and ("ce", BATCH_CE) in labels for name, labels in got)
    subclusters = {labels: value for (name, labels), value in got.items() if name == "glueinfo_subcluster_accelerators"}
    ((labels, value),) = subclusters.items()
    assert dict(labels)["model"] == H100["model"] and dict(labels)["type"] == "GPU"
    assert value == GPU_HOSTS * H100["count"]


def test_unknown_accelerators_give_no_series_and_no_line_on_the_page():
    status = status_of(hosts_with(gpus=None, cpus=None), {GPU_CE: queue(), BATCH_CE: queue()})
    got = samples(status)
    assert not any(name in ("glueinfo_ce_accelerators", "glueinfo_subcluster_accelerators") for name, _ in got)
    page = render(status).decode()
    assert "accelerators" not in page and "GPU" not in page


def test_the_status_page_shows_the_queues_and_subclusters_accelerators():
    status = status_of(hosts_with(), {GPU_CE: queue((GPU_QUEUE,)), BATCH_CE: queue()})
    page = render(status).decode()
    assert "GPU h100 free / used / total</th><td>3 / 1 / 4</td>" in page
    assert f"accelerators per host: 2 x {H100['model']} (81559 MB, compute capability 9.0)" in page
    assert "accelerators per host: none" in page  # the Xeon nodes, known to have none
