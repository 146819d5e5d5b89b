"""GET /haizea/site.xml on a real `glueinfo serve`: the site as a Haizea <site>, valid against
the Haizea XSD, one node counted for every host the server's own /nodes.xml shows neither
Offline nor Unknown."""

from __future__ import annotations

import http.client
import json

from glueinfo_processes import start_glueinfo, stop_glueinfo
from lxml import etree
from paths import REPO

FIXTURE = REPO / "tests" / "fixtures" / "nodes" / "site50.json"
XSD = etree.XMLSchema(etree.parse(str(REPO / "glueinfo" / "haizea" / "xsd" / "haizea.xsd")))


def fetch(served, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(served.host, served.port, timeout=30)
    connection.request("GET", path)
    answer = connection.getresponse()
    return answer.status, answer.read()


def test_the_haizea_site_document_is_served_and_counts_every_schedulable_host(tmp_path):
    newest = max(h["collected_at"] for h in json.loads(FIXTURE.read_text()))
    config = tmp_path / "serve.conf"
    config.write_text(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n[node]\nsite_snapshots = {FIXTURE}\n"
                      f"[run]\nstate_dir = {tmp_path / 'state'}\n")
    served = start_glueinfo(config, tmp_path / "serve.log", env={"GLUEINFO_CLOCK": str(int(newest) + 30)})
    try:
        status, body = fetch(served, "/haizea/site.xml")
        assert status == 200, body
        site = etree.fromstring(body)
        assert XSD.validate(site), XSD.error_log
        _, nodes_xml = fetch(served, "/nodes.xml")
    finally:
        stop_glueinfo(served)
    schedulable = [n for n in etree.fromstring(nodes_xml).iter("Node") if n.findtext("State") not in ("Offline", "Unknown")]
    assert schedulable  # the clock is set just after the fixture's newest report
    assert sum(int(s.get("numnodes")) for s in site.iter("node-set")) == len(schedulable)
