"""The quick starts of README.md, docs/install.md and docs/admin-guide.md, run as written.

Each documented block that can run here is marked in its document (tests/harness/doc_blocks.py)
and run, in the order an admin following the document runs them, on a throwaway copy of this
Debian 12 machine (tests/harness/sandbox.py: nothing of it touches the machine, and its ports
are its own).  A block fails the test when one of its steps fails, and each block is then
checked for what an admin would look at (the CE in BDII, the file on the spool, the daemon
running).  No systemd runs as PID 1 here: `systemctl` starts a unit's ExecStart itself, as
its User= with its Environment= and drop-ins, the daemon in the foreground of its own
process (tests/harness/systemd_standin.py).  A cron line runs with cron's environment only
(PATH=/usr/bin:/bin), and the BDII provider as BDII's own user, openldap.

Three machines: a CE head node following the README, a fresh worker following the README's
agent and spool steps, and a head node installed by docs/install.md's pip route and set up
by the admin guide.  `pip install` reaches the machine's package index (its only use of the
machine's network); everything else runs on the copy's loopback.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from doc_blocks import Block, Step, all_blocks, run_block
from paths import REPO
from sandbox import Sandbox, missing_sandbox_tools
from waiting import wait_until

pytestmark = pytest.mark.integration

README, INSTALL, ADMIN = "README.md", "docs/install.md", "docs/admin-guide.md"
# Blocks that install from the package index, run on the machine's network.
NETWORK = {(README, "setup"), (INSTALL, "pip-debian")}

# The flows, in the order an admin runs them.
HEAD_NODE = [(README, "setup"), (README, "config-dir"), (README, "one-host-config"), (README, "one-host"),
             (README, "one-host-service"), (README, "bdii"), (README, "head-node-config"), (README, "head-node")]
WORKER = [(README, "setup"), (README, "agent"), (README, "spool-cron")]
PIP_AND_ADMIN_GUIDE = [(INSTALL, "pip-debian"), (INSTALL, "after-install"), (ADMIN, "run"), (ADMIN, "openldap-shim"),
                       (ADMIN, "bdii-size"), (ADMIN, "bdii"), (ADMIN, "provider-as-bdii"), (ADMIN, "bdii-count"),
                       (ADMIN, "agent"), (ADMIN, "spool-cron")]
# Run by tests/integration/test_bdii_scale.py (BDII started by the init script).
ELSEWHERE = {(ADMIN, "bdii-size-init")}


def need_sandbox() -> None:
    missing = missing_sandbox_tools()
    if missing:
        pytest.skip("a sandbox copy of this machine needs " + ", ".join(missing))


def wait_for(sandbox: Sandbox, script: str, what: str, timeout: float = 60) -> str:
    """Run ``script`` inside until it exits 0; its output.  Fails naming ``what``."""
    last: list[subprocess.CompletedProcess[str]] = []

    def succeeded() -> bool:
        last[:] = [sandbox.run(script)]
        return last[0].returncode == 0

    wait_until(succeeded, what, timeout, step=0.5,
               detail=lambda: f"{last[0].stdout[-3000:]}\n{last[0].stderr[-3000:]}" if last else "")
    return str(last[0].stdout)


class Flow:
    """One machine following the docs: run each named block, then its checks."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.blocks = all_blocks()
        self.env: dict[str, str] = {}

    def block(self, doc: str, name: str) -> Block:
        return self.blocks[(doc, name)]

    def run(self, doc: str, name: str, env: dict[str, str] | None = None) -> Step:
        block = self.block(doc, name)
        step = run_block(self.sandbox, block, network="host" if (doc, name) in NETWORK else "sandbox",
                         env={**self.env, **(env or {})})
        assert step.returncode == 0, step.report()
        return step


def test_every_marked_block_is_run_by_a_quick_start_test():
    # A marker no flow names would be a block that silently stopped being tested.
    flows = set(HEAD_NODE) | set(WORKER) | set(PIP_AND_ADMIN_GUIDE) | ELSEWHERE
    marked = set(all_blocks())
    assert marked - flows == set(), f"marked but not run: {sorted(marked - flows)}"
    assert flows - marked == set(), f"run but no longer marked in the docs: {sorted(flows - marked)}"


def test_readme_head_node_one_host_bdii_and_sources(tmp_path):
    need_sandbox()
    with Sandbox(tmp_path / "head", REPO) as sandbox:
        sandbox.run("install -d /spool")  # the shared spool directory, an NFS mount on a real head node
        flow = Flow(sandbox)
        step = flow.run(README, "setup")
        assert "dn: GlueClusterUniqueID=" in step.stdout
        # "The commands below assume the install above with /opt/glueinfo/bin on PATH".
        flow.env["PATH"] = "/opt/glueinfo/bin:" + sandbox.environment()["PATH"]
        flow.run(README, "config-dir")
        flow.run(README, "one-host-config")
        step = flow.run(README, "one-host")
        assert "GlueSiteUniqueID: EXAMPLE-T2" in step.stdout and "GlueCEAccessControlBaseRule: VO:cms" in step.stdout
        assert "<Node" in step.stdout
        flow.run(README, "one-host-service")
        # glueinfo run, as the user glueinfo, keeps the LDIF the BDII provider prints.
        wait_for(sandbox, "grep -q '^dn: GlueCEUniqueID=' /var/lib/glueinfo/glue.ldif", "glueinfo run writes glue.ldif")
        assert "active" in sandbox.run("systemctl is-active glueinfo").stdout
        step = flow.run(README, "bdii")
        assert re.search(r"(?m)^dn: GlueCEUniqueID=[^,]+:2119/jobmanager-fork-default,", step.stdout), step.report()
        flow.run(README, "head-node-config")
        step = flow.run(README, "head-node")
        assert "dn: " in step.stdout
        # The agents and Ganglia named do not exist here: each costs its timeout, the site is published anyway.
        assert sandbox.run("systemctl is-active glueinfo").returncode == 0


