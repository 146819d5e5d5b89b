"""Waiting times from the batch system's own view (glueinfo.lrms.waiting), on hand-made job records
and a fixed clock.  Every expected figure is worked out by hand in the comments."""

from __future__ import annotations

from glueinfo.core.model import QueueState
from glueinfo.lrms.waiting import RECENT_S, Observed, settle

NOW = 1_800_000_000.0


def settled(records, starts_now=False, model=None, calls=None):
    state = QueueState()
    seen = Observed(NOW)
    seen.add(records)

    def drain():
        if calls is not None:
            calls.append("model")
        return model if model is not None else (None, None)

    settle(state, seen, starts_now, drain)
    return state


def figures(state):
    return state.estimated_response_time_s, state.worst_response_time_s, state.response_basis


def test_a_free_cpu_and_nothing_queued_is_no_wait_whatever_else_is_known():
    calls = []
    state = settled([("atlas", False, NOW - 900, NOW - 100)], starts_now=True, calls=calls)
    assert figures(state) == (0, 0, "free")
    assert state.vo_response_times == {} and state.response_times_of_vo("atlas") == (0, 0)
    assert calls == []


def test_the_schedulers_forecasts_come_first():
    # queued jobs forecast to start in 600 s and 1800 s, one started 300 s after it was submitted
    state = settled([(None, True, None, NOW + 600), (None, True, None, NOW + 1800), (None, False, NOW - 400, NOW - 100)])
    assert figures(state) == ((600 + 1800) // 2, 1800, "forecast")


def test_a_forecast_already_past_is_no_wait_not_a_negative_one():
    assert figures(settled([(None, True, None, NOW - 50), (None, True, None, NOW + 100)])) == (50, 100, "forecast")


def test_without_forecasts_the_waits_of_the_jobs_started_in_the_last_hour():
    records = [
        (None, False, NOW - 1000, NOW - 400),                  # waited 600 s
        (None, False, NOW - 200, NOW - 180),                   # waited 20 s
        (None, False, NOW - RECENT_S - 600, NOW - RECENT_S),   # started exactly an hour ago: counted, 600 s
        (None, False, NOW - 9000, NOW - RECENT_S - 1),         # started before the hour: not recent
        (None, False, None, NOW - 10),                         # submit time unknown: not guessed
        (None, False, NOW - 100, NOW + 30),                    # a start after now (clock skew): not a wait yet
        (None, True, None, None),                              # queued with no forecast
    ]
    assert figures(settled(records)) == (round((600 + 20 + 600) / 3), 600, "measured")  # 406.7 s: 407


def test_a_start_before_its_submit_time_is_no_wait():
    assert figures(settled([(None, False, NOW - 10, NOW - 20), (None, False, NOW - 30, NOW - 20)])) == (5, 10, "measured")


def test_the_plugins_model_only_when_nothing_was_forecast_or_measured():
    calls = []
    assert figures(settled([(None, True, None, None)], model=(1334, 2288), calls=calls)) == (1334, 2288, "model")
    assert calls == ["model"]
    calls.clear()
    settled([(None, False, NOW - 60, NOW - 30)], model=(1334, 2288), calls=calls)
    assert calls == []


def test_nothing_known_is_left_out():
    state = settled([(None, True, None, None), (None, False, NOW - 5000, NOW - 4000)], model=(None, 2288))
    assert figures(state) == (None, None, None)
    assert state.response_times_of_vo("atlas") == (None, None)


def test_each_vo_from_its_own_forecasts_else_the_queues():
    records = [
        ("atlas", True, None, NOW + 7200),       # atlas queues behind its own forecast
        ("cms", True, None, NOW + 600),
        ("cms", False, NOW - 3000, NOW - 2000),  # cms: a forecast, so its wait of 1000 s is not used
        ("lhcb", False, NOW - 500, NOW - 200),   # lhcb: nothing queued; its last job started after 300 s
        (None, True, None, NOW + 3600),          # a local job
    ]
    state = settled(records)
    assert figures(state) == ((7200 + 600 + 3600) // 3, 7200, "forecast")
    assert state.vo_response_times == {"atlas": (7200, 7200), "cms": (600, 600)}
    # lhcb's next job queues behind the forecast jobs, not after the 300 s its last one waited
    assert state.response_times_of_vo("lhcb") == (3800, 7200)
    assert state.response_times_of_vo("dteam") == (3800, 7200)  # no job of its own: the queue's


def test_each_vo_from_its_own_waits_when_the_queues_are_measured():
    records = [
        ("atlas", False, NOW - 1000, NOW - 400),  # 600 s
        ("atlas", False, NOW - 300, NOW - 100),   # 200 s
        ("cms", False, NOW - 3000, NOW - 2000),   # 1000 s
        ("cms", True, None, None),                # queued, no forecast
    ]
    state = settled(records)
    assert figures(state) == (600, 1000, "measured")
    assert state.vo_response_times == {"atlas": (400, 600), "cms": (1000, 1000)}


def test_a_second_source_adds_to_the_first():
    seen = Observed(NOW)
    seen.add([("atlas", True, None, None)])
    assert not seen.told
    seen.add([("atlas", False, NOW - 700, NOW - 100)])  # e.g. Slurm's accounting
    assert seen.told
    state = QueueState()
    settle(state, seen, False)
    assert figures(state) == (600, 600, "measured") and state.vo_response_times == {"atlas": (600, 600)}
