"""SSS Node XML: what glueinfo emits validates against the XSD, says what the
host data says (checked with plain lxml against the fixture's own numbers or
/proc), follows the documented State rules, and reads back into the same
HostSnapshot; hostile and absurd input is refused with a clear message."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree
from paths import REPO

from glueinfo.core.model import CpuInfo, FileSystem, HostSnapshot, LoadInfo, MemoryInfo, OsInfo, StaticFacts
from glueinfo.sss.node_reader import NodeXMLError, read_node, read_nodes
from glueinfo.sss.node_resources import attach_resources, parse_resources
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_xml import render_data, render_node

ROOT = REPO
FIXTURE = ROOT / "tests" / "fixtures" / "nodes" / "site50.json"
NOW = 1_700_000_100.0  # the fixture's clock (see make_site50.py)
SCHEMA = etree.XMLSchema(etree.parse(str(ROOT / "glueinfo" / "sss" / "xsd" / "sss-node.xsd")))
PSEUDO = {"tmpfs", "devtmpfs", "squashfs", "overlay", "proc", "sysfs", "ramfs"}


def fixture_dicts() -> list[dict]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def fixture_snapshots() -> list[HostSnapshot]:
    return [HostSnapshot.from_dict(d) for d in fixture_dicts()]


def assert_valid(document: bytes) -> etree._Element:
    root = etree.fromstring(document)
    assert SCHEMA.validate(root), SCHEMA.error_log
    return root


def text(node: etree._Element, path: str):
    found = node.find(path)
    return None if found is None else found.text


def normalised(snapshot: HostSnapshot) -> dict:
    """A snapshot's dict with empty sections as None (they render the same) and times to the microsecond."""
    data = snapshot.to_dict()
    for key in ("cpu", "memory", "load", "os", "static"):
        section = data[key]
        if section is not None and not any(v not in (None, [], {}) for v in section.values()):
            data[key] = None
    for key in ("network", "filesystems"):
        data[key] = data[key] or None
    data["collected_at"] = round(data["collected_at"], 6)
    if data["os"] and data["os"]["boot_time"] is not None:
        data["os"]["boot_time"] = round(data["os"]["boot_time"], 6)
    return data


# -- validity ---------------------------------------------------------------------------------------


def test_every_fixture_node_and_the_site_document_validate():
    snapshots = fixture_snapshots()
    for snapshot in snapshots:
        root = assert_valid(render_node(snapshot, NOW))
        assert root.tag == "Node" and text(root, "Id") == snapshot.hostname
    site = assert_valid(render_data(snapshots, NOW))
    assert [n.findtext("Id") for n in site] == [s.hostname for s in snapshots]


def test_elements_are_upper_camel_case_attributes_lower_camel_case_and_quotes_straight():
    document = render_data(fixture_snapshots(), NOW)
    assert document.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    for quote in ("\u201c".encode(), "\u201d".encode(), b"'"):
        assert quote not in document.split(b"?>", 1)[0]
    root = etree.fromstring(document)
    for element in root.iter():
        assert element.tag[0].isupper() and "_" not in element.tag and "-" not in element.tag
        for name in element.attrib:
            assert name[0].islower() and "_" not in name and "-" not in name


