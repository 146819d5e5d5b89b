"""SubClusters split by accelerators (issue 27 item 3): by kind (type, vendor, model, MIG profile) and
count; memory, driver and how they were read do not split a group; a host known to have none and a
host whose accelerators are unknown stay together; hosts without accelerators keep their names and ids."""

from __future__ import annotations

import dataclasses

from glue_sites import CLASSES, make_host

from glueinfo.core.config import parse_text
from glueinfo.core.model import Accelerator
from glueinfo.site.aggregate import aggregate
from glueinfo.site.from_config import site_from_config
from glueinfo.site.ids import SubClusterIds

XEON = CLASSES[0][0]
H100 = Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=2, memory_mb=81559, source="nvml")
A100_MIG = Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA A100-SXM4-80GB", count=4, memory_mb=19968, partition="MIG",
                       source="nvidia-smi")


def site():
    return site_from_config(parse_text("", "/etc/glueinfo/glueinfo.conf"), "ce01.example.org")


def host(index: int, accelerators):
    return dataclasses.replace(make_host(XEON, index), accelerators=accelerators)


def groups(hosts, ids=None, now=0.0):
    found = aggregate(site(), hosts, ids, now)
    return {sc.unique_id: ([h.hostname.split(".")[0] for h in sc.hosts], sc.name) for c in found.clusters for sc in c.subclusters}


def test_hosts_without_accelerators_keep_their_group_name_and_id():
    plain = groups([make_host(XEON, 1), make_host(XEON, 2)])
    mixed = groups([host(1, None), host(2, [])])
    assert mixed == plain and len(plain) == 1


def test_kind_and_count_split_memory_and_source_do_not():
    four = dataclasses.replace(H100, count=4)
    other_reading = dataclasses.replace(H100, memory_mb=None, source="sysfs", driver_version="565.57.01")
    found = groups([host(1, [H100]), host(2, [other_reading]), host(3, [four]), host(4, [A100_MIG]), host(5, [])])
    members = sorted(hosts for hosts, _ in found.values())
    assert members == [["wn-xeon-00001", "wn-xeon-00002"], ["wn-xeon-00003"], ["wn-xeon-00004"], ["wn-xeon-00005"]]


def test_names_and_new_ids_spell_the_accelerators():
    found = groups([host(1, []), host(2, [H100]), host(3, [A100_MIG])])
    by_host = {hosts[0]: (unique_id, name) for unique_id, (hosts, name) in found.items()}
    cpu_id, cpu_name = by_host["wn-xeon-00001"]
    assert by_host["wn-xeon-00002"] == (f"{cpu_id}-nvidia-h100-80gb-hbm3", f"{cpu_name}-2xnvidia-h100-80gb-hbm3")
    assert by_host["wn-xeon-00003"] == (f"{cpu_id}-nvidia-a100-sxm4-80gb-mig", f"{cpu_name}-4xnvidia-a100-sxm4-80gb-mig")


def test_gpus_fitted_to_part_of_a_group_leave_its_id_with_the_larger_part():
    memory = SubClusterIds()
    before = groups([host(i, None) for i in range(1, 5)], memory, now=100.0)
    [(cpu_id, _)] = before.items()
    after = groups([host(1, None), host(2, None), host(3, []), host(4, [H100])], memory, now=200.0)
    assert after[cpu_id][0] == ["wn-xeon-00001", "wn-xeon-00002", "wn-xeon-00003"]
    assert after[f"{cpu_id}-nvidia-h100-80gb-hbm3"][0] == ["wn-xeon-00004"]
