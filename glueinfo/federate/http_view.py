"""The federation view over HTTP: the same transport as ``glueinfo serve`` (glueinfo.run.http_server:
deadlines, connection caps, allow list), GET and HEAD only.

- ``/sites``: every site with its state (fresh or stale), when it last sent
  and its documents (sender, message id, times, SHA-256, path);
- ``/glue2.json``: the GLUE 2 objects of every site in one document;
- ``/sites/SITE/glue21.json``, ``/sites/SITE/crr.json``: a site's document
  byte for byte as it pushed it; ``/sites/SITE/glue.ldif``: its LDIF
  unpacked (SITE written as in ``/sites``' paths);
- ``/health``: JSON of the broker, LDAP and site counts; 503 while the
  broker or LDAP server is failing, so a load balancer can tell;
- ``/metrics``: Prometheus exposition (``glueinfo_federate_*``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any, Optional

from glueinfo.federate.consumer import ConsumerState
from glueinfo.federate.receive import site_of_word
from glueinfo.federate.view import Federation
from glueinfo.run.http_server import Request, Response, text_response

log = logging.getLogger(__name__)

JSON_TYPE = "application/json"
SITE_KINDS = {"glue21.json": JSON_TYPE, "crr.json": JSON_TYPE, "glue.ldif": "text/plain; charset=utf-8"}


class FederationRoutes:
    """The transport's Handler for the view."""

    def __init__(self, federation: Federation, consumer: Callable[[], Optional[ConsumerState]],
                 transport_stats: Callable[[], dict[str, int]]) -> None:
        self.federation, self.consumer, self.transport_stats = federation, consumer, transport_stats
        self._registry: Any = None

    def needs_body(self, request: Request) -> bool:
        return False

    def quick(self, request: Request) -> Optional[Response]:
        if request.method not in ("GET", "HEAD"):
            return text_response(405, f"method {request.method[:20]} not allowed: GET or HEAD",
                                 headers=(("Allow", "GET, HEAD"),), close=True)
        if request.path in ("/sites", "/glue2.json", "/health", "/metrics") or request.path.startswith("/sites/"):
            return None
        return text_response(404, f"no such document {request.path[:100]!r}: try /sites, /glue2.json, "
                                  "/sites/SITE/glue21.json, /health, /metrics")

    def answer(self, request: Request) -> Response:
        federation = self.federation
        if request.path == "/sites":
            return Response(200, federation.sites_document(), JSON_TYPE)
        if request.path == "/glue2.json":
            return Response(200, federation.union_json(), JSON_TYPE)
        if request.path == "/health":
            report = self.health()
            status = 200 if report["ok"] else 503
            return Response(status, json.dumps(report, indent=1).encode() + b"\n", JSON_TYPE)
        if request.path == "/metrics":
            from prometheus_client import CollectorRegistry

            from glueinfo.run.metrics import CONTENT_TYPE, exposition

            if self._registry is None:
                self._registry = CollectorRegistry(auto_describe=False)
                self._registry.register(_Collector(self))
            return Response(200, exposition(self._registry), CONTENT_TYPE)
        parts = request.path.split("/")
        if len(parts) == 4 and parts[3] in SITE_KINDS:
            site_id = site_of_word(parts[2])
            held = federation.document(site_id, parts[3]) if site_id is not None else None
            if held is not None:
                return Response(200, held[1], SITE_KINDS[parts[3]])
            return text_response(404, f"no {parts[3]} of a site {parts[2][:100]!r} here (see /sites)")
        return text_response(404, f"no such document {request.path[:100]!r} (see /sites)")

    def refuse_body(self, request: Request, status: int, too_large: bool, message: str) -> Response:
        return text_response(status, message, close=True)

    def health(self) -> dict[str, Any]:
        consumer = self.consumer()
        ldap = self.federation.ldap
        broker = None if consumer is None else {"up": consumer.up, "last_error": consumer.last_error,
                                                "failing_since": consumer.failing_since,
                                                "last_message_at": consumer.last_message_at}
        ldap_state = None if ldap is None else {"url": ldap.ldap.url, "last_error": ldap.state.last_error,
                                                "failing_since": ldap.state.failing_since,
                                                "last_success_at": ldap.state.last_success_at,
                                                "last": ldap.state.last_report}
        ok = (broker is None or broker["up"] is not False) and (ldap_state is None or ldap_state["failing_since"] is None)
        return {"ok": ok, "broker": broker, "ldap": ldap_state, **self.federation.counts(), "http": self.transport_stats()}


class _Collector:
    """``glueinfo_federate_*`` for /metrics, read at each scrape."""

    def __init__(self, routes: FederationRoutes) -> None:
        self.routes = routes

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        federation = self.routes.federation
        counts = federation.counts()
        sites = GaugeMetricFamily("glueinfo_federate_sites", "Sites the view holds, by state", labels=["state"])
        sites.add_metric(["fresh"], counts["sites"] - counts["stale"])
        sites.add_metric(["stale"], counts["stale"])
        yield sites
        yield CounterMetricFamily("glueinfo_federate_documents_accepted", "Documents accepted from the broker",
                                  value=counts["accepted_total"])
        refused = CounterMetricFamily("glueinfo_federate_documents_refused", "Messages refused, never loaded, by reason",
                                      labels=["reason"])
        for reason, count in sorted(counts["refused_total"].items()):
            refused.add_metric([reason], count)
        yield refused
        yield CounterMetricFamily("glueinfo_federate_sites_withdrawn", "Sites withdrawn for sending nothing",
                                  value=counts["withdrawn_total"])
        with federation.lock:
            ages = [(s.site_id, s.received_at) for s in federation.sites.values()]
        last = GaugeMetricFamily("glueinfo_federate_site_last_received_timestamp_seconds",
                                 "When each site's newest document arrived", labels=["site"])
        for site_id, at in sorted(ages):
            last.add_metric([site_id], at)
        yield last
        consumer = self.routes.consumer()
        if consumer is not None:
            yield GaugeMetricFamily("glueinfo_federate_broker_up", "Whether the view is consuming from the broker",
                                    value=1.0 if consumer.up else 0.0)
        ldap = federation.ldap
        if ldap is not None:
            yield GaugeMetricFamily("glueinfo_federate_ldap_up", "Whether the last LDAP write worked",
                                    value=0.0 if ldap.state.failing_since is not None else 1.0)
            yield CounterMetricFamily("glueinfo_federate_ldap_writes", "LDAP writes sent", value=ldap.state.writes_total)
            yield CounterMetricFamily("glueinfo_federate_ldap_refused", "LDAP writes the server refused",
                                      value=ldap.state.refused_total)
