"""Site model and SubCluster aggregation, on host snapshots written by hand."""

from __future__ import annotations

import dataclasses
import random

import pytest
from glue_sites import CLASSES, make_host, synthetic_site

from glueinfo.core.config import ConfigError, parse_text
from glueinfo.site.aggregate import aggregate, ram_bucket
from glueinfo.site.from_config import site_from_config

XEON, EPYC, ARM, OLD, DESK = (hw for hw, _ in CLASSES)


def site(text: str = "", fqdn: str = "ce01.example.org"):
    return site_from_config(parse_text(text, "/etc/glueinfo/glueinfo.conf"), fqdn)


def ids(groups) -> dict[str, list[str]]:
    return {sc.unique_id: [h.hostname for h in sc.hosts] for c in groups.clusters for sc in c.subclusters}


# -- site model ---------------------------------------------------------------------

def test_without_config_one_cluster_named_after_the_host_and_one_fork_ce():
    model = site()
    assert [c.unique_id for c in model.clusters] == ["ce01.example.org"]
    assert [ce.unique_id for ce in model.ces] == ["ce01.example.org:2119/jobmanager-fork-default"]
    assert model.ces[0].lrms == "fork" and model.ces[0].cluster == "ce01.example.org"
    assert model.site.unique_id == ""  # no GlueSite invented


def test_configured_site_cluster_and_ces():
    model = site("""
[site]
id = EXAMPLE-T2
[cluster:main]
unique_id = cluster.example.org
hosts = wn-*
[ce:long]
host = ce01.example.org
lrms = slurm
queue = long
access = VO:atlas VO:cms
max_wall_clock_time = 2880
publish_jobs = yes
[ce:short]
host = ce02.example.org
port = 9619
jobmanager = condor
lrms = slurm
""")
    assert [c.unique_id for c in model.clusters] == ["cluster.example.org"]
    long, short = model.ces
    assert long.unique_id == "ce01.example.org:2119/jobmanager-slurm-long"
    assert long.access == ("VO:atlas", "VO:cms")
    assert long.policies["max_wall_clock_time"] == 2880 and long.policies["max_cpu_time"] is None
    assert long.publish_jobs is True and long.cluster == "cluster.example.org"
    assert short.unique_id == "ce02.example.org:9619/condor-slurm-short"  # queue defaults to the section name
    assert short.options["queue"] == "short"


@pytest.mark.parametrize("text, expected", [
    ("[glue]\naggregation_key = platform, colour\n", "/etc/glueinfo/glueinfo.conf:2: [glue] aggregation_key: unknown fact(s) colour"),
    ("[cluster:a]\nhosts = a*\n[ce:x]\ncluster = b\n", "/etc/glueinfo/glueinfo.conf:4: [ce:x] cluster: no [cluster:b] section"),
    ("[cluster:a]\n[cluster:b]\n", "[cluster:b] hosts: only one cluster may omit its host list"),
    ("[cluster:a]\nhosts=a*\n[cluster:b]\nhosts=b*\n[subcluster:p]\nhosts = x\n",
     "[subcluster:p] cluster: required when there are several"),
    ("[subcluster:p]\n", "[subcluster:p] hosts: required"),
    ("[ce:a]\n[ce:b]\nqueue = a\n", "CE id 'ce01.example.org:2119/jobmanager-fork-a' is used twice"),
    ("[ce:a]\nunique_id = " + "x" * 300 + "\n", ":2: [ce:a] unique_id: GlueCEUniqueID 'xxxx"),
    ("[cluster:" + "c" * 190 + "]\n", "too long to name an LDAP entry"),
])
def test_config_mistakes_are_one_line_errors_naming_the_key(text, expected):
    with pytest.raises(ConfigError) as err:
        site(text)
    assert expected in str(err.value) and "\n" not in str(err.value)


# -- grouping -----------------------------------------------------------------------

