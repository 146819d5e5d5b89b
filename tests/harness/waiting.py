"""Waiting for an outcome in tests: one rule for every poll loop.

A test waits for what a user would wait for (a line logged, a document
served, a file written) and fails saying what never happened; the time
limit is a safety net against a hang, never a speed claim (speed is
measured in benchmarks/).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], what: str, seconds: float = 60.0, *, step: float = 0.05,
               detail: Callable[[], str] = lambda: "", still_running: Callable[[], bool] = lambda: True,
               ignore: tuple[type[BaseException], ...] = ()) -> Any:
    """Poll ``condition`` until it gives something true, and return that.  AssertionError naming
    ``what`` (with ``detail()``, e.g. a log's tail) when ``still_running()`` turns false (the
    process died) or ``seconds`` pass.  Exceptions of the ``ignore`` types count as not yet."""
    give_up = time.monotonic() + seconds
    while True:
        try:
            result = condition()
        except ignore:
            result = None
        if result:
            return result
        if not still_running():
            raise AssertionError(f"stopped before {what}\n{detail()}")
        if time.monotonic() >= give_up:
            raise AssertionError(f"never happened within {seconds:g} s: {what}\n{detail()}")
        time.sleep(step)
