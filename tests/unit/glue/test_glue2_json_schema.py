"""glueinfo's GLUE 2.1 JSON (what ``glueinfo glue2-json`` prints and the amqp output pushes) validated
against the OGF GLUE working group's JSON Schema of GLUE 2.0 (issue 28 item 1), as restated in
tests/fixtures/glue2-json-schema/ (its README names the published source), for sites as admins run
them: the example Slurm site in both DIT forms (limits, benchmarks, a location, connectivity known),
a minimal site (no limits, connectivity never said), a fork CE, and a GPU site (GLUE 2.1 classes).
Expected values come from the config texts and host facts written here, never from the renderer."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
from glue_sites import CLASSES, make_host
from jsonschema import Draft202012Validator

from glueinfo.core.config import load, parse_text
from glueinfo.core.model import Accelerator, QueueAccelerators, QueueState, VoJobCounts
from glueinfo.publish.documents import Publisher
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "glue2-json-schema" / "glue2.schema.json").read_text())
EXAMPLE = ROOT / "etc" / "examples" / "glue2-site.conf"
NOW = 1_700_000_100.0
XEON, EPYC = CLASSES[0][0], CLASSES[1][0]
EXAMPLE_CES = ("ce1.example.org:9619/jobmanager-slurm-long", "ce1.example.org:9619/jobmanager-slurm-short",
               "arc.example.org:443/jobmanager-slurm-grid")

MINIMAL = """
[site]
id = MINIMAL-SITE
[ce:long]
host = ce.minimal.example.org
lrms = slurm
access = VO:dteam VO:atlas
[ce:1]
host = ce.minimal.example.org
lrms = slurm
queue = 1
access = VOMS:/dteam/Role=lcgadmin
"""
MINIMAL_CES = ("ce.minimal.example.org:2119/jobmanager-slurm-long", "ce.minimal.example.org:2119/jobmanager-slurm-1")

FORK = """
[site]
id = FORK-SITE
latitude = -33.9
longitude = 6.1
[cluster:local]
unique_id = fork.example.org
hosts = wn-*
[ce:fork]
host = ce.fork.example.org
lrms = fork
implementation_name = HTCondorCE
status = Production
access = VO:dteam
"""

GPU = """
[site]
id = GPU-SITE
[cluster:main]
unique_id = cluster.example.org
hosts = wn-*
[ce:gpu]
host = ce1.example.org
port = 9619
lrms = slurm
queue = gpu
implementation_name = HTCondorCE
status = Production
access = VO:atlas VO:cms
"""
GPU_CE = "ce1.example.org:9619/jobmanager-slurm-gpu"
H100 = Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=2, memory_mb=81559,
                   compute_capability="9.0")


def slurm(**changes) -> QueueState:
    fields = dict(lrms_type="slurm", lrms_version="23.02.7", status="Production", total_cpus=100, free_cpus=40,
                  running_jobs=10, waiting_jobs=5, total_jobs=15, free_job_slots=40, estimated_response_time_s=600,
                  worst_response_time_s=3600, vo_counts={"atlas": VoJobCounts(4, 2, 6), "dteam": VoJobCounts()})
    fields.update(changes)
    return QueueState(**fields)


def quiet(hosts):
    """The same hosts with nothing said of their connectivity."""
    return [dataclasses.replace(h, static=dataclasses.replace(h.static, inbound_ip=None, outbound_ip=None)) for h in hosts]


def published(config, hosts, states) -> dict:
    site = assemble_snapshots(config, hosts, lambda: NOW, local_fqdn="ce1.example.org", states=states)
    document = Publisher(publish_settings(config), check_health=False).documents(site).glue2_json
    assert document
    return json.loads(document)


def example_site(dit="resource"):
    config = load(str(EXAMPLE))
    if dit != "resource":
        config = parse_text(EXAMPLE.read_text().replace("dit = resource", f"dit = {dit}"))
    hosts = [make_host(hw, i) for hw, _ in CLASSES[:2] for i in range(3)]
    return published(config, hosts, {ce: slurm() for ce in EXAMPLE_CES})


def minimal_site():
    hosts = quiet([make_host(XEON, i) for i in range(3)])
    return published(parse_text(MINIMAL), hosts, {ce: slurm(estimated_response_time_s=None, worst_response_time_s=None)
                                                  for ce in MINIMAL_CES})


def fork_site():
    hosts = quiet([make_host(XEON, 0)])
    return published(parse_text(FORK), hosts, {})


def gpu_site():
    hosts = [make_host(EPYC, i) for i in range(2)]
    for host in hosts:
        host.accelerators = [H100]
    gpus = QueueAccelerators(type="GPU", model="h100", total=4, used=1, free=3, max_per_job=2)
    return published(parse_text(GPU), hosts, {GPU_CE: slurm(accelerators=(gpus,))})


SITES = {"example": example_site, "example-site-dit": lambda: example_site("site"), "minimal": minimal_site,
         "fork": fork_site, "gpu": gpu_site}


def problems(document) -> list[str]:
    validator = Draft202012Validator(SCHEMA)
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document))


def objects(node, kind):
    """Every object of ``kind`` in the nested document, wherever it sits."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == kind and isinstance(value, list):
                found.extend(value)
            found.extend(objects(value, kind))
    elif isinstance(node, list):
        for item in node:
            found.extend(objects(item, kind))
    return found


