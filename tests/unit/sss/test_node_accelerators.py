"""Accelerators in SSS Node XML (issue 27 item 2): what agents and the spool bring to the head node.

A host's accelerators travel in two places the SSS Node spec allows: one Configured ``Resource``
per kind (spec 4.3, the extensible consumable, ``name`` the accelerator type and ``type`` the
model) for any SSS reader, and the ``Accelerators`` Extension (spec 4.1) with every fact, which
glueinfo reads back.  The hosts are the collector's own readings of the recorded GPU hosts in
tests/fixtures/gpu; the expected elements are written out by hand from those fixtures.
"""

from __future__ import annotations

import shutil

import pytest
from lxml import etree
from paths import FIXTURES, REPO

from glueinfo.core.model import Accelerator, CpuInfo, HostSnapshot, MemoryInfo
from glueinfo.host.collect import CollectContext
from glueinfo.host.collectors.accelerators import collect
from glueinfo.sss.node_markup_cache import NodeMarkupCache
from glueinfo.sss.node_reader import NodeXMLError, read_node, read_nodes
from glueinfo.sss.node_resources import attach_resources, parse_resources
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_xml import render_data, render_node

SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "glueinfo" / "sss" / "xsd" / "sss-node.xsd")))
GPU = FIXTURES / "gpu"
NOW = 1_700_000_100.0


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The collector's readings: two H100 through NVML; one A100 split into four MIG instances."""
    h100 = tmp_path_factory.mktemp("h100") / "host"
    shutil.copytree(GPU / "hosts" / "h100x2-driver-only", h100)
    (h100 / ".glueinfo").mkdir()
    shutil.copy(GPU / "recorded" / "h100x2-nvml.json", h100 / ".glueinfo" / "nvml.json")
    a100 = tmp_path_factory.mktemp("a100")
    (a100 / ".glueinfo").mkdir()
    shutil.copy(GPU / "recorded" / "a100-sxm4-80gb-mig-nvidia-smi.xml", a100 / ".glueinfo" / "nvidia-smi-q-x.xml")
    return {name: collect(CollectContext(host_root=str(root))) for name, root in (("h100", h100), ("a100", a100))}


def host(name: str, accelerators, **parts) -> HostSnapshot:
    return HostSnapshot(hostname=name, collected_at=NOW - 10, source="agents", cpu=CpuInfo(logical_cpus=64),
                        memory=MemoryInfo(ram_mb=515_000), accelerators=accelerators, **parts)


def resources(document: bytes) -> list[tuple[str, str, str]]:
    return [(r.get("name"), r.get("type"), r.text) for r in etree.fromstring(document).iterfind(".//Configured/Resource")]


def test_each_kind_is_a_configured_resource_and_every_fact_comes_back(probed):
    snapshot = host("gpu01.example.org", probed["h100"] + probed["a100"])
    document = render_node(snapshot, NOW)
    assert SCHEMA.validate(etree.fromstring(document)), SCHEMA.error_log
    assert resources(document) == [("GPU", "NVIDIA H100 80GB HBM3", "2"), ("GPU", "NVIDIA A100-SXM4-80GB MIG", "4")]
    back = read_node(document, source="agents")
    assert back.accelerators == snapshot.accelerators
    assert back.accelerators[0] == Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=2,
                                               memory_mb=81559, compute_capability="9.0", clock_speed_mhz=1980,
                                               driver_version="565.57.01", runtime_version="12.7", pci_ids=["10de:2330"],
                                               source="nvml")
    # read as glueinfo's own Node: nothing kept "as published", no Resource taken for the host's own
    assert back.published is None and "node_resources" not in back.extra
    assert render_node(back, NOW) == document


def test_known_none_and_unknown_stay_apart():
    none = read_node(render_node(host("cpu01.example.org", []), NOW))
    unknown_document = render_node(host("cpu02.example.org", None), NOW)
    assert none.accelerators == []
    assert b"Accelerators" not in unknown_document and read_node(unknown_document).accelerators is None


def test_the_admins_resources_stay_theirs(probed):
    snapshot = attach_resources(host("gpu01.example.org", probed["h100"]), parse_resources(["License:MATLAB=2", "GPU:A100=4"]))
    document = render_node(snapshot, NOW)
    assert resources(document) == [("License", "MATLAB", "2"), ("GPU", "A100", "4"), ("GPU", "NVIDIA H100 80GB HBM3", "2")]
    back = read_node(document)
    assert [(r["name"], r["type"], r["configured"]) for r in back.extra["node_resources"]["resources"]] == [
        ("License", "MATLAB", 2.0), ("GPU", "A100", 4.0)]
    assert back.accelerators == probed["h100"]


def test_a_spool_of_several_hosts(probed):
    hosts = [host("gpu01.example.org", probed["h100"]), host("gpu02.example.org", probed["a100"]), host("cpu01.example.org", [])]
    back = read_nodes(render_data(hosts, NOW, NodeSettings()), source="spool")
    assert [(h.hostname, h.accelerators) for h in back] == [(h.hostname, h.accelerators) for h in hosts]


def test_the_node_is_made_again_when_only_the_accelerators_change(probed):
    cache = NodeMarkupCache()
    before = host("gpu01.example.org", probed["h100"])
    first = cache.markup(before, NOW, NodeSettings())
    after = host("gpu01.example.org", probed["h100"] + probed["a100"])
    second = cache.markup(after, NOW, NodeSettings())
    assert "A100" not in first and "A100" in second


def node(extension: str, extra: str = "") -> bytes:
    return (f'<Node><Id>wn01</Id><Name>wn01</Name><State>Idle</State>{extra}'
            f'<Extension name="Accelerators" type="Accelerator">{extension}</Extension>'
            '<Extension name="Source" type="Glueinfo">agents</Extension></Node>').encode()


@pytest.mark.parametrize("text, problem", [
    ("{not json", "not valid JSON"),
    ('{"count": 2}', "expected a JSON list of objects"),
    ('[{"count": -2, "model": "X"}]', "count -2 is negative"),
    ('[{"count": 100000000, "model": "X"}]', "count 100000000 is absurdly large"),
    ('[{"count": "two"}]', "accelerators"),
])
def test_a_bad_accelerators_extension_is_refused_naming_it(text, problem):
    with pytest.raises(NodeXMLError, match=r"Node 'wn01': Extension\[@name='Accelerators'\]: .*" + problem):
        read_node(node(text))


def test_given_twice_is_refused():
    twice = node("[]", extra='<Extension name="Accelerators" type="Accelerator">[]</Extension>')
    with pytest.raises(NodeXMLError, match="Accelerators.*given twice"):
        read_node(twice)
