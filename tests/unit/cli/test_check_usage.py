"""`glueinfo check` answers every outcome as a Nagios plugin must: one status line on stdout and
exit 0-3.  A usage mistake or a config it cannot read is UNKNOWN (3) with the reason on stdout,
never CRITICAL (2, argparse's code) or an empty output (Nagios's "(No output)").

Also what `check --bdii` compares: the trees the published LDIF has, found from its DNs alone,
and never the attributes that change on their own between publications."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from paths import REPO


def check(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=60)


@pytest.mark.parametrize("args, line", [
    (["check", "--bogus"], "glueinfo: unrecognized arguments: --bogus (see glueinfo check --help)"),
    (["check", "--url", "http://ce01.example.org:7170", "--bogus"],
     "glueinfo: unrecognized arguments: --bogus (see glueinfo check --help)"),
    (["check", "--stale-warning", "ten"],
     "glueinfo check: argument --stale-warning: 'ten': expected a number, or a percentage such as 10% "
     "(see glueinfo check --help)"),
    (["check", "--timeout"], "glueinfo check: argument --timeout: expected one argument (see glueinfo check --help)"),
])
def test_a_usage_error_is_unknown_with_its_reason_on_stdout(args, line):
    done = check(*args)
    assert (done.returncode, done.stdout, done.stderr) == (3, f"GLUEINFO UNKNOWN - {line}\n", "")


def test_other_commands_keep_argparse_exit_2_on_stderr():
    done = check("ldif", "--bogus")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "glueinfo: unrecognized arguments: --bogus (see glueinfo ldif --help)\n"


def test_a_config_that_is_missing_or_not_a_file_is_unknown(tmp_path):
    done = check("check", "--config", str(tmp_path / "nope.conf"))
    assert (done.returncode, done.stdout, done.stderr) == (3, f"GLUEINFO UNKNOWN - {tmp_path / 'nope.conf'}: no such "
                                                              "config file\n", "")
    done = check("check", "--config", str(tmp_path))
    assert (done.returncode, done.stdout) == (3, f"GLUEINFO UNKNOWN - {tmp_path}: cannot read config file: Is a directory\n")


def test_a_config_mistake_is_unknown_naming_file_line_and_key(tmp_path):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[run]\nserve = yes\n[serve]\nlistn = 127.0.0.1:7170\n")
    done = check("check", "--config", str(conf))
    assert (done.returncode, done.stdout) == (3, f"GLUEINFO UNKNOWN - {conf}:4: [serve] listn: unknown key (did you mean "
                                                 "listen?)\n")
    conf.write_text("[run]\nserve = yes\nldif_file =\nnode_xml_file =\n[serve]\nlisten = 127.0.0.1:port\n")
    done = check("check", "--config", str(conf))
    assert (done.returncode, done.stdout) == (3, f"GLUEINFO UNKNOWN - {conf}:6: [serve] listen: listen address "
                                                 "'127.0.0.1:port': port 'port' is not a number from 0 to 65535\n")


def test_a_config_the_monitoring_user_may_not_read_is_unknown():
    """install.md's config: mode 0640, group glueinfo; NRPE runs the probe as another user."""
    from glueinfo import cli
    from glueinfo.commands import check as check_command  # noqa: F401 - imported before the child drops root
    from glueinfo.core import config, text  # noqa: F401

    base = Path(tempfile.mkdtemp(prefix="glueinfo-check-"))
    try:
        os.chmod(base, 0o755)
        conf = base / "glueinfo.conf"
        conf.write_text("[run]\nserve = yes\n")
        os.chmod(conf, 0o640)
        nobody = pwd.getpwnam("nobody")
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            code = 99
            try:
                os.close(read_end)
                sys.stdout = os.fdopen(write_end, "w")  # pytest holds the real one
                if os.geteuid() == 0:
                    os.setgid(nobody.pw_gid)
                    os.setuid(nobody.pw_uid)
                else:
                    os.chmod(conf, 0)
                code = cli.main(["check", "--config", str(conf)])
                sys.stdout.flush()
            finally:
                os._exit(code)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            out = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert (os.waitstatus_to_exitcode(status), out) == (
        3, f"GLUEINFO UNKNOWN - {conf}: cannot read config file: Permission denied\n")


def test_the_trees_are_found_from_the_published_dns():
    from glueinfo.commands.check import tree_bases
    from glueinfo.core.ldif import normalise_dn

    dns = ["GlueSiteUniqueID=EX,mds-vo-name=resource,o=grid",
           "GlueClusterUniqueID=c1,mds-vo-name=resource,o=grid",
           "GlueSubClusterUniqueID=s1,GlueClusterUniqueID=c1,mds-vo-name=resource,o=grid",
           "GLUE2ServiceID=svc,GLUE2GroupID=resource,o=glue",
           "GLUE2EndpointID=ep,GLUE2ServiceID=svc,GLUE2GroupID=resource,o=glue"]
    assert tree_bases(normalise_dn(dn) for dn in dns) == ["glue2groupid=resource,o=glue", "mds-vo-name=resource,o=grid"]
    # a site-form GLUE 2 tree, whose top entry hangs from o=glue itself, and a tree published with its base
    assert tree_bases(["glue2domainid=ex,o=glue", "glue2serviceid=s,glue2domainid=ex,o=glue",
                       "mds-vo-name=resource,o=grid", "gluesiteuniqueid=ex,mds-vo-name=resource,o=grid"]) == [
        "o=glue", "o=grid"]


@pytest.mark.parametrize("name, volatile", [
    ("GlueHostSMPLoadLast1Min", True), ("gluehostprocessorloadlast15min", True), ("GlueHostMainMemoryRAMAvailable", True),
    ("GlueCEStateFreeCPUs", True), ("GlueCEStateWaitingJobs", True), ("GlueHostLocalFileSystemAvailableSpace", True),
    ("GLUE2EntityCreationTime", True), ("GLUE2ComputingShareRunningJobs", True), ("GLUE2ComputingShareFreeSlots", True),
    ("GLUE2ExecutionEnvironmentUsedInstances", True), ("GLUE2EndpointHealthState", True),
    ("GlueHostMainMemoryRAMSize", False), ("GlueCEInfoTotalCPUs", False), ("GlueSubClusterLogicalCPUs", False),
    ("GlueHostProcessorModel", False), ("GLUE2ExecutionEnvironmentTotalInstances", False),
    ("GLUE2ComputingShareMaxWallTime", False), ("GLUE2ComputingManagerTotalLogicalCPUs", False),
])
def test_what_check_never_compares(name, volatile):
    from glueinfo.glue.volatile import is_volatile

    assert is_volatile(name) is volatile


def test_every_figure_the_renderer_patches_between_publications_is_volatile():
    """The host figures the GLUE 1.3 render cache rewrites in place when only they changed are, by that
    very rule, what changes between publications: check must not compare them."""
    from glueinfo.glue.render13 import HOST_VOLATILE
    from glueinfo.glue.volatile import is_volatile

    assert [name for name in HOST_VOLATILE if not is_volatile(name)] == []
