"""Source ``prometheus``: every node_exporter target a Prometheus server scrapes, as a snapshot.

``[sources] prometheus_url`` names the server (``http://`` or ``https://``, a
path prefix kept: ``https://mon.example.org/prometheus``).  glueinfo asks its
HTTP API for instant queries (``GET /api/v1/query``), one per metric family
for all targets at once, never one per host (QUERIES below; each family's
series carry ``prometheus_selector``, e.g. ``job="node"``).  The per-CPU
families are counted on the server (``count by (job, instance)``), so a
10,000-host site's answers stay a few MB each.  The queries run concurrently,
each within ``[sources] timeout`` (also sent as the API's ``timeout``) and all
within the gather's deadline; an answer may not exceed ``prometheus_max_body``
bytes.  Authentication: ``prometheus_token_file`` (a bearer token, first
line) or ``prometheus_user`` with ``prometheus_password_file`` (basic auth);
TLS is verified against the system's CAs or ``prometheus_ca_file``.

Targets are told apart by their ``job`` and ``instance`` labels (Prometheus
gives every target both).  A target's snapshot is built by
glueinfo.gather.sources._node_metrics, the mapping the ``node_exporter`` source uses.

Freshness: an instant query's value carries the *evaluation* time, not the
sample's, so the snapshot's time is ``timestamp(up)``, the target's last
scrape, moved onto this host's clock by the age Prometheus itself reports
(evaluation time minus scrape time): a server with a skewed clock makes no
host look fresh or stale.  A target whose ``up`` is 0 is not reported (one
warning, when its job has node_exporter targets or it had node series before): its host keeps its last good
snapshot until ``[node] stale_after`` and ``[sources] drop_after``, like a
dead agent.  A target Prometheus no longer scrapes has no series at all
(Prometheus marks them stale at once) and is simply not reported.

Host identity (``prometheus_identity``): ``nodename`` (default) is
``node_uname_info``'s nodename; ``instance`` is the ``instance`` label with
its port cut off (``wn001.example.org:9100`` -> ``wn001.example.org``,
``[2001:db8::1]:9100`` -> ``2001:db8::1``); ``label:NAME`` is the target's
label NAME (read from its ``up`` series).  A target without the chosen name
(no ``node_uname_info``: the uname collector off; no such label) is named by
its instance, port cut off.  Two targets giving the same name are both
refused (one warning each): Prometheus cannot say which is the host, and
exporters sharing one kernel all report its nodename.

Failure: a server that is down, slow, answers an error status or anything
but the API's JSON success document fails the whole source for this gather
with one warning naming the server and what went wrong, and reports no host:
every host keeps its last good snapshot.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo import __version__
from glueinfo.core.errors import GlueinfoError
from glueinfo.gather.identity import host_key
from glueinfo.gather.registry import Source, SourceContext, SourceFailure, SourceReport
from glueinfo.gather.sources._node_metrics import FILESYSTEM, LOAD, MEMORY, NETWORK, NodeFacts

SOURCE_NAME = "prometheus"
_READ_CHUNK = 1 << 16

TargetKey = tuple[str, str]  # (job, instance)


class PrometheusError(GlueinfoError):
    """A query that failed: the server unreachable, slow, an error status, not the API's JSON."""


