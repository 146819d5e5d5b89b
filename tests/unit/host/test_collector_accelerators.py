"""The accelerators collector on recorded GPU hosts and recorded GPU tools' answers (tests/fixtures/gpu).

Every expected value is read off the recorded outputs by hand (tests/fixtures/gpu/README.md says
where each came from); none is computed by glueinfo.
"""

from __future__ import annotations

import os
import shutil
import stat

import pytest
from paths import FIXTURES

from glueinfo.core.bounded_run import CommandTimedOut
from glueinfo.core.config import parse_text
from glueinfo.core.model import Accelerator
from glueinfo.host import accelerators as acc
from glueinfo.host.collect import CollectContext, probe
from glueinfo.host.collectors.accelerators import collect
from glueinfo.host.linux import LinuxHost, PciDevice

GPU = FIXTURES / "gpu"
HOSTS = GPU / "hosts"
RECORDED = GPU / "recorded"


def tree(tmp_path, host=None, answers=(), without=()):
    """A copy of a recorded host (or an empty tree) with tools' answers put in its .glueinfo folder."""
    root = tmp_path / "host"
    if host is None:
        root.mkdir()
    else:
        shutil.copytree(HOSTS / host, root)
    for relative in without:
        shutil.rmtree(root / relative)
    for fixture, name in answers:
        (root / ".glueinfo").mkdir(exist_ok=True)
        if isinstance(fixture, str) and not (RECORDED / fixture).exists():
            (root / ".glueinfo" / name).write_text(fixture, encoding="utf-8")
        else:
            shutil.copy(RECORDED / fixture, root / ".glueinfo" / name)
    return str(root)


def accelerators(root):
    return collect(CollectContext(host_root=root))


# -- NVIDIA ----------------------------------------------------------------------------------------

def test_two_h100_with_only_the_kernel_driver_are_two_nvidia_h100_80gb():
    # sysfs: two 10de:2330 3D controllers; /proc/driver/nvidia names them "NVIDIA H100 80GB HBM3".
    assert accelerators(str(HOSTS / "h100x2-driver-only")) == [
        Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=2, pci_ids=["10de:2330"], source="sysfs")]


def test_with_nvml_recorded_memory_compute_capability_clock_and_versions_are_known(tmp_path):
    # nvml.json: 81559 MiB each, compute capability (9, 0), max graphics clock 1980 MHz,
    # driver 565.57.01, CUDA driver version 12070 = 12.7.
    root = tree(tmp_path, "h100x2-driver-only", [("h100x2-nvml.json", "nvml.json")])
    assert accelerators(root) == [
        Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=2, memory_mb=81559,
                    compute_capability="9.0", clock_speed_mhz=1980, driver_version="565.57.01", runtime_version="12.7",
                    pci_ids=["10de:2330"], source="nvml")]


def test_eight_h100_from_sysfs():
    [h100] = accelerators(str(HOSTS / "h100x8-driver-only"))
    assert (h100.model, h100.count, h100.source) == ("NVIDIA H100 80GB HBM3", 8, "sysfs")


def test_without_the_nvidia_driver_the_name_comes_from_pci_ids(tmp_path):
    # pci.ids (2023.04.10): "10de  NVIDIA Corporation" / "\t2330  GH100[H100 SXM5 80GB]"
    root = tree(tmp_path, "h100x2-driver-only", without=["proc"])
    assert accelerators(root) == [
        Accelerator(type="GPU", vendor="NVIDIA", model="GH100[H100 SXM5 80GB]", count=2, pci_ids=["10de:2330"], source="sysfs")]


def test_without_a_name_anywhere_the_devices_are_still_counted(tmp_path):
    root = tree(tmp_path, "h100x2-driver-only", without=["proc", "usr"])
    assert accelerators(root) == [Accelerator(type="GPU", vendor="NVIDIA", count=2, pci_ids=["10de:2330"], source="sysfs")]


