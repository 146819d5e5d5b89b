"""A spool of GPU and CPU workers through `glueinfo ldif` (issue 27 item 3): SubClusters split by
accelerator model and count, and the stable SubCluster ids keep their rule.

The workers are recorded hosts: a two-socket Xeon Gold 6126 (tests/fixtures/hosts/xeon-gold-2s-ht),
and the same host with the two H100 of tests/fixtures/gpu (sysfs, /proc/driver/nvidia and NVML's
recorded answers) put in; each writes its Node XML into the spool with `glueinfo node-xml`, as its
cron job would.  The expected ids are written out by hand from the id rule (glueinfo.site.ids:
``<cluster id>-<platform>-<CPU vendor and model>``, and the accelerators' model for hosts that
have them) and the fixtures' facts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from paths import FIXTURES

XEON = FIXTURES / "hosts" / "xeon-gold-2s-ht"
H100 = FIXTURES / "gpu" / "hosts" / "h100x2-driver-only"
NVML = FIXTURES / "gpu" / "recorded" / "h100x2-nvml.json"
CLUSTER = "batch.example.org"
CPU_ID = f"{CLUSTER}-x86_64-intel-xeon-gold-6126"
GPU_ID = f"{CLUSTER}-x86_64-intel-xeon-gold-6126-nvidia-h100-80gb-hbm3"


def glueinfo(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def worker(tmp: Path, spool: Path, name: str, gpus: bool = False, known_none: bool = False) -> None:
    """One worker's tree, its Node XML dropped in the spool as ``glueinfo node-xml`` prints it."""
    root = tmp / "trees" / name
    shutil.copytree(XEON, root)
    if gpus:
        for part in ("sys", "proc", "usr"):
            shutil.copytree(H100 / part, root / part, dirs_exist_ok=True)
        shutil.copy(NVML, root / ".glueinfo" / "nvml.json")
    if known_none:  # a newer agent: sysfs read, a host bridge and no accelerator
        bridge = root / "sys" / "bus" / "pci" / "devices" / "0000:00:00.0"
        bridge.mkdir(parents=True)
        for attribute, value in (("class", "0x060000"), ("vendor", "0x8086"), ("device", "0x2020")):
            (bridge / attribute).write_text(value + "\n")
    config = tmp / f"{name}.conf"
    config.write_text(f"[glueinfo]\nhostname = {name}\n")
    done = glueinfo("node-xml", "--config", str(config), "--host-root", str(root))
    assert done.returncode == 0, done.stderr
    spool.mkdir(exist_ok=True)
    (spool / f"{name}.xml").write_text(done.stdout)


def site(tmp: Path, spool: Path, state: bool = False) -> Path:
    config = tmp / "site.conf"
    config.write_text(f"""
[site]
id = SITE-GPU

[cluster:{CLUSTER}]

[ce:batch]
host = ce01.example.org
lrms = fork

[sources]
enabled = spool
spool_dir = {spool}
""" + (f"\n[run]\nstate_dir = {tmp / 'state'}\n" if state else ""))
    return config


def subclusters(config: Path) -> dict[str, list[str]]:
    """SubCluster id -> its hosts, from the GLUE 1.3 DNs `glueinfo ldif` prints."""
    done = glueinfo("ldif", "--config", str(config))
    assert done.returncode == 0, done.stderr
    groups: dict[str, list[str]] = {}
    text = done.stdout.replace("\n ", "")  # LDIF continuation lines
    for line in text.splitlines():
        if line.startswith("dn: GlueHostUniqueID="):
            rdns = line[len("dn: "):].split(",")
            groups.setdefault(rdns[1].split("=", 1)[1], []).append(rdns[0].split("=", 1)[1])
    return groups


def test_gpu_and_cpu_workers_are_separate_subclusters(tmp_path):
    spool = tmp_path / "spool"
    for name in ("cpu01.example.org", "cpu02.example.org"):
        worker(tmp_path, spool, name)
    for name in ("gpu01.example.org", "gpu02.example.org"):
        worker(tmp_path, spool, name, gpus=True)
    assert subclusters(site(tmp_path, spool)) == {CPU_ID: ["cpu01.example.org", "cpu02.example.org"],
                                                  GPU_ID: ["gpu01.example.org", "gpu02.example.org"]}


def test_a_cpu_only_sites_ids_do_not_change_when_gpu_workers_join(tmp_path):
    spool = tmp_path / "spool"
    # A CPU-only site as it stood: one worker read by an agent older than the accelerators collector
    # (no Accelerators in its Node), one by a newer one that found none.
    worker(tmp_path, spool, "cpu01.example.org")
    worker(tmp_path, spool, "cpu02.example.org", known_none=True)
    config = site(tmp_path, spool, state=True)
    before = subclusters(config)
    assert before == {CPU_ID: ["cpu01.example.org", "cpu02.example.org"]}
    worker(tmp_path, spool, "gpu01.example.org", gpus=True)
    after = subclusters(config)
    assert after == {CPU_ID: ["cpu01.example.org", "cpu02.example.org"], GPU_ID: ["gpu01.example.org"]}
