"""`--config FILE` is taken before the command as well as after it: an admin writes
`glueinfo --config /etc/glueinfo/site.conf ldif` as often as `glueinfo ldif --config ...`
(the first was once `argument COMMAND: invalid choice: '/etc/glueinfo/site.conf'`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from paths import REPO


def glueinfo(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=60)


@pytest.fixture
def site_conf(tmp_path):
    path = tmp_path / "site.conf"
    path.write_text("[site]\nid = PLACED-T2\nname = Placed\n")
    return path


@pytest.mark.parametrize("where", ["before", "equals-before", "after"])
def test_the_config_named_before_or_after_the_command_is_the_one_read(site_conf, where):
    args = {"before": ["--config", str(site_conf), "ldif", "--no-hosts"],
            "equals-before": [f"--config={site_conf}", "ldif", "--no-hosts"],
            "after": ["ldif", "--no-hosts", "--config", str(site_conf)]}[where]
    done = glueinfo(*args)
    assert done.returncode == 0, done.stderr
    assert "GlueSiteUniqueID: PLACED-T2" in done.stdout


def test_a_missing_config_named_before_the_command_is_the_usual_error(tmp_path):
    done = glueinfo("--config", str(tmp_path / "absent.conf"), "ldif")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"glueinfo: {tmp_path / 'absent.conf'}: no such config file\n"


def test_two_different_configs_are_refused_naming_both(site_conf, tmp_path):
    other = tmp_path / "other.conf"
    done = glueinfo("--config", str(site_conf), "ldif", "--config", str(other))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1
    assert f"--config given twice, {site_conf} before the command and {other} after it" in done.stderr


def test_check_takes_its_config_before_the_command_too(tmp_path):
    # A check with an unreadable config answers UNKNOWN on stdout whichever side --config is on.
    absent = tmp_path / "absent.conf"
    for args in (["--config", str(absent), "check"], ["check", "--config", str(absent)]):
        done = glueinfo(*args)
        assert done.returncode == 3 and done.stdout.startswith("GLUEINFO UNKNOWN - ") and str(absent) in done.stdout
