"""Plugin discovery shared by the three registries: collectors
(``glueinfo.collectors``), LRMS plugins (``glueinfo.lrms.registry``) and host sources
(``glueinfo.gather.registry``).

A plugin is a frozen dataclass value (Collector, LrmsPlugin, Source) or a
module holding one under a known attribute (COLLECTOR, LRMS, SOURCE).
Built-ins are the modules of their family's folder (glueinfo.host.collectors,
glueinfo.lrms.plugins, glueinfo.gather.sources); third-party packages
register entry points.  A broken or clashing plugin is reported through
``on_error`` and left out: it never takes the others down.

Finding entry points reads only the ``entry_points.txt`` files of installed
distributions and parses the metadata of those that declare the group:
``importlib.metadata.entry_points()`` reads every distribution's metadata,
which cost a fresh ``glueinfo probe`` more than the probe itself.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Protocol, TypeVar


class PluginValue(Protocol):
    """What every plugin value is: a (frozen) dataclass with a name."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @property
    def name(self) -> str: ...


P = TypeVar("P", bound=PluginValue)

OnError = Callable[[str], None]


def _ignore(message: str) -> None:
    pass


def unwrap(obj: Any, kind: type[P], attribute: str, origin: str, error: type[Exception]) -> P:
    """``obj`` itself if it is a ``kind``, else its ``attribute``; else ``error``."""
    if isinstance(obj, kind):
        return obj
    found = getattr(obj, attribute, None)
    if isinstance(found, kind):
        return found
    raise error(f"{origin} is not a glueinfo {kind.__name__} (no {attribute} in it)")


def builtin(kind: type[P], attribute: str, package: str, modules: Iterable[str], error: type[Exception]) -> list[P]:
    """The plugins of the named modules of ``package`` (their family's folder), in that order."""
    return [unwrap(importlib.import_module(f"{package}.{name}"), kind, attribute, f"{package}.{name}", error)
            for name in modules]


def _declaring(directory: str, marker: bytes) -> Iterator[str]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if not entry.name.endswith((".dist-info", ".egg-info")):
            continue
        try:
            with open(os.path.join(entry.path, "entry_points.txt"), "rb") as handle:
                if marker in handle.read(1 << 20):
                    yield entry.path
        except OSError:
            continue


def distributions_declaring(group: str) -> list[Any]:
    """Installed distributions with entry points in ``group``, in sys.path
    order, the first of a name winning (as importlib.metadata does)."""
    found: list[Any] = []
    seen: set[str] = set()

    def add(dist: Any) -> None:
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name not in seen:
            seen.add(name)
            found.append(dist)

    marker = group.encode()
    for entry in sys.path:
        directory = os.path.abspath(entry or ".")
        if os.path.isdir(directory):
            for path in _declaring(directory, marker):
                # importlib.metadata costs a fresh process tens of ms: only when a plugin is there.
                import pathlib
                from importlib.metadata import PathDistribution

                add(PathDistribution(pathlib.Path(path)))
        elif os.path.exists(directory):  # a zip or egg on sys.path: rare, let importlib read it
            from importlib.metadata import distributions

            for dist in distributions(path=[directory]):
                if any(ep.group == group for ep in dist.entry_points):
                    add(dist)
    return found


def entry_point_plugins(group: str, kind: type[P], attribute: str, label: str, error: type[Exception],
                        on_error: OnError = _ignore, origin_field: str = "source") -> list[P]:
    """Plugins that installed packages register under ``group``; each carries
    the providing distribution's name in its ``origin_field``."""
    found = []
    for distribution in distributions_declaring(group):
        dist = distribution.metadata["Name"] or "unknown"
        for ep in distribution.entry_points.select(group=group):
            try:
                plugin = unwrap(ep.load(), kind, attribute, f"entry point {ep.name} ({dist})", error)
            except Exception as exc:  # a broken plugin must not take the others down
                on_error(f"{label} plugin {ep.name!r} from {dist} failed to load: {exc}")
                continue
            found.append(dataclasses.replace(plugin, **{origin_field: dist}))
    return found


def merge(builtins: Sequence[P], plugins: Iterable[P], label: str, on_error: OnError = _ignore,
          origin_field: str = "source") -> list[P]:
    """Built-ins first, then plugins whose name is not taken yet."""
    merged = list(builtins)
    names = {p.name for p in merged}
    for plugin in plugins:
        name = plugin.name
        if name in names:
            on_error(f"{label} plugin {name!r} from {getattr(plugin, origin_field)} clashes with an existing name; ignored")
            continue
        names.add(name)
        merged.append(plugin)
    return merged
