"""Accelerators published (issue 27 item 5): the GLUE 2.1 JSON classes by the names of OGF's GLUE 2.1
draft, the GLUE 2.0 and GLUE 1.3 forms EGI's GPU sites use, glueinfo's LDAP extension behind
``[glue] accelerator_schema``, and nothing about GPUs from hosts whose accelerators are unknown.

Expected values are the hosts' and the batch system's figures written here (two worker nodes with
two NVIDIA H100 80GB HBM3 each: 81559 MiB as nvidia-smi reports that card, compute capability 9.0
as NVIDIA's CUDA guide lists Hopper), and the attribute names are copied from the draft's tables
(https://github.com/OpenGridForum/OGF-GLUE-2.1-test, section 7), never from the renderer."""

from __future__ import annotations

import json

from glue_sites import CLASSES, make_host

from glueinfo.core.config import parse_text
from glueinfo.core.model import Accelerator, QueueAccelerators, QueueState
from glueinfo.glue.glue2.check import GLUE2_SCHEMA_FILES
from glueinfo.glue.schema import load_schema
from glueinfo.publish.documents import Publisher
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings

NOW = 1_700_000_100.0
# GLUE 2.1 draft, section 7: each class's own attributes, and what every Entity has.
ENTITY = {"ID", "Name", "OtherInfo", "CreationTime", "Validity", "Associations"}
ACCELERATOR_ENVIRONMENT = {"Type", "Numbers", "Vendor", "Model", "Version", "ClockSpeed", "Memory", "ComputeCapability"}
COMPUTING_MANAGER_ACCELERATOR = {"Type", "TotalNumbers", "TotalSlots", "UsedSlots"}
COMPUTING_SHARE_ACCELERATOR = {"Type", "FreeSlots", "UsedSlots", "MaxSlotsPerJob"}
GLUE21_CLASSES = ("AcceleratorEnvironment", "ComputingManagerAccelerator", "ComputingShareAccelerator")

CONFIG = """
[site]
id = EXAMPLE-SITE
name = EXAMPLE-SITE
location = Geneva, Switzerland
email = grid-admin@example.org
[cluster:main]
unique_id = cluster.example.org
hosts = wn-*
[vos]
map = group:atlas*=atlas, group:cms*=cms
[glue]
accelerator_schema = {switch}
[ce:gpu]
host = ce1.example.org
port = 9619
lrms = slurm
queue = gpu
implementation_name = HTCondorCE
status = Production
access = VO:atlas
[ce:batch]
host = ce1.example.org
port = 9619
lrms = slurm
queue = batch
implementation_name = HTCondorCE
status = Production
access = VO:atlas VO:cms
"""
GPU_CE, BATCH_CE = "ce1.example.org:9619/jobmanager-slurm-gpu", "ce1.example.org:9619/jobmanager-slurm-batch"
H100 = {"type": "GPU", "vendor": "NVIDIA", "model": "NVIDIA H100 80GB HBM3", "count": 2, "memory_mb": 81559,
        "compute_capability": "9.0"}
GPU_HOSTS, CPU_HOSTS = 2, 2
# Slurm's view of the two partitions over the same two GPU nodes: 4 GPUs, 1 in use
GPU_QUEUE = QueueAccelerators(type="GPU", model="h100", total=4, used=1, free=3, max_per_job=2)
BATCH_QUEUE = QueueAccelerators(type="GPU", model="h100", total=4, used=1, free=3, max_per_job=1)


def hosts_with(gpus=True, cpus=True):
    """Two EPYC nodes with two H100 each, two Xeon nodes known to have none (``[]``)."""
    hosts = []
    for i in range(GPU_HOSTS):
        host = make_host(CLASSES[1][0], i)
        host.accelerators = [Accelerator(**H100)] if gpus is True else gpus
        hosts.append(host)
    for i in range(CPU_HOSTS):
        host = make_host(CLASSES[0][0], i)
        host.accelerators = [] if cpus is True else cpus
        hosts.append(host)
    return hosts


def queue(accelerators=()):
    return QueueState(lrms_type="slurm", lrms_version="23.11.4", status="Production", total_cpus=560, free_cpus=100,
                      running_jobs=2, waiting_jobs=0, total_jobs=2, free_job_slots=100, accelerators=accelerators)


def documents(switch="no", hosts=None, states=None):
    config = parse_text(CONFIG.format(switch=switch))
    states = states if states is not None else {GPU_CE: queue((GPU_QUEUE,)), BATCH_CE: queue((BATCH_QUEUE,))}
    site = assemble_snapshots(config, hosts if hosts is not None else hosts_with(), lambda: NOW,
                              local_fqdn="ce1.example.org", states=states)
    assert {ce.unique_id for ce in site.model.ces} == {GPU_CE, BATCH_CE}
    return Publisher(publish_settings(config), check_health=False).documents(site)


