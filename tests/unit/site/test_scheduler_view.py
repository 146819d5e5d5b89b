"""The scheduler's view of nodes reaches Node XML (issue 13): State and Available/Utilized
Processors from the batch system that knows the node, the load kept as Extensions; a batch system
that does not answer makes its cluster's hosts Unknown; fork never does."""

from __future__ import annotations

from glue_sites import CLASSES, make_host
from lxml import etree

from glueinfo.core.config import parse_text
from glueinfo.core.model import NodeAllocation, QueueState
from glueinfo.glue.glue2 import glue2_entries
from glueinfo.publish.documents import glue2_options
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_xml import data_element

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


def test_available_processors_are_what_a_new_job_can_get_so_an_sssrmap_sum_matches_free_cpus():
    site_hosts = hosts()
    cpus = site_hosts[0].cpu.logical_cpus
    named = [make_host(CLASSES[0][0], i) for i in range(3, 5)]
    state = QueueState(lrms_type="lsf", nodes=[
        # drained with nothing running: none of its CPUs is available to a new job
        NodeAllocation(name="wn-xeon-00000.example.org", state="Offline", total_cpus=cpus, allocated_cpus=0),
        # an exclusive job on 2 CPUs: no other job goes there
        NodeAllocation(name="wn-xeon-00001.example.org", state="Busy", total_cpus=cpus, allocated_cpus=2),
        # lost by the batch system
        NodeAllocation(name="wn-xeon-00002.example.org", state="Unknown", total_cpus=cpus, allocated_cpus=1),
        # 6 used and 2 reserved for a pending job (LSF's RSV): 8 left of 16
        NodeAllocation(name="wn-xeon-00003.example.org", state="Idle", total_cpus=16, allocated_cpus=6, free_cpus=8),
        NodeAllocation(name="wn-xeon-00004.example.org", state="Idle", total_cpus=16, allocated_cpus=10)])
    nodes = nodes_of({GRID: state}, [*site_hosts, *named])
    available = {name: int(n.findtext("Available/Processors")) for name, n in nodes.items() if name.startswith("wn")}
    utilized = {name: n.findtext("Utilized/Processors") for name, n in nodes.items()}
    assert available == {
        "wn-xeon-00000.example.org": 0, "wn-xeon-00001.example.org": 0, "wn-xeon-00002.example.org": 0,
        "wn-xeon-00003.example.org": 8, "wn-xeon-00004.example.org": 6}
    assert (utilized["wn-xeon-00001.example.org"], utilized["wn-xeon-00003.example.org"]) == ("2", "6")
    # an SSSRMAP sum of Available/Processors: the CPUs the CE's FreeCPUs counts (the untaken CPUs of
    # Idle nodes, commands.node_capacity), 8 + 6, not the drained, exclusive or lost nodes' ones
    assert sum(available.values()) == 14


def test_a_node_the_admin_lists_offline_has_no_available_processor_whatever_the_batch_system_says():
    site_hosts = hosts()
    state = QueueState(lrms_type="slurm", nodes=[
        NodeAllocation(name="wn-xeon-00000.example.org", state="Idle", total_cpus=8, allocated_cpus=2)])
    site = assemble_snapshots(parse_text(CONFIG), site_hosts, clock=lambda: site_hosts[0].collected_at,
                              local_fqdn="ce01.example.org", states={GRID: state})
    data = data_element(site.snapshots(), site_hosts[0].collected_at, NodeSettings(offline_hosts=("wn-xeon-00000*",)))
    node = next(n for n in data.iter("Node") if n.findtext("Id") == "wn-xeon-00000.example.org")
    assert (node.findtext("State"), node.findtext("Available/Processors")) == ("Offline", "0")


def test_a_replayed_site_publishes_the_schedulers_instances_in_glue2_as_a_live_one_does():
    config = parse_text("[site]\nid = EXAMPLE\nname = EXAMPLE\n[glue]\nversions = 1.3 2.0\n" + CONFIG)
    site_hosts = hosts()
    cpus = site_hosts[0].cpu.logical_cpus
    state = QueueState(lrms_type="slurm", status="Production", nodes=[
        NodeAllocation(name="wn-xeon-00000.example.org", state="Busy", total_cpus=cpus, allocated_cpus=cpus),
        NodeAllocation(name="wn-xeon-00001.example.org", state="Offline", total_cpus=cpus, allocated_cpus=0),
        NodeAllocation(name="wn-xeon-00002.example.org", state="Idle", total_cpus=cpus, allocated_cpus=1)])
    # glueinfo ldif --snapshots: the recorded hosts and the batch system's answer, assembled once
    site = assemble_snapshots(config, site_hosts, clock=lambda: site_hosts[0].collected_at,
                              local_fqdn="ce01.example.org", states={GRID: state})
    batch = [e for e in glue2_entries(site, glue2_options(publish_settings(config))) if "GLUE2ExecutionEnvironment" in e.object_classes
             and e.first("GLUE2ExecutionEnvironmentTotalInstances") == "3"]
    assert [(e.first("GLUE2ExecutionEnvironmentUsedInstances"), e.first("GLUE2ExecutionEnvironmentUnavailableInstances"))
            for e in batch] == [("1", "1")]
