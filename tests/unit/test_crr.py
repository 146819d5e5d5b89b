"""WLCG's CRR document (issue 28 item 1): what CRIC reads of a site.

The site is the GLUE 2 example (etc/examples/glue2-site.conf: two CE hosts, three queues,
three VOs) on hosts whose figures are written by hand (tests/harness/glue_sites.py); every
expected value is read from those figures, from the config file as an admin wrote it, or from
the GLUE 2 tree, never from the CRR renderer.  Each document is also checked against the
structure docs/crr.md gives (a hand-written checker: no schema is published for CRR).
"""

from __future__ import annotations

import configparser
import http.client
import json
from pathlib import Path

import pytest
from glue_sites import CLASSES, make_host

from glueinfo.core.config import load, parse_text
from glueinfo.core.model import Accelerator, QueueLimits, QueueState
from glueinfo.publish.documents import Publisher
from glueinfo.publish.outputs import Publication
from glueinfo.publish.outputs.file import FileOutput
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "etc" / "examples" / "glue2-site.conf"
NOW = 1_700_000_100.0
CE_IDS = {"long": "ce1.example.org:9619/jobmanager-slurm-long", "short": "ce1.example.org:9619/jobmanager-slurm-short",
          "grid": "arc.example.org:443/jobmanager-slurm-grid"}
HARDWARE = [hw for hw, _ in CLASSES[:2]]  # xeon and epyc, three hosts each
PER_CLASS = 3

# -- the structure docs/crr.md gives, checked by hand ----------------------------------------------------------
SERVING = {"production", "queueing", "draining", "closed"}
LIMITS = ("max_wall_time", "max_cpu_time", "max_main_memory", "max_virtual_memory", "max_running_jobs",
          "max_waiting_jobs", "max_total_jobs", "max_slots_per_job")
CAPACITY_COUNTS = ("hosts", "processors", "physical_cores", "sockets", "main_memory")


def _keys(obj: dict, required: set, optional: set, where: str) -> None:
    assert isinstance(obj, dict), where
    assert required <= obj.keys(), f"{where}: missing {required - obj.keys()}"
    assert obj.keys() <= required | optional, f"{where}: unknown {obj.keys() - required - optional}"


def _text(value, where: str) -> None:
    assert isinstance(value, str) and value, where


def _count(value, where: str, minimum: int = 0) -> None:
    assert isinstance(value, int) and not isinstance(value, bool) and value >= minimum, where


def check_structure(raw: bytes) -> dict:
    """The document as docs/crr.md describes it, or an AssertionError naming what is not."""
    assert raw.endswith(b"\n") and not raw.endswith(b"\n\n")
    document = json.loads(raw.decode("utf-8"))
    _keys(document, {"computingresource"}, set(), "document")
    resource = document["computingresource"]
    _keys(resource, {"name", "site"}, {"capacity", "accesspoints", "computingshares"}, "computingresource")
    _text(resource["name"], "name")
    _text(resource["site"], "site")
    capacity = resource.get("capacity", {})
    _keys(capacity, set(), {*CAPACITY_COUNTS, "accelerators"}, "capacity")
    for key in CAPACITY_COUNTS:
        if key in capacity:
            _count(capacity[key], f"capacity.{key}", 1)
    for kind in capacity.get("accelerators", []):
        _keys(kind, {"type", "count"}, {"vendor", "model", "partition"}, "accelerator")
        _count(kind["count"], "accelerator.count", 1)
        for key in ("type", "vendor", "model", "partition"):
            if key in kind:
                _text(kind[key], f"accelerator.{key}")
    points = resource.get("accesspoints", [])
    shares = resource.get("computingshares", [])
    assert [p["name"] for p in points] == sorted({p["name"] for p in points})  # unique, in order
    assert [s["name"] for s in shares] == sorted({s["name"] for s in shares})
    for point in points:
        _keys(point, {"name", "endpoint_url", "shares"},
              {"interface_name", "interface_version", "flavour", "version", "hosting_site"}, "accesspoint")
        for key in point.keys() - {"shares"}:
            _text(point[key], f"accesspoint.{key}")
        assert point["shares"] and all(isinstance(name, str) for name in point["shares"])
    for share in shares:
        _keys(share, {"name", "queue"},
              {"access_point", "batch_system", "batch_system_version", "serving_state", "vos", *LIMITS}, "computingshare")
        for key in ("name", "queue", "access_point", "batch_system", "batch_system_version"):
            if key in share:
                _text(share[key], f"computingshare.{key}")
        assert share.get("serving_state", "production") in SERVING
        assert share.get("vos", ["x"]) and all(isinstance(vo, str) and vo for vo in share.get("vos", []))
        for key in LIMITS:
            if key in share:
                _count(share[key], f"computingshare.{key}")
    # referential integrity: each share in the shares of exactly the access point it names
    listed = {name: point["name"] for point in points for name in point["shares"]}
    assert sum(len(point["shares"]) for point in points) == len(listed)
    assert listed == {share["name"]: share["access_point"] for share in shares if "access_point" in share}
    return document