def test_hostile_strings_still_give_a_valid_document():
    snapshot = HostSnapshot(
        hostname="wn-evil.example.org", collected_at=NOW - 5,
        cpu=CpuInfo(logical_cpus=4, model_name="Xeon\x00\x1b[31m <script>&amp;\"'</script> \ud800 ]]> \u202e"),
        memory=MemoryInfo(ram_mb=1024),
        os=OsInfo(name="Linux\x07", pretty_name="\ufffe\uffff"),
        static=StaticFacts(features=["]]>", "a&b", "<Feature>"], extensions={"k\"ey": "v\x01al<ue>", "tab\there\nnew\rline": "x"},
                           runtime_environment=["\r\n\t"]),
        extra={"plugin": {"weird \x00 key": "\x1f value", "nested": [1, {"x": "<y/>"}]}},
    )
    root = assert_valid(render_node(snapshot, NOW))
    model = root.find("Extension[@name='CpuModel']").text
    assert "<script>&amp;\"'</script>" in model and "\ufffd" in model and "\x00" not in model
    assert [f.text for f in root.findall("Feature")] == ["]]>", "a&b", "<Feature>"]
    back = read_node(etree.tostring(root))
    assert back.static.features == ["]]>", "a&b", "<Feature>"]
    assert back.static.extensions == {"k\"ey": "v\ufffdal<ue>", "tab\there\nnew\rline": "x"}
    assert back.static.runtime_environment == ["\r\n\t"] and back.extra["plugin"]["weird \x00 key"] == "\x1f value"
    assert back.extra["plugin"]["nested"] == [1, {"x": "<y/>"}]


# -- figures: what the document says against the fixture's own data -------------------------------------


def expected_processors(snap: dict) -> tuple[int, int, str, float] | None:
    """(utilized, available, wallDuration in seconds, busy) by the README's rules, computed from the raw fixture."""
    cpus = snap["cpu"]["logical_cpus"]
    load = snap["load"]
    if load is None:
        return None
    if load.get("cpu_utilisation_percent") is not None:
        busy, wall = load["cpu_utilisation_percent"] / 100 * cpus, "2"
    else:
        busy, wall = load["load1"], "60"
    capped = min(busy, cpus)
    used = math.ceil(capped - 1e-9) if capped > 1e-9 else 0
    return used, cpus - used, wall, capped


def test_configured_available_utilized_figures_match_the_fixture():
    raw = fixture_dicts()
    site = assert_valid(render_data(fixture_snapshots(), NOW))
    for snap, node in zip(raw, site, strict=True):
        assert node.findtext("Id") == snap["hostname"]
        assert node.findtext("Name") == snap["hostname"].split(".")[0]
        assert int(node.findtext("Configured/Processors")) == snap["cpu"]["logical_cpus"]
        memory = node.find("Configured/Memory")
        assert (memory.get("units"), float(memory.text)) == ("MB", snap["memory"]["ram_mb"])
        assert float(node.findtext("Available/Memory")) == snap["memory"]["ram_available_mb"]
        assert float(node.findtext("Utilized/Memory")) == snap["memory"]["ram_mb"] - snap["memory"]["ram_available_mb"]
        assert node.find("Available/Memory").get("metric") == "Instantaneous"
        if snap["memory"]["swap_mb"] is None:
            assert node.find("Configured/Swap") is None and node.find("Utilized/Swap") is None
        else:
            assert float(node.findtext("Configured/Swap")) == snap["memory"]["swap_mb"]
            assert float(node.findtext("Available/Swap")) == snap["memory"]["swap_free_mb"]
        local = [fs for fs in snap["filesystems"] if not fs["remote"] and not fs["read_only"] and fs["fs_type"] not in PSEUDO]
        assert float(node.findtext("Configured/Disk")) == sum(fs["size_mb"] for fs in local)
        if any(fs["available_mb"] is None for fs in local):
            assert node.find("Available/Disk") is None and node.find("Utilized/Disk") is None
        else:
            assert float(node.findtext("Available/Disk")) == sum(fs["available_mb"] for fs in local)
        speed = snap["network"][0]["speed_mbps"]
        if speed is None:
            assert node.find("Configured/Network") is None
        else:
            assert (node.find("Configured/Network").get("units"), float(node.findtext("Configured/Network"))) == ("Mbps", speed)
        expected = expected_processors(snap)
        utilized = node.find("Utilized/Processors")
        if expected is None:
            assert utilized is None and node.find("Available/Processors") is None
            continue
        used, free, wall, busy = expected
        assert int(utilized.text) == used and int(node.findtext("Available/Processors")) == free
        assert utilized.get("metric") == "Average" and utilized.get("wallDuration") == wall
        if used:
            assert float(utilized.get("consumptionRate")) == pytest.approx(busy / used, abs=1e-4)
            assert 0 < float(utilized.get("consumptionRate")) <= 1
        assert [f.text for f in node.findall("Feature")] == snap["static"]["features"]
        resources = (snap["extra"].get("node_resources") or {}).get("resources", [])
        assert [(r.get("name"), r.get("type"), float(r.text)) for r in node.findall("Configured/Resource")] == \
            [(r["name"], r["type"], r["configured"]) for r in resources]


