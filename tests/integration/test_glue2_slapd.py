"""The GLUE 2 tree of etc/examples/glue2-site.conf loaded into a real slapd (GLUE20.schema) with
ldapadd -c, zero rejections, then the chain a workload manager follows asked with ldapsearch:
MappingPolicy Rule=VO:x -> ComputingShare -> ExecutionEnvironment (memory, OS, platform) and
Endpoint (URL, ImplementationName).  Expected values come from the config file and the hand-written
host facts, never from the renderer."""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "glue"))
from test_glue2 import EXAMPLE, example_site  # noqa: E402

from glueinfo.glue.glue2 import check_glue2, glue2_entries, load_glue2_schema  # noqa: E402
from glueinfo.publish.documents import glue2_options
from glueinfo.site.publish_settings import publish_settings

pytestmark = pytest.mark.integration
BASE = "o=glue"


def load(slapd, dit="resource"):
    config, site, hosts = example_site()
    options = glue2_options(publish_settings(config))
    entries = glue2_entries(site, type(options)(dit=dit, validity_s=options.validity_s))
    build = check_glue2(entries, load_glue2_schema("/etc/ldap/schema"))
    assert not build.errors
    result = slapd.ldapadd(build.ldif())
    assert result.ok, str(result)
    assert len(result.added) == len(build.entries)
    return hosts


@pytest.mark.parametrize("dit", ["resource", "site"])
def test_the_tree_loads_with_zero_rejections_and_a_broker_follows_the_chain(slapd, dit):
    hosts = load(slapd, dit)
    raw = configparser.ConfigParser()
    raw.read(EXAMPLE)
    ram = {h.memory.ram_mb for h in hosts}
    for section in ("long", "short", "grid"):
        vos = {r.split(":", 1)[1] for r in raw[f"ce:{section}"]["access"].split() if r.startswith("VO:")}
        for vo in vos:
            policies = slapd.ldapsearch(BASE, f"(&(objectClass=GLUE2MappingPolicy)(GLUE2PolicyRule=VO:{vo}))",
                                        ["GLUE2MappingPolicyShareForeignKey"])
            share_ids = [p.first("GLUE2MappingPolicyShareForeignKey") for p in policies]
            shares = [s for sid in share_ids
                      for s in slapd.ldapsearch(BASE, f"(&(objectClass=GLUE2ComputingShare)(GLUE2ShareID={sid}))")]
            queue = raw[f"ce:{section}"]["queue"]
            (share,) = [s for s in shares if s.first("GLUE2ComputingShareMappingQueue") == queue]
            assert int(share.first("GLUE2ComputingShareMaxWallTime")) == int(raw[f"ce:{section}"]["max_wall_clock_time"]) * 60
            for ee_id in share.get("GLUE2ComputingShareExecutionEnvironmentForeignKey"):
                (ee,) = slapd.ldapsearch(BASE, f"(&(objectClass=GLUE2ExecutionEnvironment)(GLUE2ResourceID={ee_id}))")
                assert any(abs(int(ee.first("GLUE2ExecutionEnvironmentMainMemorySize")) - r) <= 1024 for r in ram)
                assert ee.first("GLUE2ExecutionEnvironmentPlatform") == "x86_64"
                assert ee.first("GLUE2ExecutionEnvironmentOSFamily") == "linux"
            endpoint_id = share.first("GLUE2ComputingShareComputingEndpointForeignKey")
            (endpoint,) = slapd.ldapsearch(BASE, f"(&(objectClass=GLUE2ComputingEndpoint)(GLUE2EndpointID={endpoint_id}))")
            host = raw[f"ce:{section}"]["host"]
            assert host in endpoint.first("GLUE2EndpointURL")
            assert endpoint.first("GLUE2EndpointImplementationName") in ("HTCondor", "nordugrid-arc")
