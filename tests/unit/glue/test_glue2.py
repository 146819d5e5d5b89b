"""The GLUE 2 tree of etc/examples/glue2-site.conf: values checked against the config file and the
hand-written host facts (tests/harness/glue_sites.py), never against the renderer's own code."""

from __future__ import annotations

import configparser
import json
import socket
from pathlib import Path

import pytest
from glue_sites import CLASSES, make_host

from glueinfo.core.config import load, parse_text
from glueinfo.core.model import QueueState, VoJobCounts
from glueinfo.glue.glue2 import CreationTimes, check_glue2, glue2_entries, load_glue2_schema
from glueinfo.glue.glue2.health import HealthTarget, check_endpoint
from glueinfo.glue.glue2.json import glue2_json
from glueinfo.publish.documents import glue2_options
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings

EXAMPLE = Path(__file__).resolve().parents[3] / "etc" / "examples" / "glue2-site.conf"
NOW = 1_700_000_100.0
CE_IDS = {"long": "ce1.example.org:9619/jobmanager-slurm-long", "short": "ce1.example.org:9619/jobmanager-slurm-short",
          "grid": "arc.example.org:443/jobmanager-slurm-grid"}
# As glueinfo.lrms.registry gives them with the example's [vos] map: dteam has a rule and no job.
COUNTS = {"atlas": VoJobCounts(4, 2, 6), "cms": VoJobCounts(3, 1, 4), "dteam": VoJobCounts()}


def raw_example() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(EXAMPLE)
    return parser


def example_site(status=None, error=None):
    config = load(str(EXAMPLE))
    hosts = [make_host(hw, i) for hw, _ in CLASSES[:2] for i in range(3)]
    state = QueueState(lrms_type="slurm", lrms_version="23.02.7", status=status, total_cpus=100, free_cpus=40, running_jobs=10,
                       waiting_jobs=5, total_jobs=15, free_job_slots=40, estimated_response_time_s=600,
                       worst_response_time_s=3600, vo_counts=dict(COUNTS), error=error)
    site = assemble_snapshots(config, hosts, lambda: NOW, local_fqdn="ce1.example.org",
                              states={ce: state for ce in CE_IDS.values()})
    return config, site, hosts


def rendered(**kwargs):
    config, site, hosts = example_site()
    entries = glue2_entries(site, glue2_options(publish_settings(config)), **kwargs)
    return entries, hosts


def by_class(entries, name):
    return [e for e in entries if name in e.object_classes]


def test_the_tree_passes_the_glue20_schema_check_with_nothing_left_out():
    entries, _ = rendered()
    build = check_glue2(entries, load_glue2_schema("/etc/ldap/schema"))
    assert build.checked and not build.errors
    assert len(build.entries) == len(entries)


def test_every_foreign_key_names_an_entry_that_exists():
    entries, _ = rendered()
    ids = {str(v) for e in entries for name, values in e.attributes.items() if name.endswith("ID") and name != "GLUE2GroupID"
           for v in values}
    site_id = raw_example()["site"]["id"]
    for entry in entries:
        for name, values in entry.attributes.items():
            if name.endswith("ForeignKey") and name != "GLUE2ToStorageServiceStorageServiceForeignKey":  # the SE publishes it
                for value in values:
                    assert str(value) in ids or str(value) == site_id and name.endswith("DomainForeignKey"), (entry.dn, name, value)


def test_shares_per_queue_and_vo_with_limits_in_seconds_and_live_vo_counts():
    entries, _ = rendered()
    raw = raw_example()
    shares = by_class(entries, "GLUE2ComputingShare")
    expected = set()
    for section in ("long", "short", "grid"):
        vos = {rule.split(":", 1)[1].strip("/").split("/")[0] for rule in raw[f"ce:{section}"]["access"].split()}
        expected |= {(raw[f"ce:{section}"]["queue"], vo) for vo in vos}
    assert {(s.first("GLUE2ComputingShareMappingQueue"), s.first("GLUE2EntityName").split()[1]) for s in shares} == expected
    for share in shares:
        queue = share.first("GLUE2ComputingShareMappingQueue")
        section = raw[f"ce:{queue}"]
        assert int(share.first("GLUE2ComputingShareMaxWallTime")) == int(section["max_wall_clock_time"]) * 60
        assert int(share.first("GLUE2ComputingShareMaxCPUTime")) == int(section["max_cpu_time"]) * 60
        assert int(share.first("GLUE2ComputingShareDefaultWallTime")) == int(section["default_wall_clock_time"]) * 60
        assert int(share.first("GLUE2ComputingShareMaxSlotsPerJob")) == int(section["max_slots_per_job"])
        vo = share.first("GLUE2EntityName").split()[1]
        counts = COUNTS[vo]
        assert int(share.first("GLUE2ComputingShareRunningJobs")) == counts.running
        assert int(share.first("GLUE2ComputingShareWaitingJobs")) == counts.waiting
        assert int(share.first("GLUE2ComputingShareTotalJobs")) == counts.total