# -- sites ---------------------------------------------------------------------------------------------------------
def example_hosts(**changes):
    hosts = [make_host(hw, i) for hw in HARDWARE for i in range(PER_CLASS)]
    for host in hosts:
        for name, value in changes.items():
            setattr(host, name, value)
    return hosts


def example_state(**fields) -> QueueState:
    values = dict(lrms_type="slurm", lrms_version="23.02.7", total_cpus=100, free_cpus=40, running_jobs=10,
                  waiting_jobs=5, total_jobs=15)
    values.update(fields)
    return QueueState(**values)


def example_site(config=None, hosts=None, state=None, now=NOW):
    config = config if config is not None else load(str(EXAMPLE))
    state = state if state is not None else example_state()
    return config, assemble_snapshots(config, hosts if hosts is not None else example_hosts(), lambda: now,
                                      local_fqdn="ce1.example.org", states={ce: state for ce in CE_IDS.values()})


def documents_of(config, site):
    return Publisher(publish_settings(config), check_health=False).documents(site)


def crr_of(config, site) -> dict:
    raw = documents_of(config, site).crr_json
    assert raw is not None
    return check_structure(raw)


def raw_example() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(EXAMPLE)
    return parser


# -- the document -------------------------------------------------------------------------------------------------
def test_the_example_site_has_its_ces_capacity_and_the_glue2_endpoints():
    config, site = example_site()
    documents = documents_of(config, site)
    resource = check_structure(documents.crr_json)["computingresource"]
    raw = raw_example()
    assert resource["name"] == raw["site"]["id"] and resource["site"] == raw["site"]["name"]

    # its CEs: one share per [ce:NAME], with the queue, the VOs of its access rules and its limits as the admin wrote them
    shares = {share["name"]: share for share in resource["computingshares"]}
    assert shares.keys() == set(CE_IDS.values())
    for section, ce_id in CE_IDS.items():
        share, written = shares[ce_id], raw[f"ce:{section}"]
        assert share["queue"] == written["queue"]
        assert share["vos"] == sorted({rule.split(":", 1)[1].strip("/").split("/")[0] for rule in written["access"].split()})
        assert share["max_wall_time"] == int(written["max_wall_clock_time"]) * 60
        assert share["max_cpu_time"] == int(written["max_cpu_time"]) * 60
        assert share["max_main_memory"] == int(written["max_main_memory"])
        assert share["max_virtual_memory"] == int(written["max_virtual_memory"])
        assert share["max_slots_per_job"] == int(written["max_slots_per_job"])
        assert share["serving_state"] == written["status"].lower()
        assert (share["batch_system"], share["batch_system_version"]) == ("slurm", "23.02.7")

    # capacity: the hosts' own figures, as the test wrote them
    assert resource["capacity"] == {
        "hosts": PER_CLASS * len(HARDWARE),
        "processors": PER_CLASS * sum(hw.threads for hw in HARDWARE),
        "physical_cores": PER_CLASS * sum(hw.cores for hw in HARDWARE),
        "sockets": PER_CLASS * sum(hw.sockets for hw in HARDWARE),
        "main_memory": PER_CLASS * sum(hw.ram_mb for hw in HARDWARE),
    }  # no "accelerators": glue_sites hosts say nothing about theirs

    # access points: the URLs of the GLUE 2 tree's ComputingEndpoints, named by their IDs
    endpoints = {e.first("GLUE2EndpointID"): e.first("GLUE2EndpointURL") for e in documents.glue2.entries
                 if "GLUE2ComputingEndpoint" in e.object_classes}
    assert {p["name"]: p["endpoint_url"] for p in resource["accesspoints"]} == endpoints
    assert {p["endpoint_url"] for p in resource["accesspoints"]} == {"condor://ce1.example.org:9619",
                                                                     "https://arc.example.org:443/arex"}
    by_url = {p["endpoint_url"]: p for p in resource["accesspoints"]}
    assert by_url["condor://ce1.example.org:9619"]["shares"] == [CE_IDS["long"], CE_IDS["short"]]
    assert (by_url["condor://ce1.example.org:9619"]["flavour"], by_url["https://arc.example.org:443/arex"]["flavour"]) == \
        ("HTCONDOR-CE", "ARC-CE")
    assert by_url["https://arc.example.org:443/arex"]["version"] == raw["ce:grid"]["implementation_version"]