@pytest.fixture(scope="module")
def documents():
    return {name: make() for name, make in SITES.items()}


def test_the_schema_is_a_valid_json_schema():
    Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("site", SITES)
def test_each_sites_document_validates_against_the_published_rules(documents, site):
    document = documents[site]
    assert document["AdminDomain"] and document["ComputingService"]
    assert problems(document) == []


def test_every_class_glueinfo_publishes_was_checked(documents):
    seen = {kind for doc in documents.values() for kind in SCHEMA["$defs"]["listOf"] if objects(doc, kind)}
    assert seen == set(SCHEMA["$defs"]["listOf"]) - {"glue21Objects"}
    assert all(objects(documents["gpu"], kind) for kind in
               ("AcceleratorEnvironment", "ComputingManagerAccelerator", "ComputingShareAccelerator"))


def test_values_are_typed_as_the_schema_types_them(documents):
    (location,) = objects(documents["example"], "Location")
    assert (location["Latitude"], location["Longitude"]) == (46.2, 6.1)  # the example's [site] latitude, longitude
    assert documents["example"]["AdminDomain"][0]["WWW"] == ["https://www.example.org/grid"]
    benchmarks = {b["Type"]: b["Value"] for b in objects(documents["example"], "Benchmark")}
    # [ce:long] benchmarks = HEP-SPEC06=12.5 HEPscore23=13.1, the hosts' si00 = 2500 (glue_sites.make_host)
    assert benchmarks == {"hep-spec06": 12.5, "hepscore23": 13.1, "specint2000": 2500}
    environments = objects(documents["example"], "ExecutionEnvironment")
    assert {(e["ConnectivityIn"], e["ConnectivityOut"]) for e in environments} == {(False, True)}  # the hosts' facts
    assert {e["OSVersion"] for e in environments} <= {hw.os_release for hw, _ in CLASSES[:2]}
    assert all(isinstance(e["OSVersion"], str) for e in environments)  # "12" is a version, not a count
    long_share = next(s for s in objects(documents["example"], "ComputingShare") if s["MappingQueue"] == "long")
    assert long_share["MaxWallTime"] == 4320 * 60  # max_wall_clock_time = 4320 (minutes)


def test_undefined_connectivity_is_null_and_a_queue_named_1_stays_text(documents):
    for site in ("minimal", "fork"):
        for environment in objects(documents[site], "ExecutionEnvironment"):
            assert environment["ConnectivityIn"] is None and environment["ConnectivityOut"] is None
    assert "1" in {s["MappingQueue"] for s in objects(documents["minimal"], "ComputingShare")}


