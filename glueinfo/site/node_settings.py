"""The ``[node]`` config section as the Node XML renderer's settings.

The renderer (glueinfo.sss.node_xml) takes a typed :class:`NodeSettings`
and never reads the config; this is where a Config becomes one, once per
command or service start.
"""

from __future__ import annotations

from glueinfo.core.config import Config, ConfigError
from glueinfo.sss.node_resources import parse_resources
from glueinfo.sss.node_settings import NodeSettings


def node_settings(config: Config) -> NodeSettings:
    """NodeSettings from the ``[node]`` section; a bad ``resources`` entry raises ConfigError naming the file."""
    section = config.section("node")
    try:
        resources = tuple(parse_resources(section["resources"]))
    except ValueError as exc:
        raise ConfigError(f"{config.path or '<config>'}: [node] resources: {exc}") from None
    return NodeSettings(
        stale_after_s=float(section["stale_after"]),
        offline_hosts=tuple(section["offline_hosts"]),
        busy_threshold=float(section["busy_threshold"]),
        disk_mounts=tuple(section["disk_mounts"]),
        description=section["description"],
        resources=resources,
    )
