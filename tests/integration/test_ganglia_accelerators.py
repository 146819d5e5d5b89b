"""GPUs from Ganglia (issue 27 item 2): a real gmond whose host reports the metrics of the NVIDIA
module of gmond_python_modules (gpu/nvidia/python_modules/nvidia.py: gpu_num uint "GPUs",
gpu_driver string, gpuN_type string, gpuN_mem_total uint "MB", gpuN_max_graphics_speed uint "MHz",
as its descriptors declare them).  There is no GPU here to run the module on, so the values the
module would have read are sent with Debian's gmetric, under the module's names, types and units:
those of the two-H100 host of tests/fixtures/gpu (NVML: "NVIDIA H100 80GB HBM3", 81559 MiB, 1980
MHz, driver 565.57.01).  What glueinfo reads is gmond's own XML answer."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from test_ganglia import gmond  # noqa: F401  # the fixture: a real gmond on loopback
from waiting import wait_until

from glueinfo.core.config import parse_text
from glueinfo.core.hostrange import Target
from glueinfo.core.model import Accelerator
from glueinfo.gather.gatherer import Gatherer
from glueinfo.gather.sources.ganglia import read_port

MODULE_METRICS = [
    ("gpu_num", "2", "uint32", "GPUs"),
    ("gpu_driver", "565.57.01", "string", ""),
    ("gpu0_type", "NVIDIA H100 80GB HBM3", "string", ""),
    ("gpu1_type", "NVIDIA H100 80GB HBM3", "string", ""),
    ("gpu0_mem_total", "81559", "uint32", "MB"),
    ("gpu1_mem_total", "81559", "uint32", "MB"),
    ("gpu0_max_graphics_speed", "1980", "uint32", "MHz"),
    ("gpu1_max_graphics_speed", "1980", "uint32", "MHz"),
]


@pytest.mark.integration
def test_a_gmond_reporting_the_gpu_module_metrics_gives_the_hosts_gpus(gmond, tmp_path):  # noqa: F811
    if not shutil.which("gmetric"):
        pytest.skip("gmetric (Debian package ganglia-monitor) is not installed")
    conf = next(tmp_path.glob("gmond.conf"))
    for name, value, kind, units in MODULE_METRICS:
        subprocess.run(["gmetric", "-c", str(conf), "-n", name, "-v", value, "-t", kind, "-u", units, "-d", "600"],
                       check=True, timeout=30)
    wait_until(lambda: b'NAME="gpu1_max_graphics_speed"' in read_port(Target("127.0.0.1", gmond), 2.0, 2**22),
               "gmond showed the GPU metrics", 30, step=0.3)
    result = Gatherer(parse_text(f"[sources]\nenabled = ganglia\nganglia = 127.0.0.1:{gmond}\n", "test.conf")).gather()
    assert result.failures == []
    (host,) = result.hosts
    assert host.snapshot.accelerators == [
        Accelerator(type="GPU", vendor="NVIDIA", model="NVIDIA H100 80GB HBM3", count=2, memory_mb=81559, clock_speed_mhz=1980,
                    driver_version="565.57.01", source="ganglia")]
    assert host.snapshot.cpu.logical_cpus  # the rest of the host read as ever (the general path)
