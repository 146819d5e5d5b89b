"""Accelerators through a real slapd (issue 27 item 5), both ways a site can run:

- without glueinfo's GLUE 2.1 extension (EGI's GLUE20.schema only, ``[glue] accelerator_schema =
  no``): everything glueinfo sends loads with zero rejections, and a broker finds the GPUs in the
  GLUE 2.0 forms (ExecutionEnvironment OtherInfo ``GPU=2``, ApplicationEnvironment ``GPU``,
  ComputingManager and ComputingShare OtherInfo) and GLUE 1.3's run-time environment tag ``GPU``;
  the GLUE 2.1 entries it keeps out are refused by that slapd, which is why they are kept out;
- with the extension included in slapd.conf (``accelerator_schema = yes``): the GLUE 2.1 classes
  load too, and ldapsearch answers the draft's attributes: 2 total and 1 used slots of the
  manager, the environment's 2 H100 per node.

Then the same from the command line a BDII provider runs: ``glueinfo ldif`` over snapshot files
of GPU workers, loaded into each slapd.  Expected values are the figures written in the unit
test's site (two nodes with two H100 each; Slurm's 4 GPUs, 1 used), never read from glueinfo."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "glue"))
from test_glue2_accelerators import GPU_HOSTS, GPU_QUEUE, H100, documents, hosts_with  # noqa: E402

from glueinfo.glue.glue2.accelerators import EXTENSION_SCHEMA  # noqa: E402

pytestmark = pytest.mark.integration
GLUE, GRID = "o=glue", "o=grid"
CLOCK = "1800000000"


@pytest.fixture
def slapd_with_extension(tmp_path):
    from servers import Slapd, missing_slapd_tools

    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    server = Slapd(tmp_path / "slapd-ext", extra_schema=[EXTENSION_SCHEMA]).start()
    try:
        yield server
    finally:
        server.stop()


def test_without_the_extension_slapd_takes_everything_and_the_glue20_forms_tell_the_gpus(slapd):
    docs = documents("no")
    result = slapd.ldapadd(docs.ldif.decode())
    assert result.ok, str(result)
    assert len(result.added) == docs.ldif.decode().count("\ndn: ") + 1
    (ee,) = slapd.ldapsearch(GLUE, "(&(objectClass=GLUE2ExecutionEnvironment)(GLUE2EntityOtherInfo=GPU=*))")
    assert "GPU=2" in ee.get("GLUE2EntityOtherInfo")
    assert f"GPUModel={H100['model']}" in ee.get("GLUE2EntityOtherInfo")
    assert int(ee.first("GLUE2ExecutionEnvironmentTotalInstances")) == GPU_HOSTS
    (app,) = slapd.ldapsearch(GLUE, "(&(objectClass=GLUE2ApplicationEnvironment)(GLUE2ApplicationEnvironmentAppName=GPU))")
    assert app.get("GLUE2ApplicationEnvironmentExecutionEnvironmentForeignKey") == [ee.first("GLUE2ResourceID")]
    (manager,) = slapd.ldapsearch(GLUE, "(objectClass=GLUE2ComputingManager)")
    assert {"GPUTotalSlots=4", "GPUUsedSlots=1", "GPUTotalNumbers=4"} <= set(manager.get("GLUE2EntityOtherInfo"))
    (subcluster,) = slapd.ldapsearch(GRID, "(&(objectClass=GlueSubCluster)(GlueHostApplicationSoftwareRunTimeEnvironment=GPU))")
    assert "EPYC" in subcluster.first("GlueHostProcessorModel")
    # the entries kept out of LDAP: this slapd refuses each of them
    from glueinfo.core.ldif import format_ldif

    refused = slapd.ldapadd(format_ldif(docs.glue2.json_only, sort=False))
    assert len(docs.glue2.json_only) == 5 and len(refused.rejected) == 5, str(refused)


def test_with_the_extension_slapd_takes_the_glue21_classes_and_answers_their_attributes(slapd_with_extension):
    server = slapd_with_extension
    docs = documents("yes")
    result = server.ldapadd(docs.ldif.decode())
    assert result.ok, str(result)
    (accelerator,) = server.ldapsearch(GLUE, "(objectClass=GLUE2AcceleratorEnvironment)")
    assert accelerator.first("GLUE2AcceleratorEnvironmentType") == "GPU"
    assert int(accelerator.first("GLUE2AcceleratorEnvironmentNumbers")) == H100["count"]
    assert accelerator.first("GLUE2AcceleratorEnvironmentModel") == H100["model"]
    assert int(accelerator.first("GLUE2AcceleratorEnvironmentMemory")) == H100["memory_mb"]
    (manager,) = server.ldapsearch(GLUE, "(objectClass=GLUE2ComputingManagerAccelerator)")
    assert int(manager.first("GLUE2ComputingManagerAcceleratorTotalSlots")) == GPU_QUEUE.total == 4
    assert int(manager.first("GLUE2ComputingManagerAcceleratorUsedSlots")) == GPU_QUEUE.used == 1
    assert int(manager.first("GLUE2ComputingManagerAcceleratorTotalNumbers")) == GPU_HOSTS * H100["count"]
    # integerOrderingMatch: a broker can ask for shares with a free GPU
    shares = server.ldapsearch(GLUE, "(&(objectClass=GLUE2ComputingShareAccelerator)(GLUE2ComputingShareAcceleratorFreeSlots>=1))")
    assert len(shares) == 3


@pytest.fixture
def gpu_site_files(tmp_path):
    from paths import REPO

    hosts = hosts_with()
    for host in hosts:
        host.collected_at = float(CLOCK) - 30
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in hosts]))

    def config(switch: str) -> Path:
        path = tmp_path / f"site-{switch}.conf"
        path.write_text((REPO / "etc" / "examples" / "glue2-site.conf").read_text().replace(
            "validity = 10800", f"validity = 10800\naccelerator_schema = {switch}")
            + f"\n[run]\nstate_dir = {tmp_path / 'state'}\n[sources]\nenabled =\n[node]\nsite_snapshots = {snapshots}\n")
        return path

    return config


@pytest.mark.parametrize("switch", ["no", "yes"])
def test_glueinfo_ldif_over_gpu_workers_loads_into_the_slapd_it_is_meant_for(gpu_site_files, slapd, slapd_with_extension,
                                                                              switch):
    from glueinfo_processes import run_glueinfo

    done = run_glueinfo("ldif", "--config", str(gpu_site_files(switch)), env={"GLUEINFO_CLOCK": CLOCK})
    assert done.returncode in (0, 1), done.stderr  # 1: the example's Slurm CEs have no Slurm here (said on stderr)
    server = slapd_with_extension if switch == "yes" else slapd
    result = server.ldapadd(done.stdout)
    assert result.ok, str(result)
    environments = server.ldapsearch(GLUE, "(objectClass=GLUE2AcceleratorEnvironment)") if switch == "yes" else []
    assert len(environments) == (2 if switch == "yes" else 0)  # one per service (HTCondor-CE, ARC-CE) of the cluster
    assert (b"GLUE2AcceleratorEnvironment" in done.stdout.encode()) == (switch == "yes")
    tagged = server.ldapsearch(GRID, "(&(objectClass=GlueSubCluster)(GlueHostApplicationSoftwareRunTimeEnvironment=GPU))")
    assert len(tagged) == 1
    printed = run_glueinfo("glue2-json", "--no-health-check", "--config", str(gpu_site_files(switch)),
                           env={"GLUEINFO_CLOCK": CLOCK})
    document = json.loads(printed.stdout)
    found = [acc for service in document["ComputingService"] for ee in service.get("ExecutionEnvironment", [])
             for acc in ee.get("AcceleratorEnvironment", [])]
    assert {(a["Type"], a["Numbers"], a["Model"]) for a in found} == {("GPU", H100["count"], H100["model"])}