def objects(document, kind):
    """Every object of ``kind`` in the nested JSON, wherever it sits."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == kind and isinstance(value, list):
                    found.extend(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(document)
    return found


def other_info(entry):
    return [v for v in entry.get("GLUE2EntityOtherInfo") if not v.startswith("Profile")]


def test_json_has_the_accelerator_environment_by_the_drafts_names_in_its_execution_environment():
    document = json.loads(documents().glue2_json)
    environments = objects(document, "ExecutionEnvironment")
    (gpu_ee,) = [ee for ee in environments if "AcceleratorEnvironment" in ee]
    assert gpu_ee["TotalInstances"] == GPU_HOSTS
    (accelerator,) = gpu_ee["AcceleratorEnvironment"]
    assert set(accelerator) <= ACCELERATOR_ENVIRONMENT | ENTITY
    assert accelerator["Type"] == "GPU"
    assert accelerator["Numbers"] == 2  # per worker node
    assert (accelerator["Vendor"], accelerator["Model"]) == ("NVIDIA", "NVIDIA H100 80GB HBM3")
    assert accelerator["Memory"] == 81559
    assert accelerator["ComputeCapability"] == ["9.0"]  # multi-valued in the draft
    assert accelerator["Associations"]["ExecutionEnvironmentID"] in (gpu_ee["ID"], [gpu_ee["ID"]])
    # the CPU-only environment (hosts known to have none) has no AcceleratorEnvironment
    assert len(environments) == 2 and sum("AcceleratorEnvironment" in ee for ee in environments) == 1


def test_json_has_the_managers_and_shares_accelerators_from_the_hosts_and_the_batch_system():
    document = json.loads(documents().glue2_json)
    (manager,) = objects(document, "ComputingManager")
    (accelerators,) = manager["ComputingManagerAccelerator"]
    assert set(accelerators) <= COMPUTING_MANAGER_ACCELERATOR | ENTITY
    assert accelerators["Type"] == "GPU"
    assert accelerators["TotalNumbers"] == GPU_HOSTS * H100["count"]  # physical cards on the hosts
    assert (accelerators["TotalSlots"], accelerators["UsedSlots"]) == (GPU_QUEUE.total, GPU_QUEUE.used)
    assert accelerators["Associations"]["ComputingManagerID"] == manager["ID"]
    shares = objects(document, "ComputingShare")
    assert len(shares) == 3  # gpu/atlas, batch/atlas, batch/cms
    for share in shares:
        (figures,) = share["ComputingShareAccelerator"]
        assert set(figures) <= COMPUTING_SHARE_ACCELERATOR | ENTITY
        expected = GPU_QUEUE if share["MappingQueue"] == "gpu" else BATCH_QUEUE
        assert (figures["Type"], figures["FreeSlots"], figures["MaxSlotsPerJob"]) == ("GPU", expected.free, expected.max_per_job)
        # used: the queue's, said only where the share is the queue's one share (the gpu queue's atlas)
        assert figures.get("UsedSlots") == (GPU_QUEUE.used if share["MappingQueue"] == "gpu" else None)
        assert figures["Associations"]["ComputingShareID"] == share["ID"]


def test_without_the_switch_ldap_gets_the_glue20_forms_only_and_glue20_schema_alone_takes_them():
    docs = documents("no")
    build = docs.glue2
    assert not build.errors
    classes = {c for e in build.entries for c in e.object_classes}
    assert not classes & {"GLUE2" + name for name in GLUE21_CLASSES}
    assert {c for e in build.json_only for c in e.object_classes} >= {"GLUE2" + name for name in GLUE21_CLASSES}
    # what EGI's GLUE20.schema (with core and cosine, nothing of glueinfo's) says of the LDAP entries
    plain = load_schema("/etc/ldap/schema", GLUE2_SCHEMA_FILES)
    assert [(e.dn, plain.check(e)) for e in build.entries if plain.check(e)] == []
    (gpu_ee,) = [e for e in build.entries if "GLUE2ExecutionEnvironment" in e.object_classes and other_info(e)]
    assert int(gpu_ee.first("GLUE2ExecutionEnvironmentTotalInstances")) == GPU_HOSTS
    assert set(other_info(gpu_ee)) == {"GPU=2", "GPUVendor=NVIDIA", "GPUModel=NVIDIA H100 80GB HBM3", "GPUMemory=81559",
                                       "GPUComputeCapability=9.0"}
    (app,) = [e for e in build.entries if e.first("GLUE2ApplicationEnvironmentAppName") == "GPU"]
    assert app.get("GLUE2ApplicationEnvironmentExecutionEnvironmentForeignKey") == [gpu_ee.first("GLUE2ResourceID")]
    (manager,) = [e for e in build.entries if "GLUE2ComputingManager" in e.object_classes]
    assert set(other_info(manager)) == {"GPUTotalNumbers=4", "GPUTotalSlots=4", "GPUUsedSlots=1"}
    (gpu_share,) = [e for e in build.entries if e.first("GLUE2ComputingShareMappingQueue") == "gpu"]
    assert set(other_info(gpu_share)) == {"GPUFreeSlots=3", "GPUUsedSlots=1", "GPUMaxSlotsPerJob=2"}


def test_with_the_switch_ldap_carries_the_glue21_classes_and_the_json_is_the_same():
    off, on = documents("no"), documents("yes")
    assert not on.glue2.errors and on.glue2.json_only == []
    glue21 = [e for e in on.glue2.entries if any(c.startswith("GLUE2") and c[5:] in GLUE21_CLASSES for c in e.object_classes)]
    assert len(glue21) == 1 + 1 + 3  # one environment, one manager type, three shares
    assert on.glue2_json == off.glue2_json
    assert b"GLUE2AcceleratorEnvironmentID" in on.ldif and b"GLUE2AcceleratorEnvironmentID" not in off.ldif


def test_the_glue20_keys_of_every_object_stay_as_they_were():
    with_gpus = json.loads(documents().glue2_json)
    without = json.loads(documents(hosts=hosts_with(gpus=[], cpus=[]), states={GPU_CE: queue(), BATCH_CE: queue()}).glue2_json)
    for kind in ("ComputingService", "ComputingEndpoint", "ComputingShare", "ComputingManager", "ExecutionEnvironment",
                 "MappingPolicy", "ApplicationEnvironment", "Benchmark"):
        before = {key for obj in objects(without, kind) for key in obj}
        after = {key for obj in objects(with_gpus, kind) for key in obj}
        assert before <= after, kind
        assert after - before <= set(GLUE21_CLASSES), kind


def test_glue13_tags_the_gpu_subcluster_with_gpu_only():
    ldif = documents().ldif.decode()
    subclusters = [block for block in ldif.replace("\n ", "").split("\n\n") if "objectClass: GlueSubCluster" in block]
    assert len(subclusters) == 2
    tagged = [b for b in subclusters if "GlueHostApplicationSoftwareRunTimeEnvironment: GPU\n" in b + "\n"]
    assert len(tagged) == 1 and "AMD EPYC" in tagged[0]


def test_hosts_with_unknown_accelerators_publish_nothing_about_gpus():
    docs = documents(hosts=hosts_with(gpus=None, cpus=None), states={GPU_CE: queue(), BATCH_CE: queue()})
    assert b"GPU" not in docs.ldif and b"ccelerator" not in docs.ldif  # queue "gpu" aside, no word of GPUs
    assert b"GPU" not in docs.glue2_json and b"ccelerator" not in docs.glue2_json
    assert "GPU=" not in docs.ldif.decode()
    document = json.loads(docs.glue2_json)
    assert all(objects(document, kind) == [] for kind in GLUE21_CLASSES)
    assert docs.glue2.json_only == []


def test_hosts_known_to_have_none_publish_no_accelerator_environment():
    docs = documents(hosts=hosts_with(gpus=[], cpus=[]), states={GPU_CE: queue(), BATCH_CE: queue()})
    document = json.loads(docs.glue2_json)
    assert all(objects(document, kind) == [] for kind in GLUE21_CLASSES)
    assert "GPU" not in {app["AppName"] for app in objects(document, "ApplicationEnvironment")}


def test_a_figure_the_batch_system_does_not_give_is_left_out():
    unsaid = QueueAccelerators(type="GPU", model=None, total=4, used=None, free=None, max_per_job=None)
    docs = documents(states={GPU_CE: queue((unsaid,)), BATCH_CE: queue((unsaid,))})
    document = json.loads(docs.glue2_json)
    (figures,) = objects(document, "ComputingManagerAccelerator")
    assert figures["TotalSlots"] == 4 and "UsedSlots" not in figures
    assert objects(document, "ComputingShareAccelerator") == []  # nothing it could say: no entity


def test_one_unknown_host_leaves_the_managers_physical_total_out():
    hosts = hosts_with(cpus=None)  # the CPU nodes' accelerators were never read
    document = json.loads(documents(hosts=hosts).glue2_json)
    (figures,) = objects(document, "ComputingManagerAccelerator")
    assert "TotalNumbers" not in figures and figures["TotalSlots"] == 4


def test_partitioned_gpus_publish_what_a_job_gets_without_a_physical_count():
    mig = Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA A100-SXM4-40GB", count=7, partition="1g.5gb", memory_mb=4864)
    docs = documents(hosts=hosts_with(gpus=[mig]))
    (accelerator,) = objects(json.loads(docs.glue2_json), "AcceleratorEnvironment")
    assert "Numbers" not in accelerator and "Memory" not in accelerator
    assert {"LogicalAccelerators=7", "Partition=1g.5gb", "PartitionMemory=4864"} <= set(accelerator["OtherInfo"])
    (gpu_ee,) = [e for e in docs.glue2.entries if "GLUE2ExecutionEnvironment" in e.object_classes and other_info(e)]
    assert "GPU=7" in other_info(gpu_ee) and "GPUPartition=1g.5gb" in other_info(gpu_ee)