def test_hosts_equal_on_the_key_share_one_subcluster_and_no_host_is_in_two():
    hosts = synthetic_site(1000)
    groups = aggregate(site(), hosts)
    members = ids(groups)
    assert len(members) == 5
    assert sorted(len(m) for m in members.values()) == [50, 150, 150, 250, 400]
    all_members = [h for m in members.values() for h in m]
    assert len(all_members) == len(set(all_members)) == 1000
    for m in members.values():  # one hardware class per SubCluster
        assert len({name.split("-")[1] for name in m}) == 1


def test_ids_are_readable_spell_no_upgradable_fact_and_are_independent_of_arrival_order():
    hosts = synthetic_site(100)
    groups = aggregate(site(), hosts)
    first = ids(groups)
    shuffled = hosts[:]
    random.Random(7).shuffle(shuffled)
    assert ids(aggregate(site(), shuffled)) == first
    # Platform and processor only: no OS release, RAM or thread count, which upgrades change.
    assert sorted(first) == [
        "ce01.example.org-aarch64-arm-neoverse-n1",
        "ce01.example.org-x86_64-amd-epyc-7702",
        "ce01.example.org-x86_64-intel-core-i7-8700",
        "ce01.example.org-x86_64-intel-xeon-e5-2620-v4",
        "ce01.example.org-x86_64-intel-xeon-gold-6126",
    ]
    # The readable summary of everything shared (OS included) is the Name, which can change in place.
    names = sorted(sc.name for sc in groups.clusters[0].subclusters)
    assert names[0] == "aarch64-arm-neoverse-n1-80cpu-252gb-ubuntu22.04"


def test_groups_differing_only_in_a_fact_the_id_does_not_show_get_distinct_stable_ids():
    a = [make_host(XEON, i, runtime_environment=("R-4.3",)) for i in range(3)]
    b = [make_host(XEON, i + 10, runtime_environment=("R-4.3", "CUDA-12")) for i in range(2)]
    first = ids(aggregate(site(), a + b))
    # Numbered in the order of each group's first host name: a's hosts sort before b's.
    assert first == {"ce01.example.org-x86_64-intel-xeon-gold-6126": sorted(h.hostname for h in a),
                     "ce01.example.org-x86_64-intel-xeon-gold-6126-2": sorted(h.hostname for h in b)}
    assert ids(aggregate(site(), b + a)) == first


def test_ram_is_compared_rounded_to_the_granularity_and_published_as_the_smallest():
    small, large = make_host(OLD, 1), make_host(OLD, 2)
    small.memory = dataclasses.replace(small.memory, ram_mb=64_300)
    large.memory = dataclasses.replace(large.memory, ram_mb=64_500)
    # 64300/1024 = 62.8 and 64500/1024 = 63.0 both round to 63 GiB: one SubCluster, RAM 64300 (what both have).
    (sc,) = aggregate(site(), [small, large]).clusters[0].subclusters
    assert sc.shared["ram"] == 64_300
    # 64300/128 = 502.3 -> 502, 64500/128 = 503.9 -> 504: two SubClusters.
    fine = aggregate(site("[glue]\nram_granularity_mb = 128\n"), [small, large]).clusters[0].subclusters
    assert sorted(sc.shared["ram"] for sc in fine) == [64_300, 64_500]
    assert ram_bucket(64_300, 1024) == 64_512 and ram_bucket(None, 1024) is None


def test_subcluster_publishes_only_facts_every_member_shares():
    a, b = make_host(XEON, 1, si00=2500), make_host(XEON, 2, si00=2600)
    b.cpu = dataclasses.replace(b.cpu, version="family 6 model 85 stepping 7")  # not in the key
    b.static.runtime_environment = ["GLITE-3_2_0"]
    groups = aggregate(site("[glue]\naggregation_key = platform, cpu_model, logical_cpus\n"), [a, b])
    (sc,) = groups.clusters[0].subclusters
    assert "si00" not in sc.shared and "cpu_version" not in sc.shared
    assert sc.shared["runtime_environment"] == ("GLITE-3_2_0",)  # the tags both have
    assert sc.shared["cpu_model"] == "Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz"
    assert sc.shared["os_name"] == "Debian GNU/Linux" and sc.shared["ram"] == 196_480