def test_unknown_figures_are_left_out_never_invented():
    snapshot = HostSnapshot(hostname="bare.example.org", collected_at=NOW, memory=MemoryInfo(ram_mb=2048))
    root = assert_valid(render_node(snapshot, NOW))
    assert [e.tag for e in root] == ["Id", "Name", "State", "Configured", "Extension", "Extension"]
    assert [e.tag for e in root.find("Configured")] == ["Memory"]
    assert root.findtext("State") == "Configured"
    assert root.find("Available") is None and root.find("Utilized") is None


def test_processors_from_measured_utilisation_and_from_load():
    cpu = CpuInfo(logical_cpus=8)
    by_load = HostSnapshot(hostname="a", collected_at=NOW, cpu=cpu, load=LoadInfo(load1=3.2))
    root = assert_valid(render_node(by_load, NOW))
    assert root.findtext("Utilized/Processors") == "4" and root.findtext("Available/Processors") == "4"
    assert root.find("Utilized/Processors").get("consumptionRate") == "0.8"
    assert root.find("Utilized/Processors").get("wallDuration") == "60"
    measured = HostSnapshot(hostname="b", collected_at=NOW, cpu=cpu,
                            load=LoadInfo(load1=7.9, cpu_utilisation_percent=25.0, utilisation_interval_s=1.5))
    root = assert_valid(render_node(measured, NOW))
    assert root.findtext("Utilized/Processors") == "2" and root.findtext("Available/Processors") == "6"
    assert root.find("Utilized/Processors").get("wallDuration") == "1.5"
    overloaded = HostSnapshot(hostname="c", collected_at=NOW, cpu=cpu, load=LoadInfo(load1=30.0))
    root = assert_valid(render_node(overloaded, NOW))
    assert root.findtext("Utilized/Processors") == "8" and root.findtext("Available/Processors") == "0"
    assert root.find("Utilized/Processors").get("consumptionRate") == "1"


def test_disk_counts_local_writable_real_filesystems_once_per_device():
    filesystems = [
        FileSystem("/", "/dev/sda1", "ext4", size_mb=100, available_mb=40),
        FileSystem("/srv/bind", "/dev/sda1", "ext4", size_mb=100, available_mb=40),  # bind mount: same device
        FileSystem("/tmp", "tmpfs", "tmpfs", size_mb=50, available_mb=50),
        FileSystem("/home", "nfs:/home", "nfs4", remote=True, size_mb=9999, available_mb=999),
        FileSystem("/cdrom", "/dev/sr0", "ext4", read_only=True, size_mb=700, available_mb=0),
        FileSystem("/data", "/dev/sdb", "xfs", size_mb=1000, available_mb=900),
    ]
    snapshot = HostSnapshot(hostname="d", collected_at=NOW, filesystems=filesystems)
    root = assert_valid(render_node(snapshot, NOW))
    assert (root.findtext("Configured/Disk"), root.findtext("Available/Disk"), root.findtext("Utilized/Disk")) == ("1100", "940", "160")
    only_data = assert_valid(render_node(snapshot, NOW, NodeSettings(disk_mounts=("/data",))))
    assert only_data.findtext("Configured/Disk") == "1000"


