"""Everything glueinfo writes as SSS Job XML validates against sss-job.xsd: the jobs of every recorded queue of
every LRMS plugin (tests/fixtures/<lrms>), with and without the private fields; and `glueinfo jobs-xml` writes
the private fields only when [jobs] private_fields names them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from lxml import etree
from paths import FIXTURES, REPO
from recorded_commands import recorded_files
from slurm_records import slurm_state

from glueinfo.core.job import PRIVATE_FIELDS
from glueinfo.lrms.registry import LrmsContext, queue_state
from glueinfo.sss.job_xml import render_jobs
from glueinfo.sss.object_sets import job_object_set

XSD_PATH = REPO / "glueinfo" / "sss" / "xsd" / "sss-job.xsd"


@pytest.fixture(scope="module")
def schema():
    return etree.XMLSchema(etree.parse(str(XSD_PATH)))


files = recorded_files


def jobs_of(lrms: str, queue: str, directory: Path, answers: Mapping[str, str], now: float, **config):
    """The jobs a plugin lists from recorded answers; ``config``: the CE's options."""
    state = queue_state(lrms, LrmsContext(queue=queue, ce_config=config, hosts=[], clock=lambda: now, with_jobs=True,
                                          run=files(directory, answers)))
    assert state.error is None, state.error
    assert state.jobs
    return state.jobs


def pbs(flavour: str, queue: str, **config):
    if flavour == "openpbs":
        return jobs_of("pbs", queue, FIXTURES / "pbs" / "openpbs-23.06", {
            "qstat --version": "qstat_version.txt", "qstat -Q": f"qstat_Q_{queue}.json", "pbsnodes": "pbsnodes.json",
            "qstat -f": f"qstat_jobs_{queue}.json"}, 1732003200.0, **config)
    return jobs_of("pbs", queue, FIXTURES / "pbs" / "torque-6.1.3", {
        "qstat --version": "qstat_version.txt", "qstat -Q": f"qstat_Q_{queue}.txt", "pbsnodes": "pbsnodes.xml",
        "qstat -f": f"qstat_jobs_{queue}.xml"}, 1732003200.0, **config)


def sge(qstat: str, queue: str, qhost: str = "qhost.xml", **config):
    directory = FIXTURES / "sge" / "8.1.9"
    return jobs_of("sge", queue, directory, {"qstat -help": "qstat_help.txt", "qstat -xml": qstat, "qhost": qhost,
                                             "qconf": f"qconf_sq_{queue}.txt"}, 1795478400.0, **config)


def htcondor(**config):
    directory = FIXTURES / "htcondor" / "24.0"
    return jobs_of("htcondor", "all", directory, {
        "condor_version": "condor_version.txt", "condor_status -schedd": "condor_status_schedd.json",
        "condor_status": "condor_status_slots.json",
        **{f"condor_q -name {n} ": f"condor_q_{n}.json"
           for n in ("sched1.example.org", "ce01.example.org", "sched3@sub.example.org")}}, 1760000000.0, **config)


def lsf(version: str, queue: str, **config):
    directory = FIXTURES / "lsf" / version
    if version == "9.1.3":
        return jobs_of("lsf", queue, directory, {"lsid": "lsid.txt", "bqueues": f"bqueues_l_{queue}.txt",
                                                 "bhosts": "bhosts_w.txt", "bjobs": f"bjobs_w_{queue}.txt"}, 1732003200.0,
                       **config)
    return jobs_of("lsf", queue, directory, {"lsid": "lsid.txt", "bqueues": f"bqueues_l_{queue}.txt",
                                             "bhosts": "bhosts_gridhosts.json", "bjobs": f"bjobs_{queue}.json"},
                   1732003200.0, **config)


QUEUES = {  # each gets the CE options: {} or the private fields asked for
    "slurm 22.05 short": lambda c: slurm_state("22.05", "short", **c).jobs,
    "slurm 22.05 long": lambda c: slurm_state("22.05", "long", **c).jobs,
    "slurm 20.11 batch": lambda c: slurm_state("20.11", "batch", slurm_json="no", **c).jobs,
    "slurm 23.02 gpu": lambda c: slurm_state("23.02", "gpu", **c).jobs,
    "slurm 23.11 main": lambda c: slurm_state("23.11", "main", **c).jobs,
    "openpbs workq": lambda c: pbs("openpbs", "workq", **c),
    "openpbs express": lambda c: pbs("openpbs", "express", **c),
    "torque batch": lambda c: pbs("torque", "batch", **c),
    "torque express": lambda c: pbs("torque", "express", **c),
    "sge short": lambda c: sge("qstat_full.xml", "short", **c),
    "sge short sss": lambda c: sge("qstat_sss.xml", "short", **c),
    "sge grid": lambda c: sge("qstat_states.xml", "grid", "qhost_states.xml", **c),
    "htcondor all": lambda c: htcondor(**c),
    "lsf 10.1 grid": lambda c: lsf("10.1.0.13", "grid", **c),
    "lsf 10.1 express": lambda c: lsf("10.1.0.13", "express", **c),
    "lsf 9.1 short": lambda c: lsf("9.1.3", "short", **c),
}


