"""Incremental publication: what a changed fact re-renders, and that caching never changes a byte.

The counts are the issue's rule, written by hand: a load change re-renders
that host's entry and the CE (whose FreeCPUs follow the loads), not the
host's file systems, its SubCluster, the cluster or the other hosts.
"""

from __future__ import annotations

import dataclasses

import pytest
from glue_sites import CLASSES, make_host

from glueinfo.core.config import parse_text
from glueinfo.glue.build import RenderCache, render_site
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.sss.node_markup_cache import NodeMarkupCache
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_xml import data_element, to_bytes

CONFIG = parse_text("[ce:default]\naccess = VO:dteam\n", "/etc/glueinfo/glueinfo.conf")
NOW = 1_700_000_100.0


def site(hosts):
    return assemble_snapshots(CONFIG, hosts, lambda: NOW, local_fqdn="ce01.example.org")


def hosts_of_two_classes():
    return [make_host(CLASSES[0][0], i) for i in range(4)] + [make_host(CLASSES[1][0], i) for i in range(2)]


# keep_entries=False: the daemon's cache without an LDAP server, which keeps host entries as texts only.
BOTH_MODES = pytest.mark.parametrize("keep_entries", [True, False], ids=["entries", "texts"])


@BOTH_MODES
def test_a_load_change_re_renders_that_host_and_the_ce_only_and_the_bytes_match_an_uncached_render(keep_entries):
    cache = RenderCache(keep_entries)
    hosts = hosts_of_two_classes()
    first = render_site(site(hosts), cache=cache)
    assert first.ldif() == render_site(site(hosts)).ldif()
    entries = len(first.texts)  # 1 cluster + 2 SubClusters + 6 hosts x (1 + 3 file systems) + 1 CE + 1 VOView = 29
    assert entries == 29 and (cache.rendered, cache.reused) == (29, 0)

    busy = dataclasses.replace(hosts[2], load=dataclasses.replace(hosts[2].load, load1=40.0))
    changed = hosts[:2] + [busy] + hosts[3:]
    second = render_site(site(changed), cache=cache)
    assert second.ldif() == render_site(site(changed)).ldif()
    assert second.ldif() != first.ldif()
    assert (cache.rendered, cache.reused) == (2, 27)  # the host's entry and the CE's FreeCPUs (not its VOView)

    third = render_site(site(changed), cache=cache)  # nothing new: nothing checked or formatted
    assert (cache.rendered, cache.reused) == (0, 29) and third.ldif() == second.ldif()


@BOTH_MODES
def test_a_host_that_leaves_is_gone_from_the_cached_output_too(keep_entries):
    cache = RenderCache(keep_entries)
    hosts = hosts_of_two_classes()
    render_site(site(hosts), cache=cache)
    fewer = render_site(site(hosts[1:]), cache=cache).ldif()
    assert fewer == render_site(site(hosts[1:])).ldif()
    assert hosts[0].hostname not in fewer


def test_node_xml_markup_is_reused_only_while_the_snapshot_and_its_state_are_the_same():
    cache = NodeMarkupCache()
    hosts = hosts_of_two_classes()
    first = to_bytes(data_element(hosts, NOW, cache=cache))
    assert first == to_bytes(data_element(hosts, NOW)) and cache.rendered == 6
    again = to_bytes(data_element(hosts, NOW, cache=cache))
    assert again == first and (cache.rendered, cache.reused) == (0, 6)
    # A new snapshot of one host: that Node only.
    newer = dataclasses.replace(hosts[0], collected_at=hosts[0].collected_at + 60,
                                load=dataclasses.replace(hosts[0].load, load1=1.5))
    changed = [newer] + hosts[1:]
    assert to_bytes(data_element(changed, NOW, cache=cache)) == to_bytes(data_element(changed, NOW))
    assert (cache.rendered, cache.reused) == (1, 5)
    # The clock alone: every host stale, so every State changes and every Node is rendered again.
    later = NOW + 10_000
    assert to_bytes(data_element(changed, later, cache=cache)) == to_bytes(data_element(changed, later))
    assert cache.rendered == 6 and b"<State>Unknown</State>" in to_bytes(data_element(changed, later, cache=cache))


def test_the_streamed_node_document_is_lxmls_pretty_document_byte_for_byte():
    """run's Node XML file is put together node by node (never parsed whole); `node-xml --site`
    pretty-prints the whole tree with lxml.  Same bytes, hostile text included."""
    from glueinfo.sss.node_xml import render_data, render_data_streamed

    hosts = hosts_of_two_classes()
    odd = hosts[0]
    odd = dataclasses.replace(odd, cpu=dataclasses.replace(odd.cpu, model_name='Xeon <&> "quoted" \'single\' ™ é\ttab'),
                              static=dataclasses.replace(odd.static, extensions={"note": "a\nnew line & <tag>", "empty": ""}))
    site_hosts = [odd] + hosts[1:]
    cache = NodeMarkupCache()
    assert render_data_streamed(site_hosts, NOW, cache=cache, settings=NodeSettings()) == render_data(site_hosts, NOW)
    assert render_data_streamed(site_hosts, NOW, cache=cache, settings=NodeSettings()) == render_data(site_hosts, NOW)
    assert render_data_streamed([], NOW, cache=cache, settings=NodeSettings()) == render_data([], NOW)