# -- State rules ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("collected_at, load1, settings, state", [
    (NOW - 10, 1.0, NodeSettings(), "Idle"),
    (NOW - 10, 3.6, NodeSettings(), "Busy"),  # 3.6 / 4 = 0.9, the default threshold
    (NOW - 10, 3.5, NodeSettings(), "Idle"),
    (NOW - 10, 2.0, NodeSettings(busy_threshold=0.5), "Busy"),
    (NOW - 301, 0.0, NodeSettings(), "Unknown"),  # older than stale_after (300 s)
    (NOW - 299, 0.0, NodeSettings(), "Idle"),
    (NOW + 400, 0.0, NodeSettings(), "Unknown"),  # from the future: a wrong clock
    (0.0, 0.0, NodeSettings(), "Unknown"),  # never collected
    (NOW - 10, 0.0, NodeSettings(offline_hosts=("wn0[1-3]",)), "Offline"),  # short-name pattern
    (NOW - 10, 0.0, NodeSettings(offline_hosts=("WN02.EXAMPLE.ORG",)), "Offline"),
    (NOW - 9999, 0.0, NodeSettings(offline_hosts=("*",)), "Offline"),  # an admin's word beats staleness
    (NOW - 10, None, NodeSettings(), "Configured"),  # no load figure: only configured facts known
])
def test_state_rules(collected_at, load1, settings, state):
    snapshot = HostSnapshot(hostname="wn02.example.org", collected_at=collected_at, cpu=CpuInfo(logical_cpus=4),
                            load=LoadInfo(load1=load1) if load1 is not None else None)
    assert assert_valid(render_node(snapshot, NOW, settings)).findtext("State") == state


def test_state_unknown_without_any_fact():
    snapshot = HostSnapshot(hostname="ghost", collected_at=NOW)
    assert assert_valid(render_node(snapshot, NOW)).findtext("State") == "Unknown"


def test_fixture_states():
    site = etree.fromstring(render_data(fixture_snapshots(), NOW, NodeSettings(offline_hosts=("wn04*",))))
    states = {n.findtext("Id"): n.findtext("State") for n in site}
    assert states["wn017.example.org"] == "Unknown"  # stale
    assert states["wn031.example.org"] == "Unknown"  # never collected
    assert states["wn023.example.org"] == "Configured"  # no load data
    assert all(states[f"wn{i:03d}.example.org"] == "Offline" for i in range(40, 50))
    for snap in fixture_dicts():
        if states[snap["hostname"]] in ("Idle", "Busy"):
            _, _, _, busy = expected_processors(snap)
            assert states[snap["hostname"]] == ("Busy" if busy / snap["cpu"]["logical_cpus"] >= 0.9 else "Idle")


# -- round trip -------------------------------------------------------------------------------------------------


def test_round_trip_of_every_fixture_host():
    for snapshot in fixture_snapshots():
        back = read_node(render_node(snapshot, NOW))
        assert normalised(back) == normalised(snapshot)


def test_round_trip_of_the_site_document_and_of_a_live_probe():
    snapshots = fixture_snapshots()
    back = read_nodes(render_data(snapshots, NOW, pretty=False))
    assert [normalised(s) for s in back] == [normalised(s) for s in snapshots]
    live = HostSnapshot.from_json(subprocess.run([sys.executable, "-m", "glueinfo.cli", "probe"], check=True,
                                                 capture_output=True, text=True, cwd=ROOT).stdout)
    assert normalised(read_node(render_node(live, live.collected_at))) == normalised(live)


def test_round_trip_keeps_the_collection_time_and_source_and_can_relabel_it():
    snapshot = HostSnapshot(hostname="wn9", collected_at=1_700_000_000.123456, source="agent", memory=MemoryInfo(ram_mb=1))
    back = read_node(render_node(snapshot, NOW))
    assert back.collected_at == pytest.approx(1_700_000_000.123456, abs=1e-6) and back.source == "agent"
    assert read_node(render_node(snapshot, NOW), source="spool").source == "spool"


