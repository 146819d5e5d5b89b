"""HostSnapshot JSON round trip: nothing lost, nothing changed, bad input refused."""

from __future__ import annotations

import json
import os

import pytest
from paths import HOSTS

from glueinfo.core.config import Config, parse_text
from glueinfo.core.model import CollectorResult, CpuInfo, HostSnapshot, ModelError, NetworkAdapter
from glueinfo.host.collect import probe

HOSTS = str(HOSTS)


def test_live_snapshot_round_trips():
    config = parse_text("[static]\nsi00 = 2150\nruntime_environment = VO-atlas-x, GLITE-3_2_0\n[extensions]\nnote = Grüße ™\n")
    snapshot = probe(config)
    for pretty in (False, True):
        again = HostSnapshot.from_json(snapshot.to_json(pretty=pretty))
        assert again == snapshot
        assert again.to_json() == snapshot.to_json()


@pytest.mark.parametrize("host", sorted(os.listdir(HOSTS)))
def test_fixture_snapshot_round_trips(host):
    snapshot = probe(Config(), host_root=os.path.join(HOSTS, host))
    text = snapshot.to_json()
    again = HostSnapshot.from_json(text)
    assert again == snapshot
    # every part is typed again, not left as plain dicts
    assert isinstance(again.cpu, CpuInfo) and all(isinstance(a, NetworkAdapter) for a in again.network)
    assert all(isinstance(r, CollectorResult) for r in again.collectors)


def test_non_ascii_is_written_as_is():
    snapshot = probe(Config(), host_root=os.path.join(HOSTS, "vm-nonascii-cpu"))
    text = snapshot.to_json()
    assert "Intel® Core™ i7-8700 CPU @ 3.20GHz" in text and "/srv/данные" in text
    assert HostSnapshot.from_json(text).cpu.model_name == "Intel® Core™ i7-8700 CPU @ 3.20GHz"


def test_extra_facts_of_plugins_round_trip():
    snapshot = HostSnapshot(hostname="h", extra={"gpu": {"count": 2, "models": ["A100", "A100"], "nested": {"x": 1.5}}})
    assert HostSnapshot.from_json(snapshot.to_json()) == snapshot


def test_unknown_keys_from_a_newer_writer_are_ignored():
    data = json.loads(HostSnapshot(hostname="h", cpu=CpuInfo(logical_cpus=4)).to_json())
    data["cpu"]["quantum_bits"] = 7
    data["future_part"] = {}
    assert HostSnapshot.from_dict(data) == HostSnapshot(hostname="h", cpu=CpuInfo(logical_cpus=4))


@pytest.mark.parametrize("patch, where", [
    ({"cpu": {"logical_cpus": "48"}}, "snapshot.cpu.logical_cpus: expected an integer"),
    ({"cpu": {"logical_cpus": True}}, "snapshot.cpu.logical_cpus: expected an integer"),
    ({"network": {"name": "eth0"}}, "snapshot.network: expected a list"),
    ({"network": [{"is_up": "yes"}]}, "snapshot.network[0].is_up: expected true/false"),
    ({"load": {"load1": "high"}}, "snapshot.load.load1: expected a number"),
])
def test_wrong_types_are_refused_with_where(patch, where):
    data = json.loads(HostSnapshot(hostname="h").to_json())
    data.update(patch)
    with pytest.raises(ModelError) as caught:
        HostSnapshot.from_dict(data)
    assert str(caught.value).startswith(where)
