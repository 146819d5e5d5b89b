"""GPUs in the Haizea documents (issue 27 item 5): a GPU resource type per node in ``<site>`` from
the hosts' accelerators, and in the lease requests of jobs that asked for GPUs; the spec leaves
resource type names free ("you can specify any resource types you want"), so every document is
checked against glueinfo's XSD of the spec.  Expected amounts are the hosts' device counts and the
jobs' requests written here."""

from __future__ import annotations

import pytest
from glue_sites import CLASSES, make_host
from lxml import etree
from paths import REPO

from glueinfo.core.config import parse_text
from glueinfo.core.job import JobInfo
from glueinfo.core.model import Accelerator
from glueinfo.haizea.site import site_document, site_nodes
from glueinfo.haizea.workload import workload_document
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.node_settings import node_settings
from glueinfo.sss.vocabulary import RESOURCES_EXTRA

SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "glueinfo" / "haizea" / "xsd" / "haizea.xsd")))
NOW = 1_700_000_100.0
H100 = Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=4, memory_mb=81559)


def site_of(gpu_hosts=2, cpu_hosts=2, unknown_hosts=0, config="[cluster:batch]\nhosts = wn-*\n"):
    hosts = []
    for i in range(gpu_hosts):
        host = make_host(CLASSES[1][0], i, collected_at=NOW - 10)
        host.accelerators = [H100]
        hosts.append(host)
    for i in range(cpu_hosts):
        host = make_host(CLASSES[0][0], i, collected_at=NOW - 10)
        host.accelerators = []
        hosts.append(host)
    for i in range(unknown_hosts):
        hosts.append(make_host(CLASSES[3][0], i, collected_at=NOW - 10))  # accelerators never read: None
    parsed = parse_text(config)
    return assemble_snapshots(parsed, hosts, lambda: NOW, local_fqdn="ce01.example.org", states={}), parsed


def node_sets(root):
    return [(int(s.get("numnodes")), {r.get("type"): int(r.get("amount")) for r in s.iter("res")})
            for s in root.iter("node-set")]


def test_the_site_counts_each_nodes_gpus_as_a_gpu_resource():
    site, config = site_of()
    root = etree.fromstring(site_document(site, NOW, node_settings(config)))
    SCHEMA.assertValid(root)
    assert root.find("resource-types").get("names").split() == ["CPU", "Memory", "GPU"]
    sets = node_sets(root)
    gpu_sets = [(n, res) for n, res in sets if "GPU" in res]
    assert gpu_sets == [(2, {"CPU": CLASSES[1][0].threads * 100, "Memory": CLASSES[1][0].ram_mb, "GPU": 4})]
    assert sum(n for n, res in sets if "GPU" not in res) == 2
    assert sum(n * res.get("GPU", 0) for n, res in sets) == 2 * H100.count  # the site's GPUs


def test_hosts_whose_accelerators_are_unknown_get_no_gpu_and_are_named():
    site, config = site_of(unknown_hosts=1)
    root = etree.fromstring(site_document(site, NOW, node_settings(config)))
    SCHEMA.assertValid(root)
    comment = next(c.text for c in root.iter(etree.Comment))
    assert "Accelerators unknown on 1 host(s) (wn-old-00000.example.org)" in comment
    assert sum(n * res.get("GPU", 0) for n, res in node_sets(root)) == 2 * H100.count


def test_a_site_without_gpus_has_no_gpu_type_and_says_nothing_of_accelerators():
    site, config = site_of(gpu_hosts=0, cpu_hosts=1, unknown_hosts=1)
    root = etree.fromstring(site_document(site, NOW, node_settings(config)))
    assert root.find("resource-types").get("names").split() == ["CPU", "Memory"]
    assert "ccelerator" not in next(c.text for c in root.iter(etree.Comment))


def test_a_gpu_type_the_admin_configured_is_not_counted_twice():
    site, parsed = site_of(cpu_hosts=0)
    for published in site.hosts:  # [node] resources = GPU:H100=4, as each host's snapshot carries it
        published.snapshot.extra[RESOURCES_EXTRA] = {"resources": [{"name": "GPU", "type": "H100", "configured": 4}]}
    root = etree.fromstring(site_document(site, NOW, node_settings(parsed)))
    SCHEMA.assertValid(root)
    assert root.find("resource-types").get("names").split() == ["CPU", "Memory", "GPU:H100"]
    assert [res for _, res in node_sets(root)] == [{"CPU": CLASSES[1][0].threads * 100, "Memory": CLASSES[1][0].ram_mb,
                                                    "GPU:H100": 4}]


@pytest.mark.parametrize("with_gpu_nodes", [True, False])
def test_a_job_that_asked_for_gpus_asks_for_them_per_node(with_gpu_nodes):
    site, config = site_of(gpu_hosts=2 if with_gpu_nodes else 0)
    nodes = site_nodes(site, NOW, node_settings(config))
    gpu_job = JobInfo(local_id="41", submit_time=1000.0, requested_processors=8, requested_nodes=2, requested_duration_s=3600,
                      requested_accelerators=3, sss_state="Idle")
    cpu_job = JobInfo(local_id="42", submit_time=1030.0, requested_processors=1, requested_nodes=1, requested_duration_s=60,
                      requested_accelerators=0, sss_state="Idle")
    root = etree.fromstring(workload_document("w", ["ce"], nodes, [(gpu_job, "batch"), (cpu_job, "batch")], 2000.0))
    SCHEMA.assertValid(root)
    leases = root.findall("lease-requests/lease-request/lease/nodes/node-set")
    assert {r.get("type"): r.get("amount") for r in leases[0]} == {"CPU": "400", "GPU": "2"}  # 3 GPUs on 2 nodes: 2 each
    assert {r.get("type") for r in leases[1]} == {"CPU"}
    declared = root.find("site/resource-types").get("names").split()
    assert declared == ["CPU", "Memory", "GPU"]  # declared for the leases even when no node has one
