"""The daemon's garbage-collection schedule: survivors frozen after each publish, cycles that became
garbage reclaimed by the full collection due every full_every_s, CPython's settings back at the end."""

from __future__ import annotations

import gc
import weakref

from glueinfo.run.gc_policy import CollectorPolicy


class Node:
    def __init__(self) -> None:
        self.other: object = None


def make_cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_frozen_cycle_is_reclaimed_by_the_full_collection_when_due_and_settings_come_back():
    before = gc.get_threshold()
    now = [1000.0]
    policy = CollectorPolicy(lambda: now[0], full_every_s=3600.0)
    try:
        assert gc.get_threshold()[:2] == before[:2]  # young generations as CPython sets them
        assert gc.get_threshold()[2] > before[2]
        cycle = make_cycle()  # alive during a publish, garbage after it
        policy.after_publish()
        assert gc.get_freeze_count() > 0
        gc.collect()  # what the automatic collector could do meanwhile: frozen objects are skipped
        assert cycle() is not None

        now[0] += 3599.0
        policy.after_publish()
        assert cycle() is not None and policy.full_collections == 0

        now[0] += 1.0
        policy.after_publish()
        assert cycle() is None and policy.full_collections == 1
    finally:
        policy.restore()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
