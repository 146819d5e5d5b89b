"""A minimal site as admins start one: ``[site] id``, two ``[ce:NAME]`` queues with access rules, nothing
about connectivity, limits or the CE's middleware, three workers.  What EGI's validator, DIRAC's GLUE 2
reader and ARGO need of its trees, checked against the config text below and the hand-written host facts
(tests/harness/glue_sites.py); tests/integration/test_minimal_site.py does the same through slapd."""

from __future__ import annotations

import dataclasses
import re

from glue_sites import CLASSES, make_host

from glueinfo.core.config import parse_text
from glueinfo.core.model import QueueState, VoJobCounts
from glueinfo.glue.glue2 import load_glue2_schema
from glueinfo.glue.glue2.ces import health_targets
from glueinfo.publish.documents import Publisher
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings

XEON, EPYC = CLASSES[0][0], CLASSES[1][0]
NOW = 1_700_000_100.0
CE_HOST = "ce.minimal.example.org"
SITE_ID = "MINIMAL-SITE"
MINIMAL = f"""
[site]
id = {SITE_ID}

[ce:long]
host = {CE_HOST}
lrms = slurm
access = VO:dteam VO:atlas

[ce:short]
host = {CE_HOST}
lrms = slurm
access = VO:dteam
"""
CE_IDS = {"long": f"{CE_HOST}:2119/jobmanager-slurm-long", "short": f"{CE_HOST}:2119/jobmanager-slurm-short"}
QUEUES_OF = {"dteam": {"long", "short"}, "atlas": {"long"}}  # from the access rules above
# The names of retired middleware a consumer would act on: CREAM, Globus GRAM (its URL scheme and interface).
RETIRED = re.compile(r"cream|gram|globus", re.IGNORECASE)


def quiet_hosts(hw=XEON, count: int = 3, **static_changes):
    """Workers whose snapshots say nothing of connectivity (no [static] inbound_ip / outbound_ip)."""
    hosts = []
    for i in range(count):
        host = make_host(hw, i)
        static = dataclasses.replace(host.static, **{"inbound_ip": None, "outbound_ip": None, **static_changes})
        hosts.append(dataclasses.replace(host, static=static))
    return hosts


def slurm_state(**changes) -> QueueState:
    fields = dict(lrms_type="slurm", lrms_version="22.05.8", total_cpus=144, free_cpus=100, running_jobs=3, waiting_jobs=1,
                  total_jobs=4, free_job_slots=100, vo_counts={"dteam": VoJobCounts(3, 1, 4)})
    fields.update(changes)
    return QueueState(**fields)


def documents(conf: str = MINIMAL, hosts=None, states=None):
    config = parse_text(conf)
    hosts = quiet_hosts() if hosts is None else hosts
    states = {ce: slurm_state() for ce in CE_IDS.values()} if states is None else states
    site = assemble_snapshots(config, hosts, lambda: NOW, local_fqdn=CE_HOST, states=states)
    return Publisher(publish_settings(config), check_health=False).documents(site)


def glue2(docs):
    return docs.glue2.entries


def of_class(entries, name):
    return [e for e in entries if name in e.object_classes]


def by_id(entries, attribute):
    return {str(e.first(attribute)): e for e in entries if attribute in e}


def dirac_queues(entries, vo):
    """The queues a VO reaches the way DIRAC's getGlue2CEInfo walks the tree: its policies
    (GLUE2PolicyRule VO:<vo>) -> GLUE2MappingPolicyShareForeignKey -> the ComputingShare ->
    GLUE2ComputingShareExecutionEnvironmentForeignKey -> the ExecutionEnvironment, which must give
    OS family, platform and main memory.  Queue -> the environments' (OSFamily, Platform, MainMemorySize)."""
    shares = by_id(of_class(entries, "GLUE2ComputingShare"), "GLUE2ShareID")
    environments = by_id(of_class(entries, "GLUE2ExecutionEnvironment"), "GLUE2ResourceID")
    found = {}
    for policy in of_class(entries, "GLUE2Policy"):
        if f"VO:{vo}" not in [str(r) for r in policy.get("GLUE2PolicyRule")] or "GLUE2MappingPolicyShareForeignKey" not in policy:
            continue
        share = shares[str(policy.first("GLUE2MappingPolicyShareForeignKey"))]
        keys = [str(k) for k in share.get("GLUE2ComputingShareExecutionEnvironmentForeignKey")]
        assert keys, share.dn
        found[str(share.first("GLUE2ComputingShareMappingQueue"))] = [
            (str(environments[k].first("GLUE2ExecutionEnvironmentOSFamily")),
             str(environments[k].first("GLUE2ExecutionEnvironmentPlatform")),
             int(environments[k].first("GLUE2ExecutionEnvironmentMainMemorySize"))) for k in keys]
    return found