def test_node_templates_filled_again_give_the_uncached_bytes_cycle_after_cycle():
    """A Node whose lasting facts are as before is filled in again from its template (only its
    volatile figures are formatted): every cycle, pretty and compact, byte for byte what an
    uncached render gives, hostile text, missing sections and a gather's times included."""
    from glueinfo.core.model import CollectorResult
    from glueinfo.sss.node_xml import render_data, render_data_streamed

    hosts = hosts_of_two_classes()
    odd = hosts[0]
    odd = dataclasses.replace(
        odd, cpu=dataclasses.replace(odd.cpu, model_name='Xeon <&> "quoted" \'single\' ™ é\ttab\r'),
        static=dataclasses.replace(odd.static, extensions={"note": "a\nnew line & <tag>", "empty": "", "]]>": "x\u0001y"}),
        extra={"node_resources": {"resources": [{"name": "GPU", "type": "A100", "configured": 4.0, "available": 1.0,
                                                 "utilized": 3.0, "units": None}]}, "plugin": {"k": "<v>"},
               "gather": {"sources": {"spool": 1.5}}},
        collectors=[CollectorResult(name="cpu", success=False, duration_s=0.25, error="boom\n<x>")])
    bare = dataclasses.replace(hosts[1], load=None, memory=None, filesystems=None, network=None)
    site_hosts = [odd, bare] + hosts[2:]
    pretty, compact = NodeMarkupCache(), NodeMarkupCache()
    settings = NodeSettings()
    for cycle in range(4):
        now = NOW + 60 * cycle
        if cycle:  # new loads, free memory and collection times; the same lasting fact objects
            site_hosts = [dataclasses.replace(
                h, collected_at=h.collected_at + 60 * cycle,
                load=None if h.load is None else dataclasses.replace(h.load, load1=h.load.load1 + 1.25 * cycle, runnable_tasks=cycle),
                memory=None if h.memory is None else dataclasses.replace(h.memory, ram_available_mb=1000 + cycle),
                extra={**h.extra, "gather": {"sources": {"spool": now}}} if "gather" in h.extra else h.extra)
                for h in site_hosts]
        assert render_data_streamed(site_hosts, now, settings, pretty) == render_data(site_hosts, now)
        assert to_bytes(data_element(site_hosts, now, settings, compact)) == to_bytes(data_element(site_hosts, now, settings))
        assert pretty.rendered == len(site_hosts) and pretty.filled == (len(site_hosts) if cycle else 0)
    # Nothing new: every Node reused as it was.
    assert render_data_streamed(site_hosts, now, settings, pretty) == render_data(site_hosts, now)
    assert (pretty.rendered, pretty.reused) == (0, len(site_hosts))


@BOTH_MODES
def test_host_entries_with_new_loads_and_free_memory_are_patched_to_the_uncached_bytes_cycle_after_cycle(keep_entries):
    """A host whose lasting facts are as last time gets its last entry with the new load and free
    memory put in (no check, no format): byte for byte the uncached LDIF every cycle, with
    non-ASCII facts the check rewrites, figures that come and go, and negative loads."""
    hosts = hosts_of_two_classes()
    odd = hosts[0]
    hosts[0] = dataclasses.replace(odd, cpu=dataclasses.replace(odd.cpu, model_name="Xeon™ Gold é <&>"),
                                   os=dataclasses.replace(odd.os, name="Débian"))
    cache = RenderCache(keep_entries)
    for cycle in range(5):
        if cycle:
            hosts = [dataclasses.replace(
                h, collected_at=h.collected_at + 60,
                load=None if cycle == 3 and index == 1 else dataclasses.replace(
                    h.load or hosts_of_two_classes()[index].load, load1=(h.load.load1 if h.load else 1.0) + 7.5 * cycle),
                memory=dataclasses.replace(h.memory, ram_available_mb=100 + cycle, virtual_available_mb=200 + cycle))
                for index, h in enumerate(hosts)]
        cached = render_site(site(hosts), cache=cache)
        assert cached.ldif() == render_site(site(hosts)).ldif()
        uncached = render_site(site(hosts)).entries
        if not keep_entries:  # every entry but the hosts' and their file systems'
            uncached = [e for e in uncached if "GlueHostUniqueID=" not in e.dn]
        assert [e.dn for e in cached.entries] == [e.dn for e in uncached]
        assert [e.attributes for e in cached.entries] == [e.attributes for e in uncached]
    assert any(h.glue_load_figures()[0] < 0 for h in hosts)


@BOTH_MODES
def test_hosts_taken_from_the_cache_fall_with_a_subcluster_the_check_leaves_out(keep_entries, tmp_path):
    """When a SubCluster entry is refused (here: a site's own template gives it an attribute its
    classes do not allow), its hosts and file systems are left out with it, by DN, cached or not,
    and published again once it passes."""
    from glueinfo.glue.templates import builtin_templates_dir, load_templates

    for name in ("site", "cluster", "subcluster", "ce"):
        text = open(f"{builtin_templates_dir()}/{name}.ldif").read()
        if name == "subcluster":
            text = text.replace("GlueSubClusterName:", "GlueCEName: oops\nGlueSubClusterName:", 1)
        (tmp_path / f"{name}.ldif").write_text(text)
    refusing = load_templates(str(tmp_path))
    hosts = hosts_of_two_classes()
    cache = RenderCache(keep_entries)
    for cycle, templates in enumerate((None, refusing, refusing, None)):
        hosts = [dataclasses.replace(h, load=dataclasses.replace(h.load, load1=h.load.load1 + cycle)) for h in hosts]
        cached = render_site(site(hosts), cache=cache, templates=templates)
        uncached = render_site(site(hosts), templates=templates)
        assert cached.ldif() == uncached.ldif()
        assert [(p.dn, p.message) for p in cached.errors] == [(p.dn, p.message) for p in uncached.errors]
        if templates is refusing:  # 2 SubClusters, 6 hosts, 18 file systems
            assert len(cached.errors) == 26 and "GlueHostUniqueID" not in cached.ldif()
            assert sum("parent entry was left out" in p.message for p in cached.errors) == 24
        else:
            assert not cached.errors and hosts[5].hostname in cached.ldif()
