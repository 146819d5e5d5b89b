"""GPU exporters' series -> each host's accelerators: what the ``prometheus`` source reads beside
node_exporter's (docs/admin-guide.md "Accelerators").

- NVIDIA's DCGM exporter: one device per ``gpu`` label (per ``GPU_I_ID`` too when the GPU is split
  into MIG instances, ``GPU_I_PROFILE`` naming the profile), its model from ``modelName``, its
  memory ``DCGM_FI_DEV_FB_FREE`` + ``DCGM_FI_DEV_FB_USED`` (+ ``DCGM_FI_DEV_FB_RESERVED`` where
  the exporter has it; MiB), the driver from ``DCGM_FI_DRIVER_VERSION`` where given;
- AMD's Device Metrics Exporter: one device per ``gpu_id`` (``gpu_uuid``), its model from
  ``card_series`` (else ``card_model``), its memory ``gpu_total_vram`` (MB).

The exporters are targets of their own (another job, another port), so their series are asked
for without the node selector and each exporter target is given to the node target of the same
host: the one whose instance has the same host (port cut off), else the one whose name is the
exporter's ``Hostname``/``hostname`` label; an exporter target that matches no node target, or
more than one, is left out (a GPU exporter of another cluster scraped by the same Prometheus).
A host whose node target has no GPU exporter gets no accelerators (None, unknown: the exporter
may just not run there), never zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

from glueinfo.core.model import Accelerator
from glueinfo.gather.identity import host_key
from glueinfo.gather.sources._node_metrics import instance_host
from glueinfo.host.accelerators import Device, group

TargetKey = tuple[str, str]  # (job, instance)

_DCGM_LABELS = "job, instance, Hostname, gpu, GPU_I_ID, GPU_I_PROFILE, modelName, DCGM_FI_DRIVER_VERSION"
_AMD_LABELS = "job, instance, hostname, gpu_id, gpu_uuid, card_series, card_model"
# Query name -> PromQL; every series of the exporters, whatever their job (joined by host below).
QUERIES: Mapping[str, str] = {
    "dcgm_fb_free": f"max by ({_DCGM_LABELS}) (DCGM_FI_DEV_FB_FREE)",
    "dcgm_fb_used": f"max by ({_DCGM_LABELS}) (DCGM_FI_DEV_FB_USED)",
    "dcgm_fb_reserved": f"max by ({_DCGM_LABELS}) (DCGM_FI_DEV_FB_RESERVED)",
    "amd_vram": f"max by ({_AMD_LABELS}) (gpu_total_vram)",
}
MAX_DEVICES = 1024  # devices one exporter target may report (more: a broken exporter, ignored)


class AcceleratorSeries:
    """The exporters' samples, folded per exporter target and device as they arrive."""

    def __init__(self) -> None:
        # (job, instance) -> device key -> what is known of it
        self.targets: dict[TargetKey, dict[tuple[str, ...], dict[str, Any]]] = {}
        self.hostnames: dict[TargetKey, str] = {}

    def sink(self, name: str) -> Callable[[Any], None]:
        """What folds one sample of query ``name`` (a key of QUERIES); never raises."""
        field = name.removeprefix("dcgm_fb_") if name.startswith("dcgm_") else "vram"

        def one(sample: Any) -> None:
            try:
                labels = sample["metric"]
                value = float(sample["value"][1])
            except (KeyError, TypeError, ValueError, IndexError):
                return
            if not isinstance(labels, dict) or not math.isfinite(value) or value < 0:
                return
            instance = labels.get("instance")
            if not isinstance(instance, str) or not instance:
                return
            target = (str(labels.get("job", "")), instance)
            device: tuple[str, ...]
            if field == "vram":
                device = ("amd", str(labels.get("gpu_uuid") or labels.get("gpu_id") or ""))
            else:
                device = ("nvidia", str(labels.get("gpu", "")), str(labels.get("GPU_I_ID", "")))
            if not device[1]:
                return
            devices = self.targets.setdefault(target, {})
            if device not in devices and len(devices) >= MAX_DEVICES:
                return
            record = devices.setdefault(device, {"labels": {k: v for k, v in labels.items() if isinstance(v, str)}})
            record[field] = value
            hostname = labels.get("Hostname") or labels.get("hostname")
            if isinstance(hostname, str) and hostname:
                self.hostnames[target] = hostname

        return one

    def accelerators(self, target: TargetKey) -> Optional[list[Accelerator]]:
        """One exporter target's devices as the model's Accelerators; None when it reported none."""
        devices = self.targets.get(target)
        if not devices:
            return None
        found = []
        for (vendor, *_), record in sorted(devices.items()):
            labels = record["labels"]
            if vendor == "amd":
                model = labels.get("card_series") or labels.get("card_model") or None
                memory = int(record["vram"]) if record.get("vram") else None
                found.append(Device(address=None, vendor="AMD", model=model, memory_mb=memory, source="prometheus"))
                continue
            memory = None
            if "free" in record and "used" in record:
                memory = int(record["free"] + record["used"] + record.get("reserved", 0.0)) or None
            found.append(Device(address=None, vendor="NVIDIA", model=labels.get("modelName") or None, memory_mb=memory,
                                driver_version=labels.get("DCGM_FI_DRIVER_VERSION") or None,
                                partition=labels.get("GPU_I_PROFILE") or None, source="prometheus"))
        return group(found)

    def assign(self, nodes: Mapping[TargetKey, str]) -> dict[TargetKey, list[Accelerator]]:
        """Each node target's accelerators (``nodes``: node target -> the host name it is published
        as), from the exporter target of the same host (see the module docstring)."""
        by_name: dict[str, set[TargetKey]] = {}
        for key, name in nodes.items():
            for candidate in (instance_host(key[1]), name):
                if candidate:
                    by_name.setdefault(host_key(candidate), set()).add(key)
        given: dict[TargetKey, list[Accelerator]] = {}
        for target in sorted(self.targets):
            node = _one_match(by_name, (instance_host(target[1]), self.hostnames.get(target)))
            if node is None or node in given:
                continue
            kinds = self.accelerators(target)
            if kinds:
                given[node] = kinds
        return given


def _one_match(by_name: Mapping[str, set[TargetKey]], candidates: Iterable[Optional[str]]) -> Optional[TargetKey]:
    for candidate in candidates:
        if candidate:
            matches = by_name.get(host_key(candidate), set())
            if len(matches) == 1:
                return next(iter(matches))
    return None


