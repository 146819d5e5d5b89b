"""CI's promise: with GLUEINFO_FORBID_SKIPS=1 (set by .ci/run) a skipped test
fails the run, so an integration test that cannot find its server in CI is
a red CI, not a quiet skip.  Checked by running pytest on a test that skips,
with this suite's conftest.py loaded as a plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from paths import TESTS

TESTS = TESTS


def run_pytest_on_a_skip(tmp_path: Path, forbid: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_needs_a_server.py").write_text(
        "import pytest\n\n"
        "def test_needs_slapd():\n"
        "    pytest.skip('real slapd needed, missing: slapd')\n")
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_FORBID_SKIPS"}
    if forbid:
        env["GLUEINFO_FORBID_SKIPS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)


def test_a_skip_fails_the_run_in_ci(tmp_path):
    result = run_pytest_on_a_skip(tmp_path, forbid=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout
    assert "skipped in CI, which counts as a failure" in result.stdout
    assert "real slapd needed" in result.stdout


def test_a_skip_is_only_a_skip_outside_ci(tmp_path):
    result = run_pytest_on_a_skip(tmp_path, forbid=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout
