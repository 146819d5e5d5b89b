"""The Node renderer's settings: the [node] config section, typed (glueinfo.site.node_settings makes
them from the config)."""

from __future__ import annotations

from typing import Any

from glueinfo.core.records import dataclass


@dataclass(frozen=True)
class NodeSettings:
    """The [node] config section, typed; defaults match glueinfo.core.config.SCHEMA.

    Built from a Config by glueinfo.site.node_settings.node_settings: this renderer never reads the config.
    """

    stale_after_s: float = 300.0
    offline_hosts: tuple[str, ...] = ()
    busy_threshold: float = 0.9
    disk_mounts: tuple[str, ...] = ()
    description: str = ""
    resources: tuple[dict[str, Any], ...] = ()  # parsed [node] resources, for the local host