def test_coordinates_are_numbers_and_one_that_is_not_is_refused_by_the_config(documents):
    from glueinfo.core.config import ConfigError, parse_text

    (location,) = objects(documents["fork"], "Location")
    assert (location["Latitude"], location["Longitude"]) == (-33.9, 6.1)
    with pytest.raises(ConfigError, match=r"^<config>:3: \[site\] latitude: '46N' is not a number of degrees"):
        parse_text("[site]\nid = X\nlatitude = 46N\n")
    with pytest.raises(ConfigError, match=r"\[site\] longitude: 200 is outside -180 to 180 degrees"):
        parse_text("[site]\nid = X\nlongitude = 200\n")


def test_associations_the_schema_requires_come_from_the_tree(documents):
    document = documents["example"]
    (domain,) = document["AdminDomain"]
    (location,) = domain["Location"]
    assert domain["Associations"] == {"LocationID": location["ID"], "ParentDomainID": None}
    for service in document["ComputingService"]:
        shares = service["ComputingShare"]
        for endpoint in service["ComputingEndpoint"]:
            naming = [s["ID"] for s in shares if endpoint["ID"] in s["Associations"]["EndpointID"]]
            assert naming and endpoint["Associations"]["ShareID"] == naming
        for manager in service["ComputingManager"]:
            assert sorted(manager["Associations"]["ResourceID"]) == sorted(
                e["ID"] for e in service["ExecutionEnvironment"] if e["Associations"]["ManagerID"] == manager["ID"])
    # the VOs the rules name: [ce:long] access = VO:atlas VOMS:/atlas/Role=pilot ...
    policies = {p["Associations"]["ShareID"]: p for p in objects(document, "MappingPolicy")}
    atlas_long = next(p for share_id, p in policies.items() if share_id.endswith("_long_atlas_share"))
    assert atlas_long["Rule"] == ["VO:atlas", "VOMS:/atlas/Role=pilot"]
    assert atlas_long["Associations"]["UserDomainID"] == ["atlas"]
    (queue_1,) = [s for s in objects(documents["minimal"], "ComputingShare") if s["MappingQueue"] == "1"]
    (minimal_1,) = queue_1["MappingPolicy"]
    assert minimal_1["Associations"]["UserDomainID"] == ["dteam"]  # VOMS:/dteam/Role=lcgadmin


def mutate(document, kind, change):
    broken = copy.deepcopy(document)
    change(objects(broken, kind)[0])
    return broken


# What glueinfo published before it followed the schema, each one rejected.
OLD_FORMS = {
    "ExtendedBoolean as LDAP text": ("ExecutionEnvironment", lambda o: o.update(ConnectivityIn="false")),
    "undefined left out where required": ("ExecutionEnvironment", lambda o: o.pop("ConnectivityOut")),
    "a number as text": ("Location", lambda o: o.update(Latitude="46.2")),
    "an integer as text": ("ComputingShare", lambda o: o.update(MaxWallTime="259200")),
    "a string typed as an integer": ("ExecutionEnvironment", lambda o: o.update(OSVersion=12)),
    "one value of a list attribute as a string": ("AdminDomain", lambda o: o.update(WWW="https://www.example.org/grid")),
    "an enum in LDAP's case": ("ComputingShare", lambda o: o.update(ServingState="Production")),
    "a list association as one ID": ("Contact", lambda o: o["Associations"].update(DomainID="EXAMPLE-SITE")),
    "one-ID association as a list": ("Benchmark", lambda o: o["Associations"].update(ExecutionEnvironmentID=["x"])),
    "a Policy without its UserDomain": ("MappingPolicy", lambda o: o["Associations"].pop("UserDomainID")),
    "an Endpoint without its Shares": ("ComputingEndpoint", lambda o: o["Associations"].pop("ShareID")),
    "a Manager without its Resources": ("ComputingManager", lambda o: o["Associations"].update(ResourceID=[])),
    "a Domain without Associations": ("AdminDomain", lambda o: o.pop("Associations")),
    "an entity without ID": ("ComputingService", lambda o: o.pop("ID")),
}


@pytest.mark.parametrize("form", OLD_FORMS)
def test_the_schema_rejects_what_the_published_one_rejects(documents, form):
    kind, change = OLD_FORMS[form]
    assert problems(mutate(documents["example"], kind, change))
