"""Shared test setup.

With GLUEINFO_FORBID_SKIPS=1 (set by .ci/run) a skipped test fails the run:
an integration test that cannot find slapd, BDII, Slurm or gmond in CI is a
CI failure, not a quiet skip.
"""

from __future__ import annotations

import os
import sys

import pytest

# Shared harnesses (real servers, Slurm, site configs, paths) are imported by name: `from servers import Slapd`.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness"))

FORBID_SKIPS = os.environ.get("GLUEINFO_FORBID_SKIPS") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if FORBID_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped in CI, which counts as a failure (GLUEINFO_FORBID_SKIPS=1): {reason}"


# ---- real LDAP servers (tests/servers.py) --------------------------------
# `slapd`: a fresh private slapd with the GLUE schema for each test (it starts
# in about 0.15 s, so tests never see each other's entries).  `bdii`: one
# Debian BDII per test module (an update cycle takes a few seconds); tests
# use their own DNs, call bdii.wait_for_update() after adding providers, and
# bdii.clear() to start again from the package's default tree.  Both skip with the
# missing package named when the binaries are absent -- which CI
# (GLUEINFO_FORBID_SKIPS=1) turns into a failure.


@pytest.fixture
def slapd(tmp_path):
    from servers import Slapd, missing_slapd_tools

    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    server = Slapd(tmp_path / "slapd").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bdii(tmp_path_factory):
    from servers import Bdii, missing_bdii_tools

    missing = missing_bdii_tools()
    if missing:
        pytest.skip("real BDII needed, missing: " + ", ".join(missing))
    server = Bdii(tmp_path_factory.mktemp("bdii")).start()
    try:
        yield server
    finally:
        server.stop()


# ---- no test touches this machine's own glueinfo files ---------------------
# `run` and `serve` default to /var/lib/glueinfo (state directory, LDIF and Node
# XML files).  A test that forgets to point them elsewhere would make other tests
# depend on the order they run in (one restores the hosts another left there), so
# the session fails when anything there was created or changed.

MACHINE_DIR = "/var/lib/glueinfo"


def _machine_files() -> dict[str, float]:
    found = {}
    for root, _dirs, files in os.walk(MACHINE_DIR):
        for name in files:
            path = os.path.join(root, name)
            try:
                found[path] = os.stat(path).st_mtime
            except OSError:
                pass
    return found


@pytest.fixture(scope="session", autouse=True)
def machine_glueinfo_files_untouched():
    before = _machine_files()
    yield
    after = _machine_files()
    touched = sorted(path for path, mtime in after.items() if before.get(path) != mtime)
    assert not touched, f"tests wrote this machine's own glueinfo files (give run/serve a [run] directory): {touched}"
