"""Shared test setup.

With GLUEINFO_FORBID_SKIPS=1 (set by .ci/run) a skipped test fails the run:
an integration test that cannot find slapd, BDII, Slurm or gmond in CI is a
CI failure, not a quiet skip.
"""

from __future__ import annotations

import os

import pytest

FORBID_SKIPS = os.environ.get("GLUEINFO_FORBID_SKIPS") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if FORBID_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped in CI, which counts as a failure (GLUEINFO_FORBID_SKIPS=1): {reason}"
