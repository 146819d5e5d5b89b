"""Collect stage: find collectors, run each one isolated, build a HostSnapshot.

A collector is a :class:`Collector` value: a name, a default-enabled flag and
one function ``collect(ctx) -> fact``.  Built-ins live in ``glueinfo.providers``
(one module per probe, each with a module-level ``COLLECTOR``); third-party
packages register theirs under the entry-point group ``glueinfo.collectors``
(the entry point names a ``Collector`` or a module holding ``COLLECTOR``).

Each collector runs in its own daemon thread: one that raises is recorded as
failed, one that hangs past its timeout is abandoned (its thread is left to
die with the process) and recorded as timed out; neither stops the others.
"""

from __future__ import annotations

import importlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.model import CollectorResult, HostSnapshot

ENTRY_POINT_GROUP = "glueinfo.collectors"

# Built-in collector modules, in the order their facts are shown.
BUILTIN_MODULES = ("cpu", "memory", "load", "network", "filesystems", "opsys", "static")

# Snapshot fields a collector may fill; anything else goes to snapshot.extra.
SNAPSHOT_FIELDS = ("cpu", "memory", "load", "network", "filesystems", "os", "static")


@dataclass(frozen=True)
class CollectContext:
    """What a collector may know about the run: never global state."""

    host_root: str = "/"  # "/" is this machine; anything else a recorded tree
    config: Mapping[str, Any] = field(default_factory=dict)  # the [static] etc. sections, typed
    utilisation_interval_s: Optional[float] = None  # measure CPU utilisation over this long
    clock: Callable[[], float] = time.time

    @property
    def live(self) -> bool:
        return self.host_root in ("/", "")


@dataclass(frozen=True)
class Collector:
    name: str
    collect: Callable[[CollectContext], Any]
    default_enabled: bool = True
    field: Optional[str] = None  # HostSnapshot attribute it fills; None -> extra[name]
    description: str = ""
    source: str = "builtin"


class CollectorError(Exception):
    """A collector that cannot be loaded or named."""


def _collector_from(obj: Any, origin: str) -> Collector:
    if isinstance(obj, Collector):
        return obj
    found = getattr(obj, "COLLECTOR", None)
    if isinstance(found, Collector):
        return found
    raise CollectorError(f"{origin} is not a glueinfo Collector (no COLLECTOR in it)")


def builtin_collectors() -> list[Collector]:
    return [
        _collector_from(importlib.import_module(f"glueinfo.providers.{name}"), f"glueinfo.providers.{name}")
        for name in BUILTIN_MODULES
    ]


