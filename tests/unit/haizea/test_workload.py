"""The CEs' batch jobs as a Haizea lease workload (issue 14): every figure of every lease request
checked against the recorded squeue output itself, read here with a few lines of plain Python
(tests/fixtures/slurm), never through the code under test; the document valid against the XSD."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime

from lxml import etree
from paths import FIXTURES, REPO
from slurm_records import SLURM_FIXTURES, now_of, slurm_state

from glueinfo.core.config import parse_text
from glueinfo.core.job import JobInfo
from glueinfo.core.model import HostSnapshot
from glueinfo.haizea.site import site_nodes
from glueinfo.haizea.workload import format_duration, workload_document
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.node_settings import node_settings

SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "glueinfo" / "haizea" / "xsd" / "haizea.xsd")))
SITE_NOW = 1_700_000_100.0
FINISHED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
            "DEADLINE"}


def small_site():
    hosts = json.loads((FIXTURES / "nodes" / "site50.json").read_text(encoding="utf-8"))[:4]
    config = parse_text("[cluster:batch]\n")
    site = assemble_snapshots(config, [HostSnapshot.from_dict(h) for h in hosts], lambda: SITE_NOW,
                              local_fqdn="ce01.example.org", states={})
    return site_nodes(site, SITE_NOW, node_settings(config))


# -- the recorded squeue output, read by hand -------------------------------------------------------

def seconds(text: str) -> int | None:
    if text == "UNLIMITED":
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def megabytes(tres: str) -> int | None:
    match = re.search(r"(?:^|,)mem=(\d+)([MG])", tres)
    if not match:
        return None
    return int(match.group(1)) * (1024 if match.group(2) == "G" else 1)


def recorded_jobs(version: str, partition: str) -> list[dict]:
    text = (SLURM_FIXTURES / version / f"squeue_{partition}.txt").read_text()
    jobs = []
    for record in text.split("|~.\n")[:-1]:
        f = record.split("|~|")
        jobs.append({"id": f[0], "state": f[1], "submit": datetime.fromisoformat(f[6]).replace(tzinfo=UTC).timestamp(),
                     "limit": seconds(f[9]), "used": seconds(f[10]), "cpus": int(f[11]), "mem": megabytes(f[12]),
                     "nodes": int(f[13]), "nodelist": f[14]})
    return jobs


def dhms(total: int) -> str:
    return f"{total // 86400:02d}:{total % 86400 // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


def expected_requests(jobs: list[dict]) -> list[dict]:
    """Each usable job's request, in order of submission then job number."""
    usable = [j for j in jobs if j["limit"] and not (j["state"] in FINISHED and not j["nodelist"] and not j["used"])]
    first = min(j["submit"] for j in usable)
    usable.sort(key=lambda j: (j["submit"], int(j["id"].split("_")[0]), j["id"]))
    return [{"job": j["id"], "arrival": dhms(int(j["submit"] - first)), "numnodes": str(j["nodes"]),
             "CPU": str(math.ceil(100 * j["cpus"] / j["nodes"])),
             "Memory": None if j["mem"] is None else str(math.ceil(j["mem"] / j["nodes"])),
             "duration": dhms(j["limit"]), "realduration": dhms(j["used"]) if j["state"] in FINISHED else None}
            for j in usable]


# -- the document, read back --------------------------------------------------------------------------

def workload(version: str, partition: str, preemptible: bool | None = None) -> etree._Element:
    jobs = [(job, "batch") for job in slurm_state(version, partition).jobs]
    text = workload_document("replay", ["ce01.example.org:2119/jobmanager-slurm-" + partition], small_site(), jobs,
                             now_of(version), preemptible)
    root = etree.fromstring(text)
    SCHEMA.assertValid(root)
    return root


