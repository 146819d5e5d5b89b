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
    process died) or ``seconds`` pass.  Exceptions of the ``ignore`` types count as not yet; the
    last of them is named in the failure."""
    give_up = time.monotonic() + seconds
    last_error: BaseException | None = None
    while True:
        try:
            result = condition()
        except ignore as exc:
            result, last_error = None, exc
        if result:
            return result
        because = f" (last error: {last_error})" if last_error is not None else ""
        if not still_running():
            raise AssertionError(f"stopped before {what}{because}\n{detail()}")
        if time.monotonic() >= give_up:
            raise AssertionError(f"never happened within {seconds:g} s: {what}{because}\n{detail()}")
        time.sleep(step)
