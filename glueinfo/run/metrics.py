"""``GET /metrics``: glueinfo's own figures in the Prometheus exposition format.

Written by prometheus_client from a :class:`~prometheus_client.CollectorRegistry`
the server owns (never the library's global default registry), with one
custom collector that reads the current :class:`glueinfo.run.stats.Status`
at scrape time, so nothing is copied on every refresh and a scrape never
sees half of one.  Names are ``glueinfo_*``; durations in seconds, times as
Unix timestamps.  A figure glueinfo does not know (a CE whose LRMS did not
say its free CPUs, an output never written) is left out, never published
as 0.

Families (labels in brackets):

- ``glueinfo_info`` [version, role, site] 1
- ``glueinfo_hosts`` [state]: hosts by published Node State;
  ``glueinfo_hosts_known``, ``glueinfo_hosts_stale``, ``glueinfo_hosts_dropped_total``,
  ``glueinfo_gather_refused_claims_total``; ``glueinfo_sssrmap_cached_fields``, ``glueinfo_sssrmap_cache_bytes``
  (once a query made them)
- ``glueinfo_collector_last_duration_seconds``, ``_last_success``, ``_failures_total`` [collector]
- ``glueinfo_source_last_duration_seconds``, ``_last_success``, ``_runs_total``,
  ``_failures_total``, ``_snapshots``, ``_failed_targets`` [source]
- ``glueinfo_job_last_duration_seconds``, ``_last_success``, ``_runs_total``, ``_failures_total`` [job] (run)
- ``glueinfo_output_last_duration_seconds``, ``_last_success``, ``_runs_total``, ``_failures_total`` [output]:
  each output of the publish layer (file, ldap, http, plugins') (run)
- ``glueinfo_publish_last_duration_seconds``, ``_last_success``, ``_runs_total``,
  ``_failures_total``, ``_last_timestamp_seconds``, ``glueinfo_publish_entries``
- ``glueinfo_ldap_last_writes`` [operation: added, modified, deleted], ``glueinfo_ldap_rejected_entries``,
  ``glueinfo_ldap_up``, ``glueinfo_ldap_sync_failures_total``, ``glueinfo_ldap_last_duration_seconds``
- ``glueinfo_lrms_query_duration_seconds``, ``_success``, ``_runs_total``, ``_failures_total`` [ce, lrms, queue]
- ``glueinfo_ce_free_cpus``, ``_total_cpus``, ``_running_jobs``, ``_waiting_jobs`` [ce]
- ``glueinfo_ce_accelerators`` [ce, type, model, state: total, used, free]: the queue's accelerators as
  its batch system counts them (model "" when it does not type them); a state it does not say is left out
- ``glueinfo_subcluster_accelerators`` [subcluster, cluster, type, model]: accelerators (devices, or
  partitions of partitioned ones) over the SubCluster's hosts; nothing for one whose hosts' are unknown
- ``glueinfo_output_age_seconds``, ``glueinfo_output_interval_seconds``, ``glueinfo_output_write_ok`` [output] (run)
- ``glueinfo_outbox_documents``, ``glueinfo_outbox_last_confirm_timestamp_seconds``, ``glueinfo_outbox_confirmed_total``,
  ``glueinfo_outbox_broker_up`` [output]: a pushing output's (amqp's) documents waiting for the broker's confirm, its
  last confirm (left out before the first), the confirms since start, 1 unless the broker failed at the last attempt (run)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Optional

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from glueinfo.run.stats import HealthRow, Status

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST


def _flag(value: Optional[bool]) -> Optional[float]:
    return None if value is None else float(value)


class StatusCollector(Collector):
    """Turns the status of the moment into metric families (see the module docstring)."""

    def __init__(self, status: Callable[[], Status]) -> None:
        self.status = status

    def describe(self) -> Iterable[Metric]:
        return ()  # families depend on the data: described at collection only

    def collect(self) -> Iterator[Metric]:
        status = self.status()
        info = GaugeMetricFamily("glueinfo_info", "glueinfo's version, role (site or agent) and site name",
                                 labels=["version", "role", "site"])
        info.add_metric([status.version, status.role, status.site_name], 1)
        yield info

        hosts = GaugeMetricFamily("glueinfo_hosts", "Hosts by the State published in Node XML", labels=["state"])
        for state, count in sorted(status.states.items()):
            hosts.add_metric([state], count)
        yield hosts
        yield GaugeMetricFamily("glueinfo_hosts_known", "Hosts published, stale ones included", value=status.hosts_total)
        yield GaugeMetricFamily("glueinfo_hosts_stale", "Hosts whose facts are older than [node] stale_after",
                                value=status.hosts_stale)
        yield CounterMetricFamily("glueinfo_hosts_dropped", "Hosts forgotten after [sources] drop_after since start",
                                  value=status.hosts_dropped)
        yield CounterMetricFamily("glueinfo_gather_refused_claims",
                                  "Answers refused since start for claiming a host that is not their target's",
                                  value=status.claims_refused)
        if status.sssrmap_cache is not None:
            fields, size = status.sssrmap_cache
            yield GaugeMetricFamily("glueinfo_sssrmap_cached_fields",
                                    "Fields SSSRMAP queries keep worked out for the served Nodes (bounded, least recently used out)",
                                    value=fields)
            yield GaugeMetricFamily("glueinfo_sssrmap_cache_bytes", "Estimated bytes of those fields", value=size)

        yield from self._health("collector", status.collectors, "this host's collector")
        yield from self._health("source", status.sources, "source")
        if status.sources:
            snapshots = GaugeMetricFamily("glueinfo_source_snapshots", "Good snapshots in the source's last report",
                                          labels=["source"])
            failed = GaugeMetricFamily("glueinfo_source_failed_targets", "Targets the source could not read in its last run",
                                       labels=["source"])
            for row in status.sources:
                if row.snapshots is not None:
                    snapshots.add_metric([row.name], row.snapshots)
                if row.failed_targets is not None:
                    failed.add_metric([row.name], row.failed_targets)
            yield snapshots
            yield failed
        yield from self._health("job", status.jobs, "run's job")
        yield from self._health("output", status.output_plugins, "output")
        yield from self._publish(status)
        yield from self._lrms(status)
        yield from self._subclusters(status)
        yield from self._outputs(status)
        yield from self._outboxes(status)

    @staticmethod
    def _health(kind: str, rows: Iterable[HealthRow], what: str) -> Iterator[Metric]:
        rows = list(rows)
        if not rows:
            return
        duration = GaugeMetricFamily(f"glueinfo_{kind}_last_duration_seconds", f"How long the {what}'s last run took",
                                     labels=[kind])
        success = GaugeMetricFamily(f"glueinfo_{kind}_last_success", f"1 if the {what}'s last run succeeded", labels=[kind])
        runs = CounterMetricFamily(f"glueinfo_{kind}_runs", f"Runs of the {what} since start", labels=[kind])
        failures = CounterMetricFamily(f"glueinfo_{kind}_failures", f"Failed runs of the {what} since start", labels=[kind])
        for row in rows:
            if row.last_duration_s is not None:
                duration.add_metric([row.name], row.last_duration_s)
            if row.ok is not None:
                success.add_metric([row.name], float(row.ok))
            runs.add_metric([row.name], row.runs)
            failures.add_metric([row.name], row.failures)
        yield from (duration, success, runs, failures)

    @staticmethod
    def _publish(status: Status) -> Iterator[Metric]:
        publish = status.publish
        if publish is None:
            return
        if publish.last_duration_s is not None:
            yield GaugeMetricFamily("glueinfo_publish_last_duration_seconds", "How long the last publication took",
                                    value=publish.last_duration_s)
        if publish.ok is not None:
            yield GaugeMetricFamily("glueinfo_publish_last_success", "1 if the last publication wrote everything",
                                    value=float(publish.ok))
        if publish.last_at is not None:
            yield GaugeMetricFamily("glueinfo_publish_last_timestamp_seconds", "When the last publication started",
                                    value=publish.last_at)
        yield CounterMetricFamily("glueinfo_publish_runs", "Publications since start", value=publish.runs)
        yield CounterMetricFamily("glueinfo_publish_failures", "Failed publications since start", value=publish.failures)
        if publish.entries is not None:
            yield GaugeMetricFamily("glueinfo_publish_entries", "Entries in the GLUE LDIF published", value=publish.entries)
        if publish.ldap_state is None:
            return
        writes = GaugeMetricFamily("glueinfo_ldap_last_writes", "Entries the last LDAP synchronisation wrote",
                                   labels=["operation"])
        for operation, count in (("added", publish.ldap_added), ("modified", publish.ldap_modified),
                                 ("deleted", publish.ldap_deleted)):
            if count is not None:
                writes.add_metric([operation], count)
        yield writes
        yield GaugeMetricFamily("glueinfo_ldap_rejected_entries", "Entries the LDAP server refused at the last synchronisation",
                                value=len(publish.rejected))
        yield CounterMetricFamily("glueinfo_ldap_refused_writes", "Writes the LDAP server refused since start",
                                  value=publish.ldap_refused_total)
        yield GaugeMetricFamily("glueinfo_ldap_up", "1 unless the LDAP server could not be used (waiting to retry)",
                                value=float(publish.ldap_state != "waiting"))
        yield CounterMetricFamily("glueinfo_ldap_sync_runs", "LDAP synchronisations since start", value=publish.ldap_runs)
        yield CounterMetricFamily("glueinfo_ldap_sync_failures", "LDAP synchronisations that failed or had rejections",
                                  value=publish.ldap_failures)
        if publish.ldap_duration_s is not None:
            yield GaugeMetricFamily("glueinfo_ldap_last_duration_seconds", "How long the last LDAP synchronisation took",
                                    value=publish.ldap_duration_s)

    @staticmethod
    def _lrms(status: Status) -> Iterator[Metric]:
        if not status.ces:
            return
        labels = ["ce", "lrms", "queue"]
        duration = GaugeMetricFamily("glueinfo_lrms_query_duration_seconds", "How long the CE's last LRMS query took",
                                     labels=labels)
        success = GaugeMetricFamily("glueinfo_lrms_query_success", "1 if the CE's last LRMS answer had no error", labels=labels)
        runs = CounterMetricFamily("glueinfo_lrms_query_runs", "LRMS queries since start", labels=labels)
        failures = CounterMetricFamily("glueinfo_lrms_query_failures", "LRMS queries that failed since start", labels=labels)
        figures = {name: GaugeMetricFamily(f"glueinfo_ce_{name}", f"The CE's {name.replace('_', ' ')} as its LRMS said",
                                           labels=["ce"])
                   for name in ("total_cpus", "free_cpus", "running_jobs", "waiting_jobs")}
        for ce in status.ces:
            key = [ce.unique_id, ce.lrms, ce.queue]
            if ce.query_duration_s is not None:
                duration.add_metric(key, ce.query_duration_s)
            if ce.query_runs or ce.collected_at:
                success.add_metric(key, float(ce.error is None))
            runs.add_metric(key, ce.query_runs)
            failures.add_metric(key, ce.query_failures)
            for name, family in figures.items():
                value = getattr(ce, name)
                if value is not None:
                    family.add_metric([ce.unique_id], value)
        yield from (duration, success, runs, failures, *figures.values())
        accelerators = GaugeMetricFamily("glueinfo_ce_accelerators", "The CE's accelerators as its batch system counts "
                                         "them: total, used, free", labels=["ce", "type", "model", "state"])
        for ce in status.ces:
            seen: set[tuple[str, str]] = set()
            for item in ce.accelerators:
                if (item.type, item.model or "") in seen:
                    continue  # one series per type and model: the first the plugin gave
                seen.add((item.type, item.model or ""))
                for state, value in (("total", item.total), ("used", item.used), ("free", item.free)):
                    if value is not None:
                        accelerators.add_metric([ce.unique_id, item.type, item.model or "", state], value)
        yield accelerators

    @staticmethod
    def _subclusters(status: Status) -> Iterator[Metric]:
        family = GaugeMetricFamily("glueinfo_subcluster_accelerators", "Accelerators a job can be given over the "
                                   "SubCluster's hosts (devices, or partitions of partitioned ones)",
                                   labels=["subcluster", "cluster", "type", "model"])
        for sc in status.subclusters:
            counts: dict[tuple[str, str], int] = {}  # kinds of one model (MIG profiles of one GPU) summed
            for kind in sc.accelerators or ():  # unknown or none: nothing
                key = (kind.type, kind.model or "")
                counts[key] = counts.get(key, 0) + kind.count * len(sc.hosts)
            for (acc_type, model), count in counts.items():
                family.add_metric([sc.unique_id, sc.cluster, acc_type, model], count)
        yield family

    @staticmethod
    def _outboxes(status: Status) -> Iterator[Metric]:
        if not status.outboxes:
            return
        depth = GaugeMetricFamily("glueinfo_outbox_documents", "Documents waiting in the output's outbox for the broker's "
                                  "confirm", labels=["output"])
        last = GaugeMetricFamily("glueinfo_outbox_last_confirm_timestamp_seconds", "When the broker last confirmed a "
                                 "document of the output", labels=["output"])
        confirmed = CounterMetricFamily("glueinfo_outbox_confirmed", "Documents the broker confirmed since start",
                                        labels=["output"])
        up = GaugeMetricFamily("glueinfo_outbox_broker_up", "1 unless the broker failed at the output's last attempt",
                               labels=["output"])
        for box in status.outboxes:
            depth.add_metric([box.output], box.depth)
            if box.last_confirm_at is not None:
                last.add_metric([box.output], box.last_confirm_at)
            confirmed.add_metric([box.output], box.confirmed)
            if box.up is not None:
                up.add_metric([box.output], float(box.up))
        yield from (depth, last, confirmed, up)

    @staticmethod
    def _outputs(status: Status) -> Iterator[Metric]:
        if not status.outputs:
            return
        age = GaugeMetricFamily("glueinfo_output_age_seconds", "Seconds since the output file was last written or marked fresh",
                                labels=["output", "path"])
        interval = GaugeMetricFamily("glueinfo_output_interval_seconds", "The output is refreshed at least this often",
                                     labels=["output", "path"])
        ok = GaugeMetricFamily("glueinfo_output_write_ok", "1 unless the last write of the output failed",
                               labels=["output", "path"])
        for output in status.outputs:
            key = [output.kind, output.path]
            if output.age_s is not None:
                age.add_metric(key, output.age_s)
            if output.interval_s is not None:
                interval.add_metric(key, output.interval_s)
            ok.add_metric(key, float(output.error is None))
        yield from (age, interval, ok)


def make_registry(status: Callable[[], Status]) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one) reading ``status`` at each scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(status))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The text exposition format of everything in ``registry`` now."""
    return generate_latest(registry)