def test_physical_and_logical_cpus_are_sums_and_unknown_stays_unknown():
    hosts = [make_host(XEON, i) for i in range(3)]
    (sc,) = aggregate(site(), hosts).clusters[0].subclusters
    assert (sc.physical_cpus, sc.logical_cpus) == (2 * 3, 48 * 3)  # sockets, hardware threads
    hosts[1].cpu = dataclasses.replace(hosts[1].cpu, sockets=None)
    (sc,) = aggregate(site(), hosts).clusters[0].subclusters
    assert sc.physical_cpus is None and sc.logical_cpus == 144
    cluster = aggregate(site(), synthetic_site(100)).clusters[0]
    assert cluster.logical_cpus == 40 * 48 + 25 * 256 + 15 * 80 + 15 * 16 + 5 * 12


def test_admin_pins_take_hosts_out_of_automatic_grouping():
    hosts = [make_host(XEON, i) for i in range(4)] + [make_host(DESK, i) for i in range(2)]
    groups = aggregate(site("""
[subcluster:mixed]
hosts = wn-xeon-00000 wn-desk-*.example.org
name = Mixed bag
"""), hosts)
    members = ids(groups)
    assert members["mixed"] == ["wn-desk-00000.example.org", "wn-desk-00001.example.org", "wn-xeon-00000.example.org"]
    assert [len(m) for i, m in members.items() if i != "mixed"] == [3]
    pinned = next(sc for sc in groups.clusters[0].subclusters if sc.unique_id == "mixed")
    assert pinned.pinned and pinned.name == "Mixed bag"
    assert "cpu_model" not in pinned.shared and pinned.shared["os_name"] == "Debian GNU/Linux"
    assert pinned.logical_cpus == 48 + 12 + 12


def test_clusters_cover_the_hosts_they_name_and_uncovered_hosts_are_reported():
    hosts = [make_host(XEON, 0), make_host(ARM, 0), make_host(OLD, 0)]
    groups = aggregate(site("""
[cluster:x86]
hosts = wn-xeon-* wn-old-*
[cluster:arm]
hosts = wn-arm-*
[ce:a]
cluster = arm
"""), hosts)
    assert [(c.unique_id, [h.hostname for h in c.hosts]) for c in groups.clusters] == [
        ("x86", ["wn-old-00000.example.org", "wn-xeon-00000.example.org"]), ("arm", ["wn-arm-00000.example.org"])]
    groups = aggregate(site("[cluster:arm]\nhosts = wn-arm-*\n"), hosts)
    assert groups.uncovered == ["wn-old-00000.example.org", "wn-xeon-00000.example.org"]
    assert any("covered by no [cluster:*]" in w for w in groups.warnings)


def test_two_snapshots_of_one_host_the_last_collected_wins():
    old, new = make_host(XEON, 1, collected_at=100.0), make_host(XEON, 1, collected_at=200.0)
    new.cpu = dataclasses.replace(new.cpu, clock_mhz=2700)
    for order in ([old, new], [new, old]):
        (sc,) = aggregate(site(), order).clusters[0].subclusters
        assert [h.collected_at for h in sc.hosts] == [200.0]


def test_subcluster_ids_stay_short_enough_to_name_an_ldap_entry():
    host = make_host(XEON, 0)
    host.cpu = dataclasses.replace(host.cpu, model_name="Xeon " * 500)
    long_cluster = "c" * 170
    groups = aggregate(site(f"[cluster:{long_cluster}]\n"), [host, make_host(XEON, 1)])
    ids_ = [sc.unique_id for sc in groups.clusters[0].subclusters]
    assert len(ids_) == 2 and all(i.startswith("c" * 100) and len(i) <= 200 - len("GlueSubClusterUniqueID=") for i in ids_)
    assert len(set(ids_)) == 2


def test_facts_read_in_one_go_equal_the_named_facts():
    from glueinfo.core.model import HostSnapshot
    from glueinfo.site.aggregate import FACT_NAMES, FACTS, host_facts

    for host in [*synthetic_site(20), HostSnapshot(hostname="bare")]:
        assert host_facts(host) == tuple(FACTS[name](host) for name in FACT_NAMES)