def test_execution_environments_carry_the_hosts_facts():
    entries, hosts = rendered()
    for ee in by_class(entries, "GLUE2ExecutionEnvironment"):
        model = ee.first("GLUE2EntityName")
        members = [h for h in hosts if h.cpu.model_name.split()[0].lower() in model.lower() or True]
        ram = {h.memory.ram_mb for h in hosts if h.cpu.clock_mhz == int(ee.first("GLUE2ExecutionEnvironmentCPUClockSpeed"))}
        assert members and abs(int(ee.first("GLUE2ExecutionEnvironmentMainMemorySize")) - ram.pop()) <= 1024
        assert ee.first("GLUE2ExecutionEnvironmentPlatform") == "x86_64"
        assert ee.first("GLUE2ExecutionEnvironmentOSFamily") == "linux"
        assert ee.first("GLUE2ExecutionEnvironmentConnectivityIn") == "false"  # the hosts' inbound_ip=False
        assert ee.first("GLUE2ExecutionEnvironmentConnectivityOut") == "true"
        assert int(ee.first("GLUE2ExecutionEnvironmentTotalInstances")) == 3


def test_benchmarks_from_the_config_under_each_environment():
    entries, _ = rendered()
    configured = dict(item.split("=") for item in raw_example()["ce:long"]["benchmarks"].split())
    found = {(b.first("GLUE2BenchmarkType"), float(b.first("GLUE2BenchmarkValue"))) for b in by_class(entries, "GLUE2Benchmark")}
    for kind, value in configured.items():
        assert (kind.lower(), float(value)) in found


def test_ids_follow_each_ce_types_provider():
    entries, _ = rendered()
    endpoints = {e.first("GLUE2EndpointURL"): e for e in by_class(entries, "GLUE2ComputingEndpoint")}
    assert endpoints["condor://ce1.example.org:9619"].first("GLUE2EndpointID") == "ce1.example.org_HTCondorCE"
    assert endpoints["condor://ce1.example.org:9619"].first("GLUE2EndpointInterfaceName") == "org.opensciencegrid.htcondorce"
    arc = endpoints["https://arc.example.org:443/arex"]
    assert str(arc.first("GLUE2EndpointID")).startswith("urn:ogf:ComputingEndpoint:arc.example.org:")
    assert arc.first("GLUE2EndpointImplementationName") == "nordugrid-arc"
    services = {s.first("GLUE2ServiceType") for s in by_class(entries, "GLUE2ComputingService")}
    assert services == {"org.opensciencegrid.htcondorce", "org.nordugrid.arex"}


def test_site_form_puts_everything_under_the_domain():
    config, site, _ = example_site()
    options = glue2_options(publish_settings(config))
    entries = glue2_entries(site, type(options)(dit="site", validity_s=options.validity_s))
    suffix = "glue2domainid=example-site,o=glue"
    assert all(e.dn.lower().endswith(suffix) for e in entries)
    assert not check_glue2(entries, load_glue2_schema("/etc/ldap/schema")).errors


def test_no_site_id_means_no_tree_and_one_warning(tmp_path):
    conf = tmp_path / "g.conf"
    conf.write_text("[ce:q]\nhost = ce.example.org\naccess = VO:dteam\n")
    site = assemble_snapshots(load(str(conf)), [], lambda: NOW, local_fqdn="ce.example.org")
    warnings: list[str] = []
    assert glue2_entries(site, warnings=warnings) == []
    assert len(warnings) == 1 and "[site] id" in warnings[0]


def test_unknown_counts_are_left_out_never_a_placeholder():
    config, site, _ = example_site()
    for ce in CE_IDS.values():
        site.states[ce] = QueueState(lrms_type="slurm", error="sinfo: timed out")
    entries = glue2_entries(site, glue2_options(publish_settings(config)))
    for share in by_class(entries, "GLUE2ComputingShare"):
        for name in ("RunningJobs", "WaitingJobs", "TotalJobs", "FreeSlots", "EstimatedAverageWaitingTime"):
            assert f"GLUE2ComputingShare{name}" not in share
    text = "\n".join(str(v) for e in entries for values in e.attributes.values() for v in values)
    for placeholder in ("444444", "2146660842", "999999999"):
        assert placeholder not in text


