"""A host's accelerators from what its tools and its kernel say: the readers of each answer and the
one rule that turns devices into the model's :class:`~glueinfo.core.model.Accelerator` entries.

Pure functions of text and plain data (glueinfo.host.linux does the reading, the ``accelerators``
collector decides which answer to believe).  Each reader gives one :class:`Device` per device a job
can be given (a GPU split into MIG instances gives one per instance, ``partition`` naming its
profile), with what its source states and nothing else; :func:`group` counts identical devices
into one Accelerator.  A reader handed something that is not its tool's answer raises ValueError
with one line naming the tool and the problem; a value it cannot read (``N/A``, a unit it does not
know) is left out (None), never guessed.

Sources, and what each states (docs/admin-guide.md "Accelerators" has the table):

- NVML (``nvmlDevice*`` answers, glueinfo.host.linux.LinuxHost.nvml_answers): name, memory,
  compute capability, maximum graphics clock, PCI id, MIG instances with their profile (the
  instance's name, ``NVIDIA A100-SXM4-40GB MIG 1g.5gb``, ends with it), driver and CUDA version;
- ``nvidia-smi -q -x``: name, memory, maximum graphics clock, PCI id, MIG instances with their
  memory (the document does not name their profile: ``partition`` is then ``MIG``), driver and
  CUDA version; no compute capability;
- ``amd-smi static --json``: market name, VRAM size, gfx target, PCI id, driver version;
- ``rocm-smi --json``: card series, VRAM total, gfx version where the release prints it, PCI id,
  driver version;
- sysfs: the PCI ids and class of every device, names from the pci.ids database, NVIDIA's model
  from /proc/driver/nvidia/gpus/*/information, AMD's VRAM from ``mem_info_vram_total``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Optional

from glueinfo.core.model import Accelerator
from glueinfo.core.records import dataclass
from glueinfo.host.linux import (
    PCI_CLASS_3D,
    PCI_CLASS_DISPLAY,
    PCI_CLASS_PROCESSING,
    PCI_CLASS_VGA,
    PCI_VENDOR_AMD,
    PCI_VENDOR_INTEL,
    PCI_VENDOR_NVIDIA,
    PciDevice,
)

MB = 1 << 20
# The vendors' short names, as GLUE 2.1 AcceleratorEnvironment Vendor and the tools write them.
VENDORS = {PCI_VENDOR_NVIDIA: "NVIDIA", PCI_VENDOR_AMD: "AMD", PCI_VENDOR_INTEL: "Intel", 0x10EE: "Xilinx",
           0x1172: "Altera", 0x1DA3: "Habana"}
_FPGA_VENDORS = frozenset({0x10EE, 0x1172})
_GPU_VENDORS = frozenset({PCI_VENDOR_NVIDIA, PCI_VENDOR_AMD})
# What partition says of a MIG instance whose profile the source does not name.
UNNAMED_MIG = "MIG"
# nvidia-smi's XML names an external DTD it never needs; one with an internal subset is refused.
_NVSMI_DOCTYPE = re.compile(r'<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+"[^"<>\[\]]*"\s*>')


@dataclass(frozen=True)
class Device:
    """One device (or partition) a job can be given, as one source states it."""

    address: Optional[str]  # PCI address, lower case, 4-digit domain: 0000:18:00.0
    type: str = "GPU"
    vendor: Optional[str] = None
    model: Optional[str] = None
    memory_mb: Optional[int] = None
    compute_capability: Optional[str] = None
    clock_speed_mhz: Optional[int] = None
    driver_version: Optional[str] = None
    runtime_version: Optional[str] = None
    partition: Optional[str] = None
    pci_id: Optional[str] = None  # "10de:2330"
    source: Optional[str] = None


def accelerator_type(device: PciDevice) -> Optional[str]:
    """What a PCI device is as an accelerator (GLUE 2.1 AcceleratorType_t), or None when it is none.

    3D controllers are GPUs (NVIDIA's data-centre cards); VGA and other display controllers only from
    NVIDIA and AMD, and Intel's display controllers (its data-centre GPUs): a server's BMC graphics
    (ASPEED, Matrox) and Intel's integrated VGA run no jobs.  Processing accelerators are FPGAs from
    FPGA vendors, GPUs from NVIDIA and AMD (MI300), ``Other`` from anyone else."""
    subclass = device.pci_class >> 8
    if subclass == PCI_CLASS_3D:
        return "GPU"
    if subclass in (PCI_CLASS_VGA, PCI_CLASS_DISPLAY):
        if device.vendor in _GPU_VENDORS or (device.vendor == PCI_VENDOR_INTEL and subclass == PCI_CLASS_DISPLAY):
            return "GPU"
        return None
    if subclass == PCI_CLASS_PROCESSING:
        if device.vendor in _FPGA_VENDORS:
            return "FPGA"
        return "GPU" if device.vendor in _GPU_VENDORS else "Other"
    return None


def pci_id(vendor: int, device: int) -> str:
    return f"{vendor:04x}:{device:04x}"


def normal_address(text: Optional[str]) -> Optional[str]:
    """A PCI address as sysfs writes it: ``00000000:18:00.0`` (NVIDIA's 8-digit domain) and
    ``0000:18:00.0`` both give ``0000:18:00.0``; None for anything else."""
    match = re.fullmatch(r"\s*(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s*", text or "")
    if match is None:
        return None
    domain = int(match.group(1) or "0", 16)
    return f"{domain:04x}:{match.group(2)}:{match.group(3)}.{match.group(4)}".lower()


def from_sysfs(devices: Sequence[PciDevice], names: Mapping[tuple[int, Optional[int]], str],
               nvidia_proc: Mapping[str, Mapping[str, str]], nvidia_driver: Optional[str]) -> list[Device]:
    """The accelerators among the PCI devices, as the kernel alone tells them: the model from the
    NVIDIA driver's /proc/driver/nvidia/gpus/ADDRESS/information, else from pci.ids (``names``);
    AMD's VRAM from ``mem_info_vram_total``; the NVIDIA kernel module's version for the GPUs it holds."""
    found = []
    for device in devices:
        kind = accelerator_type(device)
        if kind is None:
            continue
        model = names.get((device.vendor, device.device))
        driver = None
        if device.vendor == PCI_VENDOR_NVIDIA:
            information = nvidia_proc.get(device.address.lower())
            if information is not None:
                given = (information.get("Model") or "").strip()
                model = given if given and given.lower() != "unknown" else model
                driver = nvidia_driver
        vendor = VENDORS.get(device.vendor) or names.get((device.vendor, None))
        memory = device.vram_bytes // MB if device.vram_bytes else None
        found.append(Device(address=device.address.lower(), type=kind, vendor=vendor, model=model or None, memory_mb=memory,
                            driver_version=driver, pci_id=pci_id(device.vendor, device.device), source="sysfs"))
    return found


# -- NVIDIA ---------------------------------------------------------------------------------------

def cuda_version(number: Any) -> Optional[str]:
    """NVML's CUDA driver version (1000 x major + 10 x minor: 12070) as ``12.7``."""
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        return None
    return f"{number // 1000}.{number % 1000 // 10}"


def _object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a part the answer does not have)."""
    return value if isinstance(value, dict) else {}


def _whole(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _name(value: Any) -> Optional[str]:
    return value.strip() or None if isinstance(value, str) else None


def mig_profile(instance_name: Optional[str]) -> Optional[str]:
    """The profile a MIG instance's NVML name ends with: ``NVIDIA A100-SXM4-40GB MIG 1g.5gb`` -> ``1g.5gb``."""
    _, sep, profile = (instance_name or "").rpartition(" MIG ")
    return profile.strip() or None if sep else None


def from_nvml(answers: Any) -> list[Device]:
    """NVML's answers (glueinfo.host.linux.LinuxHost.nvml_answers' form) -> devices; ValueError
    when they are not of that form."""
    if not isinstance(answers, dict) or not isinstance(answers.get("devices"), list):
        raise ValueError("NVML answers: expected an object with a 'devices' list")
    driver = _name(answers.get("nvmlSystemGetDriverVersion"))
    runtime = cuda_version(answers.get("nvmlSystemGetCudaDriverVersion"))
    found = []
    for record in answers["devices"]:
        if not isinstance(record, dict):
            raise ValueError("NVML answers: a device is not an object")
        name = _name(record.get("nvmlDeviceGetName"))
        pci = _object(record.get("nvmlDeviceGetPciInfo"))
        address = normal_address(pci.get("busId") if isinstance(pci.get("busId"), str) else None)
        ids = _whole(pci.get("pciDeviceId"))
        capability = record.get("nvmlDeviceGetCudaComputeCapability")
        cc = (f"{capability[0]}.{capability[1]}" if isinstance(capability, list) and len(capability) == 2
              and all(_whole(part) is not None for part in capability) else None)
        clocks = _object(record.get("nvmlDeviceGetMaxClockInfo"))
        clock = _whole(clocks.get("graphics")) or None
        base = Device(address=address, vendor="NVIDIA", model=name, memory_mb=_memory(record), compute_capability=cc,
                      clock_speed_mhz=clock, driver_version=driver, runtime_version=runtime,
                      pci_id=pci_id(ids & 0xFFFF, ids >> 16) if ids else None, source="nvml")
        mode = record.get("nvmlDeviceGetMigMode")
        if isinstance(mode, list) and mode[:1] == [1]:  # MIG on: jobs are given its instances, not the GPU
            for instance in record.get("migDevices") or ():
                if isinstance(instance, dict):
                    found.append(replace(base, memory_mb=_memory(instance),
                                         partition=mig_profile(_name(instance.get("nvmlDeviceGetName"))) or UNNAMED_MIG))
            continue
        found.append(base)
    return found


def _memory(record: Mapping[str, Any]) -> Optional[int]:
    memory = record.get("nvmlDeviceGetMemoryInfo")
    total = _whole(memory.get("total")) if isinstance(memory, dict) else None
    return total // MB if total else None


def _mib(text: Optional[str]) -> Optional[int]:
    """``81920 MiB`` -> 81920; None for N/A or another unit."""
    match = re.fullmatch(r"\s*(\d+)\s*MiB\s*", text or "")
    return int(match.group(1)) if match else None


def _mhz(text: Optional[str]) -> Optional[int]:
    match = re.fullmatch(r"\s*(\d+)\s*MHz\s*", text or "")
    return int(match.group(1)) or None if match else None


def from_nvidia_smi(text: str) -> list[Device]:
    """``nvidia-smi -q -x`` -> devices; ValueError (one line) for anything but its document."""
    from glueinfo.core.xmlsafe import XMLInputError, parse_xml  # lxml: only on a host whose nvidia-smi answers

    body = _NVSMI_DOCTYPE.sub("", text, count=1)
    try:
        root = parse_xml(body, what="nvidia-smi -q -x")
    except XMLInputError as exc:
        raise ValueError(str(exc)) from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"nvidia-smi -q -x: expected nvidia_smi_log, got {str(root.tag)[:40]!r}")

    def known(value: Optional[str]) -> Optional[str]:
        value = (value or "").strip()
        return value if value and value != "N/A" else None

    driver, runtime = known(root.findtext("driver_version")), known(root.findtext("cuda_version"))
    found = []
    for gpu in root.iterfind("gpu"):
        ids = known(gpu.findtext("pci/pci_device_id"))
        device_id = int(ids, 16) if ids and re.fullmatch(r"[0-9a-fA-F]{8}", ids) else None
        base = Device(address=normal_address(gpu.get("id")), vendor="NVIDIA", model=known(gpu.findtext("product_name")),
                      memory_mb=_mib(gpu.findtext("fb_memory_usage/total")),
                      clock_speed_mhz=_mhz(gpu.findtext("max_clocks/graphics_clock")), driver_version=driver,
                      runtime_version=runtime, source="nvidia-smi",
                      pci_id=pci_id(device_id & 0xFFFF, device_id >> 16) if device_id else None)
        if (gpu.findtext("mig_mode/current_mig") or "").strip() == "Enabled":
            for instance in gpu.iterfind("mig_devices/mig_device"):
                found.append(replace(base, memory_mb=_mib(instance.findtext("fb_memory_usage/total")), partition=UNNAMED_MIG))
            continue
        found.append(base)
    return found


