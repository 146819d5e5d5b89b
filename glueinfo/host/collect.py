"""Collect stage: find collectors, run each one isolated, build a HostSnapshot.

A collector is a :class:`Collector` value: a name, a default-enabled flag and
one function ``collect(ctx) -> fact``.  Built-ins live in ``glueinfo.host.collectors``
(one module per probe, each with a module-level ``COLLECTOR``); third-party
packages register theirs under the entry-point group ``glueinfo.collectors``
(the entry point names a ``Collector`` or a module holding ``COLLECTOR``).

Collectors run one after another in a worker thread, each with its own
timeout: one that raises is recorded as failed; one that hangs past its
timeout is abandoned with its worker (left to die with the process), recorded
as timed out, and the rest go on in a fresh worker; neither stops the others.
One worker rather than a thread per collector: on a 2-core machine the
threads' start-up and GIL contention cost three times the collectors' work.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import Any, Optional

from glueinfo.core import plugins
from glueinfo.core.errors import ConfigurationError
from glueinfo.core.model import CollectorResult, HostSnapshot
from glueinfo.core.records import dataclass
from glueinfo.core.validate import validate_snapshot

ENTRY_POINT_GROUP = "glueinfo.collectors"

# Built-in collector modules, in the order their facts are shown.
BUILTIN_PACKAGE = "glueinfo.host.collectors"
BUILTIN_MODULES = ("cpu", "memory", "load", "network", "filesystems", "opsys", "static", "accelerators")

# Snapshot fields a collector may fill; anything else goes to snapshot.extra.
SNAPSHOT_FIELDS = ("cpu", "memory", "load", "network", "filesystems", "os", "static", "accelerators")


@dataclass(frozen=True)
class CollectContext:
    """What a collector may know about the run: never global state."""

    host_root: str = "/"  # "/" is this machine; anything else a recorded tree
    config: Mapping[str, Any] = field(default_factory=dict)  # the [static] etc. sections, typed
    utilisation_interval_s: Optional[float] = None  # measure CPU utilisation over this long
    clock: Callable[[], float] = time.time
    timeout_s: float = 5.0  # each collector's own timeout: one that runs tools keeps them within it

    @property
    def live(self) -> bool:
        return self.host_root in ("/", "")


@dataclass(frozen=True)
class Collector:
    """A named probe and the snapshot field its fact goes to."""

    name: str
    collect: Callable[[CollectContext], Any]
    default_enabled: bool = True
    field: Optional[str] = None  # HostSnapshot attribute it fills; None -> extra[name]
    description: str = ""
    source: str = "builtin"


class CollectorError(ConfigurationError):
    """A collector that cannot be loaded or named."""


def builtin_collectors() -> list[Collector]:
    return plugins.builtin(Collector, "COLLECTOR", BUILTIN_PACKAGE, BUILTIN_MODULES, CollectorError)


def plugin_collectors(on_error: Callable[[str], None] = lambda msg: None) -> list[Collector]:
    """Collectors registered by installed packages under ``glueinfo.collectors``."""
    found = []
    for collector in plugins.entry_point_plugins(ENTRY_POINT_GROUP, Collector, "COLLECTOR", "collector",
                                                 CollectorError, on_error):
        if collector.field is not None and collector.field not in SNAPSHOT_FIELDS:
            on_error(f"collector plugin {collector.name!r} from {collector.source} names unknown field {collector.field!r}")
            continue
        found.append(collector)
    return found


def all_collectors(on_error: Callable[[str], None] = lambda msg: None) -> list[Collector]:
    return plugins.merge(builtin_collectors(), plugin_collectors(on_error), "collector", on_error)


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


def _run_one(collector: Collector, ctx: CollectContext) -> tuple[Any, CollectorResult]:
    # Timed by the context's clock, the one the snapshot is stamped with: a test (or a replay with
    # $GLUEINFO_CLOCK) that stops it gets the same snapshot, durations included, from every probe.
    start = ctx.clock()
    try:
        value = collector.collect(ctx)
    except Exception as exc:  # isolation is the point: report and go on
        return None, CollectorResult(collector.name, False, max(0.0, ctx.clock() - start),
                                     f"{type(exc).__name__}: {exc}", collector.source)
    return value, CollectorResult(collector.name, True, max(0.0, ctx.clock() - start), None, collector.source)


class _Worker:
    """A thread running collectors first..last in order, and where it is now."""

    def __init__(self, first: int) -> None:
        self.index = first
        self.started = time.monotonic()
        self.abandoned = False
        self.done = threading.Event()


def _run_isolated(collectors: list[Collector], ctx: CollectContext, timeout_s: float) -> list[tuple[Collector, Any, CollectorResult]]:
    """Run the collectors in order in a worker thread, each within ``timeout_s``.

    The caller sleeps until the worker is done or the running collector's
    deadline passes, so it does not wake (and fight the worker for the GIL)
    after every collector."""
    count = len(collectors)
    outcomes: list[Optional[tuple[Any, CollectorResult]]] = [None] * count
    lock = threading.Lock()  # the worker's progress and the decision to abandon it never cross

    def work(worker: _Worker) -> None:
        for i in range(worker.index, count):
            with lock:
                if worker.abandoned:
                    return
                worker.index, worker.started = i, time.monotonic()
            outcome = _run_one(collectors[i], ctx)
            with lock:
                if worker.abandoned:
                    return  # given up on: its late answer is never read
                outcomes[i] = outcome
        worker.done.set()

    first = 0
    while first < count:
        worker = _Worker(first)
        threading.Thread(target=work, args=(worker,), name=f"collectors-from-{collectors[first].name}", daemon=True).start()
        first = count
        while True:
            with lock:
                remaining = worker.started + timeout_s - time.monotonic()
            if worker.done.wait(max(0.0, remaining)):
                break
            with lock:
                if time.monotonic() - worker.started < timeout_s:
                    continue  # it moved on to the next collector meanwhile
                worker.abandoned = True
                hung = collectors[worker.index]
                outcomes[worker.index] = (None, CollectorResult(hung.name, False, timeout_s,
                                                                f"timed out after {timeout_s:g} s", hung.source))
                first = worker.index + 1  # the rest go on in a fresh worker
            break
    results: list[tuple[Collector, Any, CollectorResult]] = []
    for collector, outcome in zip(collectors, outcomes, strict=True):
        if outcome is None:  # every collector either answered or was timed out above
            raise RuntimeError(f"collector {collector.name}: no outcome recorded")
        results.append((collector, *outcome))
    return results


def local_hostname(ctx: CollectContext) -> str:
    """The host's fully qualified name; for a recorded tree, the name recorded in it."""
    configured = ctx.config.get("hostname")
    if configured:
        return str(configured)
    if not ctx.live:
        from glueinfo.host.linux import LinuxHost

        return LinuxHost(ctx.host_root).hostname() or "unknown"
    name = socket.gethostname()
    if "." in name:
        return name
    # Ask the resolver for the canonical name (usually /etc/hosts); no DNS wait on a bare name.
    # A host name is ASCII: passed as bytes, socket skips importing the IDNA codec (~5 ms).
    try:
        for info in socket.getaddrinfo(name.encode("ascii", "replace"), None, flags=socket.AI_CANONNAME):
            if info[3] and "." in info[3]:
                return info[3]
    except OSError:
        pass
    return name


