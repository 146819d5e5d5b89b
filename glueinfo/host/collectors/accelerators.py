"""accelerators: the host's GPUs (and FPGAs, other accelerators), each kind counted as a job can be given it.

Every host is read from sysfs first (the PCI devices of the display and processing-accelerator
classes; glueinfo.host.accelerators.accelerator_type says which count), drivers or not.  Where it
has a vendor's devices the vendor's tool is asked, and its answer, when it gives one, stands for
that vendor's devices (it knows their memory, compute capability, driver and MIG partitions):

- NVIDIA: NVML (``nvidia-ml-py``, the optional ``[gpu]`` extra, loaded only when
  ``libnvidia-ml.so.1`` exists), else ``nvidia-smi -q -x``, else the kernel's own
  /proc/driver/nvidia/gpus/*/information and pci.ids;
- AMD: ``amd-smi static --json``, else ``rocm-smi --json``, else pci.ids and ``mem_info_vram_total``;
- anyone else: pci.ids.

A tool that is not installed, fails, times out or prints something else is passed over for the
next (its process group killed within the time left of the collector's own timeout); the host is
never reported with fewer devices than sysfs shows because a tool failed (a tool that lists none
where the bus has some, say without access to /dev/nvidia*, is passed over too).  The host is
known to have none (``[]``) when sysfs was read and shows none; when sysfs cannot be read (a
container without it) and no tool lists a device, its accelerators are unknown (None).  A recorded
tree is read the same way, the tools' answers from its ``.glueinfo`` folder (glueinfo.host.linux).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Optional

from glueinfo.core.model import Accelerator
from glueinfo.host import accelerators as acc
from glueinfo.host.collect import CollectContext, Collector
from glueinfo.host.linux import PCI_VENDOR_AMD, PCI_VENDOR_NVIDIA, LinuxHost

# The share of the collector's timeout its tools may use between them, so the collector answers
# (with what sysfs says) before the runner gives up on it.
TOOLS_SHARE = 0.8
MIN_TOOL_S = 0.05

NVIDIA_SMI = ["nvidia-smi", "-q", "-x"]
AMD_SMI = ["amd-smi", "static", "--json"]
ROCM_SMI = ["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--showbus", "--showdriverversion", "--json"]


def collect(ctx: CollectContext) -> Optional[list[Accelerator]]:
    host = LinuxHost(ctx.host_root)
    deadline = time.monotonic() + TOOLS_SHARE * ctx.timeout_s
    pci = host.pci_devices()
    sysfs: list[acc.Device] = []
    vendors: set[int] = set()
    if pci:
        candidates = [device for device in pci if acc.accelerator_type(device) is not None]
        vendors = {device.vendor for device in candidates}
        nvidia_proc = host.nvidia_proc_gpus() if PCI_VENDOR_NVIDIA in vendors else {}
        unnamed = {(d.vendor, d.device) for d in candidates
                   if not (d.vendor == PCI_VENDOR_NVIDIA and (nvidia_proc.get(d.address.lower()) or {}).get("Model"))}
        names = host.pci_ids(unnamed)
        driver = host.nvidia_driver_version() if nvidia_proc else None
        sysfs = acc.from_sysfs(candidates, names, nvidia_proc, driver)
    by_address = {device.address: device for device in sysfs if device.address}
    unknown_bus = pci is None  # no sysfs: ask every tool

    devices: list[acc.Device] = []
    answered = False
    for vendor, readers in ((PCI_VENDOR_NVIDIA, _nvidia_readers(host, deadline)), (PCI_VENDOR_AMD, _amd_readers(host, deadline))):
        if not unknown_bus and vendor not in vendors:
            continue
        told = _first_answer(readers)
        if told:
            answered = True
            devices.extend(acc.with_sysfs(told, by_address))
        else:
            devices.extend(d for d in sysfs if d.vendor == acc.VENDORS[vendor])
    devices.extend(d for d in sysfs if d.vendor not in (acc.VENDORS[PCI_VENDOR_NVIDIA], acc.VENDORS[PCI_VENDOR_AMD]))
    if unknown_bus and not answered:
        return None
    return acc.group(devices)


Reader = Callable[[], Optional[list[acc.Device]]]


def _first_answer(readers: list[Reader]) -> Optional[list[acc.Device]]:
    """The devices of the first reader that gives an answer; a reader that fails is passed over."""
    from glueinfo.core.bounded_run import CommandError  # subprocess & co.: only on a host with accelerators

    for reader in readers:
        try:
            found = reader()
        except (ValueError, RuntimeError, OSError, CommandError):  # not its answer, a failed run, stopped
            continue
        if found:  # a tool that sees no device where the bus has them (no access to /dev/nvidia*) tells nothing
            return found
    return None


def _left(deadline: float) -> float:
    return max(MIN_TOOL_S, deadline - time.monotonic())


def _nvidia_readers(host: LinuxHost, deadline: float) -> list[Reader]:
    def nvml() -> Optional[list[acc.Device]]:
        answers = host.nvml_answers()
        return None if answers is None else acc.from_nvml(answers)

    def smi() -> Optional[list[acc.Device]]:
        text = host.tool_output("nvidia-smi", NVIDIA_SMI, _left(deadline))
        return None if text is None else acc.from_nvidia_smi(text)

    return [nvml, smi]


def _amd_readers(host: LinuxHost, deadline: float) -> list[Reader]:
    def amd_smi() -> Optional[list[acc.Device]]:
        text = host.tool_output("amd-smi", AMD_SMI, _left(deadline))
        return None if text is None else acc.from_amd_smi(text)

    def rocm_smi() -> Optional[list[acc.Device]]:
        text = host.tool_output("rocm-smi", ROCM_SMI, _left(deadline))
        return None if text is None else acc.from_rocm_smi(text)

    return [amd_smi, rocm_smi]


COLLECTOR = Collector(name="accelerators", collect=collect, default_enabled=True, field="accelerators",
                      description="GPUs and other accelerators: model, count, memory, compute capability, driver "
                                  "(NVML, nvidia-smi, amd-smi, rocm-smi, sysfs)")