# -- AMD ------------------------------------------------------------------------------------------

def _json(text: str, tool: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{tool}: not JSON: {' '.join(str(exc).split())[:80]}") from None


def _amd_pci_id(text: Any) -> Optional[str]:
    match = re.fullmatch(r"\s*0x([0-9a-fA-F]{1,4})\s*", text) if isinstance(text, str) else None
    return pci_id(PCI_VENDOR_AMD, int(match.group(1), 16)) if match else None


def _gfx(text: Any) -> Optional[str]:
    value = _name(text)
    return value if value and re.fullmatch(r"gfx[0-9a-f]+", value) else None


def from_rocm_smi(text: str) -> list[Device]:
    """``rocm-smi --json`` (with ``--showproductname --showmeminfo vram --showbus
    --showdriverversion``) -> devices; ValueError for anything but its object of cards."""
    data = _json(text, "rocm-smi")
    if not isinstance(data, dict):
        raise ValueError("rocm-smi: expected a JSON object of cards")
    system = _object(data.get("system"))
    driver = _name(system.get("Driver version"))
    found = []
    for name, card in data.items():
        if not name.startswith("card") or not isinstance(card, dict):
            continue
        vram = card.get("VRAM Total Memory (B)")
        memory = int(vram) // MB if isinstance(vram, str) and vram.isdigit() and int(vram) > 0 else None
        model = _name(card.get("Card series")) or _name(card.get("Card Series"))
        found.append(Device(address=normal_address(card.get("PCI Bus")), vendor="AMD",
                            model=model if model and model != "N/A" else None, memory_mb=memory,
                            compute_capability=_gfx(card.get("GFX Version")), driver_version=driver,
                            pci_id=_amd_pci_id(card.get("Device ID") or card.get("GPU ID")), source="rocm-smi"))
    return found


def from_amd_smi(text: str) -> list[Device]:
    """``amd-smi static --json`` -> devices: its list of GPUs (ROCm 6.x) or that list under
    ``gpu_data`` (later releases); ValueError for anything else."""
    data = _json(text, "amd-smi")
    gpus = data.get("gpu_data") if isinstance(data, dict) else data
    if not isinstance(gpus, list):
        raise ValueError("amd-smi: expected a list of GPUs")
    found = []
    for gpu in gpus:
        if not isinstance(gpu, dict):
            continue
        asic = _object(gpu.get("asic"))
        bus = _object(gpu.get("bus"))
        vram = _object(gpu.get("vram"))
        driver = _object(gpu.get("driver"))
        version = _name(driver.get("version"))
        model = _name(asic.get("market_name"))
        found.append(Device(address=normal_address(bus.get("bdf")), vendor="AMD", model=model if model != "N/A" else None,
                            memory_mb=_sized_mb(vram.get("size")), compute_capability=_gfx(asic.get("target_graphics_version")),
                            driver_version=version if version and re.fullmatch(r"[\w.+-]{1,64}", version) else None,
                            pci_id=_amd_pci_id(asic.get("device_id")), source="amd-smi"))
    return found


def _sized_mb(value: Any) -> Optional[int]:
    """amd-smi's ``{"value": 65520, "unit": "MB"}`` in MB (its MB are 2**20 bytes)."""
    if not isinstance(value, dict):
        return None
    number, unit = _whole(value.get("value")), value.get("unit")
    factor = {"MB": 1, "MiB": 1, "GB": 1024, "GiB": 1024}.get(unit) if isinstance(unit, str) else None
    return number * factor if number and factor else None


# -- the rule -------------------------------------------------------------------------------------

def with_sysfs(devices: list[Device], sysfs: Mapping[str, Device]) -> list[Device]:
    """A tool's devices with what sysfs knows of the same PCI device and the tool did not say
    (its PCI id, its model, AMD's VRAM)."""
    completed = []
    for device in devices:
        known = sysfs.get(device.address or "")
        if known is not None:
            device = replace(device, pci_id=device.pci_id or known.pci_id, model=device.model or known.model,
                             memory_mb=device.memory_mb if device.memory_mb is not None or device.partition else known.memory_mb)
        completed.append(device)
    return completed


def group(devices: Iterable[Device]) -> list[Accelerator]:
    """Identical devices (every fact but the PCI address and id alike) counted into one
    Accelerator each, with the PCI ids they have; in the order each kind is first met."""
    kinds: dict[tuple[Any, ...], Accelerator] = {}
    for device in devices:
        key = (device.type, device.vendor, device.model, device.memory_mb, device.compute_capability, device.clock_speed_mhz,
               device.driver_version, device.runtime_version, device.partition, device.source)
        kind = kinds.get(key)
        if kind is None:
            kind = kinds[key] = Accelerator(type=device.type, vendor=device.vendor, model=device.model, count=0,
                                            memory_mb=device.memory_mb, compute_capability=device.compute_capability,
                                            clock_speed_mhz=device.clock_speed_mhz, driver_version=device.driver_version,
                                            runtime_version=device.runtime_version, partition=device.partition,
                                            pci_ids=[], source=device.source)
        kind.count += 1
        if device.pci_id and device.pci_id not in kind.pci_ids:
            kind.pci_ids.append(device.pci_id)
    for kind in kinds.values():
        kind.pci_ids.sort()
    return list(kinds.values())
