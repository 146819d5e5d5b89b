"""Accelerators when one host is seen by several sources (issue 27 item 2): a lasting fact, and an
empty list is a fact.  The devices are the H100 host of tests/fixtures/gpu as the collector reads it."""

from __future__ import annotations

from glueinfo.core.model import Accelerator, CpuInfo, HostSnapshot, LoadInfo
from glueinfo.gather.merge import merge

T0 = 1_700_000_000.0
H100 = [Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=2, memory_mb=81559,
                    compute_capability="9.0", pci_ids=["10de:2330"], source="nvml")]


def seen(source: str, at: float, accelerators, load1: float = 1.0) -> HostSnapshot:
    return HostSnapshot(hostname="gpu01.example.org", collected_at=at, source=source, cpu=CpuInfo(logical_cpus=64),
                        load=LoadInfo(load1=load1), accelerators=accelerators)


def test_a_source_that_cannot_tell_them_gets_them_from_one_that_can():
    # Ganglia without the GPU module knows the load, not the GPUs: the agent's GPUs stay.
    merged = merge([seen("agents", T0 - 60, H100), seen("ganglia", T0 - 5, None, load1=7.0)], now=T0, stale_after=300)
    assert merged.load.load1 == 7.0 and merged.accelerators == H100


def test_they_are_a_lasting_fact_taken_from_a_stale_snapshot_too():
    merged = merge([seen("agents", T0 - 900, H100), seen("ganglia", T0 - 5, None)], now=T0, stale_after=300)
    assert merged.accelerators == H100 and merged.load.load1 == 1.0


def test_known_none_is_a_fact_the_newest_source_gives():
    # The newest source read the host and found none: an older reading's GPUs do not come back.
    merged = merge([seen("agents", T0 - 60, H100), seen("local", T0 - 5, [])], now=T0, stale_after=300)
    assert merged.accelerators == []


def test_the_newest_reading_wins():
    older = [Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=2, source="sysfs")]
    merged = merge([seen("spool", T0 - 120, older), seen("agents", T0 - 5, H100)], now=T0, stale_after=300)
    assert merged.accelerators == H100