def requests_of(root: etree._Element) -> list[dict]:
    found = []
    for request in root.find("lease-requests").findall("lease-request"):
        comment = request.getprevious()
        assert comment.tag is etree.Comment
        node_set = request.find("lease/nodes/node-set")
        real = request.find("realduration")
        found.append({"job": re.fullmatch(r" job (\S+) of batch ", comment.text).group(1),
                      "arrival": request.get("arrival"), "numnodes": node_set.get("numnodes"),
                      "CPU": node_set.find("res[@type='CPU']").get("amount"),
                      "Memory": node_set.xpath("string(res[@type='Memory']/@amount)") or None,
                      "duration": request.find("lease/duration").get("time"),
                      "realduration": None if real is None else real.get("time")})
    return found


def test_every_job_becomes_a_lease_request_with_the_figures_squeue_printed():
    root = workload("20.11", "batch")
    assert root.tag == "lease-workload" and root.get("name") == "replay"
    expected = expected_requests(recorded_jobs("20.11", "batch"))
    assert len(expected) == 10
    assert requests_of(root) == expected
    # job 102: 8 CPUs and 16G on two nodes -> two nodes of 4 CPUs (400) and 8192 MB each
    assert {"job": "102", "numnodes": "2", "CPU": "400", "Memory": "8192"}.items() <= requests_of(root)[3].items()
    leases = root.findall("lease-requests/lease-request/lease")
    assert [lease.get("id") for lease in leases] == [str(n) for n in range(1, 11)]
    for lease in leases:
        assert lease.get("preemptible") is None  # no plugin knows it; not invented
        assert [child.tag for child in lease] == ["nodes", "start", "duration", "software"]
        assert len(lease.find("start")) == 0 and lease.find("software/none") is not None


def test_the_site_is_the_same_site_element_and_declares_every_type_the_leases_use():
    root = workload("23.02", "gpu", preemptible=False)
    declared = set(root.find("site/resource-types").get("names").split())
    assert {r.get("type") for r in root.iter("res")} <= declared
    assert [lease.get("preemptible") for lease in root.iter("lease")] == ["no"] * 4
    expected = expected_requests(recorded_jobs("23.02", "gpu"))
    assert requests_of(root) == expected
    # job 203: a day's limit, 64 CPUs and 500G on two nodes
    assert {"job": "203", "duration": "01:00:00:00", "CPU": "3200", "Memory": "256000"}.items() <= requests_of(root)[2].items()


def test_jobs_that_cannot_be_replayed_are_left_out_and_named_in_the_description():
    root = workload("22.05", "short", preemptible=True)
    recorded = recorded_jobs("22.05", "short")
    expected = expected_requests(recorded)
    assert requests_of(root) == expected
    assert "10" not in [r["job"] for r in expected]  # cancelled while pending: never ran
    description = root.findtext("description")
    assert "finished without running: 1 (10)" in description
    assert all(lease.get("preemptible") == "yes" for lease in root.iter("lease"))
    unlimited = workload("23.11", "main")
    assert unlimited.find("lease-requests/lease-request") is None
    assert "no time limit: 3 (301, 302, 303)" in unlimited.findtext("description")


def test_durations_are_four_colon_separated_fields():
    assert [format_duration(s) for s in (0, 59, 3600, 90061, 100 * 86400 + 1)] == [
        "00:00:00:00", "00:00:00:59", "00:01:00:00", "01:01:01:01", "100:00:00:01"]


def test_multi_node_requests_round_up_and_unknown_memory_is_left_out():
    job = JobInfo(local_id="7", submit_time=1000.0, requested_processors=5, requested_nodes=2, requested_memory_mb=3001,
                  requested_duration_s=3600, sss_state="Idle")
    bare = JobInfo(local_id="8", submit_time=1060.0, requested_processors=1, requested_nodes=1, requested_duration_s=60,
                   sss_state="Idle")
    root = etree.fromstring(workload_document("w", [], small_site(), [(job, "c"), (bare, "c")], 2000.0))
    SCHEMA.assertValid(root)
    sets = root.findall("lease-requests/lease-request/lease/nodes/node-set")
    assert [(r.get("type"), r.get("amount")) for r in sets[0]] == [("CPU", "250"), ("Memory", "1501")]
    assert [(r.get("type"), r.get("amount")) for r in sets[1]] == [("CPU", "100")]
    assert [r.get("arrival") for r in root.iter("lease-request")] == ["00:00:00:00", "00:00:01:00"]