def queries(selector: str) -> dict[str, str]:
    """Query name -> PromQL, the selector's matchers added to every series selector.

    ``up``/``seen``: which targets are scraped and when last; ``cpus``, ``cores``,
    ``sockets``, ``cpu_models``: the per-CPU families counted per target; then one
    query per family the mapping reads, with only the labels it reads."""
    def series(name: str, *matchers: str) -> str:
        inner = ",".join(m for m in (*matchers, selector.strip().strip("{}").strip()) if m)
        return f"{name}{{{inner}}}" if inner else name

    idle = series("node_cpu_seconds_total", 'mode="idle"')
    placed = series("node_cpu_info", 'package!=""')
    cored = series("node_cpu_info", 'package!=""', 'core!=""')
    found = {
        "up": series("up"),
        "seen": f"timestamp({series('up')})",
        "cpus": f"count by (job, instance) ({idle})",
        "cores": f"count by (job, instance) (count by (job, instance, package, core) ({cored}))",
        "sockets": f"count by (job, instance) (count by (job, instance, package) ({placed}))",
        "cpu_models": f"count by (job, instance, model_name, vendor) ({series('node_cpu_info')})",
    }
    # Only the labels the mapping reads come back (``max by``): a 10,000-host answer stays small.
    for name in (*MEMORY, *LOAD):
        found[name] = f"max by (job, instance) ({series(name)})"
    for name in FILESYSTEM:
        found[name] = f"max by (job, instance, device, fstype, mountpoint) ({series(name)})"
    for name in NETWORK:
        found[name] = f"max by (job, instance, device) ({series(name)})"
    for name, labels in (("node_network_info", "device, address, operstate"),
                         ("node_os_info", "name, version_id, version_codename, version, pretty_name"),
                         ("node_uname_info", "nodename, machine, release, version")):
        found[name] = f"max by (job, instance, {labels}) ({series(name)})"
    return found


@dataclass
class Server:
    """How to reach the Prometheus API: parsed from the config once per gather."""

    url: str
    scheme: str
    host: str
    port: int
    base_path: str
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: Optional[ssl.SSLContext] = None
    max_body: int = 256 * 2**20
    timeout_s: float = 5.0


