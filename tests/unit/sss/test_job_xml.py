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
                                            ("23.02", "gpu"), ("23.11", "main"), ("22.05-gpu", "short")])
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


def test_multi_node_job_has_a_task_group_with_a_task_per_node(schema):
    root = parsed(render_jobs(slurm_state("20.11", "batch").jobs, pretty=False))
    group = job_by_id(root, "102").find("TaskGroup")  # NumTasks 8 on n[01-02]; squeue tells no CPUs per node
    assert [child.tag for child in group] == ["TaskCount", "NodeCount", "Task", "Task"]
    assert (group.findtext("TaskCount"), group.findtext("NodeCount")) == ("8", "2")
    assert [etree.tostring(task) for task in group.iter("Task")] == [
        b"<Task><Node>n01.example.org</Node></Task>", b"<Task><Node>n02.example.org</Node></Task>"]
    assert job_by_id(root, "105").find("TaskGroup") is None  # one task, no node yet
    pending = job_by_id(parsed(render_jobs(slurm_state("23.02", "gpu").jobs, pretty=False)), "203")
    assert etree.tostring(pending.find("TaskGroup")) == b"<TaskGroup><TaskCount>8</TaskCount></TaskGroup>"


def test_tasks_carry_the_processors_of_their_node(schema):
    job = JobInfo(local_id="9", sss_state="Running", nodes=["a", "b"], node_processors=(4, 2), task_count=6)
    group = parsed(render_jobs([job])).find("Job/TaskGroup")
    assert [(t.findtext("Node"), t.findtext("Processors")) for t in group.iter("Task")] == [("a", "4"), ("b", "2")]
    # processors that do not match the nodes one for one are left out, not guessed
    odd = JobInfo(local_id="9", sss_state="Running", nodes=["a", "b"], node_processors=(4,))
    assert [t.findtext("Processors") for t in parsed(render_jobs([odd])).iter("Task")] == [None, None]


def test_a_job_cancelled_while_it_waited_has_no_start_time(schema):
    root = parsed(render_jobs(slurm_state("22.05", "short").jobs))
    cancelled = job_by_id(root, "10")
    assert schema.validate(root), schema.error_log
    assert cancelled.findtext("State") == "Completed" and cancelled.find("StartTime") is None
    assert cancelled.findtext("EndTime") == "1795357971"  # 2026-11-22T14:32:51Z, when Slurm says it ended
    assert cancelled.findtext("StatusMessage") == "Cancelled before it started"
    assert cancelled.find("Delivered") is None and cancelled.find("ExitCode") is None
    done = job_by_id(root, "1")
    assert (done.findtext("ExitCode"), done.findtext("StatusMessage")) == ("0", "Succeeded")
    assert done.findtext("StartTime") == "1795357969"


def test_failed_and_successful_jobs_are_told_apart(schema):
    root = parsed(render_jobs(slurm_state("20.11", "batch").jobs))
    assert schema.validate(root), schema.error_log
    said = {job_id: (job_by_id(root, job_id).findtext("State"), job_by_id(root, job_id).findtext("ExitCode"),
                     job_by_id(root, job_id).findtext("StatusMessage")) for job_id in ("107", "108", "111")}
    assert said == {"107": ("Completed", "0", "Succeeded"),
                    "108": ("Completed", None, "Failed: killed by signal 15"),
                    "111": ("Completed", "1", "Failed: exit code 1 (NonZeroExitCode)")}


def test_what_slurm_tells_is_written_in_the_specs_forms(schema):
    root = parsed(render_jobs([(job, "c1") for job in slurm_state("20.11", "batch").jobs]))
    sim = job_by_id(root, "101")
    assert [child.tag for child in sim][:12] == ["Id", "Name", "Project", "User", "Group", "Executable", "Machine",
                                                 "QualityOfService", "Queue", "State", "Priority", "SubmitHost"]
    assert (sim.findtext("Executable"), sim.findtext("Group"), sim.findtext("QualityOfService")) == (
        "/home/alice/sim/run.sh", "phys", "normal")
    assert (sim.findtext("Priority"), sim.findtext("SubmitHost")) == ("10234", "login1")
    assert sim.find("Arguments") is None and sim.find("InitialWorkingDirectory") is None  # private by default
    post = job_by_id(root, "105")
    assert [(d.get("condition"), d.text) for d in post.iter("Dependency")] == [("OnSuccess", "102")]
    assert [h.text for h in job_by_id(root, "106").iter("Hold")] == ["System"]
    assert job_by_id(root, "103").findtext("Requested/Feature") == "bigmem"


def test_private_fields_only_when_asked(schema):
    job = JobInfo(local_id="5", sss_state="Idle", executable="/bin/app", arguments="--token s3cr3t",
                  working_directory="/home/ann/private", environment="A=1,B=x\\,y,TOKEN=s3cr3t")
    plain = render_jobs([job])
    assert b"s3cr3t" not in plain and b"/home/ann/private" not in plain and b"/bin/app" in plain
    arguments = parsed(render_jobs([job], private={"arguments"})).find("Job")
    assert arguments.findtext("Arguments") == "--token s3cr3t" and arguments.find("Environment") is None
    everything = parsed(render_jobs([job], private={"arguments", "environment", "working_directory"}))
    assert schema.validate(everything), schema.error_log
    variables = [(v.get("name"), v.text) for v in everything.iter("Variable")]
    assert variables == [("A", "1"), ("B", "x,y"), ("TOKEN", "s3cr3t")]
    assert everything.findtext("Job/InitialWorkingDirectory") == "/home/ann/private"


