"""Reading Node XML other software wrote (issue 14, "SSS Node"): the spec's own examples
(tests/fixtures/sss-node, each naming its section) and a Node with every optional part come back
as the same document after C14N; the figures they give keep their meaning (a given State is not
replaced by glueinfo's reading of the load); the namespaced form is read; the reference forms
become the nodes they name; features written as ``a,b,c`` are three.  Expected values are written
out by hand from the fixtures."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from lxml import etree
from paths import REPO

from glueinfo.core.model import CpuInfo, HostSnapshot, LoadInfo, MemoryInfo
from glueinfo.core.validate import validate_snapshot
from glueinfo.sss.node_file_reader import NodeFileReader
from glueinfo.sss.node_markup_cache import NodeMarkupCache
from glueinfo.sss.node_reader import MAX_NODES, NodeXMLError, read_node, read_nodes
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_state import node_state
from glueinfo.sss.node_xml import node_markup, pretty_node, render_data, render_data_streamed, render_node

FIXTURES = REPO / "tests" / "fixtures" / "sss-node"
SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "glueinfo" / "sss" / "xsd" / "sss-node.xsd")))
NOW = 1_700_000_100.0
SSSRMAP = "http://www.scidac.org/ScalableSystems/SSSRMAP"
SINGLE_NODE = ["simple.xml", "elaborate.xml", "extension.xml", "configured.xml", "available.xml", "utilized.xml",
               "consumables.xml", "resources.xml", "every-part.xml"]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def canonical(document: bytes) -> bytes:
    """C14N of ``document`` without comments and without whitespace-only text between elements."""
    root = etree.fromstring(document, etree.XMLParser(remove_comments=True))
    for element in root.iter():
        if len(element) and element.text is not None and not element.text.strip():
            element.text = None
        if element.tail is not None and not element.tail.strip():
            element.tail = None
    return etree.tostring(root, method="c14n")


def compact(document: bytes) -> str:
    """The canonical form as text, for comparing with a document written out by hand."""
    return canonical(document).decode()


# -- round trips ------------------------------------------------------------------------------------------


def test_every_fixture_names_the_spec_section_it_comes_from():
    for path in FIXTURES.glob("*.xml"):
        head = path.read_text(encoding="utf-8").split("-->", 1)[0]
        assert "SSS Node Object Specification 3.1.0" in head, path.name
        assert "section" in head or path.name == "every-part.xml", path.name
        assert "\u201c" not in path.read_text(encoding="utf-8") and "\u201d" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", SINGLE_NODE)
@pytest.mark.parametrize("pretty", [True, False])
def test_a_single_node_example_comes_back_as_the_same_document(name, pretty):
    document = fixture(name)
    (snapshot,) = read_nodes(document)
    written = render_node(snapshot, NOW, pretty=pretty)
    assert canonical(written) == canonical(document)
    assert SCHEMA.validate(etree.fromstring(written)), SCHEMA.error_log


@pytest.mark.parametrize("name", SINGLE_NODE)
def test_the_published_record_survives_json_as_state_files_and_the_spool_carry_it(name):
    (snapshot,) = read_nodes(fixture(name))
    again = HostSnapshot.from_json(snapshot.to_json())
    assert again == snapshot
    assert canonical(render_node(again, NOW)) == canonical(fixture(name))
    checked = validate_snapshot(again, NOW)
    assert checked.snapshot is again and checked.dropped == []


def test_the_elaborate_example_keeps_what_the_issue_says_was_lost():
    snapshot = read_node(fixture("elaborate.xml"))
    # the facts the host model has a place for
    assert snapshot.hostname == "64" and snapshot.cpu.logical_cpus == 16
    assert (snapshot.memory.ram_mb, snapshot.memory.swap_mb, snapshot.memory.ram_available_mb) == (512, 512, 143)
    assert snapshot.static.features == ["BigMem", "NetOC12"]
    assert (snapshot.os.name, snapshot.os.platform_type) == ("AIX", "Power4")
    # the rest, as published
    assert snapshot.published.name == "Netpipe2" and snapshot.published.state is None
    utilized = next(part for part in snapshot.published.parts if part.tag == "Utilized")
    assert [(a.tag, a.text, a.metric, a.wall_duration) for a in utilized.amounts] == \
        [("Processors", "8", None, "3576"), ("Memory", "400", "Average", "3576")]
    node = etree.fromstring(render_node(snapshot, NOW))
    assert node.findtext("Name") == "Netpipe2"  # not 64
    assert node.find("State") is None  # not Unknown: none was given
    assert node.findtext("Available/Processors") == "7" and node.findtext("Utilized/Processors") == "8"
    memory = node.find("Utilized/Memory")
    assert (memory.text, memory.get("metric"), memory.get("wallDuration")) == ("400", "Average", "3576")  # not 369 Instantaneous


def test_an_extension_keeps_its_type_and_a_node_every_part():
    snapshot = read_node(fixture("every-part.xml"))
    assert snapshot.cpu.logical_cpus == 16
    # 64 GB = 65536 MB; 20480.5 MB rounds to 20480 (half to even); 8192 MB and 8000 MB of swap
    assert (snapshot.memory.ram_mb, snapshot.memory.ram_available_mb) == (65536, 20480)
    assert (snapshot.memory.swap_mb, snapshot.memory.swap_free_mb) == (8192, 8000)
    assert snapshot.static.features == ["BigMem", "NetOC12", "gpu", "ib", "fast scratch"]
    assert snapshot.static.extensions == {"Software": "NWChem", "Rack": "B12"}
    assert snapshot.extra["node_resources"]["resources"] == [
        {"name": "GPU", "type": "A100", "configured": 1.0, "available": 0.0, "utilized": 1.0, "units": "devices"},
        {"name": "License", "type": "MATLAB", "configured": None, "available": None, "utilized": 1.0, "units": None}]
    assert (snapshot.published.name, snapshot.published.state) == ("Netpipe42", "Busy")
    node = etree.fromstring(render_node(snapshot, NOW))
    assert [(e.get("name"), e.get("type")) for e in node.findall("Extension")] == [("Software", "Chemistry"), ("Rack", None)]
    assert node.findtext("Description") == "Two sockets, one GPU & a tape robot down the hall"


def test_glueinfos_own_nodes_are_not_kept_as_published():
    from glue_sites import hostile_host, synthetic_site

    for host in synthetic_site(12) + [hostile_host()]:
        back = read_node(render_node(host, NOW))
        assert back.published is None, host.hostname
    pretty_and_compact = read_nodes(render_data(synthetic_site(3), NOW, pretty=False))
    assert all(s.published is None for s in pretty_and_compact)


@pytest.mark.parametrize("change", [
    lambda d: d.replace(b"<State>Idle</State>", b"<State>Drained</State>").replace(b"<State>Busy</State>", b"<State>Drained</State>"),
    lambda d: d.replace(b'<Extension name="Source" type="Glueinfo">spool</Extension>', b""),
    lambda d: d.replace(b"<Name>", b"<Name>x"),
    lambda d: d.replace(b'<Memory units="MB" metric="Instantaneous">', b'<Memory units="MB" metric="Average">', 1),
    lambda d: d.replace(b'name="CpuModel" type="Cpu"', b'name="CpuModel" type="Chemistry"'),
])
def test_a_node_not_as_glueinfo_writes_it_is_kept_as_published_and_comes_back(change):
    from glue_sites import CLASSES, make_host

    host = dataclasses.replace(make_host(CLASSES[0][0], 3), source="spool")
    document = change(render_node(host, NOW, pretty=False))
    assert document != render_node(host, NOW, pretty=False)
    snapshot = read_node(document)
    assert snapshot.published is not None
    assert canonical(render_node(snapshot, NOW)) == canonical(document)


# -- what the figures mean ----------------------------------------------------------------------------------

FOREIGN = b"""<Node><Id>wn7.example.org</Id><State>Busy</State>
  <Configured><Processors>4</Processors></Configured>
  <Available><Processors>0</Processors></Available>
  <Extension name="LoadAverage1" type="Load">0.1</Extension>