def test_each_share_has_its_vos_own_waiting_times_else_the_queues():
    """Issue 25 item 5: EstimatedAverage/WorstWaitingTime of a VO's share are its own jobs' when they
    told them (glueinfo.lrms.waiting), else the queue's: the example's state says 600 s and 3600 s."""
    config, site, _ = example_site()
    for ce in CE_IDS.values():
        site.states[ce].vo_response_times = {"atlas": (120, 300)}
    entries = glue2_entries(site, glue2_options(publish_settings(config)))
    shares = {}
    for share in by_class(entries, "GLUE2ComputingShare"):
        vo = share.first("GLUE2EntityName").rsplit(" ", 1)[1]  # "<queue> <vo>"
        shares.setdefault(vo, set()).add((share.first("GLUE2ComputingShareEstimatedAverageWaitingTime"),
                                          share.first("GLUE2ComputingShareEstimatedWorstWaitingTime")))
    assert shares["atlas"] == {("120", "300")}
    assert all(pairs == {("600", "3600")} for vo, pairs in shares.items() if vo != "atlas") and len(shares) > 1


def test_creation_time_is_kept_while_unchanged_and_renewed_at_half_validity_or_on_change():
    config, site, _ = example_site()
    options = glue2_options(publish_settings(config))
    times = CreationTimes()
    first = {e.dn: e.first("GLUE2EntityCreationTime") for e in glue2_entries(site, options, now=NOW, times=times)}
    later = {e.dn: e.first("GLUE2EntityCreationTime") for e in glue2_entries(site, options, now=NOW + 60, times=times)}
    assert later == first  # nothing changed: nothing to write
    site.states[CE_IDS["short"]] = QueueState(lrms_type="slurm", status="Draining", running_jobs=0, waiting_jobs=0,
                                              total_jobs=0)
    changed = {e.dn: e.first("GLUE2EntityCreationTime") for e in glue2_entries(site, options, now=NOW + 120, times=times)}
    renewed = [dn for dn in changed if changed[dn] != first.get(dn)]
    assert renewed and all("short" in dn or "ce1.example.org" in dn for dn in renewed)
    half = options.validity_s / 2
    aged = {e.dn: e.first("GLUE2EntityCreationTime") for e in glue2_entries(site, options, now=NOW + 120 + half, times=times)}
    assert all(aged[dn] != changed[dn] for dn in aged)