def test_each_vo_reaches_its_queues_and_their_environment_by_diracs_path():
    entries = glue2(documents())
    for vo, queues in QUEUES_OF.items():
        found = dirac_queues(entries, vo)
        assert set(found) == queues, vo
        for environments in found.values():
            assert environments == [("linux", XEON.platform, XEON.ram_mb)]


def test_connectivity_nobody_states_is_published_as_undefined():
    (environment,) = of_class(glue2(documents()), "GLUE2ExecutionEnvironment")
    assert environment.first("GLUE2ExecutionEnvironmentConnectivityIn") == "undefined"
    assert environment.first("GLUE2ExecutionEnvironmentConnectivityOut") == "undefined"


def test_the_whole_chain_is_there_and_every_foreign_key_resolves():
    docs = documents()
    entries = glue2(docs)
    for name in ("GLUE2AdminDomain", "GLUE2ComputingService", "GLUE2ComputingManager", "GLUE2ExecutionEnvironment",
                 "GLUE2ComputingShare", "GLUE2ComputingEndpoint", "GLUE2MappingPolicy", "GLUE2AccessPolicy", "GLUE2Benchmark"):
        assert of_class(entries, name), name
    ids = {str(v) for e in entries for attr, values in e.attributes.items() if attr.endswith("ID") for v in values}
    keys = [(e.dn, attr, str(v)) for e in entries for attr, values in e.attributes.items() if attr.endswith("ForeignKey")
            for v in values]
    assert keys
    assert [k for k in keys if k[2] not in ids] == []
    assert not docs.glue2.errors  # GLUE20.schema took every entry


def test_the_domain_is_named_by_the_site_id():
    entries = glue2(documents())
    (domain,) = of_class(entries, "GLUE2AdminDomain")
    assert domain.first("GLUE2DomainID") == SITE_ID
    assert {e.first("GLUE2ServiceAdminDomainForeignKey") for e in of_class(entries, "GLUE2ComputingService")} == {SITE_ID}


def test_no_retired_middleware_is_advertised_in_either_tree():
    docs = documents()
    text = docs.ldif.decode()
    assert "dn: GLUE2" in text and "dn: GlueCEUniqueID" in text
    assert RETIRED.findall(text) == []
    (service,) = of_class(glue2(docs), "GLUE2ComputingService")
    (endpoint,) = of_class(glue2(docs), "GLUE2ComputingEndpoint")
    # GLUE 2.1 Appendix A's place-holders for unknown values the schema requires, and no health guessed
    assert service.first("GLUE2ServiceType") == "UNDEFINEDVALUE"
    assert endpoint.first("GLUE2EndpointInterfaceName") == "UNDEFINEDVALUE"
    assert str(endpoint.first("GLUE2EndpointURL")).split("/")[2].endswith(".example.org")
    assert endpoint.first("GLUE2EndpointHealthState") == "unknown"
    assert "GLUE2EndpointImplementationName" not in endpoint


def test_one_warning_names_the_key_that_sets_the_ce_type():
    warnings = documents().warnings
    naming = [w for w in warnings if "implementation_name" in w]
    assert len(naming) == 1, warnings
    assert "[ce:long]" in naming[0] and "[ce:short]" in naming[0]


def test_an_endpoint_whose_url_is_not_known_is_not_health_checked():
    config = parse_text(MINIMAL)
    site = assemble_snapshots(config, quiet_hosts(), lambda: NOW, local_fqdn=CE_HOST, states={})
    assert health_targets(site.model, CE_HOST) == []


def test_glue13_keeps_what_the_schema_requires_and_claims_no_gatekeeper():
    docs = documents()
    ces = of_class(docs.glue13.entries, "GlueCE")
    assert sorted(str(e.first("GlueCEUniqueID")) for e in ces) == sorted(CE_IDS.values())
    for ce in ces:
        assert "GlueCEInfoContactString" not in ce and "GlueCEImplementationName" not in ce
        assert "GlueCEInfoGRAMVersion" not in ce
    assert not docs.glue13.errors


def test_a_declared_ce_type_keeps_its_contact_string_and_says_no_warning():
    conf = MINIMAL.replace("lrms = slurm", "lrms = slurm\nimplementation_name = HTCondorCE\nport = 9619")
    states = {ce.replace(":2119/", ":9619/"): slurm_state() for ce in CE_IDS.values()}
    docs = documents(conf, states=states)
    assert not [w for w in docs.warnings if "implementation_name" in w]
    contacts = {str(e.first("GlueCEInfoContactString")) for e in of_class(docs.glue13.entries, "GlueCE")}
    assert contacts == {f"{CE_HOST}:9619/jobmanager-slurm"}
    (endpoint,) = of_class(glue2(docs), "GLUE2ComputingEndpoint")
    assert endpoint.first("GLUE2EndpointURL") == f"condor://{CE_HOST}:9619"