def _first_line(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            line = handle.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PrometheusError(f"[sources] {what} {path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if not line:
        raise PrometheusError(f"[sources] {what} {path}: empty")
    return line


def server_from(section: dict[str, Any]) -> Server:
    """The server of ``[sources] prometheus_url`` and its credentials; PrometheusError naming the key."""
    url = section["prometheus_url"].strip()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PrometheusError(f"[sources] prometheus_url: {url[:80]!r} is not an http:// or https:// URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise PrometheusError(f"[sources] prometheus_url: {url[:80]!r} has a bad port") from None
    headers = {"User-Agent": f"glueinfo/{__version__}", "Accept": "application/json"}
    if section["prometheus_token_file"]:
        headers["Authorization"] = "Bearer " + _first_line(section["prometheus_token_file"], "prometheus_token_file")
    elif section["prometheus_user"]:
        password = _first_line(section["prometheus_password_file"], "prometheus_password_file") \
            if section["prometheus_password_file"] else ""
        token = base64.b64encode(f"{section['prometheus_user']}:{password}".encode()).decode("ascii")
        headers["Authorization"] = "Basic " + token
    context = None
    if parts.scheme == "https":
        try:
            context = ssl.create_default_context(cafile=section["prometheus_ca_file"] or None)
        except (OSError, ssl.SSLError) as exc:
            raise PrometheusError(f"[sources] prometheus_ca_file {section['prometheus_ca_file']}: cannot load: {exc}") from None
    return Server(url=url, scheme=parts.scheme, host=parts.hostname, port=port, base_path=parts.path.rstrip("/"),
                  headers=headers, ssl_context=context, max_body=section["prometheus_max_body"],
                  timeout_s=section["timeout"])


def query(server: Server, promql: str, deadline: float, clock: Callable[[], float] = time.monotonic) -> list[dict[str, Any]]:
    """One instant query's result vector; PrometheusError (one line) for anything else.
    ``deadline`` is a ``clock()`` time: no read waits past it."""
    def left() -> float:
        remaining = deadline - clock()
        if remaining <= 0:
            raise PrometheusError(f"no complete answer within {server.timeout_s:g} s ([sources] timeout)")
        return remaining

    params = urllib.parse.urlencode({"query": promql, "timeout": f"{server.timeout_s:g}s"})
    path = f"{server.base_path}/api/v1/query?{params}"
    if server.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(server.host, server.port, timeout=left(),
                                                                        context=server.ssl_context)
    else:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=left())
    try:
        conn.request("GET", path, headers=server.headers)
        response = conn.getresponse()
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > server.max_body:
            raise PrometheusError(f"answer of {length} bytes is over the limit of {server.max_body} bytes "
                                  "([sources] prometheus_max_body)")
        chunks, size = [], 0
        while True:
            if conn.sock is not None:
                conn.sock.settimeout(left())
            chunk = response.read1(_READ_CHUNK) if hasattr(response, "read1") else response.read(_READ_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > server.max_body:
                raise PrometheusError(f"answer over the limit of {server.max_body} bytes ([sources] prometheus_max_body)")
            chunks.append(chunk)
        body = b"".join(chunks)
        status = response.status
    except TimeoutError:
        raise PrometheusError(f"no complete answer within {server.timeout_s:g} s ([sources] timeout)") from None
    except ssl.SSLError as exc:
        raise PrometheusError(f"TLS: {exc.reason or exc}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise PrometheusError(getattr(exc, "strerror", None) or str(exc) or type(exc).__name__) from None
    finally:
        conn.close()
    return _vector(body, status)


def _vector(body: bytes, status: int) -> list[dict[str, Any]]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        document = None
    if not isinstance(document, dict):
        shown = body[:60].decode("utf-8", "replace").strip()
        raise PrometheusError(f"HTTP {status}, not the API's JSON: {shown!r}" if status != 200 else
                              f"not the API's JSON: {shown!r}")
    if document.get("status") != "success":
        error = str(document.get("error") or document.get("status"))[:120]
        raise PrometheusError(f"HTTP {status}: {document.get('errorType', 'error')}: {error}")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise PrometheusError("answer is not an instant vector")
    result: list[dict[str, Any]] = data["result"]
    return result


def run_queries(server: Server, wanted: dict[str, str], budget_s: float, parallel: int = 8) -> dict[str, list[dict[str, Any]]]:
    """Every query of ``wanted``, ``parallel`` at a time on daemon threads (a hung server never
    holds up the process's exit), all within ``budget_s``; PrometheusError for the first to fail."""
    deadline = time.monotonic() + max(0.0, min(budget_s, server.timeout_s))
    names = list(wanted)
    results: dict[str, list[dict[str, Any]]] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not names or errors:
                    return
                name = names.pop(0)
            try:
                vector = query(server, wanted[name], deadline)
            except PrometheusError as exc:
                with lock:
                    errors.append(f"{name}: {exc}" if name in ("up", "seen") else str(exc))
                return
            with lock:
                results[name] = vector

    threads = [threading.Thread(target=worker, name="prometheus-query", daemon=True) for _ in range(min(parallel, len(names)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + 0.05)
    if errors:
        raise PrometheusError(errors[0])
    if len(results) < len(wanted):
        raise PrometheusError(f"no complete answer within {max(0.0, min(budget_s, server.timeout_s)):g} s ([sources] timeout)")
    return results


def _number(sample: dict[str, Any]) -> Optional[tuple[float, float]]:
    """(evaluation time, value) of a vector sample, None when it is not two finite numbers."""
    try:
        at, raw = sample["value"]
        value, when = float(raw), float(at)
    except (KeyError, TypeError, ValueError):
        return None
    return (when, value) if math.isfinite(value) and math.isfinite(when) else None


def _key(sample: dict[str, Any]) -> Optional[tuple[TargetKey, dict[str, str]]]:
    labels = sample.get("metric")
    if not isinstance(labels, dict) or not isinstance(labels.get("instance", ""), str):
        return None
    return (str(labels.get("job", "")), str(labels.get("instance", ""))), labels


def instance_host(instance: str) -> str:
    """``instance`` without its port: ``host:9100`` -> ``host``, ``[v6]:9100`` -> ``v6``."""
    if instance.startswith("[") and "]" in instance:
        return instance[1:instance.index("]")]
    if instance.count(":") == 1:
        return instance.split(":", 1)[0]
    return instance


def target_facts(results: dict[str, list[dict[str, Any]]]) -> dict[TargetKey, NodeFacts]:
    """Every target's facts from the answers (targets with none of the families read left out)."""
    facts: dict[TargetKey, NodeFacts] = {}
    counts = {"cpus": "cpus", "cores": "cores", "sockets": "sockets"}
    for name, vector in results.items():
        if name in ("up", "seen"):
            continue
        for sample in vector:
            keyed, number = _key(sample), _number(sample)
            if keyed is None or number is None:
                continue
            key, labels = keyed
            target = facts.get(key)
            if target is None:
                target = facts[key] = NodeFacts()
            if name in counts:
                target.set_counts(**{counts[name]: number[1]})
            elif name == "cpu_models":
                target.add("node_cpu_info", labels, number[1])
            else:
                target.add(name, labels, number[1])
    return {key: target for key, target in facts.items() if not target.empty}


def gather(ctx: SourceContext) -> SourceReport:
    section = ctx.config.section("sources")
    report = SourceReport()
    url = section["prometheus_url"].strip()
    identity = section["prometheus_identity"].strip()
    if identity not in ("nodename", "instance") and not (identity.startswith("label:") and identity[6:].strip()):
        report.failures.append(SourceFailure(target="[sources] prometheus_identity",
                                             error=f"{identity[:40]!r} is not nodename, instance or label:NAME"))
        return report
    try:
        server = server_from(section)
        results = run_queries(server, queries(section["prometheus_selector"]), ctx.remaining())
    except PrometheusError as exc:
        report.failures.append(SourceFailure(target=url or "[sources] prometheus_url", error=str(exc)))
        return report
    received = ctx.clock()

    up: dict[TargetKey, tuple[float, dict[str, str]]] = {}
    for sample in results["up"]:
        keyed, number = _key(sample), _number(sample)
        if keyed is not None and number is not None:
            up[keyed[0]] = (number[1], keyed[1])
    ages: dict[TargetKey, float] = {}
    for sample in results["seen"]:
        keyed, number = _key(sample), _number(sample)
        if keyed is not None and number is not None:
            ages[keyed[0]] = max(0.0, number[0] - number[1])  # evaluation time - scrape time

    facts = target_facts(results)
    # A down target has no node series left: warn for those of a job that has node_exporter
    # targets, or that this process saw with node series, not for every other job's dead target.
    known: set[TargetKey] = ctx.memory.setdefault("node_targets", set())
    known.update(facts)
    node_jobs = {job for job, _ in facts}
    for key in sorted(k for k, (value, _) in up.items() if value != 1 and (k in known or k[0] in node_jobs)):
        report.failures.append(SourceFailure(target=key[1], error=f"target down in Prometheus (up = 0, job {key[0]!r})"))

    names: dict[TargetKey, str] = {}
    for key, target in facts.items():
        if key not in up or up[key][0] != 1 or key not in ages:
            continue  # down, or gone between two queries: its last good snapshot stands
        names[key] = _name(identity, key, up[key][1], target) or ""
    by_name: dict[str, list[TargetKey]] = {}
    for key, name in names.items():
        by_name.setdefault(host_key(name), []).append(key)
    for key in sorted(names):
        name = names[key]
        if not name:
            report.failures.append(SourceFailure(target=key[1], error="no host name: no instance label"))
            continue
        others = [k[1] for k in by_name[host_key(name)] if k != key]
        if others:
            report.failures.append(SourceFailure(
                target=key[1], host=name[:80],
                error=f"host name {name[:80]!r} also given by {', '.join(sorted(others)[:3])}: refused "
                      "(set [sources] prometheus_identity to instance or label:NAME)"))
            continue
        report.snapshots.append(facts[key].snapshot(name, received - ages[key]))
    return report


def _name(identity: str, key: TargetKey, labels: dict[str, str], facts: NodeFacts) -> Optional[str]:
    """The target's host name by the identity rule (module docstring), None when it has none."""
    chosen: Optional[str] = None
    if identity == "nodename":
        chosen = facts.nodename
    elif identity.startswith("label:"):
        value = labels.get(identity[6:].strip())
        chosen = value if isinstance(value, str) and value.strip() else None
    if chosen is None and key[1]:
        chosen = instance_host(key[1])
    return chosen.strip() if chosen else None


SOURCE = Source(SOURCE_NAME, gather, "node_exporter series from a Prometheus server ([sources] prometheus_url)")
