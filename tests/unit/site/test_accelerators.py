"""A SubCluster's accelerators, as every output reads them (glueinfo.site.accelerators): what a
site admin would check is that nothing is said for hosts whose devices are unknown or differ, and
that a detail is given only when every member has it."""

from __future__ import annotations

from glue_sites import CLASSES, make_host

from glueinfo.core.model import Accelerator
from glueinfo.site.accelerators import group_accelerators, host_type_counts, runtime_tags

H100 = {"type": "GPU", "vendor": "NVIDIA", "model": "NVIDIA H100 80GB HBM3", "memory_mb": 81559, "compute_capability": "9.0"}


def host(index, accelerators):
    snapshot = make_host(CLASSES[0][0], index)
    snapshot.accelerators = accelerators
    return snapshot


def test_hosts_with_the_same_devices_give_them_per_host():
    hosts = [host(i, [Accelerator(count=2, **H100)]) for i in range(3)]
    (kind,) = group_accelerators(hosts)
    assert (kind.type, kind.vendor, kind.model, kind.count) == ("GPU", "NVIDIA", "NVIDIA H100 80GB HBM3", 2)
    assert (kind.memory_mb, kind.compute_capability, kind.physical) == (81559, "9.0", 2)
    assert runtime_tags(group_accelerators(hosts)) == ["GPU"]


def test_one_host_unknown_makes_the_group_unknown_not_smaller():
    hosts = [host(0, [Accelerator(count=2, **H100)]), host(1, None)]
    assert group_accelerators(hosts) is None
    assert runtime_tags(group_accelerators(hosts)) == []


def test_hosts_known_to_have_none_give_none_not_unknown():
    assert group_accelerators([host(0, []), host(1, [])]) == ()
    assert host_type_counts(host(0, [])) == {}
    assert host_type_counts(host(0, None)) is None


def test_members_with_different_counts_say_nothing_rather_than_one_hosts_devices():
    hosts = [host(0, [Accelerator(count=2, **H100)]), host(1, [Accelerator(count=4, **H100)])]
    assert group_accelerators(hosts) is None
    assert group_accelerators([host(0, [Accelerator(count=2, **H100)]), host(1, [])]) is None


def test_a_detail_the_members_do_not_share_is_left_out():
    other_memory = {**H100, "memory_mb": 81920}
    (kind,) = group_accelerators([host(0, [Accelerator(count=2, **H100)]), host(1, [Accelerator(count=2, **other_memory)])])
    assert kind.count == 2 and kind.memory_mb is None and kind.compute_capability == "9.0"


def test_partitions_count_what_a_job_gets_and_leave_the_physical_count_unknown():
    mig = Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA A100-SXM4-40GB", count=7, partition="1g.5gb", memory_mb=4864)
    (kind,) = group_accelerators([host(0, [mig])])
    assert kind.count == 7 and kind.partition == "1g.5gb" and kind.physical is None
    assert host_type_counts(host(0, [mig])) == {"GPU": 7}


def test_an_entry_with_no_device_says_nothing():
    assert group_accelerators([host(0, [Accelerator(count=0, **H100)])]) == ()