def test_readme_fresh_worker_agent_and_spool_cron_line(tmp_path):
    need_sandbox()
    with Sandbox(tmp_path / "worker", REPO) as sandbox:
        assert sandbox.run("test -e /etc/glueinfo").returncode != 0, "the copy is not a fresh machine"
        sandbox.run("install -d /spool")  # the shared spool directory
        flow = Flow(sandbox)
        flow.run(README, "setup")
        flow.run(README, "agent")
        assert "allow = 192.0.2.10/32" in sandbox.read("/etc/glueinfo/agent.conf")
        wait_for(sandbox, "ss -ltn | grep -q ':7170 '", "the agent listens on 7170")
        assert sandbox.run("systemctl is-active glueinfo-agent").returncode == 0
        host = sandbox.run("hostname -f").stdout.strip()
        flow.run(README, "spool-cron")
        assert "<Node" in sandbox.read(f"/spool/{host}.xml")
        assert sandbox.run("ls -A /spool").stdout.split() == [f"{host}.xml"]
        # When glueinfo cannot run, the line leaves neither a half-written nor an empty file behind.
        sandbox.run("chmod a-x /opt/glueinfo/bin/glueinfo")
        before = sandbox.read(f"/spool/{host}.xml")
        step = run_block(sandbox, flow.block(README, "spool-cron"))
        assert "/opt/glueinfo/bin/glueinfo: Permission denied" in step.stderr  # what cron mails
        assert sandbox.run("ls -A /spool").stdout.split() == [f"{host}.xml"]
        assert sandbox.read(f"/spool/{host}.xml") == before


def test_pip_install_then_the_admin_guide_bdii_agent_and_spool(tmp_path):
    need_sandbox()
    with Sandbox(tmp_path / "admin", REPO) as sandbox:
        sandbox.run("install -d /spool")
        flow = Flow(sandbox)
        step = flow.run(INSTALL, "pip-debian")
        assert '"hostname"' in step.stdout
        flow.run(INSTALL, "after-install")
        assert sandbox.run("stat -c %a /etc/glueinfo/glueinfo.conf").stdout.strip() == "644"
        flow.run(ADMIN, "run")
        assert "dn: GlueCEUniqueID=" in sandbox.read("/var/lib/glueinfo/glue.ldif")
        flow.run(ADMIN, "openldap-shim")
        flow.run(ADMIN, "bdii-size")
        # The wrapper sized BDII's databases: at least 1 GiB, this LDIF being small.
        info = sandbox.read("/etc/bdii/bdii-slapd.conf.maxsize.info").split("\n")
        assert "o=grid /var/lib/bdii/db/grid 1073741824" in info, info
        step = flow.run(ADMIN, "bdii")
        assert "dn: GlueCEUniqueID=" in step.stdout, step.report()
        # BDII's user runs the provider: it reads the config through glueinfo's interpreter, says nothing.
        step = flow.run(ADMIN, "provider-as-bdii")
        assert step.stdout.startswith("dn: "), step.report()
        assert "glueinfo-provider:" not in step.stderr, step.report()
        step = flow.run(ADMIN, "bdii-count")
        counts = re.findall(r"(?m)^(\S+): (\d+) published, (\d+) served$", step.stdout)
        assert [base for base, _, _ in counts] == ["mds-vo-name=resource,o=grid", "GLUE2GroupID=resource,o=glue"]
        ldif = sandbox.read("/var/lib/glueinfo/glue.ldif").replace("\n ", "")  # unfolded
        for base, published, served in counts:
            below = len(re.findall(rf"(?mi)^dn: .*,{re.escape(base)}$", ldif))
            assert int(published) == int(served) == below, step.report()
        assert int(counts[0][1]) > 0, step.report()
        flow.run(ADMIN, "agent")
        wait_for(sandbox, "ss -ltn | grep -q ':7170 '", "the agent listens on 7170")
        host = sandbox.run("hostname -f").stdout.strip()
        flow.run(ADMIN, "spool-cron")
        assert "<Node" in sandbox.read(f"/spool/{host}.xml")

        # Where BDII's user cannot run glueinfo's interpreter (a virtualenv under /root), the provider
        # publishes nothing and says why, in the line BDII logs, instead of serving a default file.
        sandbox.run("python3 -m venv --without-pip /root/venv")
        done = sandbox.run("runuser -u openldap -- env GLUEINFO_PYTHON=/root/venv/bin/python "
                           "/var/lib/bdii/gip/provider/glueinfo-provider")
        assert done.returncode == 1 and done.stdout == ""
        assert "cannot run GLUEINFO_PYTHON=/root/venv/bin/python as user openldap" in done.stderr
        assert "Permission denied" in done.stderr and done.stderr.count("\n") == 1
        # And where it cannot read the config (mode 0640 group glueinfo, as install.md once said).
        sandbox.run("chgrp glueinfo /etc/glueinfo/glueinfo.conf && chmod 640 /etc/glueinfo/glueinfo.conf")
        done = sandbox.run("runuser -u openldap -- /var/lib/bdii/gip/provider/glueinfo-provider")
        assert done.returncode == 1 and done.stdout == ""
        assert "cannot read /etc/glueinfo/glueinfo.conf as user openldap: Permission denied" in done.stderr