</Node>"""


def test_a_given_state_is_republished_as_given_not_as_glueinfo_reads_the_load():
    snapshot = dataclasses.replace(read_node(FOREIGN), collected_at=NOW - 10)
    assert snapshot.load.load1 == 0.1  # 0.1 of 4 processors: glueinfo's own rule would say Idle
    node = etree.fromstring(render_node(snapshot, NOW))
    assert node.findtext("State") == "Busy" and node.findtext("Available/Processors") == "0"
    assert node_state(snapshot, NOW, NodeSettings()) == "Busy"  # the status page and Haizea agree


def test_a_given_state_gives_way_to_the_admin_and_to_staleness():
    snapshot = read_node(FOREIGN)
    assert etree.fromstring(render_node(snapshot, NOW)).findtext("State") == "Busy"  # no collection time: nothing to judge it by
    offline = etree.fromstring(render_node(snapshot, NOW, NodeSettings(offline_hosts=("wn7",))))
    assert offline.findtext("State") == "Offline"
    stale = dataclasses.replace(snapshot, collected_at=NOW - 301)
    assert etree.fromstring(render_node(stale, NOW)).findtext("State") == "Unknown"
    assert node_state(stale, NOW, NodeSettings()) == "Unknown"


def test_without_a_given_state_only_what_glueinfo_knows_is_added():
    snapshot = dataclasses.replace(read_node(b"<Node><Id>wn8</Id><Configured><Processors>4</Processors></Configured></Node>"),
                                   collected_at=NOW - 10)
    assert compact(render_node(snapshot, NOW)) == \
        "<Node><Id>wn8</Id><Configured><Processors>4</Processors></Configured></Node>"
    with_lrms = dataclasses.replace(snapshot, extra={"lrms": {"state": "Busy", "total_cpus": 4, "allocated_cpus": 4}})
    node = etree.fromstring(render_node(with_lrms, NOW))
    assert [e.tag for e in node] == ["Id", "State", "Configured", "Extension"]
    assert node.findtext("State") == "Busy" and node.find("Extension").get("name") == "lrms"
    stale = dataclasses.replace(snapshot, collected_at=NOW - 3600)
    assert etree.fromstring(render_node(stale, NOW)).findtext("State") == "Unknown"


def test_glueinfos_provenance_is_not_added_to_another_programs_node():
    snapshot = dataclasses.replace(read_node(fixture("simple.xml"), source="spool"), collected_at=NOW - 5,
                                   extra={"gather": {"sources": {"spool": NOW - 5}}})
    assert compact(render_node(snapshot, NOW)) == compact(fixture("simple.xml"))


def test_a_fact_the_model_no_longer_holds_or_holds_otherwise_is_written_from_the_model():
    snapshot = read_node(fixture("elaborate.xml"))
    dropped = dataclasses.replace(snapshot, memory=dataclasses.replace(snapshot.memory, ram_available_mb=None))
    node = etree.fromstring(render_node(dropped, NOW))
    assert node.find("Available/Memory") is None and node.findtext("Available/Processors") == "7"
    changed = dataclasses.replace(snapshot, memory=dataclasses.replace(snapshot.memory, ram_mb=1024),
                                  cpu=CpuInfo(logical_cpus=32))
    node = etree.fromstring(render_node(changed, NOW))
    memory = node.find("Configured/Memory")
    assert (memory.text, memory.get("units")) == ("1024", "MB") and node.findtext("Configured/Processors") == "32"
    assert node.findtext("Configured/Swap") == "512"


def test_facts_another_source_adds_are_written_after_the_published_parts():
    snapshot = read_node(fixture("simple.xml"))
    merged = dataclasses.replace(snapshot, load=LoadInfo(load1=1.5), memory=MemoryInfo(ram_mb=512, virtual_mb=1024))
    node = etree.fromstring(render_node(merged, NOW))
    assert [(e.get("name"), e.text) for e in node.findall("Extension")] == [("VirtualMemory", "1024"), ("LoadAverage1", "1.5")]
    assert node.find("Available") is None and node.find("Utilized") is None  # nothing derived from the load


def test_the_cached_pretty_node_is_what_lxml_prints():
    snapshots = read_nodes(fixture("every-part.xml")) + read_nodes(fixture("elaborate.xml")) + read_nodes(fixture("reference.xml"))
    cache = NodeMarkupCache()
    for snapshot in snapshots:
        assert cache.pretty(snapshot, NOW, NodeSettings()) == pretty_node(node_markup(snapshot, NOW), snapshot.hostname)
    from glue_sites import synthetic_site

    site = synthetic_site(3) + snapshots
    assert render_data_streamed(site, NOW, NodeSettings(), NodeMarkupCache()) == render_data(site, NOW)


# -- the namespaced form -------------------------------------------------------------------------------------


def _namespaced(document: bytes, opening: bytes) -> bytes:
    body = etree.tostring(etree.fromstring(document, etree.XMLParser(remove_comments=True)))
    return body.replace(b"<Node>", opening, 1)


@pytest.mark.parametrize("name", ["elaborate.xml", "every-part.xml"])
def test_a_node_in_the_sssrmap_namespace_or_a_default_one_reads_as_the_plain_one(name):
    plain = read_node(fixture(name)).to_dict()
    default = _namespaced(fixture(name), f'<Node xmlns="{SSSRMAP}">'.encode())
    other_default = _namespaced(fixture(name), b'<Node xmlns="urn:example:sss">')
    for document in (default, other_default):
        assert etree.QName(etree.fromstring(document)).namespace is not None
        assert read_node(document).to_dict() == plain
    prefixed = etree.tostring(etree.fromstring(default))
    prefixed = prefixed.replace(f'xmlns="{SSSRMAP}"'.encode(), f'xmlns:sss="{SSSRMAP}"'.encode())
    prefixed = prefixed.replace(b"<", b"<sss:").replace(b"<sss:/", b"</sss:")
    assert read_node(prefixed).to_dict() == plain


def test_an_sssrmap_response_in_its_namespace_and_elements_of_other_namespaces():
    response = (f'<Response xmlns="{SSSRMAP}"><Status><Value>Success</Value></Status><Count>2</Count>'
                '<Data><Node><Id>a</Id><x:Id xmlns:x="urn:other">not me</x:Id></Node>'
                '<Node><Id>b</Id><Configured><Processors>2</Processors><x:Gpu xmlns:x="urn:other">1</x:Gpu>'
                '</Configured></Node></Data></Response>').encode()
    a, b = read_nodes(response)
    assert (a.hostname, b.hostname, b.cpu.logical_cpus) == ("a", "b", 2)
    tree = etree.fromstring(response)
    assert [s.hostname for s in read_nodes(tree)] == ["a", "b"]
    assert tree.tag == f"{{{SSSRMAP}}}Response" and tree.find(f"{{{SSSRMAP}}}Data") is not None  # the caller's tree as it was
    assert compact(render_node(b, NOW)) == "<Node><Id>b</Id><Configured><Processors>2</Processors></Configured></Node>"


# -- the reference forms ------------------------------------------------------------------------------------


def test_the_specs_references_become_their_nodes():
    (node1,) = read_nodes(fixture("reference.xml"))
    assert node1.hostname == "node1"
    assert compact(render_node(node1, NOW)) == "<Node><Id>node1</Id></Node>"
    assert [s.hostname for s in read_nodes(fixture("reference-pattern.xml"))] == ["node1", "node2", "node3", "node4", "node5"]


def test_a_range_id_names_its_nodes_each_with_the_shared_properties():
    document = b"""<Data><Node><Id aggregation="Range" count="4">wn[08-10,77].example.org</Id><Name>rack2</Name>
        <Configured><Processors>8</Processors><Memory units="GB">16</Memory></Configured><Feature>a,b</Feature></Node>
        <Node><Id>solo</Id></Node></Data>"""
    snapshots = read_nodes(document)
    assert [s.hostname for s in snapshots] == ["wn08.example.org", "wn09.example.org", "wn10.example.org", "wn77.example.org", "solo"]
    for snapshot in snapshots[:4]:
        assert (snapshot.cpu.logical_cpus, snapshot.memory.ram_mb, snapshot.static.features) == (8, 16384, ["a", "b"])
    assert compact(render_node(snapshots[2], NOW)) == (
        '<Node><Id>wn10.example.org</Id><Name>rack2</Name><Configured><Processors>8</Processors>'
        '<Memory units="GB">16</Memory></Configured><Feature>a,b</Feature></Node>')


@pytest.mark.parametrize("document, names", [
    (b'<Node><Id aggregation="List">a, b,,c </Id></Node>', ["a", "b", "c"]),
    (b'<Node><Id aggregation="List" delimiter=" + ">x.org + y.org</Id></Node>', ["x.org", "y.org"]),
    (b'<Node aggregation="List" delimiter=";"><Id>p;q</Id></Node>', ["p", "q"]),
    (b'<Node><Id aggregation="Pattern">^(wn|gpu)0[1-2]\\.site$</Id></Node>', ["wn01.site", "wn02.site", "gpu01.site", "gpu02.site"]),
    (b'<Node><Id aggregation="Pattern">n\\d-(?:a|b)?</Id></Node>', [f"n{d}-{s}" for d in range(10) for s in ("", "a", "b")]),
    (b'<Node><Id aggregation="Pattern">x{2,3}</Id></Node>', ["xx", "xxx"]),
    (b'<Node><Name aggregation="Range">c[1-2]</Name><Arch>x86_64</Arch></Node>', ["c1", "c2"]),
    (b'<Node aggregation="Range" count="2">h[1-2]</Node>', ["h1", "h2"]),
])
def test_list_pattern_and_range_expand_as_documented(document, names):
    snapshots = read_nodes(document)
    assert [s.hostname for s in snapshots] == names


def test_a_name_that_names_the_nodes_becomes_their_id_and_name():
    c1, c2 = read_nodes(b'<Node><Name aggregation="Range">c[1-2]</Name><Arch>x86_64</Arch></Node>')
    assert compact(render_node(c2, NOW)) == "<Node><Id>c2</Id><Name>c2</Name><Arch>x86_64</Arch></Node>"
    assert c1.os is c2.os  # the shared facts are shared, never changed once read


@pytest.mark.parametrize("document, message", [
    (b'<Node><Id aggregation="Range">wn[1-1000000]</Id></Node>', r"Node 'wn\[1-1000000\]': Id: Range .*more than 100000 hosts"),
    (b'<Node><Id aggregation="Pattern">wn[0-9]{6}</Id></Node>', r"Id: Pattern 'wn\[0-9\]\{6\}': makes more than 100000 names"),
    (b'<Node><Id aggregation="Pattern">wn.*</Id></Node>', r"'\.' \(at 2\) matches any character"),
    (b'<Node><Id aggregation="Pattern">wn\\d+</Id></Node>', r"'\+' at 4 repeats without bound"),
    (b'<Node><Id aggregation="Pattern">wn[^0]</Id></Node>', "negated"),
    (b'<Node><Id aggregation="Range">wn[3-1]</Id></Node>', "runs backwards"),
    (b'<Node><Id aggregation="Range">wn[1-2]:80</Id></Node>', "a name has no ':'"),
    (b'<Node><Id aggregation="Lots">a</Id></Node>', "Id/@aggregation: 'Lots' is not List, Pattern or Range"),
    (b'<Node><Id aggregation="List" count="3">a,b</Id></Node>', r"Id/@count: 3, but 2 nodes named"),
    (b'<Node><Id count="2">a</Id></Node>', r"Id/@count: 2, but 1 node named"),
    (b'<Node><Id count="-1">a</Id></Node>', r"Id/@count: -1 is negative"),
    (b'<Node><Id delimiter=";">a;b</Id></Node>', 'Id/@delimiter: applies to aggregation="List" only'),
    (b'<Node><Id aggregation="List">a,a</Id></Node>', "Id: names 'a' twice"),
    (b'<Node><Id aggregation="List" delimiter="-">a b-c</Id></Node>', "Id: 'a b' is not a host name"),
    (b'<Node aggregation="List"><Id aggregation="List">a,b</Id></Node>', "both carry aggregation"),
    (b'<Node><Id>a</Id><Name aggregation="List">a,b</Name></Node>', "Name: aggregation, delimiter and count name the nodes"),
    (b'<Node>node1<Configured/></Node>', "a reference .* holds no elements"),
    (b'<Data><Node aggregation="List">a,b</Node><Node><Id>b</Id></Node></Data>', "Node 'b' appears twice"),
    (b'<Node><Id>x</Id><Utilized><Processors wallDuration="P200Y">1</Processors></Utilized></Node>',
     r"Utilized/Processors/@wallDuration: 'P200Y' is absurdly long"),
    (b'<Node><Id>x</Id><Utilized><Processors wallDuration="1e3">1</Processors></Utilized></Node>',
     "'1e3' is not a number of seconds or an ISO 8601 duration"),
    (b'<Node><Id>x</Id><Feature aggregation="List" count="3">a,b</Feature></Node>', r"Feature/@count: 3, but 2 features named"),
    # more digits than int() takes (4,300)
    (b'<Node><Id>x</Id><Utilized><Processors wallDuration="' + b"9" * 5000 + b'">1</Processors></Utilized></Node>',
     r"Utilized/Processors/@wallDuration: '9{40}' is not a finite number$"),
    (b'<Node><Id>x</Id><Extension name="RunnableTasks" type="Load">' + b"9" * 5000 + b"</Extension></Node>",
     r"Extension\[@name='RunnableTasks'\]: '9{40}' is not a finite number$"),
])
def test_bad_or_absurd_references_are_refused_with_one_line(document, message):
    with pytest.raises(NodeXMLError, match=message) as caught:
        read_nodes(document)
    assert "\n" not in str(caught.value)


def test_a_document_naming_too_many_nodes_in_all_is_refused():
    half = MAX_NODES // 2 + 1
    document = (f'<Data><Node><Id aggregation="Range">a[1-{half}]</Id></Node>'
                f'<Node><Id aggregation="Range">b[1-{half}]</Id></Node></Data>').encode()
    with pytest.raises(NodeXMLError, match=f"Node 'b\\[1-{half}\\]': Id: the Range names {half} nodes, more than the "
                                           f"{MAX_NODES - half} nodes a document may name"):
        read_nodes(document)


def test_one_host_sources_refuse_a_node_that_names_several():
    document = fixture("reference-pattern.xml")
    with pytest.raises(NodeXMLError, match="expected one Node, found 5"):
        read_node(document)
    with pytest.raises(NodeXMLError, match="expected one Node, found 5"):
        NodeFileReader().read("node1.xml", document)


# -- features and wallDuration -----------------------------------------------------------------------------------


@pytest.mark.parametrize("features, expected", [
    (b"<Feature>a,b,c</Feature>", ["a", "b", "c"]),
    (b"<Feature> a , b </Feature><Feature>c</Feature>", ["a", "b", "c"]),
    (b"<Feature>a,,</Feature>", ["a"]),
    (b'<Feature aggregation="List" delimiter="|">x,y|z</Feature>', ["x,y", "z"]),
    (b'<Feature aggregation="Range">gpu[1-2]</Feature>', ["gpu1", "gpu2"]),
])
def test_features_are_the_comma_delimited_string_of_table_1(features, expected):
    snapshot = read_node(b"<Node><Id>f</Id>" + features + b"</Node>")
    assert snapshot.static.features == expected
    assert canonical(render_node(snapshot, NOW)) == canonical(b"<Node><Id>f</Id>" + features + b"</Node>")


def test_a_wall_duration_is_read_as_seconds_or_as_an_xsd_duration_and_written_as_seconds():
    for wall in ("3576", "1.5", "PT59M36S", "P1DT2H", "PT0.25S"):
        document = f'<Node><Id>w</Id><Utilized><Processors wallDuration="{wall}">1</Processors></Utilized></Node>'.encode()
        assert canonical(render_node(read_node(document), NOW)) == canonical(document)
    own = HostSnapshot(hostname="own", collected_at=NOW, cpu=CpuInfo(logical_cpus=2), load=LoadInfo(load1=1.0))
    assert etree.fromstring(render_node(own, NOW)).find("Utilized/Processors").get("wallDuration") == "60"


# -- the spool and the model boundary ----------------------------------------------------------------------------


def test_another_programs_node_in_the_spool_is_read_whole_every_time_and_as_read_node_reads_it():
    reader = NodeFileReader()
    document = fixture("every-part.xml")
    for _ in range(3):
        mine = reader.read("wn042.xml", document, source="spool")
        assert mine.to_json() == read_node(document, source="spool").to_json()
    assert (reader.quick, reader.full) == (0, 3)


def test_a_published_part_no_node_could_give_is_dropped_at_the_model_boundary_and_named():
    snapshot = read_node(fixture("every-part.xml"))
    data = snapshot.to_dict()
    configured = next(part for part in data["published"]["parts"] if part["tag"] == "Configured")
    configured["amounts"][1]["text"] = "-5"  # Memory
    configured["amounts"][0]["consumption_rate"] = "fast"  # Processors
    data["published"]["parts"].append({"tag": "Script", "text": "<evil/>"})
    checked = validate_snapshot(HostSnapshot.from_dict(data), NOW)
    assert checked.dropped == [
        "host wn042.example.org: published.parts[9] (Configured).amounts[0] (Processors) 'fast' is not a number: dropped",
        "host wn042.example.org: published.parts[9] (Configured).amounts[1] (Memory) '-5' is not a number: dropped",
        "host wn042.example.org: published.parts[14] (Script) is not an element of the SSS Node spec: dropped",
    ]
    node = etree.fromstring(render_node(checked.snapshot, NOW))
    assert [e.tag for e in node.find("Configured")] == ["Disk", "Swap", "Network", "Resource"]
    assert node.find("Script") is None


def test_a_description_over_several_lines_is_kept():
    document = b"<Node><Id>d</Id><Description>line one\nline two\ttabbed</Description></Node>"
    checked = validate_snapshot(read_node(document), NOW)
    assert checked.dropped == []
    assert etree.fromstring(render_node(checked.snapshot, NOW)).findtext("Description") == "line one\nline two\ttabbed"


def test_every_fixture_is_one_a_test_reads():
    assert sorted(p.name for p in FIXTURES.glob("*.xml")) == sorted(SINGLE_NODE + ["reference.xml", "reference-pattern.xml"])
    assert Path(FIXTURES).is_dir()