@pytest.mark.parametrize("private", [frozenset(), frozenset(PRIVATE_FIELDS)], ids=["public", "private"])
@pytest.mark.parametrize("queue", sorted(QUEUES))
def test_every_recorded_queue_renders_valid_job_xml(schema, queue, private):
    jobs = QUEUES[queue]({"private_fields": tuple(private)} if private else {})
    root = etree.fromstring(render_jobs([(job, "cluster") for job in jobs], private=private))
    assert schema.validate(root), schema.error_log
    assert [job.findtext("Id") for job in root] == [job.local_id for job in jobs]
    # the Job objects SSSRMAP serves are the same elements
    assert [job.findtext("Id") for job in job_object_set(jobs, private).elements] == [job.local_id for job in jobs]


def test_private_fields_appear_only_when_asked():
    jobs = jobs_of("pbs", "express", FIXTURES / "pbs" / "openpbs-23.06", {
        "qstat --version": "qstat_version.txt", "qstat -Q": "qstat_Q_express.json", "pbsnodes": "pbsnodes.json",
        "qstat -f": "qstat_jobs_express.json"}, 1732003200.0, private_fields=PRIVATE_FIELDS)
    public = render_jobs(jobs)  # read, but not written
    assert b"CMS_TOKEN" not in public and b"--timeout" not in public and b"<InitialWorkingDirectory>" not in public
    private = etree.fromstring(render_jobs(jobs, private=PRIVATE_FIELDS))
    stress = next(job for job in private if job.findtext("Id") == "301.pbs-head")
    assert stress.findtext("Arguments") == "--cpu 2 --timeout 1 h"
    assert stress.findtext("InitialWorkingDirectory") == "/home/cms003"
    assert stress.find("Environment/Variable[@name='CMS_TOKEN']").text == "s3cr3t,with a comma"


# -- the command ---------------------------------------------------------------------------

def fake_pbs(directory: Path) -> None:
    data = FIXTURES / "pbs" / "openpbs-23.06"
    (directory / "qstat").write_text(
        "#!/bin/sh\ncase \"$*\" in\n"
        f"  '--version') cat '{data}/qstat_version.txt';;\n"
        f"  '-Q -f -F json express') cat '{data}/qstat_Q_express.json';;\n"
        f"  '-f -t -F json express') cat '{data}/qstat_jobs_express.json';;\n"
        "  *) echo \"qstat: unexpected $*\" >&2; exit 1;;\nesac\n")
    (directory / "pbsnodes").write_text(f"#!/bin/sh\ncat '{data}/pbsnodes.json'\n")
    for tool in ("qstat", "pbsnodes"):
        (directory / tool).chmod(0o755)


@pytest.mark.parametrize("private, written, left_out", [
    ("", [], ["Environment", "Arguments", "InitialWorkingDirectory"]),
    ("private_fields = environment\n", ["Environment"], ["Arguments", "InitialWorkingDirectory"]),
    ("private_fields = arguments working_directory\n", ["Arguments", "InitialWorkingDirectory"], ["Environment"]),
])
def test_jobs_xml_writes_the_private_fields_the_config_names(tmp_path, schema, private, written, left_out):
    fake_pbs(tmp_path)
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[ce:express]\nlrms = pbs\npbs_bin_dir = {tmp_path}\npbs_flavour = openpbs\n\n[jobs]\n{private}")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "jobs-xml", "--config", str(config)],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    root = etree.fromstring(proc.stdout)
    assert schema.validate(root), schema.error_log
    stress = next(job for job in root if job.findtext("Id") == "301.pbs-head")
    assert [tag for tag in written if stress.find(tag) is None] == []
    assert [tag for tag in left_out if stress.find(tag) is not None] == []


def test_a_private_field_name_glueinfo_does_not_know_is_refused_in_one_line(tmp_path):
    config = tmp_path / "glueinfo.conf"
    config.write_text("[jobs]\nprivate_fields = arguments passwords\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "jobs-xml", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"glueinfo: {config}:2: [jobs] private_fields: must be one of arguments, environment, working_directory, "
        "got 'passwords'"]
