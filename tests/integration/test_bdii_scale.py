"""A site of 10,000 hosts through Debian's real BDII, set up as the README says.

Debian 12's bdii 6.0.0 gives each of its slapd's mdb databases slapd's default map of 10 MiB,
which holds about 1,000 hosts: past that, every update cycle loses most adds and
modifications while bdii-update reports FailedAdds 0.  The README's BDII quick start
installs etc/bdii/bdii-slapd-maxsize and names it in a systemd drop-in for bdii-slapd.service
(the packages do the same), so BDII's slapd starts with databases sized for the site.

Each site here is made of the recorded machines of tests/fixtures/hosts (their snapshots as
`glueinfo probe --host-root` reads them), cloned under new names.  The machines are sandboxes
(tests/harness/sandbox.py): a copy of this Debian 12 machine where the documented blocks run
as written (tests/harness/doc_blocks.py), BDII started as systemd starts it (its units, drop-ins
and /etc/default/bdii, through tests/harness/systemd_standin.py) or by /etc/init.d/bdii.  To
keep CI short, BDII breathes 5 s instead of 120 and logs at INFO (to see its cycles): what is
tested is what one cycle serves, whatever the breathe time.  Served entries are read with
ldapsearch and compared with the LDIF the provider printed.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import time

import pytest
from doc_blocks import Block, all_blocks, run_block
from glue_sites import synthetic_site
from paths import HOSTS, REPO
from sandbox import Sandbox, missing_sandbox_tools
from servers import Bdii, missing_bdii_tools
from waiting import wait_until

from glueinfo.core.ldif import normalise_dn, parse_ldif

pytestmark = pytest.mark.integration

BASE = "mds-vo-name=resource,o=grid"
README, ADMIN = "README.md", "docs/admin-guide.md"
GIB = 1 << 30


def need_tools() -> None:
    missing = missing_sandbox_tools() + missing_bdii_tools()
    if missing:
        pytest.skip("a sandbox with Debian's BDII needs " + ", ".join(missing))


def recorded_site(total: int, collected_at: float) -> list[dict]:
    """``total`` hosts cloned from the recorded machines, round robin, named wnNNNNN.example.org."""
    machines = []
    for tree in sorted(HOSTS.iterdir()):
        done = subprocess.run([sys.executable, "-m", "glueinfo.cli", "probe", "--host-root", str(tree)],
                              capture_output=True, text=True, cwd=REPO, timeout=60)
        assert done.returncode == 0, done.stderr
        machine = json.loads(done.stdout)
        machine.pop("host_root", None)
        machines.append(machine)
    hosts = []
    for index in range(total):
        host = copy.deepcopy(machines[index % len(machines)])
        host["hostname"] = f"wn{index:05d}.example.org"
        host["collected_at"] = collected_at
        hosts.append(host)
    return hosts


def unfolded_dns(ldif: str, base: str = BASE) -> set[str]:
    """The DNs below ``base`` in an LDIF text, read with a regular expression (not glueinfo's reader)."""
    text = ldif.replace("\n ", "")
    return {dn.lower() for dn in re.findall(r"(?m)^dn: (.*)$", text) if dn.lower().endswith("," + base.lower())}


def values_of(ldif: str, attribute: str) -> dict[str, str]:
    """DN -> the value of ``attribute``, for each entry of an LDIF text that has it."""
    found = {}
    for record in ldif.replace("\n ", "").split("\n\n"):
        dn = re.search(r"(?m)^dn: (.*)$", record)
        value = re.search(rf"(?m)^{attribute}: (.*)$", record)
        if dn and value:
            found[dn.group(1).lower()] = value.group(1)
    return found


class Machine:
    """A sandbox running the documented blocks, and watching its BDII."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.blocks = all_blocks()
        self.env: dict[str, str] = {}

    def block(self, doc: str, name: str) -> Block:
        return self.blocks[(doc, name)]

    def run_block(self, doc: str, name: str, network: str = "sandbox") -> str:
        step = run_block(self.sandbox, self.block(doc, name), network=network, env=self.env)
        assert step.returncode == 0, step.report()
        return step.stdout

    def sh(self, script: str, timeout: float = 300) -> str:
        done = self.sandbox.run(script, timeout=timeout)
        assert done.returncode == 0, f"{script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    def tune_bdii(self) -> None:
        # What a site may set in /etc/bdii/bdii.conf; the cycles are what the test watches.
        self.sh("sed -i -e 's/^BDII_BREATHE_TIME=.*/BDII_BREATHE_TIME=5/' -e 's/^BDII_LOG_LEVEL=.*/BDII_LOG_LEVEL=INFO/' "
                "/etc/bdii/bdii.conf")

    def cycles(self) -> tuple[int, int]:
        """BDII's update cycles started and finished so far (its log, at INFO)."""
        log = self.sandbox.run("cat /var/log/bdii/bdii-update.log").stdout
        return (len(re.findall(r"(?m)\] Starting Update$", log)), len(re.findall(r"(?m)\] Sleeping for \d+ seconds$", log)))

    def wait_for_a_cycle_after(self, started: int, timeout: float = 180) -> None:
        """Wait until a cycle that started after the first ``started`` ones has finished."""
        wait_until(lambda: self.cycles()[1] >= started + 1, "a BDII cycle finished", timeout, step=0.5,
                   detail=lambda: self.sandbox.run("tail -20 /var/log/bdii/bdii-update.log").stdout)

    def served(self, base: str = BASE, attrs: str = "1.1") -> str:
        return self.sh(f"command ldapsearch -x -LLL -o ldif-wrap=no -H ldap://localhost:2170 -b {base} '(objectClass=*)' "
                       f"{attrs}")

    def stats(self) -> dict[str, str]:
        text = self.sh("command ldapsearch -x -LLL -H ldap://localhost:2170 -b o=infosys '(objectClass=UpdateStats)'")
        return dict(re.findall(r"(?m)^(\w+): (.*)$", text))


def test_a_10000_host_site_through_bdii_set_up_as_the_readme_says_is_served_whole_and_kept_current(tmp_path):
    need_tools()
    hosts = recorded_site(10_000, time.time())
    with Sandbox(tmp_path / "ce", REPO) as sandbox:
        machine = Machine(sandbox)
        machine.sh("install -d /srv/site")
        sandbox.write("/srv/site/hosts.json", json.dumps(hosts))
        machine.tune_bdii()
        machine.run_block(README, "setup", network="host")
        machine.env["PATH"] = "/opt/glueinfo/bin:" + sandbox.environment()["PATH"]
        machine.run_block(README, "config-dir")
        machine.run_block(README, "one-host-config")
        # The site's workers, as snapshot files, refreshed every 10 s.
        machine.sh("printf '[node]\\nsite_snapshots = /srv/site/hosts.json\\n[run]\\nfast_interval = 10\\n' "
                   ">> /etc/glueinfo/glueinfo.conf")
        machine.run_block(README, "one-host-service")
        wait_until(lambda: machine.sandbox.run("grep -q wn09999.example.org /var/lib/glueinfo/glue.ldif").returncode == 0,
                   "the site in glueinfo's LDIF", 120, step=1, detail=lambda: machine.sh("journalctl -u glueinfo | tail -20"))
        machine.run_block(README, "bdii")
        machine.wait_for_a_cycle_after(0)  # BDII started after the site was written: its first cycle has it all

        published = sandbox.read("/var/lib/glueinfo/glue.ldif")
        wanted = unfolded_dns(published)
        assert len(wanted) > 40_000  # four entries or more per host: four times what 10 MiB holds
        served = unfolded_dns(machine.served())
        assert served == wanted, f"{len(wanted - served)} of {len(wanted)} entries missing, {len(served - wanted)} extra"
        assert machine.stats()["FailedAdds"] == "0"
        # The size the wrapper chose, from the LDIF (1 GiB: eight times ~45 MB is less) and said where monitoring reads it.
        info = sandbox.read("/etc/bdii/bdii-slapd.conf.maxsize.info").split("\n")
        assert f"o=grid /var/lib/bdii/db/grid {GIB}" in info and f"o=glue /var/lib/bdii/db/glue {GIB}" in info
        assert "bdii-slapd-maxsize: slapd's mdb databases get maxsize 1073741824 (1 GiB, at least eight times the" in \
            machine.sh("journalctl -u bdii-slapd")
        # The admin guide's count check agrees.
        counts = re.findall(r"(?m)^(\S+): (\d+) published, (\d+) served$", machine.run_block(ADMIN, "bdii-count"))
        assert counts and all(published_count == served_count for _, published_count, served_count in counts), counts
        assert int(counts[0][1]) == len(wanted)

        # One host in a hundred changes its load: glueinfo run republishes it, and one BDII cycle serves it.
        before = values_of(published, "GlueHostProcessorLoadLast1Min")
        for host in hosts[::100]:
            host["load"].update(load1=host["load"]["load1"] + 7.25, load5=host["load"]["load5"] + 3.5)
            host["collected_at"] = time.time()
        sandbox.write("/srv/site/hosts.json.new", json.dumps(hosts))
        machine.sh("mv /srv/site/hosts.json.new /srv/site/hosts.json")
        changed_host = "glueHostUniqueID=wn09900.example.org,".lower()
        def republished_changes() -> dict[str, str]:
            after = values_of(sandbox.read("/var/lib/glueinfo/glue.ldif"), "GlueHostProcessorLoadLast1Min")
            changed = {dn: value for dn, value in after.items() if before.get(dn) != value and dn.startswith("gluehostuniqueid=wn")}
            return changed if any(dn.startswith(changed_host) for dn in changed) else {}

        changed = wait_until(republished_changes, "glueinfo run republished the changed snapshots", 120, step=1)
        started = machine.cycles()[0]  # BDII's cycles started before the change reached the LDIF
        assert len(changed) >= 90, len(changed)
        machine.wait_for_a_cycle_after(started)
        now_served = values_of(machine.served(attrs="GlueHostProcessorLoadLast1Min"), "GlueHostProcessorLoadLast1Min")
        stale = {dn: (now_served.get(dn), value) for dn, value in changed.items() if now_served.get(dn) != value}
        assert not stale, f"{len(stale)} of {len(changed)} changes not served after one cycle, e.g. {list(stale.items())[:3]}"
        assert unfolded_dns(machine.served()) == wanted
        assert machine.stats()["FailedAdds"] == "0" and machine.stats()["FailedModifies"] == "0"


def test_started_by_the_init_script_bdii_takes_the_size_set_in_etc_default_bdii(tmp_path):
    # /etc/init.d/bdii reads /etc/default/bdii without exporting it: the wrapper reads BDII_MDB_MAXSIZE there itself.
    need_tools()
    hosts = recorded_site(3_000, time.time())
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps(hosts))
    done = subprocess.run([sys.executable, "-m", "glueinfo.cli", "ldif", "--config", "/dev/null", "--snapshots",
                           str(snapshots)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    wanted = unfolded_dns(done.stdout)
    assert len(wanted) > 12_000 and len(done.stdout) > 10_485_760  # past slapd's default 10 MiB, LDIF alone
    with Sandbox(tmp_path / "init", REPO) as sandbox:
        machine = Machine(sandbox)
        machine.tune_bdii()
        # glueinfo on another host writes the LDIF here; no glueinfo config: the provider serves the default file.
        machine.sh("install -d /var/lib/glueinfo")
        sandbox.write("/var/lib/glueinfo/glue.ldif", done.stdout)
        machine.sh(f"cd {REPO} && install -m 755 providers/glueinfo-provider /var/lib/bdii/gip/provider/glueinfo-provider")
        machine.run_block(ADMIN, "openldap-shim")
        machine.sh("echo BDII_MDB_MAXSIZE=67108864 >> /etc/default/bdii")  # 64 MiB, this site's choice
        machine.run_block(ADMIN, "bdii-size-init")
        machine.wait_for_a_cycle_after(0)
        served = unfolded_dns(machine.served())
        assert served == wanted, f"{len(wanted - served)} of {len(wanted)} entries missing"
        info = sandbox.read("/etc/bdii/bdii-slapd.conf.maxsize.info").split("\n")
        assert "o=grid /var/lib/bdii/db/grid 67108864" in info, info
        assert "maxsize 67108864" in sandbox.read("/etc/bdii/bdii-slapd.conf.maxsize")


def test_without_the_wrapper_slapds_default_map_loses_a_3000_host_site(tmp_path):
    # What the two tests above would see without the wrapper: the control that they show the fix.
    missing = missing_bdii_tools()
    if missing:
        pytest.skip("real BDII needed, missing: " + ", ".join(missing))
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in synthetic_site(3000)]))
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[cluster:main]\nunique_id = cluster.example.org\n[ce:long]\nhost = ce01.example.org\nlrms = fork\n"
                    "access = VO:atlas\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "ldif", "--config", str(conf), "--snapshots", str(snapshots)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    fed = {normalise_dn(e.dn) for e in parse_ldif(proc.stdout)}
    assert len(fed) > 12_000
    plain = Bdii(tmp_path / "plain")
    try:
        plain.start()
        plain.add_static_ldif("site", proc.stdout)
        plain.wait_for_update(120)
        served = {normalise_dn(e.dn) for e in plain.ldapsearch(BASE, "(objectClass=*)", ["1.1"])} - {normalise_dn(BASE)}
        lost = fed - served
        assert lost and len(lost) > len(fed) // 4, "the default map held the whole site: this test no longer shows the fix"
        assert plain.stats().get("FailedAdds") == "0"  # and BDII does not say so
        assert "txn_commit failed" in plain.log_text() + plain.slapd_log.read_text(errors="replace")
    finally:
        plain.stop()
