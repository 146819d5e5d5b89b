"""GPUs from a Prometheus server (issue 27 item 2): NVIDIA's DCGM exporter series, given to the
node_exporter target of the same host.  The DCGM answers are recorded (tests/fixtures/gpu/README.md
says from where); the node_exporter target around them is the least a host needs (up, its scrape
time, its uname).  A loopback server plays Prometheus's /api/v1/query."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse

import pytest
from paths import FIXTURES

from glueinfo.core.config import parse_text
from glueinfo.core.model import Accelerator
from glueinfo.gather.registry import SourceContext
from glueinfo.gather.sources import prometheus

NOW = 1651505400.123
DCGM = json.loads((FIXTURES / "gpu" / "prometheus" / "dcgm-a100-80gb-pcie.json").read_text())


def vector(*samples) -> dict:
    return {"status": "success", "data": {"resultType": "vector", "result": list(samples)}}


def node_answers(*instances: str) -> dict[str, dict]:
    """up, seen and node_uname_info of node_exporter targets: what names a host."""
    def one(instance, value, **labels):
        return {"metric": {"job": "node", "instance": instance, **labels}, "value": [NOW, value]}
    return {"up": vector(*(one(i, "1") for i in instances)),
            "seen": vector(*(one(i, str(NOW - 5)) for i in instances)),
            "node_uname_info": vector(*(one(i, "1", nodename=i.split(":")[0], machine="x86_64") for i in instances))}


@pytest.fixture
def server():
    """A Prometheus answering each of glueinfo's queries by name (the `answers` dict, set per test)."""
    by_promql: dict[str, dict] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            promql = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["query"][0]
            body = json.dumps(by_promql.get(promql, vector())).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def answer(answers: dict[str, dict]) -> str:
        by_promql.clear()
        wanted = {**prometheus.queries(""), **prometheus.ACCELERATOR_QUERIES}
        by_promql.update({wanted[name]: body for name, body in answers.items()})
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield answer
    httpd.shutdown()


def gather(url: str):
    config = parse_text(f"[sources]\nenabled = prometheus\nprometheus_url = {url}\nprometheus_identity = instance\n", "t.conf")
    return prometheus.gather(SourceContext(config=config, clock=lambda: NOW, deadline=NOW + 30))


def test_dcgm_series_give_the_hosts_gpus(server):
    # one GPU (gpu="0"), modelName "NVIDIA A100 80GB PCIe", FB free 80328 + used 741 = 81069 MiB, driver 510.47.03
    report = gather(server({**node_answers("gpu01.example.org:9100", "cpu01.example.org:9100"), **DCGM}))
    hosts = {s.hostname: s.accelerators for s in report.snapshots}
    assert report.failures == []
    assert hosts == {"gpu01.example.org": [Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA A100 80GB PCIe", count=1,
                                                       memory_mb=81069, driver_version="510.47.03", source="prometheus")],
                     "cpu01.example.org": None}  # no GPU exporter there: unknown, not zero


def test_an_exporter_of_a_host_prometheus_has_no_node_target_for_is_left_out(server):
    report = gather(server({**node_answers("cpu01.example.org:9100"), **DCGM}))
    assert [(s.hostname, s.accelerators) for s in report.snapshots] == [("cpu01.example.org", None)]