def test_resources_from_config_reach_the_document_and_come_back():
    snapshot = attach_resources(HostSnapshot(hostname="g", collected_at=NOW), parse_resources(["GPU:A100=4", "License:MATLAB=2.5"]))
    root = assert_valid(render_node(snapshot, NOW))
    assert [(r.get("name"), r.get("type"), r.text) for r in root.findall("Configured/Resource")] == \
        [("GPU", "A100", "4"), ("License", "MATLAB", "2.5")]
    assert read_node(etree.tostring(root)).extra == snapshot.extra
    for bad in (["GPU"], ["GPU=-1"], ["=4"], ["GPU=4", "GPU=2"], ["GPU:A 100=1"]):
        with pytest.raises(ValueError, match="GPU|NAME"):
            parse_resources(bad)


# -- reading other software's and hostile documents ---------------------------------------------------------------


SPEC_EXAMPLE = b"""<Node>
  <Id>64</Id><Name>Netpipe2</Name><Feature>BigMem</Feature><Feature>NetOC12</Feature><Opsys>AIX</Opsys><Arch>Power4</Arch>
  <Configured><Processors>16</Processors><Memory units="MB">512</Memory><Swap>512</Swap></Configured>
  <Available><Processors>7</Processors><Memory metric="Instantaneous">143</Memory></Available>
  <Utilized><Processors wallDuration="3576">8</Processors><Memory metric="Average" wallDuration="3576">400</Memory></Utilized>
  <Extension type="Chemistry" name="Software">NWChem</Extension>
</Node>"""


def test_the_specs_elaborate_example_validates_and_reads():
    assert_valid(SPEC_EXAMPLE)
    snapshot = read_node(SPEC_EXAMPLE)
    assert snapshot.hostname == "64" and snapshot.cpu.logical_cpus == 16
    assert (snapshot.memory.ram_mb, snapshot.memory.ram_available_mb, snapshot.memory.swap_mb) == (512, 143, 512)
    assert snapshot.static.features == ["BigMem", "NetOC12"] and snapshot.os.name == "AIX" and snapshot.os.platform_type == "Power4"
    assert snapshot.static.extensions == {"Software": "NWChem"} and snapshot.collected_at == 0.0


def test_units_are_converted_when_reading():
    snapshot = read_node(b'<Node><Id>u</Id><Configured><Memory units="GB">1.5</Memory><Swap units="KB">2048</Swap></Configured></Node>')
    assert (snapshot.memory.ram_mb, snapshot.memory.swap_mb) == (1536, 2)