def test_a_cluster_states_connectivity_for_all_its_hosts_in_both_trees():
    docs = documents(MINIMAL + "\n[cluster:wn]\ninbound_ip = no\noutbound_ip = yes\n")
    (environment,) = of_class(glue2(docs), "GLUE2ExecutionEnvironment")
    assert environment.first("GLUE2ExecutionEnvironmentConnectivityIn") == "false"
    assert environment.first("GLUE2ExecutionEnvironmentConnectivityOut") == "true"
    (subcluster,) = of_class(docs.glue13.entries, "GlueSubCluster")
    assert str(subcluster.first("GlueHostNetworkAdapterInboundIP")).upper() == "FALSE"
    assert str(subcluster.first("GlueHostNetworkAdapterOutboundIP")).upper() == "TRUE"


def test_a_subcluster_states_over_its_cluster_and_its_hosts():
    # The hosts say outbound yes; the cluster says inbound no for all; the epyc pin says outbound no for its own.
    hosts = quiet_hosts(XEON, 2, outbound_ip=True) + quiet_hosts(EPYC, 2, outbound_ip=True)
    conf = MINIMAL + "\n[cluster:wn]\ninbound_ip = no\n\n[subcluster:epyc]\nhosts = wn-epyc-*\noutbound_ip = no\n"
    environments = of_class(glue2(documents(conf, hosts)), "GLUE2ExecutionEnvironment")
    connectivity = {str(e.first("GLUE2ExecutionEnvironmentPlatform")) + " " + str(e.first("GLUE2EntityName")):
                    (e.first("GLUE2ExecutionEnvironmentConnectivityIn"), e.first("GLUE2ExecutionEnvironmentConnectivityOut"))
                    for e in environments}
    assert sorted(connectivity.values()) == [("false", "false"), ("false", "true")]
    (pinned,) = [e for e in environments if e.first("GLUE2EntityName") == "epyc"]
    assert (pinned.first("GLUE2ExecutionEnvironmentConnectivityIn"), pinned.first("GLUE2ExecutionEnvironmentConnectivityOut")) == \
        ("false", "false")


def test_an_environment_without_platform_is_left_out_naming_the_key_until_the_cluster_states_it():
    hosts = [dataclasses.replace(h, os=dataclasses.replace(h.os, platform_type=None)) for h in quiet_hosts()]
    docs = documents(MINIMAL, hosts)
    assert of_class(glue2(docs), "GLUE2ExecutionEnvironment") == []
    (said,) = [w for w in docs.warnings if "ExecutionEnvironment" in w and "left out" in w]
    assert "platform" in said and "[cluster:" in said
    stated = documents(MINIMAL + "\n[cluster:wn]\nplatform = x86_64\n", hosts)
    (environment,) = of_class(glue2(stated), "GLUE2ExecutionEnvironment")
    assert environment.first("GLUE2ExecutionEnvironmentPlatform") == "x86_64"
    assert dirac_queues(glue2(stated), "dteam").keys() == {"long", "short"}


def test_counts_the_batch_system_did_not_give_are_left_out():
    unknown = slurm_state(total_cpus=None, free_cpus=None, running_jobs=None, waiting_jobs=None, total_jobs=None,
                          free_job_slots=None, vo_counts={})
    docs = documents(states={ce: unknown for ce in CE_IDS.values()})
    for share in of_class(glue2(docs), "GLUE2ComputingShare"):
        for name in ("RunningJobs", "WaitingJobs", "TotalJobs", "FreeSlots", "UsedSlots"):
            assert f"GLUE2ComputingShare{name}" not in share
    for ce in of_class(docs.glue13.entries, "GlueCE"):
        for name in ("GlueCEInfoTotalCPUs", "GlueCEStateFreeCPUs", "GlueCEStateRunningJobs", "GlueCEStateWaitingJobs"):
            assert name not in ce
    assert not docs.glue13.errors and not docs.glue2.errors


def test_the_schema_check_ran():  # the checks above mean something only when GLUE20.schema was read
    assert load_glue2_schema("/etc/ldap/schema") is not None


def test_a_ce_type_glueinfo_does_not_know_publishes_no_glue13_service_and_glue2_placeholders():
    conf = MINIMAL.replace("lrms = slurm", "lrms = slurm\nimplementation_name = SomeNewCE")
    docs = documents(conf)
    assert of_class(docs.glue13.entries, "GlueService") == [] and not docs.glue13.errors
    (endpoint,) = of_class(glue2(docs), "GLUE2ComputingEndpoint")
    assert endpoint.first("GLUE2EndpointURL") == "https://your-ce.example.org/"
    assert not docs.glue2.errors
    stated = documents(conf.replace("implementation_name = SomeNewCE", "implementation_name = SomeNewCE\n"
                                    "endpoint_url = https://ce.minimal.example.org:8443/new\nservice_type = org.example.newce"))
    (service,) = of_class(stated.glue13.entries, "GlueService")
    assert (service.first("GlueServiceEndpoint"), service.first("GlueServiceType")) == \
        ("https://ce.minimal.example.org:8443/new", "org.example.newce")
