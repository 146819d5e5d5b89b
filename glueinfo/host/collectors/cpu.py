"""cpu: sockets, cores and hardware threads kept apart; model, clock, caches, features."""

from __future__ import annotations

import re
from typing import Optional

from glueinfo.core.model import CpuInfo
from glueinfo.host.collect import CollectContext, Collector
from glueinfo.host.linux import LinuxHost

# Flags worth publishing (x86 /proc/cpuinfo "flags", arm64 "Features"): the
# vector and crypto extensions software is built for, and virtualisation.
NOTABLE_FEATURES = frozenset({
    # x86
    "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    "aes", "sha_ni", "vmx", "svm", "hypervisor",
    # arm64
    "asimd", "asimddp", "sve", "sve2", "sha2", "sha3", "sha512", "atomics", "bf16", "i8mm",
})

# arm64 /proc/cpuinfo gives numbers only; names as lscpu prints them.
ARM_IMPLEMENTERS: dict[Optional[int], str] = {  # keyed by Optional: an unknown or absent number finds nothing
    0x41: "ARM", 0x42: "Broadcom", 0x43: "Cavium", 0x46: "Fujitsu", 0x48: "HiSilicon",
    0x4E: "NVIDIA", 0x50: "APM", 0x51: "Qualcomm", 0x61: "Apple", 0xC0: "Ampere",
}
ARM_PARTS: dict[tuple[Optional[int], Optional[int]], str] = {
    (0x41, 0xD03): "Cortex-A53", (0x41, 0xD07): "Cortex-A57", (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD0B): "Cortex-A76", (0x41, 0xD0C): "Neoverse-N1", (0x41, 0xD40): "Neoverse-V1",
    (0x41, 0xD49): "Neoverse-N2", (0x41, 0xD4F): "Neoverse-V2", (0x43, 0x0AF): "ThunderX2 99xx",
    (0x46, 0x001): "A64FX", (0x48, 0xD01): "Kunpeng-920", (0xC0, 0xAC3): "Ampere-1",
}

_RATED = re.compile(r"@\s*(\d+(?:\.\d+)?)\s*([GM])Hz", re.I)


def _hex(text: Optional[str]) -> Optional[int]:
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


def clock_mhz(host: LinuxHost, model_name: Optional[str]) -> Optional[int]:
    """Nominal clock, first of: the rating in the model name ("@ 2.60GHz", the
    vendor's nominal figure); cpufreq base_frequency (nominal, intel_pstate);
    cpufreq cpuinfo_max_freq (the highest the kernel may set); /proc/cpuinfo
    "cpu MHz" as a last resort, which without cpufreq is the fixed clock
    (typical of VMs)."""
    match = _RATED.search(model_name or "")
    if match:
        value = float(match.group(1)) * (1000 if match.group(2).upper() == "G" else 1)
        return int(round(value))
    for name in ("base_frequency", "cpuinfo_max_freq"):
        khz = host.cpufreq_khz(name)
        if khz:
            return int(round(khz / 1000))
    try:
        mhz = float(host.cpuinfo.get("cpu MHz", ""))
    except ValueError:
        return None
    return int(round(mhz)) if mhz > 0 else None


def collect(ctx: CollectContext) -> CpuInfo:
    host = LinuxHost(ctx.host_root)
    info = host.cpuinfo
    implementer, part = _hex(info.get("CPU implementer")), _hex(info.get("CPU part"))

    vendor = info.get("vendor_id") or ARM_IMPLEMENTERS.get(implementer)
    model_name = info.get("model name") or ARM_PARTS.get((implementer, part))

    if "cpu family" in info:
        version = f"family {info['cpu family']} model {info.get('model', '?')} stepping {info.get('stepping', '?')}"
    elif implementer is not None:
        version = (f"implementer {info['CPU implementer']} architecture {info.get('CPU architecture', '?')} "
                   f"variant {info.get('CPU variant', '?')} part {info.get('CPU part', '?')} revision {info.get('CPU revision', '?')}")
    else:
        version = None

    flags = (info.get("flags") or info.get("Features") or "").split()
    cpu = CpuInfo(
        logical_cpus=host.logical_cpus(),
        physical_cores=host.physical_cores(),
        sockets=host.sockets(),
        vendor=vendor or None,
        model_name=model_name or None,
        version=version,
        clock_mhz=clock_mhz(host, model_name),
        instruction_set=host.machine(),
        features=sorted(NOTABLE_FEATURES.intersection(flags)),
    )
    for cache in host.caches():
        if cache.level == 1 and cache.type == "Instruction":
            cpu.cache_l1i_kb = cpu.cache_l1i_kb or cache.size_kb
        elif cache.level == 1 and cache.type == "Data":
            cpu.cache_l1d_kb = cpu.cache_l1d_kb or cache.size_kb
        elif cache.level == 1:
            cpu.cache_l1_kb = cpu.cache_l1_kb or cache.size_kb
        elif cache.level == 2:
            cpu.cache_l2_kb = cpu.cache_l2_kb or cache.size_kb
        elif cache.level == 3:
            cpu.cache_l3_kb = cpu.cache_l3_kb or cache.size_kb
    return cpu


COLLECTOR = Collector(name="cpu", collect=collect, default_enabled=True, field="cpu",
                      description="processor counts (sockets, cores, threads), model, clock, caches, features")