@pytest.mark.parametrize("document, message", [
    (b"<Node><Id>x</Id><Configured><Memory>-5</Memory></Configured></Node>", "Configured/Memory: -5 is negative"),
    (b"<Node><Id>x</Id><Configured><Memory units='PB'>9e9</Memory></Configured></Node>", "Configured/Memory: .* absurdly large"),
    (b"<Node><Id>x</Id><Configured><Processors>1e12</Processors></Configured></Node>", "Configured/Processors: .*absurdly large"),
    (b"<Node><Id>x</Id><Configured><Processors>0</Processors></Configured></Node>", "at least one processor"),
    (b"<Node><Id>x</Id><Configured><Processors>2.5</Processors></Configured></Node>", "not a whole number"),
    (b"<Node><Id>x</Id><Configured><Memory>lots</Memory></Configured></Node>", "'lots' is not a number"),
    (b"<Node><Id>x</Id><Configured><Memory>INF</Memory></Configured></Node>", "not a number"),
    (b"<Node><Id>x</Id><Configured><Memory units='parsecs'>1</Memory></Configured></Node>", "unknown unit"),
    (b"<Node><Id>x</Id><Configured><Memory>1</Memory><Memory>2</Memory></Configured></Node>", "given twice"),
    (b"<Node><Id>x</Id><Configured><Memory>100</Memory></Configured><Available><Memory>200</Memory></Available></Node>",
     "Available/Memory: 200 is more than Configured/Memory"),
    (b"<Node><Id>x</Id><Utilized><Processors consumptionRate='-1'>1</Processors></Utilized></Node>", "consumptionRate: -1 is negative"),
    (b"<Node><Id>x</Id><Utilized><Processors wallDuration='an hour'>1</Processors></Utilized></Node>",
     "'an hour' is not a number of seconds or an ISO 8601 duration"),
    (b"<Node><Id>x</Id><Configured><Resource>1</Resource></Configured></Node>", "needs a name"),
    (b"<Node><Id>x</Id><Extension name='ClockSpeed' type='Cpu'>-2000</Extension></Node>", "ClockSpeed.*negative"),
    (b"<Node><Id>x</Id><Extension name='LoadAverage1' type='Load'>nan</Extension></Node>", "not a number"),
    (b"<Node><Id>x</Id><Extension name='CollectedAt' type='Glueinfo'>3999-01-01T00:00:00Z</Extension></Node>", "absurdly large"),
    (b"<Node><Id>x</Id><Extension name='CollectedAt' type='Glueinfo'>2024-01-01T00:00:00</Extension></Node>", "no time zone"),
    (b"<Node><Id>x</Id><Extension name='/' type='FileSystem'>{\"size_mb\": -1}</Extension></Node>", "size_mb: -1 is negative"),
    (b"<Node><Id>x</Id><Extension name='/' type='FileSystem'>{not json</Extension></Node>", "not valid JSON"),
    (b"<Node><Id>x</Id><Extension name='eth0' type='NetworkAdapter'>{\"mtu\": \"big\"}</Extension></Node>", "mtu: expected an integer"),
    (b"<Node><Id>x</Id><Extension name='cpu' type='Collector'>maybe</Extension></Node>", "not 'ok|failed"),
    (b"<Node><Name>x</Name></Node>", "exactly one Id"),
    (b"<Node><Id>a b</Id></Node>", "Id: must be a host name"),
    (b"<Data><Node><Id>a</Id></Node><Node><Id>a</Id></Node></Data>", "'a' appears twice"),
    (b"<Nodes/>", "expected a Node or Data"),
    (b"<Node><Id>x</Id>", "not well-formed"),
    (b"", "empty document"),
])
def test_absurd_or_broken_documents_are_refused_with_a_clear_message(document, message):
    with pytest.raises(NodeXMLError, match=message) as caught:
        read_nodes(document)
    assert "\n" not in str(caught.value)


def test_entities_and_dtds_are_refused():
    xxe = b'<?xml version="1.0"?><!DOCTYPE Node [<!ENTITY x SYSTEM "file:///etc/passwd">]><Node><Id>&x;</Id></Node>'
    laughs = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">' +
              b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10) for i in range(1, 10)) +
              b']><Node><Id>&lol9;</Id></Node>')
    utf16 = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE Node [<!ENTITY x "y">]><Node><Id>&x;</Id></Node>'.encode("utf-16")
    for document in (xxe, laughs, utf16):
        with pytest.raises(NodeXMLError, match="DTDs and entity declarations are not accepted"):
            read_node(document)
    with pytest.raises(NodeXMLError, match="over the limit"):
        read_node(b"<Node><Id>x</Id>" + b"<Feature>f</Feature>" * 100 + b"</Node>", max_bytes=1000)


# -- the command ----------------------------------------------------------------------------------------------------


def glueinfo(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, GLUEINFO_CONFIG=os.devnull)
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, check=check, cwd=ROOT, env=env)


def test_node_xml_command_describes_this_host_as_proc_does():
    root = assert_valid(glueinfo("node-xml").stdout)
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert int(root.findtext("Configured/Processors")) == sum(1 for line in cpuinfo.splitlines() if line.startswith("processor"))
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert int(root.findtext("Configured/Memory")) == int(meminfo["MemTotal"].split()[0]) // 1024
    assert root.findtext("Arch") == os.uname().machine
    assert root.find("Extension[@name='Kernel']").text == os.uname().release
    assert root.findtext("State") in ("Idle", "Busy")


