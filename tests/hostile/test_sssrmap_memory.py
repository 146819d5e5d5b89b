"""Distinct SSSRMAP field names from one client (issue 26, finding 6) against a real
`glueinfo serve` on loopback serving the 50-host fixture.

The attack: a client asks for thousands of field names nobody has
(``Extension[@name='a1']``, ``'a2'``...).  The server used to keep a column per
name and per host for as long as the node view lived (33 MB per 1,000 names on
2,000 hosts); its per-field caches now keep a bounded number of fields, the least
recently used forgotten first (docs/sss.md "Memory").  What a user can check from
outside, and this test does: every such query is answered, and the fields asked
before the flood (a projection and a numeric Where, whose cached columns were
forgotten meanwhile) give the same answers as before it, the fixture's own facts.
The server's memory is measured, not asserted: benchmarks/sssrmap_names.py; the
fields it keeps are read from /metrics (glueinfo_sssrmap_cached_fields), as a
monitoring engineer would, and must stay within the documented bound.
Only HTTP is used: the test means the same against any version of the code.
"""

from __future__ import annotations

import http.client
import json

import pytest
from glueinfo_processes import Served, start_glueinfo, stop_glueinfo
from lxml import etree
from paths import REPO

FIXTURE = REPO / "tests" / "fixtures" / "nodes" / "site50.json"
RAW = json.loads(FIXTURE.read_text(encoding="utf-8"))
MODELS = {host["hostname"]: host["cpu"]["model_name"] for host in RAW if (host.get("cpu") or {}).get("model_name")}
FAST = {host["hostname"] for host in RAW if ((host.get("cpu") or {}).get("clock_mhz") or 0) >= 2500}  # MHz, as ClockSpeed
NAMES = 5000  # well past the server's bound of fields (256 by default)
PER_REQUEST = 100


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    config = tmp / "names.conf"
    config.write_text(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n"
                      f"[node]\nsite_snapshots = {FIXTURE}\n[run]\nstate_dir = {tmp / 'state'}\n")
    served = start_glueinfo(config, tmp / "names.log")
    yield served
    stop_glueinfo(served)


class Client:
    """One keep-alive connection, as one client asking name after name."""

    def __init__(self, served: Served):
        self.connection = http.client.HTTPConnection(served.host, served.port, timeout=30)

    def records(self, inner: str) -> list[etree._Element]:
        body = f'<Envelope><Body><Request action="Query" actor="hostile"><Object>Node</Object>{inner}</Request></Body></Envelope>'
        self.connection.request("POST", "/SSSRMAP3", body.encode(), {"Content-Type": 'text/xml; charset="utf-8"'})
        response = etree.fromstring(self.connection.getresponse().read()).find("Body/Response")
        assert response.findtext("Status/Value") == "Success", etree.tostring(response)[:400]
        data = response.find("Data")
        return list(data) if data is not None else []

    def models(self) -> dict[str, str]:
        return {node.findtext("Id"): node.findtext("Extension") for node in
                self.records("<Get name=\"Id\"/><Get name=\"Extension[@name='CpuModel']\"/>") if node.find("Extension") is not None}

    def fast(self) -> set[str]:
        return {node.findtext("Id") for node in
                self.records("<Get name=\"Id\"/><Where name=\"Extension[@name='ClockSpeed']\" op=\"GE\">2500</Where>")}


def test_finding6_fields_asked_before_5000_distinct_names_answer_the_same_after_them(server):
    client = Client(server)
    try:
        hosts = [node.findtext("Id") for node in client.records('<Get name="Id"/>')]  # the fixture's and this host
        assert set(MODELS) <= set(hosts)
        models, fast = client.models(), client.fast()
        # the fixture's facts, before the flood (this host's own are whatever it runs on)
        assert {host: models.get(host) for host in MODELS} == MODELS and fast & set(MODELS) == FAST
        for start_at in range(0, NAMES, PER_REQUEST):
            gets = "".join(f"<Get name=\"Extension[@name='a{n}']\"/>" for n in range(start_at, start_at + PER_REQUEST))
            nodes = client.records("<Get name=\"Id\"/>" + gets)
            # a name no host has selects nothing: every host answers with its Id alone
            assert [node.findtext("Id") for node in nodes] == hosts
            assert all([child.tag for child in node] == ["Id"] for node in nodes)
        assert client.models() == models and client.fast() == fast
        # and what monitoring reads: the fields the server keeps stay within its bound (docs/sss.md)
        metrics = metric_values(server)
        assert 0 < metrics["glueinfo_sssrmap_cached_fields"] <= 256 + 16  # the bound and the fields the server warms
        assert metrics["glueinfo_sssrmap_cache_bytes"] <= 32 * 2**20 + 8 * 2**20
    finally:
        client.connection.close()


def metric_values(served: Served) -> dict[str, float]:
    """Unlabelled samples of the server's /metrics, by name."""
    connection = http.client.HTTPConnection(served.host, served.port, timeout=30)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            values[name] = float(value)
    return values