def test_mig_instances_are_what_a_job_can_get(tmp_path):
    # nvidia-smi -q -x: one A100-SXM4-80GB, MIG enabled, four instances of 19968 MiB; the document
    # names no profile.  No sysfs in this tree: the tool is asked all the same.
    root = tree(tmp_path, answers=[("a100-sxm4-80gb-mig-nvidia-smi.xml", "nvidia-smi-q-x.xml")])
    assert accelerators(root) == [
        Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA A100-SXM4-80GB", count=4, memory_mb=19968,
                    clock_speed_mhz=1410, driver_version="535.54.03", runtime_version="12.2", partition="MIG",
                    pci_ids=["10de:20b2"], source="nvidia-smi")]


def test_nvml_is_believed_before_nvidia_smi(tmp_path):
    root = tree(tmp_path, "h100x2-driver-only", [("h100x2-nvml.json", "nvml.json"),
                                                 ("a100-sxm4-80gb-mig-nvidia-smi.xml", "nvidia-smi-q-x.xml")])
    assert [a.source for a in accelerators(root)] == ["nvml"]


@pytest.mark.parametrize("answers", [
    [("{not json", "nvml.json")],
    [('{"devices": "none"}', "nvml.json")],
    [("<html>502 Bad Gateway</html>", "nvidia-smi-q-x.xml")],
    [('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><nvidia_smi_log>&e;</nvidia_smi_log>',
      "nvidia-smi-q-x.xml")],
])
def test_a_tool_answer_that_cannot_be_read_leaves_what_sysfs_says(tmp_path, answers):
    root = tree(tmp_path, "h100x2-driver-only", answers)
    [h100] = accelerators(root)
    assert (h100.model, h100.count, h100.source, h100.memory_mb) == ("NVIDIA H100 80GB HBM3", 2, "sysfs", None)


def test_nvml_mig_instances_carry_their_profile_and_own_memory(tmp_path):
    # nvml.json (transcribed): one NVIDIA A100-PCIE-40GB at 00000000:0F:00.0, MIG mode on, one
    # instance "MIG 1g.5gb" with 4864 MiB (the GPU itself 40960 MiB), driver 510.47.03.  No sysfs
    # in this tree: NVML is asked all the same.  A job gets the instance, not the 40960 MiB GPU.
    root = tree(tmp_path, answers=[("a100-pcie-40gb-mig-nvml.json", "nvml.json")])
    assert accelerators(root) == [
        Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA A100-PCIE-40GB", count=1, memory_mb=4864,
                    driver_version="510.47.03", partition="1g.5gb", pci_ids=[], source="nvml")]


def test_mig_profile_is_the_end_of_the_instance_name():
    assert acc.mig_profile("NVIDIA A100-SXM4-40GB MIG 1g.5gb") == "1g.5gb"
    assert acc.mig_profile("NVIDIA A100-SXM4-40GB") is None


# -- AMD -------------------------------------------------------------------------------------------

def test_four_mi100_from_sysfs_with_their_vram():
    # mem_info_vram_total 34342961152 bytes = 32752 x 2**20; pci.ids "\t738c  Arcturus GL-XL [Instinct MI100]"
    assert accelerators(str(HOSTS / "mi100x4-driver-only")) == [
        Accelerator(type="GPU", vendor="AMD", model="Arcturus GL-XL [Instinct MI100]", count=4, memory_mb=32752,
                    pci_ids=["1002:738c"], source="sysfs")]


def test_four_mi100_from_rocm_smi(tmp_path):
    # rocm-smi: "Card series" "Arcturus GL-XL [Instinct MI100]", "VRAM Total Memory (B)" 34342961152,
    # "Device ID" 0x738c, "system" "Driver version" 6.3.6
    root = tree(tmp_path, "mi100x4-driver-only", [("mi100x4-rocm-smi.json", "rocm-smi.json")])
    assert accelerators(root) == [
        Accelerator(type="GPU", vendor="AMD", model="Arcturus GL-XL [Instinct MI100]", count=4, memory_mb=32752,
                    driver_version="6.3.6", pci_ids=["1002:738c"], source="rocm-smi")]


def test_an_mi210_from_amd_smi(tmp_path):
    # amd-smi static --json: asic.market_name "AMD Instinct MI210", device_id 0x740f,
    # target_graphics_version gfx90a, vram.size 65520 MB; its bus part names no BDF.  Its
    # driver.version is the kernel's version string run together ("Linuxversion6.14.0-24-generic(...")
    # and is no driver version: left out.  No sysfs in this tree: amd-smi is asked all the same.
    root = tree(tmp_path, answers=[("mi210-amd-smi-static.json", "amd-smi-static.json")])
    assert accelerators(root) == [
        Accelerator(type="GPU", vendor="AMD", model="AMD Instinct MI210", count=1, memory_mb=65520,
                    compute_capability="gfx90a", pci_ids=["1002:740f"], source="amd-smi")]