def test_health_check_connects_for_real(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        up = check_endpoint(HealthTarget(f"https://127.0.0.1:{port}/arex", timeout_s=2))
    assert up.state == "ok" and f"127.0.0.1:{port}" in up.info
    down = check_endpoint(HealthTarget(f"https://127.0.0.1:{port}/arex", timeout_s=2))
    assert down.state == "critical"
    with open("/proc/self/comm") as handle:
        me = handle.read().strip()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        url = f"condor://127.0.0.1:{server.getsockname()[1]}"
        assert check_endpoint(HealthTarget(url, local=True, process=me)).state == "ok"
        missing = check_endpoint(HealthTarget(url, local=True, process="no-such-daemon"))
    assert missing.state == "critical" and "no-such-daemon: not running" in missing.info


def test_json_rendering_nests_the_same_objects():
    entries, _ = rendered()
    document = json.loads(json.dumps(glue2_json(entries)))
    services = document["ComputingService"]
    assert {s["ID"] for s in services} == {e.first("GLUE2ServiceID") for e in by_class(entries, "GLUE2ComputingService")}
    shares = [share for s in services for share in s.get("ComputingShare", [])]
    assert len(shares) == len(by_class(entries, "GLUE2ComputingShare"))
    assert all(share["Associations"]["ComputingServiceID"] for share in shares)
    assert all("MappingPolicy" in share for share in shares)


@pytest.mark.parametrize("bad", ["HEP-SPEC06", "HEP-SPEC06=fast"])
def test_a_malformed_benchmark_is_one_clear_error(tmp_path, bad):
    conf = tmp_path / "g.conf"
    conf.write_text(f"[site]\nid = S\n[ce:q]\nhost = ce.example.org\naccess = VO:dteam\nbenchmarks = {bad}\n")
    site = assemble_snapshots(load(str(conf)), [], lambda: NOW, local_fqdn="ce.example.org")
    with pytest.raises(ValueError, match=r"\[ce:q\] benchmarks: .*TYPE=VALUE"):
        glue2_entries(site)


@pytest.mark.parametrize("order, express", [(("batch", "express"), 48), (("express", "batch"), 48),
                                            (("batch", "express"), None)])
def test_a_managers_total_slots_do_not_depend_on_the_order_of_its_queues(order, express):
    # Two Torque queues on one cluster: batch's nodes have 32 CPUs, express reaches 48 (more nodes).
    sections = {name: f"[ce:{name}]\ncluster = batch\nlrms = pbs\nqueue = {name}\naccess = VO:atlas\n"
                for name in ("batch", "express")}
    config = parse_text("[site]\nid = EXAMPLE\nname = EXAMPLE\n[glue]\nversions = 2.0\n[cluster:batch]\nhosts = wn*\n"
                        + "".join(sections[name] for name in order))
    hosts = [make_host(CLASSES[0][0], i) for i in range(2)]
    totals = {"batch": 32, "express": express}  # express None: its node query failed
    states = {f"ce1.example.org:2119/jobmanager-pbs-{name}": QueueState(lrms_type="torque", total_cpus=cpus, status="Production")
              for name, cpus in totals.items()}
    site = assemble_snapshots(config, hosts, lambda: NOW, local_fqdn="ce1.example.org", states=states)
    managers = [e for e in glue2_entries(site, glue2_options(publish_settings(config))) if "GLUE2ComputingManager" in e.object_classes]
    # a queue that did not say leaves the figure out rather than publish the other's 32
    assert [m.first("GLUE2ComputingManagerTotalSlots") for m in managers] == ["48" if express else None]


def test_a_limit_the_batch_system_gives_in_seconds_is_published_to_the_second():
    # Grid Engine's s_rt 172000: GLUE 1.3 says 2866 minutes (rounded down), GLUE 2 172000 s, not 171960
    config = parse_text("[site]\nid = EXAMPLE\nname = EXAMPLE\n[glue]\nversions = 2.0\n[cluster:batch]\nhosts = wn*\n"
                        "[ce:long]\ncluster = batch\nlrms = sge\nqueue = long\naccess = VO:atlas\n"
                        "default_wall_clock_time = 4000\n")
    state = QueueState(lrms_type="sge", status="Production", max_wall_clock_time_min=2866, max_wall_clock_time_s=172000)
    site = assemble_snapshots(config, [make_host(CLASSES[0][0], 0)], lambda: NOW, local_fqdn="ce1.example.org",
                              states={"ce1.example.org:2119/jobmanager-sge-long": state})
    share = next(e for e in glue2_entries(site, glue2_options(publish_settings(config))) if "GLUE2ComputingShare" in e.object_classes)
    # the configured default (4000 min) is capped at the limit beside it
    assert (share.first("GLUE2ComputingShareMaxWallTime"), share.first("GLUE2ComputingShareDefaultWallTime")) == (
        "172000", "172000")


@pytest.mark.parametrize("queues, published", [(("short", "long"), False), (("short",), True)])
def test_a_service_leaves_out_waiting_jobs_two_of_its_queues_may_both_count(queues, published):
    # Grid Engine counts a job that requested no queue in each queue it may start in: summed over
    # short and long it would count twice; one queue alone counts it once.
    config = parse_text("[site]\nid = EXAMPLE\nname = EXAMPLE\n[glue]\nversions = 2.0\n[cluster:batch]\nhosts = wn*\n"
                        + "".join(f"[ce:{q}]\ncluster = batch\nlrms = sge\nqueue = {q}\naccess = VO:atlas\n" for q in queues))
    states = {f"ce1.example.org:2119/jobmanager-sge-{q}": QueueState(
        lrms_type="sge", status="Production", running_jobs=2, waiting_jobs=5, total_jobs=7, waiting_shared=True)
        for q in queues}
    site = assemble_snapshots(config, [make_host(CLASSES[0][0], 0)], lambda: NOW, local_fqdn="ce1.example.org", states=states)
    (service,) = [e for e in glue2_entries(site, glue2_options(publish_settings(config))) if "GLUE2ComputingService" in e.object_classes]
    figures = [service.first(f"GLUE2ComputingService{n}Jobs") for n in ("Running", "Waiting", "Total")]
    assert figures == ([str(2 * len(queues)), "5", "7"] if published else ["4", None, None])