def test_the_same_site_gives_the_same_bytes_whatever_the_jobs_and_the_clock():
    config, site = example_site()
    first = documents_of(config, site).crr_json
    _, busier = example_site(config, state=example_state(running_jobs=90, waiting_jobs=400, total_jobs=490, free_cpus=0),
                             now=NOW + 3600)
    assert documents_of(config, busier).crr_json == first
    _, bigger = example_site(config, hosts=[*example_hosts(), make_host(HARDWARE[0], 99)])
    grown = crr_of(config, bigger)["computingresource"]["capacity"]
    assert grown["hosts"] == PER_CLASS * len(HARDWARE) + 1
    assert grown["processors"] == PER_CLASS * sum(hw.threads for hw in HARDWARE) + HARDWARE[0].threads


MINIMAL = """
[site]
id = SMALL-SITE
[cluster:main]
unique_id = cluster.small.org
hosts = wn-*
[ce:plain]
host = ce.small.org
port = 9619
lrms = slurm
queue = plain
implementation_name = HTCondorCE
access = VO:atlas
[ce:unknown]
host = ce2.small.org
port = 2119
lrms = slurm
queue = other
access = VO:cms
"""


def test_unknown_limits_an_unknown_url_and_unknown_memory_are_left_out():
    config = parse_text(MINIMAL)
    hosts = example_hosts()
    hosts[0].memory = None  # one host's RAM is not known: the site's is not either
    quiet = QueueState(lrms_type="SLURM")  # the batch system answered, and told nothing about limits
    failed = QueueState(lrms_type="SLURM", error="squeue: Unable to contact slurm controller")  # nor its state
    site = assemble_snapshots(config, hosts, lambda: NOW, local_fqdn="ce.small.org",
                              states={"ce.small.org:9619/jobmanager-slurm-plain": quiet,
                                      "ce2.small.org:2119/jobmanager-slurm-other": failed})
    documents = documents_of(config, site)
    resource = check_structure(documents.crr_json)["computingresource"]
    assert resource["site"] == "SMALL-SITE"  # no [site] name: its id
    for share in resource["computingshares"]:
        assert not set(LIMITS) & share.keys(), share
    assert "main_memory" not in resource["capacity"]
    assert resource["capacity"]["processors"] == PER_CLASS * sum(hw.threads for hw in HARDWARE)
    # the CE of no known type has no URL (GLUE 2 would write its place-holder): no access point
    assert [p["endpoint_url"] for p in resource["accesspoints"]] == ["condor://ce.small.org:9619"]
    assert b"your-ce.example.org" not in documents.crr_json
    unknown = next(s for s in resource["computingshares"] if s["queue"] == "other")
    assert "access_point" not in unknown and "serving_state" not in unknown and unknown["vos"] == ["cms"]


