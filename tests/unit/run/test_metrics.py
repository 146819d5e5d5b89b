"""/metrics from a hand-made Status, read back with prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from glueinfo.run.metrics import exposition, make_registry
from glueinfo.run.stats import CeStatus, HealthRow, OutputStatus, PublishStatus, Status

NOW = 1_700_000_000.0


def samples(status: Status) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = exposition(make_registry(lambda: status)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def base(**kwargs) -> Status:
    values = dict(generated_at=NOW, version="1.0", role="site", site_name='a "quoted"\nsite', hostname="h",
                  host_state="Idle", states={"Idle": 7, "Unknown": 2}, hosts_total=9, hosts_stale=2, hosts_dropped=3)
    values.update(kwargs)
    return Status(**values)


def test_hosts_publication_ldap_and_outputs():
    got = samples(base(publish=PublishStatus(runs=5, failures=1, ok=True, last_at=NOW, last_duration_s=0.25, entries=42,
                                             ldap_url="ldap://x", ldap_state="rejecting", ldap_added=1, ldap_modified=2,
                                             ldap_deleted=0, ldap_runs=5, ldap_failures=2, rejected=("dn1: bad", "dn2: bad")),
                       outputs=(OutputStatus("ldif", "/o/glue.ldif", 12.5, 60.0),)))
    assert got[("glueinfo_hosts", (("state", "Unknown"),))] == 2
    assert got[("glueinfo_hosts_known", ())] == 9 and got[("glueinfo_hosts_stale", ())] == 2
    assert got[("glueinfo_hosts_dropped_total", ())] == 3
    assert got[("glueinfo_publish_entries", ())] == 42 and got[("glueinfo_publish_failures_total", ())] == 1
    assert got[("glueinfo_ldap_rejected_entries", ())] == 2 and got[("glueinfo_ldap_up", ())] == 1
    assert got[("glueinfo_ldap_last_writes", (("operation", "modified"),))] == 2
    assert got[("glueinfo_output_age_seconds", (("output", "ldif"), ("path", "/o/glue.ldif")))] == 12.5
    assert got[("glueinfo_info", (("role", "site"), ("site", 'a "quoted"\nsite'), ("version", "1.0")))] == 1


def test_unknown_figures_are_left_out_not_zero():
    got = samples(base(ces=(CeStatus("ce1", "", "c", "slurm", "q", free_cpus=None, total_cpus=16, error="sinfo failed",
                                     query_duration_s=0.1, query_runs=4, query_failures=1),),
                       collectors=(HealthRow("cpu", None),)))
    assert ("glueinfo_ce_free_cpus", (("ce", "ce1"),)) not in got
    assert got[("glueinfo_ce_total_cpus", (("ce", "ce1"),))] == 16
    key = (("ce", "ce1"), ("lrms", "slurm"), ("queue", "q"))
    assert got[("glueinfo_lrms_query_success", key)] == 0 and got[("glueinfo_lrms_query_failures_total", key)] == 1
    assert ("glueinfo_collector_last_success", (("collector", "cpu"),)) not in got  # never ran
    assert not any(name.startswith("glueinfo_publish") for name, _ in got)  # an agent-like status: no publication


def test_each_registry_is_its_own():
    from prometheus_client import REGISTRY

    make_registry(base)
    assert not any(m.name.startswith("glueinfo") for m in REGISTRY.collect())


def test_each_output_reports_its_runs_failures_duration_and_success_and_refused_writes_are_counted():
    got = samples(base(publish=PublishStatus(runs=3, ok=False, ldap_url="ldap://x", ldap_state="rejecting",
                                             ldap_refused_total=7),
                       output_plugins=(HealthRow("file", True, 0.5, 3, 0), HealthRow("ldap", False, 1.25, 3, 2, "2 writes refused"))))
    assert got[("glueinfo_output_runs_total", (("output", "ldap"),))] == 3
    assert got[("glueinfo_output_failures_total", (("output", "ldap"),))] == 2
    assert got[("glueinfo_output_last_success", (("output", "ldap"),))] == 0
    assert got[("glueinfo_output_last_success", (("output", "file"),))] == 1
    assert got[("glueinfo_output_last_duration_seconds", (("output", "file"),))] == 0.5
    assert got[("glueinfo_ldap_refused_writes_total", ())] == 7
