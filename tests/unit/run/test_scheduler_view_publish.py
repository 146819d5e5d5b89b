"""A change the batch system alone reports reaches `glueinfo run`'s Node XML file at the next LRMS
job, on a quiet site whose host snapshots did not change (issue 13: Node State from the scheduler)."""

from __future__ import annotations

import json

from glue_sites import synthetic_site
from lxml import etree

from glueinfo.core.config import parse_text
from glueinfo.core.model import NodeAllocation, QueueState
from glueinfo.run.provider import Provider

T0 = 1_800_000_000.0


def node_states(path) -> dict[str, str]:
    root = etree.parse(str(path)).getroot()
    return {node.findtext("Id"): node.findtext("State") for node in root.iter("Node")}


def test_a_node_the_scheduler_drains_is_offline_in_the_next_node_xml_though_its_snapshot_is_unchanged(tmp_path):
    hosts = synthetic_site(20)[:2]
    for host in hosts:
        host.collected_at = T0
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in hosts]))
    names = [h.hostname for h in hosts]
    config = parse_text(
        f"[site]\nname = TEST\n[cluster:main]\nunique_id = ce01.example.org\n"
        f"[ce:grid]\nhost = ce01.example.org\nlrms = slurm\n"
        f"[node]\nsite_snapshots = {snapshots}\nstale_after = 300\n"
        f"[sources]\nenabled =\ndrop_after = 3600\n"
        f"[run]\nstate_dir = {tmp_path / 'state'}\nldif_file = {tmp_path / 'glue.ldif'}\n"
        f"node_xml_file = {tmp_path / 'nodes.xml'}\n")
    scheduler = {"state": "Idle"}

    def queue_state(lrms, ctx):
        return QueueState(lrms_type="slurm", total_cpus=8, free_cpus=8, nodes=[
            NodeAllocation(name=names[0], state=scheduler["state"], total_cpus=4, allocated_cpus=0),
            NodeAllocation(name=names[1], state="Idle", total_cpus=4, allocated_cpus=0)])

    (tmp_path / "state").mkdir()
    now = [T0 + 10]
    provider = Provider(config, clock=lambda: now[0], queue_state=queue_state)
    try:
        provider.run_job("lrms")
        assert node_states(tmp_path / "nodes.xml") == {names[0]: "Idle", names[1]: "Idle"}

        scheduler["state"] = "Offline"  # drained: the host's own snapshot says nothing new
        now[0] += 60
        provider.run_job("lrms")
        assert node_states(tmp_path / "nodes.xml") == {names[0]: "Offline", names[1]: "Idle"}
    finally:
        provider.close()
