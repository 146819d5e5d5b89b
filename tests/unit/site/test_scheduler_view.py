"""The scheduler's view of nodes reaches Node XML (issue 13): State and Available/Utilized
Processors from the batch system that knows the node, the load kept as Extensions; a batch system
that does not answer makes its cluster's hosts Unknown; fork never does."""

from __future__ import annotations

from glue_sites import CLASSES, make_host
from lxml import etree

from glueinfo.core.config import parse_text
from glueinfo.core.model import NodeAllocation, QueueState
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.sss.node_xml import NodeSettings, data_element

CONFIG = "[cluster:batch]\nhosts = wn*\n[cluster:other]\n[ce:grid]\ncluster = batch\nlrms = slurm\nqueue = grid\n" \
         "[ce:local]\ncluster = other\n"
GRID = "ce01.example.org:2119/jobmanager-slurm-grid"


def nodes_of(states, hosts):
    site = assemble_snapshots(parse_text(CONFIG), hosts, clock=lambda: hosts[0].collected_at, local_fqdn="ce01.example.org",
                              states=states)
    data = data_element(site.snapshots(), hosts[0].collected_at, NodeSettings())
    return {n.findtext("Id"): n for n in data.iter("Node")}


def hosts():
    quiet = [make_host(CLASSES[0][0], i) for i in range(3)]  # wn-xeon-0000N.example.org, load well below their CPUs
    other = make_host(CLASSES[0][0], 7)
    other.hostname = "gpu7.example.org"  # in cluster "other", behind the fork CE
    return [*quiet, other]


def test_nodes_the_batch_system_knows_take_its_allocation():
    site_hosts = hosts()
    cpus = site_hosts[0].cpu.logical_cpus
    state = QueueState(lrms_type="slurm", nodes=[
        NodeAllocation(name="wn-xeon-00000.example.org", state="Busy", total_cpus=cpus, allocated_cpus=cpus),
        NodeAllocation(name="wn-xeon-00001.example.org", state="Offline", lrms_state="drained", total_cpus=cpus,
                       allocated_cpus=0, reason="disk")])
    nodes = nodes_of({GRID: state}, site_hosts)
    busy = nodes["wn-xeon-00000.example.org"]
    assert busy.findtext("State") == "Busy"  # quiet by its load, full for Slurm
    assert (busy.findtext("Available/Processors"), busy.findtext("Utilized/Processors")) == ("0", str(cpus))
    assert busy.find("Available/Processors").get("metric") == "Instantaneous"
    assert busy.find("Extension[@name='LoadAverage1']") is not None
    assert nodes["wn-xeon-00001.example.org"].findtext("State") == "Offline"
    assert nodes["wn-xeon-00002.example.org"].findtext("State") == "Idle"  # Slurm does not list it: its load says
    assert nodes["wn-xeon-00002.example.org"].find("Available/Processors").get("metric") == "Average"
    assert nodes["gpu7.example.org"].findtext("State") == "Idle"


def test_a_batch_system_that_does_not_answer_makes_its_clusters_hosts_unknown():
    nodes = nodes_of({GRID: QueueState(lrms_type="slurm", error="sinfo: command not found")}, hosts())
    assert {name: n.findtext("State") for name, n in nodes.items()} == {
        "wn-xeon-00000.example.org": "Unknown", "wn-xeon-00001.example.org": "Unknown",
        "wn-xeon-00002.example.org": "Unknown", "gpu7.example.org": "Idle"}  # the fork CE's host keeps its load's view
    lrms = etree.tostring(nodes["wn-xeon-00000.example.org"].find("Extension[@name='lrms']"), encoding="unicode")
    assert "does not answer" in lrms and "sinfo: command not found" in lrms
