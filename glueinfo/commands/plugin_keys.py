"""The config keys installed plugins declare, for the config parser (glueinfo.core.config).

Asked only when a config file has a key or section glueinfo itself does not
declare: an LRMS plugin's ``[ce:NAME]`` keys, a source's ``[sources]`` keys,
an output's ``[output:NAME]`` keys.  Only installed packages' plugins are
read (glueinfo's own keys are in its SCHEMA); one that cannot be loaded is
left out here and reported when it is used.
"""

from __future__ import annotations

from collections.abc import Mapping

from glueinfo.core.options import Option


def plugin_keys() -> dict[str, Mapping[str, Option]]:
    """Section (``ce:*``, ``sources``, ``output:NAME``) -> the keys plugins declare for it."""
    from glueinfo.core import plugins
    from glueinfo.gather.registry import ENTRY_POINT_GROUP as SOURCE_GROUP
    from glueinfo.gather.registry import Source, SourceError
    from glueinfo.lrms.registry import entry_point_plugins as lrms_plugins
    from glueinfo.publish.outputs import ENTRY_POINT_GROUP as OUTPUT_GROUP
    from glueinfo.publish.outputs import OutputError, OutputPlugin

    declared: dict[str, dict[str, Option]] = {}

    def add(section: str, keys: Mapping[str, Option]) -> None:
        if keys:
            declared.setdefault(section, {}).update(keys)

    for lrms in lrms_plugins():
        add("ce:*", lrms.config_keys)
    for source in plugins.entry_point_plugins(SOURCE_GROUP, Source, "SOURCE", "source", SourceError, origin_field="origin"):
        add("sources", source.config_keys)
    for output in plugins.entry_point_plugins(OUTPUT_GROUP, OutputPlugin, "OUTPUT", "output", OutputError):
        add(f"output:{output.name}", output.config_keys)
    return dict(declared)