def plugin_collectors(on_error: Callable[[str], None] = lambda msg: None) -> list[Collector]:
    """Collectors registered by installed packages under ``glueinfo.collectors``."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "unknown"
        try:
            collector = _collector_from(ep.load(), f"entry point {ep.name} ({dist})")
        except Exception as exc:  # a broken plugin must not take the others down
            on_error(f"collector plugin {ep.name!r} from {dist} failed to load: {exc}")
            continue
        if collector.field is not None and collector.field not in SNAPSHOT_FIELDS:
            on_error(f"collector plugin {ep.name!r} from {dist} names unknown field {collector.field!r}")
            continue
        found.append(Collector(collector.name, collector.collect, collector.default_enabled,
                               collector.field, collector.description, source=dist))
    return found


def all_collectors(on_error: Callable[[str], None] = lambda msg: None) -> list[Collector]:
    collectors = builtin_collectors()
    names = {c.name for c in collectors}
    for plugin in plugin_collectors(on_error):
        if plugin.name in names:
            on_error(f"collector plugin {plugin.name!r} from {plugin.source} clashes with an existing name; ignored")
            continue
        names.add(plugin.name)
        collectors.append(plugin)
    return collectors


def select(collectors: Iterable[Collector], enable: Iterable[str] = (), disable: Iterable[str] = ()) -> list[Collector]:
    """Apply enable/disable lists to the default flags; unknown names are an error."""
    collectors = list(collectors)
    known = {c.name for c in collectors}
    enable, disable = set(enable), set(disable)
    unknown = sorted((enable | disable) - known)
    if unknown:
        raise CollectorError(f"unknown collector(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    both = sorted(enable & disable)
    if both:
        raise CollectorError(f"collector(s) both enabled and disabled: {', '.join(both)}")
    return [c for c in collectors if (c.default_enabled or c.name in enable) and c.name not in disable]


def _run_isolated(collectors: list[Collector], ctx: CollectContext, timeout_s: float) -> list[tuple[Collector, Any, CollectorResult]]:
    outcomes: list[Optional[tuple[Any, CollectorResult]]] = [None] * len(collectors)

    def run(i: int, collector: Collector) -> None:
        start = time.perf_counter()
        try:
            value = collector.collect(ctx)
            outcomes[i] = (value, CollectorResult(collector.name, True, time.perf_counter() - start, None, collector.source))
        except Exception as exc:  # isolation is the point: report and go on
            error = f"{type(exc).__name__}: {exc}"
            outcomes[i] = (None, CollectorResult(collector.name, False, time.perf_counter() - start, error, collector.source))

    threads = []
    for i, collector in enumerate(collectors):
        thread = threading.Thread(target=run, args=(i, collector), name=f"collector-{collector.name}", daemon=True)
        thread.start()
        threads.append(thread)
    deadline = time.perf_counter() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.perf_counter()))

    results = []
    for i, collector in enumerate(collectors):
        outcome = outcomes[i]
        if outcome is None:  # still running: abandoned, its late answer is never read
            outcome = (None, CollectorResult(collector.name, False, timeout_s,
                                             f"timed out after {timeout_s:g} s", collector.source))
        results.append((collector, *outcome))
    return results


def local_hostname(ctx: CollectContext) -> str:
    """The host's fully qualified name; for a recorded tree, the name recorded in it."""
    configured = ctx.config.get("hostname")
    if configured:
        return str(configured)
    if not ctx.live:
        from glueinfo.linux import LinuxHost

        return LinuxHost(ctx.host_root).hostname() or "unknown"
    name = socket.gethostname()
    if "." in name:
        return name
    # Ask the resolver for the canonical name (usually /etc/hosts); no DNS wait on a bare name.
    try:
        for info in socket.getaddrinfo(name, None, flags=socket.AI_CANONNAME):
            if info[3] and "." in info[3]:
                return info[3]
    except OSError:
        pass
    return name


def collect_host(collectors: list[Collector], ctx: CollectContext, timeout_s: float = 5.0, source: str = "local") -> HostSnapshot:
    """Run the collectors and assemble one snapshot, recording each one's outcome."""
    snapshot = HostSnapshot(hostname=local_hostname(ctx), collected_at=ctx.clock(), source=source,
                            host_root=None if ctx.live else ctx.host_root)
    for collector, value, result in _run_isolated(collectors, ctx, timeout_s):
        snapshot.collectors.append(result)
        if not result.success or value is None:
            continue
        if collector.field is not None:
            setattr(snapshot, collector.field, value)
        elif isinstance(value, dict):
            snapshot.extra[collector.name] = value
        else:
            result.success = False
            result.error = f"returned {type(value).__name__}, expected a dict of facts"
    return snapshot


def probe(config: Any, host_root: Optional[str] = None, enable: Iterable[str] = (), disable: Iterable[str] = (),
          on_error: Callable[[str], None] = lambda msg: None, clock: Callable[[], float] = time.time) -> HostSnapshot:
    """Probe this host (or the recorded tree ``host_root``) as the config says.

    Command-line ``enable``/``disable`` lists override the config file's for
    the collectors they name.
    """
    from glueinfo.config import static_facts

    section = config.section("collectors")
    enable, disable = set(enable), set(disable)
    chosen = select(all_collectors(on_error),
                    enable=(set(section["enable"]) - disable) | enable,
                    disable=(set(section["disable"]) - enable) | disable)
    general = config.section("glueinfo")
    facts = dict(static_facts(config))
    facts["hostname"] = general["hostname"]
    interval = section["utilisation_interval"] or None
    root = host_root or general["host_root"]
    if not os.path.isdir(root):
        raise CollectorError(f"host root {root}: no such directory")
    ctx = CollectContext(host_root=root, config=facts, utilisation_interval_s=interval, clock=clock)
    timeout = section["timeout"] + (interval or 0.0)
    return collect_host(chosen, ctx, timeout_s=timeout)
