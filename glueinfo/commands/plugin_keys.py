"""The config keys installed plugins declare, for the config parser (glueinfo.core.config).

Asked only when a config file has a key or section glueinfo itself does not
declare: an LRMS plugin's ``[ce:NAME]`` keys, a source's ``[sources]`` keys,
an output's ``[output:NAME]`` keys.  Only installed packages' plugins are
read (glueinfo's own keys are in its SCHEMA); one that cannot be loaded is
left out here and reported when it is used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from glueinfo.core.options import OPTION_TYPES, Option

log = logging.getLogger(__name__)


def checked_keys(declared: object, plugin: str, on_error: Callable[[str], None]) -> dict[str, Option]:
    """A plugin's declared keys when every one is a lower-case name (configparser lower-cases what it
    reads) with an Option of a known type; else none of them, and one line through ``on_error``: a
    broken plugin must not take every command down."""
    if not isinstance(declared, Mapping):
        on_error(f"{plugin}: config_keys is not a mapping of key -> Option; its keys are ignored")
        return {}
    keys: dict[str, Option] = {}
    for name, option in declared.items():
        if not isinstance(name, str) or not name or name != name.lower() or not isinstance(option, Option) \
                or option.type not in OPTION_TYPES:
            on_error(f"{plugin}: config key {name!r} is not a lower-case name with an Option of type "
                     f"{', '.join(OPTION_TYPES)}; its keys are ignored")
            return {}
        keys[name] = option
    return keys


def plugin_keys(on_error: Callable[[str], None] = lambda message: log.warning("%s", message)) -> dict[str, Mapping[str, Option]]:
    """Section (``ce:*``, ``sources``, ``output:NAME``) -> the keys plugins declare for it."""
    from glueinfo.gather.registry import entry_point_sources
    from glueinfo.lrms.registry import entry_point_plugins as lrms_plugins
    from glueinfo.publish.outputs import installed_outputs

    declared: dict[str, dict[str, Option]] = {}

    def add(section: str, keys: object, plugin: str) -> None:
        checked = checked_keys(keys, plugin, on_error)
        if checked:
            declared.setdefault(section, {}).update(checked)

    for lrms in lrms_plugins():
        add("ce:*", lrms.config_keys, f"LRMS plugin {lrms.name} ({lrms.source})")
    for source in entry_point_sources():
        add("sources", source.config_keys, f"source {source.name} ({source.origin})")
    for output in installed_outputs():
        add(f"output:{output.name}", output.config_keys, f"output {output.name} ({output.source})")
    return dict(declared)
