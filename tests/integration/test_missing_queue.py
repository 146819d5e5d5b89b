"""A CE whose queue the batch system does not have, through the commands an admin and a broker use
(issue 25, item 4): ``queue = lng`` for Slurm's ``long``.

The batch system is Slurm 22.05 as recorded in tests/fixtures/slurm/22.05 (partitions short and
long), its tools replayed by a fake ``sinfo``/``squeue``/``scontrol`` that answers as the real ones
do (tests/harness/slurm_records.py; the live test, test_slurm_live, holds the real Slurm to the same
rule).  Checked: ``glueinfo ldif`` and ``publish`` exit 1 after one ERROR line naming ``[ce:lng]
queue`` and the partition meant, while publishing the whole site (the good CE with its figures, the
mistyped one Closed without any count); ``glueinfo check`` is CRITICAL and the status page shows it;
an ``lrms`` no plugin has is a config error (exit 2) listing the plugins, and ``lrms = torque`` is a
whole CE read by the pbs plugin's Torque dialect.
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from glueinfo_processes import run_glueinfo, start_glueinfo, stop_glueinfo
from paths import FIXTURES, REPO

pytestmark = pytest.mark.integration

ERROR = ("ERROR: [ce:lng] queue 'lng': slurm has no such partition; did you mean 'long'? "
         "(its partitions: long, short)")
COUNTS = re.compile(r"^(?:GlueCE(?:State|Info)\w*(?:Jobs|CPUs|Slots)|GLUE2Computing\w*(?:Jobs|Slots))\b.*$", re.M)


def slurm_tools(tmp: Path) -> Path:
    """sinfo, squeue, scontrol and sacctmgr answering from the 22.05 recording."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    script = bin_dir / "recorded-slurm"
    script.write_text(f"""#!{sys.executable}
import os, sys
sys.path.insert(0, {str(REPO / 'tests' / 'harness')!r})
from slurm_records import replay
code, out, err = replay("22.05")([os.path.basename(sys.argv[0]), *sys.argv[1:]], 10.0, dict(os.environ))
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(code)
""")
    script.chmod(0o755)
    for tool in ("sinfo", "squeue", "scontrol", "sacctmgr"):
        (bin_dir / tool).symlink_to(script.name)
    return bin_dir


def site_config(tmp: Path, extra: str = "", queues: tuple[str, ...] = ("long", "lng")) -> Path:
    """A site with one CE per queue (the section named as its queue) on the recorded Slurm."""
    bin_dir = slurm_tools(tmp)
    config = tmp / "glueinfo.conf"
    ces = "".join(f"[ce:{queue}]\nlrms = slurm\nslurm_bin_dir = {bin_dir}\nslurm_json = no\naccess = VO:dteam\n"
                  for queue in queues)
    config.write_text(f"[site]\nid = TEST-SITE\n[cluster:main]\n{ces}[run]\nstate_dir = {tmp / 'state'}\n{extra}")
    return config


def entries(ldif: str) -> list[str]:
    return [block for block in ldif.replace("\n ", "").split("\n\n") if block.strip()]


def ce_block(ldif: str, queue: str) -> str:
    (block,) = [b for b in entries(ldif) if b.startswith("dn: GlueCEUniqueID=") and f"\nGlueCEName: {queue}\n" in b + "\n"]
    return block


def assert_published_whole(ldif: str) -> None:
    """The good CE as the recording says, the mistyped one Closed without a count."""
    long_ce = ce_block(ldif, "long")
    assert "GlueCEStateStatus: Draining" in long_ce  # scontrol_partition_long.txt: State=DRAIN
    assert "GlueCEInfoTotalCPUs: 2" in long_ce  # sinfo_long.txt: vm, 2 CPUs
    lng = ce_block(ldif, "lng")
    assert "GlueCEStateStatus: Closed" in lng and COUNTS.findall(lng) == []
    for view in (b for b in entries(ldif) if b.startswith("dn: GlueVOViewLocalID=") and "-lng," in b):
        assert "GlueCEStateStatus: Closed" in view and COUNTS.findall(view) == []
    share = next(b for b in entries(ldif) if "\nGLUE2ComputingShareMappingQueue: lng" in b)
    assert "GLUE2ComputingShareServingState: closed" in share and COUNTS.findall(share) == []


def test_ldif_exits_1_after_one_error_and_still_prints_the_whole_site(tmp_path):
    proc = run_glueinfo("ldif", "--config", str(site_config(tmp_path)))
    assert proc.returncode == 1, proc.stderr
    assert [line for line in proc.stderr.splitlines() if "ERROR" in line] == [f"glueinfo: {ERROR}"]
    assert "queue lng" not in proc.stderr.replace(ERROR, "")  # no WARNING repeating it
    assert_published_whole(proc.stdout)
    # Without the mistyped CE, the same site exits 0.
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    assert run_glueinfo("ldif", "--config", str(site_config(fixed, queues=("long", "short")))).returncode == 0