def test_every_field_in_its_form(schema):
    job = JobInfo(local_id="77", name="n", local_owner="ann", account="p", local_group="g", global_owner="/DC=x/CN=ann",
                  queue="q", lrms_state="F", sss_state="Completed", submit_time=100.0, start_time=200.0,
                  end_time=300.0, requested_processors=4, requested_memory_mb=2048, requested_duration_s=3600,
                  requested_nodes=2, delivered_processors=4, delivered_wall_s=100, nodes=["a", "b"],
                  node_processors=(3, 1), executable="/bin/x", completion="failed", exit_code=2, cpu_duration_s=350,
                  cpu_time_limit_s=7200, delivered_memory_mb=1500, qos="high", priority=-3, holds=(),
                  submit_host="ui", features="ib", dependencies=(("OnExit", "76"), ("Never", "75")), task_count=4)
    root = parsed(render_jobs([(job, "cluster")], pretty=False))
    assert schema.validate(root), schema.error_log
    found = root.find("Job")
    assert [(c.tag, c.text, dict(c.attrib)) for c in found if c.tag not in ("Requested", "Delivered", "TaskGroup")] == [
        ("Id", "77", {}), ("Name", "n", {}), ("Project", "p", {}), ("User", "ann", {}), ("Group", "g", {}),
        ("GlobalUser", "/DC=x/CN=ann", {}), ("Executable", "/bin/x", {}), ("Machine", "cluster", {}),
        ("QualityOfService", "high", {}), ("Queue", "q", {}), ("State", "Completed", {}), ("Priority", "-3", {}),
        ("SubmitHost", "ui", {}), ("SubmitTime", "100", {}), ("StartTime", "200", {}), ("EndTime", "300", {}),
        ("ExitCode", "2", {}), ("CpuDuration", "350", {}), ("StatusMessage", "Failed: exit code 2", {}),
        ("Dependency", "76", {"condition": "OnExit"}), ("ResourceLimit", "7200", {"name": "CPUTime"}),
        ("Extension", "F", {"name": "LrmsState", "type": "Scheduler"})]
    assert etree.tostring(found.find("Requested")) == (
        b'<Requested><Processors>4</Processors><Memory units="MB">2048</Memory><Duration>3600</Duration>'
        b'<NodeCount>2</NodeCount><Feature>ib</Feature></Requested>')
    assert etree.tostring(found.find("Delivered")) == (
        b'<Delivered><Processors>4</Processors><Memory units="MB">1500</Memory><Duration>100</Duration>'
        b'<NodeCount>2</NodeCount><Node aggregation="List">a,b</Node></Delivered>')


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


def test_sssrmap_new_fields_are_queryable():
    jobs = slurm_state("20.11", "batch").jobs
    data = ask(jobs, """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Id" op="Sort"/>
                        <Where name="ExitCode" op="GT">0</Where></Request>""")
    assert [job.findtext("Id") for job in data] == ["111"]
    data = ask(jobs, """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Id" op="Sort"/>
                        <Get name="Group"/><Where name="QualityOfService">normal</Where>
                        <Where name="TaskGroup/TaskCount" op="GE">4</Where></Request>""")
    assert [(job.findtext("Id"), job.findtext("Group")) for job in data] == [("101", "phys"), ("102", "chem")]
    data = ask(jobs, """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Id"/>
                        <Where name="Dependency[@condition='OnSuccess']">102</Where></Request>""")
    assert [job.findtext("Id") for job in data] == ["105"]


def test_requested_gpus_are_a_gpu_resource_of_the_request(schema):
    """Issue 27: the recorded GPU queue (fixtures/slurm/22.05-gpu/scontrol_jobs.txt): job 1 --gres=gpu:1,
    2 --gpus=2, 3 --gpus-per-task=1 with two tasks, 4 no GPU."""
    root = parsed(render_jobs(slurm_state("22.05-gpu", "short").jobs))
    assert schema.validate(root), schema.error_log
    requested = {job.findtext("Id"): [(r.get("name"), r.get("type"), r.text) for r in job.iterfind("Requested/Resource")]
                 for job in root}
    assert requested == {"1": [("GPU", None, "1")], "2": [("GPU", None, "2")], "3": [("GPU", None, "2")], "4": []}


def test_sssrmap_selects_jobs_by_the_gpus_they_requested():
    jobs = slurm_state("22.05-gpu", "short").jobs
    data = ask(jobs, """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Id" op="Sort"/>
                        <Where name="Requested/Resource[@name='GPU']" op="GE">2</Where></Request>""")
    assert [job.findtext("Id") for job in data] == ["2", "3"]


def test_sssrmap_private_fields_are_not_in_the_objects_unless_asked():
    job = JobInfo(local_id="5", sss_state="Idle", arguments="--token s3cr3t")
    request = """<Request action="Query" actor="tester"><Object>Job</Object><Get name="Id"/>
                 <Where name="Arguments" op="Match">s3cr3t</Where></Request>"""
    assert len(ask([job], request)) == 0
    from glueinfo.sss.sssrmap import QueryService

    service = QueryService()
    objects = job_object_set([job], private={"arguments"})
    service.register("Job", lambda: objects)
    (response,) = service.handle(request.encode())
    assert b"<Id>5</Id>" in response


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
