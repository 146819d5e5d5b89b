"""SSS Job XML: the jobs of recorded Slurm queues rendered, validated against
the shipped XSD, and queried through the SSSRMAP engine as <Object>Job</Object>."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lxml import etree
from paths import REPO
from slurm_records import jobs_by_id, slurm_state

from glueinfo.core.job import JobInfo
from glueinfo.sss.job_xml import render_jobs
from glueinfo.sss.object_sets import job_object_set

XSD_PATH = REPO / "glueinfo" / "sss" / "xsd" / "sss-job.xsd"


@pytest.fixture(scope="module")
def schema():
    return etree.XMLSchema(etree.parse(str(XSD_PATH)))


def parsed(xml: bytes):
    return etree.fromstring(xml)


def job_by_id(root, job_id):
    found = [job for job in root.iter("Job") if job.findtext("Id") == job_id]
    assert len(found) == 1, job_id
    return found[0]


@pytest.mark.parametrize("version, queue", [("22.05", "short"), ("22.05", "long"), ("20.11", "batch"),
                                            ("23.02", "gpu"), ("23.11", "main")])
def test_every_recorded_queue_renders_valid_job_xml(schema, version, queue):
    state = slurm_state(version, queue)
    xml = render_jobs(state.jobs)
    root = parsed(xml)
    assert schema.validate(root), schema.error_log
    assert [job.findtext("Id") for job in root] == [job.local_id for job in state.jobs]


def test_job_xml_content_2205(schema):
    root = parsed(render_jobs([(job, "vm-cluster") for job in slurm_state("22.05", "short").jobs]))
    running = job_by_id(root, "3")
    assert running.findtext("Name") == "second" and running.findtext("User") == "root"
    assert running.findtext("Machine") == "vm-cluster" and running.findtext("Queue") == "short"
    assert running.findtext("State") == "Running"
    # 2026-11-22T14:32:49Z and 14:32:50Z as seconds since the epoch
    assert running.findtext("SubmitTime") == "1795357969" and running.findtext("StartTime") == "1795357970"
    assert running.find("EndTime") is None  # still running: its limit end is not an end time
    assert running.findtext("Requested/Duration") == "1200" and running.findtext("Requested/Processors") == "1"
    assert running.findtext("Delivered/Node") == "vm" and running.findtext("Delivered/Duration") == "3"
    assert running.find("Project") is None  # Slurm said (null)
    assert running.find("Extension[@name='LrmsState']").text == "RUNNING"

    waiting = job_by_id(root, "7")
    assert waiting.findtext("State") == "Idle" and waiting.find("StartTime") is None
    assert waiting.find("Requested/Memory").attrib == {"units": "MB"} and waiting.findtext("Requested/Memory") == "100"
    assert waiting.findtext("StatusMessage") == "Priority"
    assert waiting.find("Extension[@name='ExpectedStartTime']").text == "1795358460"  # 14:41:00Z
    assert waiting.find("Delivered") is None

    assert job_by_id(root, "5").findtext("State") == "Hold"
    assert job_by_id(root, "2").findtext("State") == "Suspended"
    finished = job_by_id(root, "1")
    assert finished.findtext("State") == "Completed" and finished.findtext("EndTime") == "1795357969"
    assert job_by_id(root, "8").findtext("Name") == 'odd|name "q" <&>'
    assert job_by_id(root, "9").findtext("Name") == "evil\n999|RUNNING|None|root"


def test_multi_node_job_lists_its_nodes_once(schema):
    root = parsed(render_jobs(slurm_state("20.11", "batch").jobs))
    node = job_by_id(root, "102").find("Delivered/Node")
    assert node.get("aggregation") == "List" and node.text == "n01.example.org,n02.example.org"
    assert job_by_id(root, "102").findtext("Delivered/NodeCount") == "2"
    assert job_by_id(root, "102").findtext("Project") == "chem"


def test_characters_xml_cannot_hold_are_replaced(schema):
    job = JobInfo(local_id="42", name="bell\x07 and nul\x00 and esc\x1b[31m", local_owner="eve", sss_state="Idle")
    root = parsed(render_jobs([job]))
    assert schema.validate(root), schema.error_log
    assert root.findtext("Job/Name") == "bell\ufffd and nul\ufffd and esc\ufffd[31m"


def test_unknown_values_are_left_out(schema):
    root = parsed(render_jobs([JobInfo(local_id="7", requested_processors=None, sss_state="Strange")]))
    assert schema.validate(root), schema.error_log
    assert [child.tag for child in root.find("Job")] == ["Id"]


def test_a_job_without_an_id_is_refused():
    with pytest.raises(ValueError, match="without an id"):
        render_jobs([JobInfo(local_id=" ")])


# -- SSSRMAP -----------------------------------------------------------------------------

def ask(jobs, request: str) -> etree._Element:
    from glueinfo.sss.sssrmap import QueryService

    service = QueryService()
    objects = job_object_set(jobs)
    service.register("Job", lambda: objects)
    (response,) = service.handle(request.encode())
    root = etree.fromstring(response)
    status = root.find(".//Status/Value")
    assert status is not None and status.text == "Success", etree.tostring(root)
    return root.find(".//Data")


def test_sssrmap_where_state_get_id():
    jobs = slurm_state("22.05", "short").jobs
    data = ask(jobs, """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Id"/><Get name="User"/>
                        <Where name="State">Running</Where></Request>""")
    assert sorted(job.findtext("Id") for job in data) == ["3", "4"]


def test_sssrmap_numbers_and_units():
    jobs = slurm_state("20.11", "batch").jobs
    # Memory is published in MB; the query asks in GB: 103 (16000 MB) and 102 (16384 MB) exceed 10 GB.
    data = ask(jobs, """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Id" op="Sort"/>
                        <Where name="Requested/Memory" op="GT" units="GB">10</Where></Request>""")
    assert [job.findtext("Id") for job in data] == ["102", "103"]
    data = ask(jobs, """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Requested/Processors" op="Sum"/>
                        <Where name="State">Idle</Where></Request>""")
    # 103: 8 + 104_1: 2 + 104_2: 2 + 105: 1
    assert data.findtext(".//Processors") == "13"


def test_sssrmap_delivered_node_match():
    jobs = slurm_state("20.11", "batch").jobs
    data = ask(jobs, """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Id" op="Sort"/>
                        <Where name="Delivered/Node" op="Match">(^|,)n02\\.example\\.org(,|$)</Where>
                        <Where name="State">Running</Where></Request>""")
    assert [job.findtext("Id") for job in data] == ["102"]


# -- the command ---------------------------------------------------------------------------

def test_jobs_xml_with_only_the_default_fork_ce_prints_an_empty_data(tmp_path, schema):
    config = tmp_path / "glueinfo.conf"
    config.write_text("")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "jobs-xml", "--config", str(config)],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    root = parsed(proc.stdout)
    assert root.tag == "Data" and len(root) == 0 and schema.validate(root)


def test_jobs_xml_unknown_ce_is_a_usage_error(tmp_path):
    config = tmp_path / "glueinfo.conf"
    config.write_text("[ce:short]\nlrms = slurm\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "jobs-xml", "--config", str(config), "--ce", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "glueinfo: --ce nope: no such CE (known: short)"


def test_jobs_xml_with_a_broken_slurm_exits_1_with_one_line(tmp_path):
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[ce:short]\nlrms = slurm\nslurm_bin_dir = {tmp_path}/none\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "jobs-xml", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stdout.strip().endswith("<Data/>")
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "command not found" in lines[0]


def test_jobs_are_the_same_as_jobs_by_id():
    state = slurm_state("23.02", "gpu")
    assert set(jobs_by_id(state)) == {"201", "202", "203", "204"}