def test_limits_the_batch_system_gives_are_published_to_the_second():
    config = parse_text(MINIMAL)
    state = QueueState(lrms_type="SLURM", status="Draining", max_wall_clock_time_s=172_000, max_running_jobs=500,
                       limits=QueueLimits(max_main_memory_mb=3_900))
    site = assemble_snapshots(config, example_hosts(), lambda: NOW, local_fqdn="ce.small.org",
                              states={"ce.small.org:9619/jobmanager-slurm-plain": state})
    share = next(s for s in crr_of(config, site)["computingresource"]["computingshares"] if s["queue"] == "plain")
    assert (share["max_wall_time"], share["max_running_jobs"], share["max_main_memory"]) == (172_000, 500, 3_900)
    assert share["serving_state"] == "draining" and "max_cpu_time" not in share


def test_accelerators_are_counted_over_the_hosts_and_none_known_is_an_empty_list():
    config = load(str(EXAMPLE))
    gpus = [Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA A100-SXM4-40GB", count=4, memory_mb=40_960)]
    hosts = example_hosts(accelerators=[])
    for host in hosts[:2]:
        host.accelerators = list(gpus)
    _, site = example_site(config, hosts=hosts)
    assert crr_of(config, site)["computingresource"]["capacity"]["accelerators"] == [
        {"type": "GPU", "vendor": "NVIDIA", "model": "NVIDIA A100-SXM4-40GB", "count": 2 * 4}]
    _, none = example_site(config, hosts=example_hosts(accelerators=[]))
    assert crr_of(config, none)["computingresource"]["capacity"]["accelerators"] == []


def test_a_site_without_name_or_id_has_no_crr_document():
    config = parse_text(MINIMAL.replace("[site]\nid = SMALL-SITE\n", ""))
    site = assemble_snapshots(config, example_hosts(), lambda: NOW, local_fqdn="ce.small.org", states={})
    assert documents_of(config, site).crr_json is None


# -- one document, three ways out -------------------------------------------------------------------------------
def test_the_command_prints_what_the_file_output_writes_and_crr_json_serves(tmp_path, monkeypatch, capsysbinary):
    from glueinfo.cli import main
    from glueinfo.run.http import NodeStore, Refreshed, Server, ServeSettings
    from glueinfo.run.http_output import refreshed

    # the batch system, as the command and the daemon would both ask it
    monkeypatch.setattr("glueinfo.lrms.registry.queue_state", lambda lrms, ctx: example_state(queue=ctx.queue))
    monkeypatch.setenv("GLUEINFO_CLOCK", str(NOW))
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([host.to_dict() for host in example_hosts()]))

    assert main(["crr-json", "--config", str(EXAMPLE), "--snapshots", str(snapshots)]) == 0
    printed = capsysbinary.readouterr().out
    check_structure(printed)

    config = load(str(EXAMPLE))
    site = assemble_snapshots(config, example_hosts(), lambda: NOW)
    documents = Publisher(publish_settings(config), daemon=True, check_health=False).documents(site)
    crr_file = tmp_path / "crr.json"
    output = FileOutput("", "", str(crr_file))
    assert output.publish(Publication(documents)).error is None
    assert crr_file.read_bytes() == printed
    assert ("crr", str(crr_file)) in output.paths

    store = NodeStore(lambda: refreshed(documents, None))
    store.refresh_once()
    server = Server(ServeSettings(port=0, refresh_interval_s=3600), store)
    server.start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.address[1], timeout=10)
        connection.request("GET", "/crr.json")
        answer = connection.getresponse()
        assert (answer.status, answer.getheader("Content-Type")) == (200, "application/json")
        assert answer.read() == printed
        connection.close()
    finally:
        server.stop()
    assert NodeStore(lambda: Refreshed(local=None, snapshots=[])).crr_json()[0] is None  # before any publish: 503


@pytest.mark.parametrize("documents_none", [True, False])
def test_the_file_is_only_rewritten_when_its_bytes_change(tmp_path, documents_none):
    config, site = example_site()
    crr_file = tmp_path / "crr.json"
    output = FileOutput("", "", str(crr_file))
    output.publish(Publication(documents_of(config, site)))
    inode = crr_file.stat().st_ino
    _, busier = example_site(config, state=example_state(running_jobs=99))
    output.publish(Publication(None if documents_none else documents_of(config, busier)))
    assert crr_file.stat().st_ino == inode and output.files.rewritten == 1
