"""The site as a Haizea <site> (issue 14): node sets counted by hand from site50.json, the
least RAM of a SubCluster's granularity bucket, [node] resources as extra types, Offline and
Unknown hosts left out and named; every document valid against the XSD, which takes the spec's
own examples and refuses the broken ones."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest
from lxml import etree
from paths import FIXTURES, REPO

from glueinfo.core.config import parse_text
from glueinfo.core.model import HostSnapshot, NodeAllocation, QueueState
from glueinfo.haizea.site import HaizeaError, site_document
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.node_settings import node_settings

NOW = 1_700_000_100.0  # site50.json's clock (tests/fixtures/nodes/make_site50.py)
SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "glueinfo" / "haizea" / "xsd" / "haizea.xsd")))
HAIZEA = FIXTURES / "haizea"
GRID = "ce01.example.org:2119/jobmanager-slurm-grid"
CONFIG = """
[cluster:batch]
hosts = wn*
[subcluster:mixed]
hosts = wn04?.example.org
[ce:grid]
cluster = batch
lrms = slurm
queue = grid
[node]
offline_hosts = wn005.example.org
"""
PINNED = {f"wn04{i}.example.org" for i in range(10)}
# What Slurm says of four hosts (the scheduler's view overrides their load's).
SLURM = {"wn002.example.org": "Offline", "wn003.example.org": "Unknown", "wn004.example.org": "Busy"}


def fixture_hosts() -> list[dict]:
    hosts = json.loads((FIXTURES / "nodes" / "site50.json").read_text(encoding="utf-8"))
    by_name = {h["hostname"]: h for h in hosts}
    # Same CPUs and one 1024 MB bucket within the pinned SubCluster: one set, of the smaller RAM.
    by_name["wn049.example.org"]["memory"]["ram_mb"] = 1048576 - 400
    by_name["wn049.example.org"]["cpu"]["logical_cpus"] = by_name["wn046.example.org"]["cpu"]["logical_cpus"]
    # A fractional licence count: whole licences only.
    by_name["wn045.example.org"]["extra"]["node_resources"]["resources"].append(
        {"name": "License", "type": None, "configured": 2.5, "available": None, "utilized": None, "units": None})
    by_name["wn012.example.org"]["memory"]["ram_mb"] = None  # capacity unknown
    return hosts


def assembled(hosts: list[dict], config: str = CONFIG, slurm: dict[str, str] = SLURM):
    snapshots = [HostSnapshot.from_dict(copy.deepcopy(h)) for h in hosts]
    state = QueueState(lrms_type="slurm", nodes=[NodeAllocation(name=name, state=word) for name, word in slurm.items()])
    parsed = parse_text(config)
    site = assemble_snapshots(parsed, snapshots, lambda: NOW, local_fqdn="ce01.example.org", states={GRID: state})
    return site, node_settings(parsed)


def document(hosts: list[dict]) -> etree._Element:
    site, settings = assembled(hosts)
    text = site_document(site, NOW, settings)
    assert text.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n')
    root = etree.fromstring(text)
    SCHEMA.assertValid(root)
    return root


# -- expected values, computed here from the fixture's data -----------------------------------------

def left_out_by_hand(hosts: list[dict]) -> dict[str, set[str]]:
    reasons: dict[str, set[str]] = {}
    for h in hosts:
        name = h["hostname"]
        if name == "wn005.example.org":
            reason = "Offline"
        elif not h["collected_at"] or abs(NOW - h["collected_at"]) > 300:
            reason = "Unknown"
        elif SLURM.get(name) in ("Offline", "Unknown"):
            reason = SLURM[name]
        elif not h["cpu"]["logical_cpus"] or not h["memory"]["ram_mb"]:
            reason = "capacity unknown"
        else:
            continue
        reasons.setdefault(reason, set()).add(name)
    return reasons


def resources_by_hand(h: dict) -> tuple[tuple[str, int], ...]:
    records = h["extra"].get("node_resources", {}).get("resources", [])
    return tuple(sorted((f"{r['name']}:{r['type']}" if r["type"] else r["name"], int(r["configured"])) for r in records))


def node_sets_by_hand(hosts: list[dict]) -> Counter:
    """(CPU, Memory, resources) -> hosts.  site50's RAM sizes are one per 1024 MB bucket, so outside the
    pinned SubCluster every host's set has its own RAM; inside it, hosts of equal CPUs and resources in
    one bucket take the least RAM among them."""
    out = set().union(*left_out_by_hand(hosts).values())
    kept = [h for h in hosts if h["hostname"] not in out]
    counts: Counter = Counter()
    for h in kept:
        cpus, ram, res = h["cpu"]["logical_cpus"], h["memory"]["ram_mb"], resources_by_hand(h)
        if h["hostname"] in PINNED:
            ram = min(o["memory"]["ram_mb"] for o in kept if o["hostname"] in PINNED and o["cpu"]["logical_cpus"] == cpus
                      and resources_by_hand(o) == res and round(o["memory"]["ram_mb"] / 1024) == round(ram / 1024))
        counts[(100 * cpus, ram, res)] += 1
    return counts


def node_sets_of(nodes: etree._Element) -> Counter:
    counts: Counter = Counter()
    for node_set in nodes.findall("node-set"):
        amounts = {r.get("type"): int(r.get("amount")) for r in node_set.findall("res")}
        key = (amounts.pop("CPU"), amounts.pop("Memory"), tuple(sorted(amounts.items())))
        assert key not in counts, f"two node-sets of one capacity: {key}"
        counts[key] = int(node_set.get("numnodes"))
    return counts


# -- tests ------------------------------------------------------------------------------------------

def test_one_node_set_per_distinct_capacity_counted_from_the_fixture():
    hosts = fixture_hosts()
    root = document(hosts)
    assert root.tag == "site"
    expected = node_sets_by_hand(hosts)
    assert node_sets_of(root.find("nodes")) == expected
    # 50 hosts less wn005 ([node] offline_hosts), wn002 and wn003 (Slurm: Offline, Unknown),
    # wn017 and wn031 (stale), wn012 (RAM unknown); wn004 is Busy for Slurm and stays.
    assert sum(expected.values()) == 44
    assert expected[(800, 1048576 - 400, ())] == 2  # wn046 and wn049: one set, the smaller RAM
    assert (800, 1048576, ()) not in expected


def test_resource_types_declare_cpu_memory_and_the_configured_consumables():
    root = document(fixture_hosts())
    assert root.find("resource-types").get("names") == "CPU Memory GPU:A100 License"
    wn045 = [s for s in root.iter("node-set") if s.find("res[@type='License']") is not None]
    assert len(wn045) == 1 and wn045[0].find("res[@type='License']").get("amount") == "2"  # 2.5 licences: 2 whole
    declared = set(root.find("resource-types").get("names").split())
    assert {r.get("type") for r in root.iter("res")} <= declared


def test_the_comment_names_every_host_left_out_and_why():
    hosts = fixture_hosts()
    root = document(hosts)
    comment = root[0]
    assert comment.tag is etree.Comment
    text = comment.text
    for reason, names in left_out_by_hand(hosts).items():
        assert f"{reason}: {len(names)} (" in text
        for name in names:
            assert name in text
    assert "a simulation does not plan on them" in text
    # and none of them is counted in a node set
    assert sum(int(s.get("numnodes")) for s in root.iter("node-set")) == 44


def test_a_slurm_that_does_not_answer_leaves_its_clusters_hosts_out():
    hosts = fixture_hosts()
    settings = node_settings(parse_text(CONFIG))
    silent = QueueState(lrms_type="slurm", error="squeue: command not found")
    site = assemble_snapshots(parse_text(CONFIG), [HostSnapshot.from_dict(copy.deepcopy(h)) for h in hosts],
                              lambda: NOW, local_fqdn="ce01.example.org", states={GRID: silent})
    with pytest.raises(HaizeaError, match=r"^no host of the site can be described for Haizea \(Offline: 1; Unknown: 49\)$"):
        site_document(site, NOW, settings)


def test_hostile_names_and_resources_are_escaped_and_the_document_stays_valid():
    hosts = fixture_hosts()[:3]
    hosts[0]["hostname"] = "xn--wn-evil.example.org"  # a valid DNS name with the "--" no XML comment may hold
    hosts[1]["extra"]["node_resources"] = {"resources": [
        {"name": "Tok<en>", "type": "a&b", "configured": 3.0, "available": None, "utilized": None, "units": None}]}
    config = CONFIG.replace("hosts = wn*", "hosts = *").replace("offline_hosts = wn005.example.org", "offline_hosts = xn--*")
    site, settings = assembled(hosts, config, slurm={})
    root = etree.fromstring(site_document(site, NOW, settings))
    SCHEMA.assertValid(root)
    assert "Tok<en>:a&b" in root.find("resource-types").get("names").split()
    assert "Offline: 1 (xn- -wn-evil.example.org)" in root[0].text


def test_the_spec_examples_validate_and_the_broken_documents_do_not():
    good = sorted(HAIZEA.glob("spec-*.xml")) + [HAIZEA / "workload-handwritten.xml"]
    bad = sorted(HAIZEA.glob("bad-*.xml"))
    assert len(good) == 4 and len(bad) >= 8
    for path in good:
        assert SCHEMA.validate(etree.parse(str(path))), (path.name, SCHEMA.error_log.last_error)
    for path in bad:
        assert not SCHEMA.validate(etree.parse(str(path))), path.name


def test_a_resource_named_like_haizeas_own_types_leaves_its_host_out():
    hosts = fixture_hosts()
    hosts[0]["extra"]["node_resources"] = {"resources": [
        {"name": "Memory", "type": None, "configured": 8.0, "available": None, "utilized": None, "units": None}]}
    root = document(hosts)
    assert "resource named CPU or Memory: 1 (wn001.example.org)" in root[0].text
    assert sum(int(s.get("numnodes")) for s in root.iter("node-set")) == 44 - 1