def collect_host(collectors: list[Collector], ctx: CollectContext, timeout_s: float = 5.0, source: str = "local") -> HostSnapshot:
    """Run the collectors and assemble one snapshot, recording each one's outcome."""
    snapshot = HostSnapshot(hostname=local_hostname(ctx), collected_at=ctx.clock(), source=source,
                            host_root=None if ctx.live else ctx.host_root)
    if ctx.timeout_s != timeout_s:
        ctx = dataclasses.replace(ctx, timeout_s=timeout_s)
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
    the collectors they name.  The snapshot has passed glueinfo.core.validate
    like any worker's: a bad field is dropped and named through ``on_error``;
    a host name that cannot be published raises CollectorError.
    """
    section = config.section("collectors")
    enable, disable = set(enable), set(disable)
    chosen = select(all_collectors(on_error),
                    enable=(set(section["enable"]) - disable) | enable,
                    disable=(set(section["disable"]) - enable) | disable)
    general = config.section("glueinfo")
    facts: dict[str, Any] = dict(config.section("static"))  # the static collector's facts
    facts["extensions"] = dict(config.section("extensions"))
    facts["hostname"] = general["hostname"]
    interval = section["utilisation_interval"] or None
    root = host_root or general["host_root"]
    if not os.path.isdir(root):
        raise CollectorError(f"host root {root}: no such directory")
    ctx = CollectContext(host_root=root, config=facts, utilisation_interval_s=interval, clock=clock)
    timeout = section["timeout"] + (interval or 0.0)
    # This host's facts pass the same model boundary as any worker's (a recorded tree can say
    # anything, and a kernel can report garbage): bad fields dropped and named, a bad name refused.
    checked = validate_snapshot(collect_host(chosen, ctx, timeout_s=timeout), clock())
    if checked.snapshot is None:
        raise CollectorError(f"this host cannot be published: {checked.refused}")
    for line in checked.dropped:
        on_error(line)
    return checked.snapshot