def test_node_xml_site_from_snapshot_files(tmp_path):
    for snap in fixture_dicts()[:3]:
        (tmp_path / f"{snap['hostname']}.json").write_text(json.dumps(snap))
    (tmp_path / "broken.json").write_text("{not json")
    result = glueinfo("node-xml", "--site", "--snapshot", str(tmp_path))
    root = assert_valid(result.stdout)
    ids = [n.findtext("Id") for n in root]
    assert ids[1:] == ["wn001.example.org", "wn002.example.org", "wn003.example.org"] and len(ids) == 4
    assert b"broken.json: not a glueinfo snapshot" in result.stderr
    # Node XML saved from an agent works as a snapshot file too
    (tmp_path / "agent.xml").write_bytes(render_node(fixture_snapshots()[5], NOW))
    only_files = assert_valid(glueinfo("node-xml", "--no-local", "--snapshot", str(tmp_path / "agent.xml")).stdout)
    assert [n.findtext("Id") for n in only_files] == ["wn006.example.org"]
    failed = glueinfo("node-xml", "--snapshot", str(tmp_path / "missing.json"), check=False)
    assert failed.returncode == 2 and b"missing.json: cannot read" in failed.stderr


# -- the render cache's memory ---------------------------------------------------------------------------


def test_cached_nodes_written_alike_share_their_lasting_text_and_still_print_as_lxml_does():
    from glue_sites import CLASSES, make_host

    from glueinfo.sss.node_markup_cache import NodeMarkupCache
    from glueinfo.sss.node_xml import node_markup, pretty_node, render_data_streamed

    xeon = CLASSES[0][0]
    a, b = make_host(xeon, 1), make_host(xeon, 2)  # one hardware class: the same OS, CPU and memory size
    cache = NodeMarkupCache()
    cache.start()
    parts_a, parts_b = cache.pretty_parts(a, NOW, NodeSettings()), cache.pretty_parts(b, NOW, NodeSettings())
    cache.finish()
    shared = [part for part in parts_a if any(part is other for other in parts_b) and b"<Opsys>Debian GNU/Linux</Opsys>" in part]
    assert len(shared) == 1  # one copy of the lines from Opsys on, for both hosts
    for snapshot, parts in ((a, parts_a), (b, parts_b)):
        assert b"".join(parts) == pretty_node(node_markup(snapshot, NOW), snapshot.hostname)
    assert render_data_streamed([a, b], NOW, NodeSettings(), cache) == render_data([a, b], NOW)


def test_the_render_cache_keeps_no_text_of_hosts_that_left():
    """A site whose hosts are all new at every render (a worst case): each document is the uncached
    one, and what the cache holds follows the site rather than every host it ever saw."""
    from glue_sites import CLASSES, make_host

    from glueinfo.sss.node_markup_cache import NodeMarkupCache
    from glueinfo.sss.node_xml import render_data_streamed

    def site(cycle: int) -> list[HostSnapshot]:
        return [make_host(hw, index, domain=f"cycle{cycle}.example.org") for hw, _ in CLASSES for index in range(6)]

    cache = NodeMarkupCache()
    for cycle in range(40):
        hosts = site(cycle)
        assert render_data_streamed(hosts, NOW, NodeSettings(), cache) == render_data(hosts, NOW)
    one_site = NodeMarkupCache()
    render_data_streamed(hosts, NOW, NodeSettings(), one_site)
    held, needed = len(cache._pieces), len(one_site._pieces)  # distinct lasting texts
    # 40 sites of 30 new hosts each have over 1,200 texts of their own (each host's Id at least); kept
    # together, the table of texts is renewed from one render's Nodes once it has doubled
    assert held <= 3 * needed + 256 < 1200
