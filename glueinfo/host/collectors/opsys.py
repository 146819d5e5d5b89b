"""os: distribution (/etc/os-release), kernel release and version, architecture, boot time."""

from __future__ import annotations

import re

from glueinfo.core.model import OsInfo
from glueinfo.host.collect import CollectContext, Collector
from glueinfo.host.linux import LinuxHost


def collect(ctx: CollectContext) -> OsInfo:
    host = LinuxHost(ctx.host_root)
    release = host.os_release()
    codename = release.get("VERSION_CODENAME")
    if not codename:  # RHEL and friends: VERSION="9.2 (Plow)"
        match = re.search(r"\(([^)]+)\)", release.get("VERSION", ""))
        codename = match.group(1).strip() if match else None
    return OsInfo(
        name=release.get("NAME") or None,
        release=release.get("VERSION_ID") or None,
        version=codename or None,
        pretty_name=release.get("PRETTY_NAME") or None,
        kernel_release=host.kernel_release(),
        kernel_version=host.kernel_version(),
        platform_type=host.machine(),
        boot_time=host.boot_time(),
    )


COLLECTOR = Collector(name="os", collect=collect, default_enabled=True, field="os",
                      description="distribution name, release and codename, kernel, architecture")
