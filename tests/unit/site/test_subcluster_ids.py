"""Stable SubCluster ids (glueinfo.site.ids) through aggregate(): the issue's rules, case by case.

Every expected id below is written by hand from the rules: an id belongs to
its group of hosts; a group whose members all change a shared fact keeps
it; when a group splits the larger part keeps it (ties: the part with the
oldest member); a host that leaves changes only its own membership.
"""

from __future__ import annotations

import dataclasses
import json

from glue_sites import CLASSES, make_host

from glueinfo.core.config import parse_text
from glueinfo.core.ldif import parse_ldif
from glueinfo.site.aggregate import aggregate
from glueinfo.site.from_config import site_from_config
from glueinfo.site.ids import IdStateError, SubClusterIds, memberships_from_entries

XEON, EPYC, ARM, OLD, DESK = (hw for hw, _ in CLASSES)
BASE = "ce01.example.org-x86_64-intel-xeon-gold-6126"


def site():
    return site_from_config(parse_text("", "/etc/glueinfo/glueinfo.conf"), "ce01.example.org")


def members(groups) -> dict[str, list[str]]:
    return {sc.unique_id: sorted(h.hostname for h in sc.hosts) for c in groups.clusters for sc in c.subclusters}


def os_update(host, release="13"):
    return dataclasses.replace(host, os=dataclasses.replace(host.os, release=release))


def xeons(count):
    return [make_host(XEON, i) for i in range(count)]


def test_a_group_whose_members_all_update_their_os_keeps_its_id_and_its_name_changes():
    memory = SubClusterIds()
    hosts = xeons(4)
    before = aggregate(site(), hosts, memory, now=100.0)
    assert list(members(before)) == [BASE]
    after = aggregate(site(), [os_update(h) for h in hosts], memory, now=200.0)
    assert members(after) == members(before)
    assert after.clusters[0].subclusters[0].name.endswith("debian13")
    assert before.clusters[0].subclusters[0].name.endswith("debian12")


def test_a_rolling_update_splits_off_a_new_id_and_the_larger_part_keeps_the_old_one():
    memory = SubClusterIds()
    hosts = xeons(4)
    names = sorted(h.hostname for h in hosts)
    aggregate(site(), hosts, memory, now=100.0)
    # One host updated: it leaves; the three others keep the id.
    step1 = members(aggregate(site(), [os_update(hosts[0])] + hosts[1:], memory, now=200.0))
    assert step1 == {BASE: names[1:], f"{BASE}-2": names[:1]}
    # Two more: BASE's members {1, 2, 3} split 2 (updated) : 1, so the updated group keeps BASE;
    # -2's only member is there too, but with the smaller part: -2 retires, and host 3, left
    # alone, gets a new id (-3: a suffix once used is not used again).
    step2 = members(aggregate(site(), [os_update(h) for h in hosts[:3]] + hosts[3:], memory, now=300.0))
    assert step2 == {BASE: names[:3], f"{BASE}-3": names[3:]}
    # The last one joins: BASE holds the larger part of the group and keeps it; -3 retires.
    step3 = members(aggregate(site(), [os_update(h) for h in hosts], memory, now=400.0))
    assert step3 == {BASE: names}


def test_a_split_into_equal_parts_leaves_the_id_with_the_part_holding_the_oldest_member():
    memory = SubClusterIds()
    early, late = xeons(2), [make_host(XEON, i) for i in (2, 3)]
    aggregate(site(), early, memory, now=100.0)
    aggregate(site(), early + late, memory, now=200.0)  # late joins later: early are the oldest members
    split = members(aggregate(site(), early + [os_update(h) for h in late], memory, now=300.0))
    assert split[BASE] == sorted(h.hostname for h in early)
    # And the other way round: the updated part holds the oldest member.
    memory2 = SubClusterIds()
    aggregate(site(), early, memory2, now=100.0)
    aggregate(site(), early + late, memory2, now=200.0)
    split2 = members(aggregate(site(), [os_update(h) for h in early] + late, memory2, now=300.0))
    assert split2[BASE] == sorted(h.hostname for h in early)


def test_a_host_leaving_or_joining_changes_no_id():
    memory = SubClusterIds()
    hosts = xeons(3)
    aggregate(site(), hosts, memory, now=100.0)
    assert list(members(aggregate(site(), hosts[1:], memory, now=200.0))) == [BASE]
    assert list(members(aggregate(site(), hosts + [make_host(XEON, 9)], memory, now=300.0))) == [BASE]


def test_a_retired_suffix_is_never_given_again():
    memory = SubClusterIds()
    hosts = xeons(2)
    aggregate(site(), hosts, memory, now=100.0)
    aggregate(site(), [hosts[0], os_update(hosts[1])], memory, now=200.0)  # -2 for the updated one
    aggregate(site(), hosts, memory, now=300.0)  # it comes back: -2 retires
    again = members(aggregate(site(), [hosts[0], os_update(hosts[1], "14")], memory, now=400.0))
    assert sorted(again) == [BASE, f"{BASE}-3"]


def test_ids_survive_the_state_file_round_trip():
    memory = SubClusterIds()
    hosts = xeons(3)
    aggregate(site(), hosts, memory, now=100.0)
    aggregate(site(), [os_update(hosts[0])] + hosts[1:], memory, now=200.0)
    restored = SubClusterIds.from_json(json.loads(json.dumps(memory.to_json())))
    assert restored.to_json() == memory.to_json()
    assert members(aggregate(site(), [os_update(hosts[0])] + hosts[1:], restored, now=300.0)) == \
        members(aggregate(site(), [os_update(hosts[0])] + hosts[1:], memory, now=300.0))


def test_a_bad_state_file_is_one_line():
    for bad in ({}, {"format": 1, "clusters": {"c": {"subclusters": {"x": {"members": "no"}}}}}, [1]):
        try:
            SubClusterIds.from_json(bad)
        except IdStateError as exc:
            assert "\n" not in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")


def test_ids_already_published_are_adopted_so_an_upgrade_renames_nothing():
    hosts = xeons(2)
    ldif = "".join(
        f"dn: GlueHostUniqueID={h.hostname},GlueSubClusterUniqueID=ce01.example.org-x86_64-intel-xeon-gold-6126-48cpu-192gb-"
        f"debian12,GlueClusterUniqueID=ce01.example.org,mds-vo-name=resource,o=grid\nobjectClass: GlueHost\n"
        f"GlueHostName: {h.hostname}\n\n" for h in hosts)
    found = memberships_from_entries(parse_ldif(ldif))
    memory = SubClusterIds()
    for cluster, subclusters in found.items():
        memory.adopt(cluster, subclusters)
    old_id = "ce01.example.org-x86_64-intel-xeon-gold-6126-48cpu-192gb-debian12"
    assert list(members(aggregate(site(), hosts, memory, now=100.0))) == [old_id]
    # It stays with its hosts through an OS update, as any remembered id does.
    assert list(members(aggregate(site(), [os_update(h) for h in hosts], memory, now=200.0))) == [old_id]
