"""LastRun: two generations during a run, one between runs once a run finishes."""

from __future__ import annotations

from glueinfo.core.lastrun import LastRun


def test_a_finished_run_keeps_only_its_own_values():
    cache: LastRun[str, str] = LastRun()
    cache.start()
    cache.keep("a", "1")
    cache.keep("b", "2")
    cache.finish()
    cache.start()
    assert cache.previous("a") == "1" and cache.previous("b") == "2"
    cache.reuse("a", "1")
    cache.keep("c", "3")
    cache.finish()
    assert cache.previous("a") is None  # the last run's values are gone at once
    cache.start()
    assert (cache.previous("a"), cache.previous("b"), cache.previous("c")) == ("1", None, "3")
    assert (cache.reused, cache.made) == (0, 0)


def test_an_unfinished_run_leaves_the_last_runs_values_readable():
    cache: LastRun[str, str] = LastRun()
    cache.start()
    cache.keep("a", "1")
    cache.finish()
    cache.start()
    cache.keep("b", "2")  # a render that stopped half-way: no finish
    cache.start()
    assert cache.previous("b") == "2" and cache.previous("a") is None
