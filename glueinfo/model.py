"""The snapshot model at its documented 1.x path (``from glueinfo.model import HostSnapshot``).

Re-exports only: the code lives in glueinfo.core.model.  Plugins build and
return these types.  docs/plugins.md lists every public name and where it lives.
"""

from glueinfo.core.job import JobInfo
from glueinfo.core.model import (
    CollectorResult,
    CpuInfo,
    FileSystem,
    HostSnapshot,
    LoadInfo,
    MemoryInfo,
    ModelError,
    NetworkAdapter,
    OsInfo,
    QueueLimits,
    QueueState,
    StaticFacts,
)

__all__ = ["CollectorResult", "CpuInfo", "FileSystem", "HostSnapshot", "JobInfo", "LoadInfo", "MemoryInfo", "ModelError",
           "NetworkAdapter", "OsInfo", "QueueLimits", "QueueState", "StaticFacts"]