def test_amd_smi_is_asked_before_rocm_smi_and_a_broken_answer_passed_over(tmp_path):
    root = tree(tmp_path, "mi100x4-driver-only", [("mi100x4-rocm-smi.json", "rocm-smi.json"),
                                                  ("Traceback (most recent call last):", "amd-smi-static.json")])
    assert [a.source for a in accelerators(root)] == ["rocm-smi"]


# -- none, unknown ---------------------------------------------------------------------------------

def test_a_host_whose_sysfs_shows_no_accelerator_has_none(tmp_path):
    root = tmp_path / "host"
    bridge = root / "sys/bus/pci/devices/0000:00:00.0"
    bridge.mkdir(parents=True)
    (bridge / "class").write_text("0x060000\n")  # a host bridge
    (bridge / "vendor").write_text("0x8086\n")
    (bridge / "device").write_text("0x2020\n")
    assert accelerators(str(root)) == []


def test_a_host_without_sysfs_and_without_tools_is_unknown():
    assert accelerators(str(FIXTURES / "hosts" / "xeon-gold-2s-ht")) is None


@pytest.mark.parametrize("vendor, device, pci_class, expected", [
    (0x10DE, 0x2330, 0x030200, "GPU"),  # H100: 3D controller
    (0x1002, 0x738C, 0x038000, "GPU"),  # MI100: display controller
    (0x10DE, 0x2684, 0x030000, "GPU"),  # an NVIDIA card in a VGA slot
    (0x1A03, 0x2000, 0x030000, None),  # ASPEED Graphics Family: a server's BMC
    (0x8086, 0x3E92, 0x030000, None),  # Intel integrated VGA
    (0x10EE, 0x5000, 0x120000, "FPGA"),  # Xilinx processing accelerator
    (0x8086, 0x2020, 0x060000, None),  # a host bridge
])
def test_which_pci_devices_are_accelerators(vendor, device, pci_class, expected):
    assert acc.accelerator_type(PciDevice("0000:01:00.0", vendor, device, pci_class, None)) == expected


# -- through the probe and the model boundary --------------------------------------------------------

def test_the_probe_carries_them_through_validation(tmp_path):
    root = tree(tmp_path, "h100x2-driver-only", [("h100x2-nvml.json", "nvml.json")])
    snapshot = probe(parse_text(f"[glueinfo]\nhost_root = {root}\nhostname = gpu01.example.org\n", "test.conf"))
    assert [(a.model, a.count, a.memory_mb) for a in snapshot.accelerators] == [("NVIDIA H100 80GB HBM3", 2, 81559)]
    assert [r.name for r in snapshot.collectors if not r.success] == []
    assert type(snapshot).from_json(snapshot.to_json()).accelerators == snapshot.accelerators


# -- the tools run live -----------------------------------------------------------------------------

def fake_tool(tmp_path, monkeypatch, script):
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "nvidia-smi"
    program.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_a_hung_tool_is_stopped_within_the_time_given(tmp_path, monkeypatch):
    fake_tool(tmp_path, monkeypatch, "sleep 30\n")
    with pytest.raises(CommandTimedOut):
        LinuxHost("/").tool_output("nvidia-smi", ["nvidia-smi", "-q", "-x"], 0.3)


def test_a_failing_tool_says_why(tmp_path, monkeypatch):
    fake_tool(tmp_path, monkeypatch, "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2\nexit 9\n")
    with pytest.raises(RuntimeError, match="^nvidia-smi exited with status 9: NVIDIA-SMI has failed because it could not"):
        LinuxHost("/").tool_output("nvidia-smi", ["nvidia-smi", "-q", "-x"], 5.0)


def test_a_tool_not_installed_is_no_answer(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert LinuxHost("/").tool_output("nvidia-smi", ["nvidia-smi", "-q", "-x"], 1.0) is None