def test_publish_exits_1_and_the_server_holds_the_whole_site(tmp_path, slapd):
    password = tmp_path / "password"
    password.write_text(slapd.password + "\n")
    proc = run_glueinfo("publish", "--config", str(site_config(tmp_path)), "--ldap", slapd.url, "--bind-dn", slapd.bind_dn,
                        "--password-file", str(password), "--no-state")
    assert proc.returncode == 1, proc.stderr
    assert [line for line in proc.stderr.splitlines() if "ERROR" in line] == [f"glueinfo: {ERROR}"]
    ces = {e.first("GlueCEName"): e for e in slapd.ldapsearch("mds-vo-name=resource,o=grid", "(objectClass=GlueCE)")}
    assert set(ces) == {"long", "lng"}
    assert ces["lng"].first("GlueCEStateStatus") == "Closed" and not ces["lng"].get("GlueCEInfoTotalCPUs")
    assert not ces["lng"].get("GlueCEStateRunningJobs") and ces["long"].first("GlueCEInfoTotalCPUs") == "2"


def test_check_is_critical_and_the_status_page_shows_the_queue(tmp_path):
    config = site_config(tmp_path, "[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n")
    served = start_glueinfo(config, tmp_path / "serve.log")
    try:
        check = run_glueinfo("check", "--url", f"http://127.0.0.1:{served.port}/")
        page = urllib.request.urlopen(f"http://127.0.0.1:{served.port}/", timeout=10).read().decode()
    finally:
        stop_glueinfo(served)
    assert check.returncode == 2, check.stdout
    assert check.stdout.startswith("GLUEINFO CRITICAL - 1 CE on a queue the batch system does not have ("), check.stdout
    assert "did you mean 'long'?" in check.stdout
    assert "the batch system has no queue lng" in page
    assert "[ce:lng] queue &#x27;lng&#x27;: slurm has no such partition; did you mean &#x27;long&#x27;?" in page


def test_an_lrms_no_plugin_has_is_a_config_error_naming_them(tmp_path):
    config = tmp_path / "glueinfo.conf"
    config.write_text("[site]\nid = TEST-SITE\n[ce:grid]\nlrms = slrum\nqueue = long\n")
    proc = run_glueinfo("ldif", "--config", str(config))
    assert proc.returncode == 2 and proc.stdout == ""
    assert re.search(r":4: \[ce:grid\] lrms: unknown LRMS 'slrum' \(known: fork, htcondor, lsf, pbs, sge, slurm; "
                     r"also torque \(= pbs\)\)", proc.stderr), proc.stderr


def test_lrms_torque_is_a_whole_ce_read_by_the_pbs_plugins_torque_dialect(tmp_path):
    """Before: only a WARNING, and the CE published with GlueCEInfoLRMSType torque and no state."""
    recorded = FIXTURES / "pbs" / "torque-6.1.3"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qstat").write_text(f"""#!/bin/sh
case "$*" in
  --version) cat {recorded}/qstat_version.txt ;;
  "-Q -f batch") cat {recorded}/qstat_Q_batch.txt ;;
  "-f -x -t batch") cat {recorded}/qstat_jobs_batch.xml ;;
  *) echo "qstat: unexpected $*" >&2; exit 1 ;;
esac
""")
    (bin_dir / "pbsnodes").write_text(f"#!/bin/sh\ncat {recorded}/pbsnodes.xml\n")
    for tool in ("qstat", "pbsnodes"):
        (bin_dir / tool).chmod(0o755)
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[site]\nid = TEST-SITE\n[ce:batch]\nlrms = torque\npbs_bin_dir = {bin_dir}\n"
                      f"[run]\nstate_dir = {tmp_path / 'state'}\n")
    proc = run_glueinfo("ldif", "--glue", "1.3", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    ce = ce_block(proc.stdout, "batch")
    assert "GlueCEInfoLRMSType: torque" in ce and "GlueCEInfoLRMSVersion: 6.1.3" in ce
    assert "GlueCEStateStatus: Production" in ce and "GlueCEStateRunningJobs: " in ce
    assert "jobmanager-torque-batch" in ce  # the CE's id keeps the admin's word
    clash = tmp_path / "clash.conf"
    clash.write_text(config.read_text().replace("lrms = torque\n", "lrms = torque\npbs_flavour = openpbs\n"))
    proc = run_glueinfo("ldif", "--config", str(clash))
    assert proc.returncode == 2
    assert "[ce:batch] lrms: 'torque' is the pbs plugin with pbs_flavour = torque, but pbs_flavour = openpbs is set" in proc.stderr


def test_fake_tools_answer_as_recorded(tmp_path):
    """The fake tools the tests above use: scontrol refuses lng as Slurm does, sinfo prints nothing."""
    bin_dir = slurm_tools(tmp_path)
    env = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard", "PATH": "/usr/bin:/bin"}
    shown = subprocess.run([str(bin_dir / "scontrol"), "show", "partition", "-o", "lng"], capture_output=True, text=True,
                           env=env)
    assert (shown.returncode, shown.stderr) == (1, "Partition lng not found\n")
    listed = subprocess.run([str(bin_dir / "sinfo"), "-h", "-N", "-p", "lng", "-o", "%N|%n|%C|%T"], capture_output=True,
                            text=True, env=env)
    assert (listed.returncode, listed.stdout) == (0, "")
