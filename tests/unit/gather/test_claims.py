"""Which host a worker's document may speak for: target identities (listed name, name
beside an address, reverse DNS), claims on other hosts in full or short form, aliases."""

from __future__ import annotations

import threading

import pytest

from glueinfo.core.hostrange import HostRangeError, Target, expand_named_list
from glueinfo.gather.identity import Claims, answers_to, parse_aliases
from glueinfo.gather.pull import identities, listed_targets, reverse_names


def test_an_address_range_names_its_hosts_in_step():
    assert expand_named_list("10.1.0.[1-3]:7170=wn[01-03].example.org, wn09.example.org") == [
        ("10.1.0.1:7170", "wn01.example.org"), ("10.1.0.2:7170", "wn02.example.org"),
        ("10.1.0.3:7170", "wn03.example.org"), ("wn09.example.org", None)]
    with pytest.raises(HostRangeError, match="3 target.s. but 2 name"):
        expand_named_list("10.1.0.[1-3]=wn[01-02]")


def test_agent_targets_carry_the_name_written_beside_an_address():
    section = {"agents": "10.1.0.7=wn07.example.org, 10.1.0.7, wn08.example.org:7171", "agents_file": "",
               "agent_port": 7170}
    assert listed_targets(section) == [Target("10.1.0.7", 7170, "wn07.example.org"), Target("wn08.example.org", 7171)]


def test_identity_is_the_name_then_the_name_beside_the_address_then_reverse_dns():
    targets = [Target("wn01.example.org", 7170), Target("10.0.0.2", 7170, "wn02.example.org"),
               Target("10.0.0.3", 7170), Target("10.0.0.4", 7170)]
    assert identities(targets, {"10.0.0.3": "wn03.example.org", "10.0.0.4": None}) == {
        "wn01.example.org:7170": "wn01.example.org", "10.0.0.2:7170": "wn02.example.org",
        "10.0.0.3:7170": "wn03.example.org", "10.0.0.4:7170": None}


def test_a_slow_resolver_leaves_names_unknown_for_this_gather_only():
    release = threading.Event()

    def resolve(address: str):
        if address == "10.0.0.9":
            release.wait(10)
        return f"host-{address.replace('.', '-')}.example.org"

    cache: dict = {}
    names = reverse_names(["10.0.0.1", "10.0.0.9"], cache, now=1000.0, budget_s=0.5, resolve=resolve)
    release.set()
    assert names == {"10.0.0.1": "host-10-0-0-1.example.org", "10.0.0.9": None}
    calls = []
    again = reverse_names(["10.0.0.1", "10.0.0.9"], cache, now=1010.0, budget_s=5,
                          resolve=lambda a: calls.append(a) or "late.example.org")
    assert calls == ["10.0.0.9"]  # the answered address is cached
    assert again == {"10.0.0.1": "host-10-0-0-1.example.org", "10.0.0.9": "late.example.org"}


@pytest.mark.parametrize("reported, owner", [
    ("hpc-node17.cluster.example.org", "10.0.0.17:7170"),
    ("HPC-NODE17.cluster.example.org.", "10.0.0.17:7170"),
    ("hpc-node17", "10.0.0.17:7170"),  # the short form claims the FQDN it abbreviates
    ("gpu01.example.org", "gpu01:7170"),  # and a full name claims a short listed one
    ("wn99.example.org", None),
])
def test_a_claim_on_another_targets_host_in_any_form_is_found(reported, owner):
    claims = Claims({"hpc-node17.cluster.example.org": "10.0.0.17:7170", "gpu01": "gpu01:7170"})
    assert claims.owner(reported, asking="10.0.0.66:7170") == owner
    assert claims.owner("hpc-node17", asking="10.0.0.17:7170") is None  # its own


def test_hosts_other_sources_know_are_claims_too():
    claims = Claims({}, known=["wn05.example.org"])
    assert claims.known_host("wn05") == "wn05.example.org"
    assert claims.known_host("wn06") is None


def test_aliases_let_a_host_report_another_id_and_nothing_else():
    aliases = parse_aliases(["wn17.example.org=wn17-ib.example.org"])
    assert answers_to("wn17-ib.example.org", "wn17.example.org", aliases)
    assert answers_to("wn17", "wn17.example.org", aliases)
    assert not answers_to("wn18.example.org", "wn17.example.org", aliases)
    with pytest.raises(ValueError, match="not NAME=ALIAS"):
        parse_aliases(["wn17.example.org"])


def test_a_new_pin_is_refused_for_the_head_node_and_other_sources_hosts_in_any_form():
    from glueinfo.gather.identity import unbound_refusals

    reported_by = {"head.example.org": {"this host"}, "wn01.example.org": {"spool"}, "wn02": {"agents"},
                   "wn03.example.org": {"agents", "ganglia"}}
    unbound = {"head": "127.0.0.16:7170", "wn01.example.org": "127.0.0.17:7170", "wn02.example.org": "127.0.0.18:7170",
               "wn03": "127.0.0.19:7170", "wn04.example.org": "127.0.0.20:7170"}
    refused = {target: (key, others) for target, key, others in unbound_refusals(unbound, "agents", reported_by)}
    assert refused == {"127.0.0.16:7170": ("head", ["this host"]),  # the short form of the head node's name
                       "127.0.0.17:7170": ("wn01.example.org", ["spool"]),
                       "127.0.0.19:7170": ("wn03", ["ganglia"])}  # wn02 only the agents themselves have; wn04 nobody


def test_a_saved_snapshot_from_a_pin_is_restored_only_by_the_rule_a_new_pin_meets():
    from glueinfo.gather.identity import restorable

    listed = frozenset({"wn05.example.org"})
    assert restorable("wn05.example.org", "agents", listed, {"agents", "ganglia"}, ["head.example.org"], {}) is None
    assert "head node" in restorable("head.example.org", "agents", listed, {"agents"}, ["head.example.org"], {})
    assert "ganglia" in restorable("wn06.example.org", "agents", listed, {"agents", "ganglia"}, [], {})
    assert restorable("wn06.example.org", "agents", listed, {"agents"}, ["head.example.org"], {}) is None
