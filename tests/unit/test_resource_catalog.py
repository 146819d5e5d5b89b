"""The OSG_ResourceCatalog an HTCondor-CE advertises (issue 28 item 1), read as its consumers read it.

The file the ``htcondor-ce`` output writes is read by HTCondor's own config reader (the
``htcondor2`` bindings from PyPI, ``param``, in a child process given the file as its
CONDOR_CONFIG: macro expansion and ``\\`` continuations as a CE's daemons see them) and the
value parsed by the ClassAd library (``classad2``), into the ClassAds glideinWMS's OSG_autoconf
gets from the collector.  Every expected figure is written here from the hosts and queues the
test makes: cores, RAM, GPUs, the batch system's wall time, the CE's access rules.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from glueinfo.catalogs.resource_catalog import classad_string, resource_catalog
from glueinfo.core.config import parse_text
from glueinfo.core.model import (
    Accelerator,
    CpuInfo,
    HostSnapshot,
    MemoryInfo,
    OsInfo,
    QueueAccelerators,
    QueueState,
)
from glueinfo.publish.documents import Publisher
from glueinfo.publish.outputs import OutputContext, Publication, all_outputs, make_outputs, publish_all
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings

# classad2 reads no HTCondor config (it imports with CONDOR_CONFIG pointing nowhere); the child
# process that reads the file with htcondor2 gets its own CONDOR_CONFIG, so no HTCondor config of
# this machine is ever read.
classad = pytest.importorskip("classad2", reason="the test extras' htcondor (pip install -e '.[test]')")

NOW = 1_700_000_000.0
A100 = Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA A100-SXM4-40GB", count=4, memory_mb=40960)
CPU_CE = "ce01.example.org:9619/jobmanager-slurm-cpu"
GPU_CE = "ce01.example.org:9619/jobmanager-slurm-gpu"

CONFIG = """\
[site]
id = EXAMPLE-SITE
[cluster:cpu]
hosts = cpu-*
[cluster:gpu]
hosts = gpu-*
[ce:cpu]
cluster = cpu
host = ce01.example.org
port = 9619
lrms = slurm
access = VO:atlas VO:cms VOMS:/dune/Role=pilot
[ce:gpu]
cluster = gpu
host = ce01.example.org
port = 9619
lrms = slurm
access = VO:icecube
"""


def host(name: str, threads: int, ram_mb: int, os_name: str, release: str, accelerators: list[Accelerator]) -> HostSnapshot:
    return HostSnapshot(hostname=f"{name}.example.org", collected_at=NOW - 30, source="synthetic",
                        cpu=CpuInfo(logical_cpus=threads, physical_cores=threads // 2, sockets=2),
                        memory=MemoryInfo(ram_mb=ram_mb), os=OsInfo(name=os_name, release=release, platform_type="x86_64"),
                        accelerators=accelerators)


def hosts() -> list[HostSnapshot]:
    return [host("cpu-01", 64, 257_000, "Rocky Linux", "9.3", []), host("cpu-02", 64, 257_000, "Rocky Linux", "9.3", []),
            host("gpu-01", 48, 515_000, "AlmaLinux", "8.9", [A100]), host("gpu-02", 48, 515_000, "AlmaLinux", "8.9", [A100])]


def states(cpu: QueueState | None = None, gpu: QueueState | None = None) -> dict[str, QueueState]:
    # Slurm said: cpu's MaxTime 2 days; gpu has no time limit and schedules its GRES gpu:a100.
    return {CPU_CE: cpu or QueueState(lrms_type="SLURM", queue="cpu", max_wall_clock_time_min=2880),
            GPU_CE: gpu or QueueState(lrms_type="SLURM", queue="gpu", accelerators=(
                QueueAccelerators(type="GPU", model="a100", total=8, used=0, free=8, max_per_job=8),))}


def site_of(config: str = CONFIG, snapshots: list[HostSnapshot] | None = None, queue_states=None):
    parsed = parse_text(config)
    return assemble_snapshots(parsed, hosts() if snapshots is None else snapshots, lambda: NOW,
                              local_fqdn="ce01.example.org", states=states() if queue_states is None else queue_states)


def read_as_htcondor(path) -> dict[str, str]:
    """The file's macros as HTCondor's config reader gives them, in a child process whose
    CONDOR_CONFIG is the file (the bindings read it once, at import)."""
    script = ("import json, htcondor2\n"
              "print(json.dumps({k: htcondor2.param.get(k) for k in ('OSG_ResourceCatalog', 'SCHEDD_ATTRS')}))\n")
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "CONDOR_CONFIG": str(path)},
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def catalog_of(data: bytes, tmp_path) -> list[dict]:
    path = tmp_path / "99-catalog.conf"
    path.write_bytes(data)
    macros = read_as_htcondor(path)
    assert "OSG_ResourceCatalog" in macros["SCHEDD_ATTRS"].replace(" ", "").split(",")
    value = classad.ExprTree(macros["OSG_ResourceCatalog"]).eval()
    return [dict(ad) for ad in value]


def by_name(ads: list[dict]) -> dict[str, dict]:
    return {ad["Name"]: ad for ad in ads}


def test_each_queue_is_a_pilot_entry_with_the_measured_figures(tmp_path):
    ads = by_name(catalog_of(resource_catalog(site_of()), tmp_path))
    assert sorted(ads) == ["cpu", "gpu"]
    assert ads["cpu"] == {"Name": "cpu", "Queue": "cpu", "IsPilotEntry": True, "CPUs": 64, "Memory": 257_000,
                          "MaxWallTime": 2880, "AllowedVOs": ["atlas", "cms", "dune"], "OS": "rhel9"}
    assert ads["gpu"] == {"Name": "gpu", "Queue": "gpu", "IsPilotEntry": True, "CPUs": 48, "Memory": 515_000, "GPUs": 4,
                          "AllowedVOs": ["icecube"], "OS": "rhel8"}


def test_a_queue_whose_wall_time_is_unknown_has_none_and_the_admins_limit_is_used_when_slurm_gives_none(tmp_path):
    ads = by_name(catalog_of(resource_catalog(site_of()), tmp_path))
    assert "MaxWallTime" not in ads["gpu"]  # Slurm gave no limit and [ce:gpu] states none
    config = CONFIG.replace("access = VO:icecube", "access = VO:icecube\nmax_wall_clock_time = 720")
    ads = by_name(catalog_of(resource_catalog(site_of(config)), tmp_path))
    assert ads["gpu"]["MaxWallTime"] == 720
    assert ads["cpu"]["MaxWallTime"] == 2880


def test_gpus_only_where_the_batch_system_schedules_them_and_within_its_per_job_limit(tmp_path):
    no_gres = QueueState(lrms_type="SLURM", queue="gpu")  # hosts have GPUs, Slurm hands out none
    ads = by_name(catalog_of(resource_catalog(site_of(queue_states=states(gpu=no_gres))), tmp_path))
    assert "GPUs" not in ads["gpu"]
    capped = QueueState(lrms_type="SLURM", queue="gpu", accelerators=(
        QueueAccelerators(type="GPU", model="a100", total=8, max_per_job=2),))  # e.g. MaxTRESPerJob=gres/gpu=2
    ads = by_name(catalog_of(resource_catalog(site_of(queue_states=states(gpu=capped))), tmp_path))
    assert ads["gpu"]["GPUs"] == 2


def test_figures_no_host_reports_are_left_out(tmp_path):
    bare = [HostSnapshot(hostname=f"cpu-0{i}.example.org", collected_at=NOW - 30) for i in (1, 2)]
    bare += hosts()[2:]
    ads = by_name(catalog_of(resource_catalog(site_of(snapshots=bare)), tmp_path))
    assert ads["cpu"] == {"Name": "cpu", "Queue": "cpu", "IsPilotEntry": True, "MaxWallTime": 2880,
                          "AllowedVOs": ["atlas", "cms", "dune"]}


def test_a_queue_over_two_kinds_of_host_has_one_entry_per_kind(tmp_path):
    config = CONFIG.replace("hosts = cpu-*", "hosts = cpu-* gpu-*").replace("[cluster:gpu]\nhosts = gpu-*\n", "")
    config = config.replace("cluster = gpu\n", "cluster = cpu\n")
    ads = catalog_of(resource_catalog(site_of(config)), tmp_path)
    cpu_entries = sorted((ad["CPUs"], ad["Memory"], ad.get("GPUs")) for ad in ads if ad["Queue"] == "cpu")
    assert cpu_entries == [(48, 515_000, None), (64, 257_000, None)]  # cpu's Slurm partition counts no GPUs
    gpu_entries = sorted((ad["CPUs"], ad["Memory"], ad.get("GPUs")) for ad in ads if ad["Queue"] == "gpu")
    assert gpu_entries == [(48, 515_000, 4), (64, 257_000, None)]
    names = [ad["Name"] for ad in ads]
    assert len(set(names)) == 4 and all(name.startswith(("cpu-", "gpu-")) for name in names)


HOSTILE_QUEUE = 'q"; IsPilotEntry = False; X = "$(FULL_HOSTNAME)$ENV(HOME)\\'
HOSTILE_VO = 'at"las}$(DOLLAR)#x'


def test_hostile_queue_and_vo_names_stay_inside_their_strings(tmp_path):
    config = CONFIG.replace("lrms = slurm\naccess = VO:icecube", f"lrms = slurm\nqueue = {HOSTILE_QUEUE}\naccess = VO:{HOSTILE_VO}")
    gpu_ce = f"ce01.example.org:9619/jobmanager-slurm-{HOSTILE_QUEUE}"
    queue_states = {CPU_CE: states()[CPU_CE], gpu_ce: states()[GPU_CE]}
    ads = by_name(catalog_of(resource_catalog(site_of(config, queue_states=queue_states)), tmp_path))
    assert sorted(ads) == sorted(["cpu", HOSTILE_QUEUE])
    hostile = ads[HOSTILE_QUEUE]
    assert hostile["Queue"] == HOSTILE_QUEUE and hostile["AllowedVOs"] == [HOSTILE_VO]
    assert hostile["IsPilotEntry"] is True and "X" not in hostile and hostile["GPUs"] == 4


@pytest.mark.parametrize("text", ["plain", "new\nline", "tab\there", "nul\0byte", "ünïcødé 名前", "\\", '"', "$", "$$(X)",
                                  "$(DOLLAR)", "back\\", "#", "\x7f\x1b[31m", "a\\\nb"])
def test_any_string_reads_back_unchanged_through_htcondor_config_and_classad(text, tmp_path):
    path = tmp_path / "one.conf"
    path.write_text(f"OSG_ResourceCatalog = {{ [ Name = {classad_string(text)}; ] }}\nSCHEDD_ATTRS = OSG_ResourceCatalog\n",
                    encoding="ascii")
    ads = classad.ExprTree(read_as_htcondor(path)["OSG_ResourceCatalog"]).eval()
    assert [dict(ad) for ad in ads] == [{"Name": text.replace("\0", "\ufffd")}]  # NUL: no ClassAd string holds one


def test_the_bytes_are_the_same_for_the_same_site_in_any_host_order():
    assert resource_catalog(site_of()) == resource_catalog(site_of(snapshots=list(reversed(hosts()))))


def test_a_site_with_only_a_fork_ce_writes_no_catalog(tmp_path):
    data = resource_catalog(site_of("[site]\nid = X\n", queue_states={}))
    text = data.decode("ascii")
    assert "OSG_ResourceCatalog =" not in text and all(line.startswith("#") for line in text.splitlines())
    path = tmp_path / "empty.conf"
    path.write_bytes(data)
    assert read_as_htcondor(path)["OSG_ResourceCatalog"] is None


# -- the htcondor-ce output ------------------------------------------------------------------------

def script(path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def output_config(tmp_path, reconfig: str, extra: str = "") -> str:
    """The site's config with the htcondor-ce output writing under ``tmp_path`` and the file output's
    LDIF beside it (node_xml_file off)."""
    return CONFIG + textwrap.dedent(f"""\
        [run]
        outputs = htcondor-ce
        ldif_file = {tmp_path}/glue.ldif
        node_xml_file =
        [htcondor-ce]
        resource_catalog_file = {tmp_path}/config.d/99-glueinfo-resource-catalog.conf
        reconfig_command = {reconfig}
        """) + extra


def make(config: str):
    """The htcondor-ce and file outputs, made from their sections as the daemon makes them, and a
    function publishing a site (None: nothing changed since the last publish) to both."""
    parsed = parse_text(config)
    sections = {name: parsed.section(name) for name in ("run", "htcondor-ce")}
    context = OutputContext(publish_settings(parsed), sections, lambda: NOW)
    outputs = make_outputs(["htcondor-ce", "file"], context, all_outputs())
    publisher = Publisher(context.settings)

    def publish(site):
        return publish_all(outputs, Publication(publisher.documents(site) if site is not None else None), {}, lambda: NOW)
    return publish


CATALOG_FILE = "config.d/99-glueinfo-resource-catalog.conf"


def test_the_output_writes_the_catalog_once_and_tells_the_ce_only_when_it_changed(tmp_path):
    (tmp_path / "config.d").mkdir()
    calls = tmp_path / "reconfig.calls"
    reconfig = script(tmp_path / "reconfig", f'echo "$@" >> {calls}\n')
    publish = make(output_config(tmp_path, f"{reconfig} -debug"))
    target = tmp_path / CATALOG_FILE

    results = publish(site_of())
    assert results["htcondor-ce"].error is None and results["htcondor-ce"].written
    assert by_name(catalog_of(target.read_bytes(), tmp_path))["gpu"]["GPUs"] == 4
    assert calls.read_text() == "-debug\n"
    inode = target.stat().st_ino

    assert publish(site_of())["htcondor-ce"].written is False  # the same site: not rewritten, the CE not told
    assert publish(None)["htcondor-ce"].error is None  # nothing changed since the last publish
    assert target.stat().st_ino == inode and calls.read_text() == "-debug\n"

    more = hosts()
    more[2].accelerators = more[3].accelerators = [dataclasses.replace(A100, count=8)]
    assert publish(site_of(snapshots=more))["htcondor-ce"].written
    assert by_name(catalog_of(target.read_bytes(), tmp_path))["gpu"]["GPUs"] == 8
    assert calls.read_text() == "-debug\n-debug\n"


def test_a_restarted_output_leaves_a_current_file_alone(tmp_path):
    (tmp_path / "config.d").mkdir()
    calls = tmp_path / "reconfig.calls"
    reconfig = script(tmp_path / "reconfig", f'echo run >> {calls}\n')
    make(output_config(tmp_path, reconfig))(site_of())
    inode = (tmp_path / CATALOG_FILE).stat().st_ino
    assert make(output_config(tmp_path, reconfig))(site_of())["htcondor-ce"].written is False
    assert (tmp_path / CATALOG_FILE).stat().st_ino == inode and calls.read_text() == "run\n"


def test_a_failing_reconfig_is_the_outputs_own_one_line_error_and_is_tried_again(tmp_path):
    (tmp_path / "config.d").mkdir()
    works = tmp_path / "schedd-up"
    reconfig = script(tmp_path / "reconfig", f'[ -e {works} ] && exit 0\necho "Sending reconfig"\n'
                                             'echo "ERROR\n  Can\'t connect to the schedd" >&2\nexit 3\n')
    publish = make(output_config(tmp_path, reconfig))

    results = publish(site_of())
    error = results["htcondor-ce"].error
    assert error == f"reconfig_command {reconfig}: exit status 3: ERROR Can't connect to the schedd"
    assert results["file"].error is None and (tmp_path / "glue.ldif").exists()  # the other output published
    assert (tmp_path / CATALOG_FILE).exists()  # the catalog was written all the same

    assert publish(None)["htcondor-ce"].error == error  # nothing changed, the CE still not told: tried again
    works.touch()
    assert publish(None)["htcondor-ce"].error is None
    assert publish(None)["htcondor-ce"].error is None  # told: not run again


def test_a_reconfig_that_hangs_is_stopped_and_a_missing_one_is_named(tmp_path):
    (tmp_path / "config.d").mkdir()
    hangs = script(tmp_path / "hangs", "sleep 30\n")
    publish = make(output_config(tmp_path, hangs, "reconfig_timeout = 0.3\n"))
    error = publish(site_of())["htcondor-ce"].error
    assert error == f"reconfig_command {hangs}: timed out after 0.3 s; its process group was killed"
    missing = tmp_path / "no-such-reconfig"
    publish = make(output_config(tmp_path / "other", str(missing)))
    (tmp_path / "other" / "config.d").mkdir(parents=True)
    assert publish(site_of())["htcondor-ce"].error == f"reconfig_command {missing}: cannot be run: No such file or directory"


def test_a_catalog_file_that_cannot_be_written_fails_the_output_alone(tmp_path):
    results = make(output_config(tmp_path, ""))(site_of())  # no config.d directory
    error = results["htcondor-ce"].error
    assert error.startswith(f"{tmp_path}/{CATALOG_FILE}") and "\n" not in error
    assert results["file"].error is None and (tmp_path / "glue.ldif").exists()


def test_glueinfo_run_writes_the_catalog_and_tells_the_ce(tmp_path):
    """The daemon hands the output its [htcondor-ce] section: one `glueinfo run --once` on this host."""
    told = tmp_path / "told"
    reconfig = script(tmp_path / "reconfig", f"touch {told}\n")
    (tmp_path / "empty-bin").mkdir()  # no Slurm commands: the queue's state is unknown, the hosts are still known
    config = tmp_path / "glueinfo.conf"
    config.write_text(textwrap.dedent(f"""\
        [ce:batch]
        lrms = slurm
        slurm_bin_dir = {tmp_path}/empty-bin
        access = VO:atlas VOMS:/cms/Role=pilot
        max_wall_clock_time = 1440
        [run]
        state_dir = {tmp_path}/state
        ldif_file = {tmp_path}/glue.ldif
        node_xml_file =
        outputs = htcondor-ce
        [htcondor-ce]
        resource_catalog_file = {tmp_path}/{CATALOG_FILE}
        reconfig_command = {reconfig}
        """), encoding="utf-8")
    (tmp_path / "config.d").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    done = subprocess.run([sys.executable, "-m", "glueinfo.cli", "--config", str(config), "run", "--once"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    (ad,) = catalog_of((tmp_path / CATALOG_FILE).read_bytes(), tmp_path)
    assert (ad["Name"], ad["Queue"], ad["MaxWallTime"], ad["AllowedVOs"]) == ("batch", "batch", 1440, ["atlas", "cms"])
    assert told.exists()
