"""Sources of host snapshots: where the head node learns about many hosts.

A collector (glueinfo.host.collect) measures one fact of one host.  A *source*
returns whole snapshots of many hosts: ``local`` (this host, through the
collectors), ``agents`` (``/node.xml`` pulled from ``glueinfo serve`` on each
worker), ``spool`` (Node XML files workers drop into a shared directory) and
``ganglia`` (the XML a gmond or gmetad serves).  glueinfo.gather.gatherer runs the
enabled sources, keeps each host's last good snapshot and merges duplicates.

A source is a :class:`Source` value: a name and one function
``gather(ctx) -> SourceReport``.  Built-ins are the ``source_*`` modules of
``glueinfo.gather.sources`` (each with a module-level ``SOURCE``); third-party
packages register theirs under the entry-point group ``glueinfo.gather.registry``.

A source never raises for a bad host: it reports a :class:`SourceFailure`
naming the target (and the host, when known) and goes on with the others.
It must return by ``ctx.deadline``; glueinfo.gather.gatherer abandons it otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, Optional

from glueinfo.core import plugins
from glueinfo.core.errors import ConfigurationError
from glueinfo.core.model import HostSnapshot
from glueinfo.core.options import Option
from glueinfo.core.records import dataclass

ENTRY_POINT_GROUP = "glueinfo.sources"

BUILTIN_PACKAGE = "glueinfo.gather.sources"
BUILTIN_MODULES = ("local", "agents", "spool", "ganglia", "prometheus", "node_exporter")


@dataclass
class SourceContext:
    """What a source may know about the run: never global state.

    ``memory`` is this source's own scratch space kept between gathers by the
    gatherer (e.g. which agent answered for which host, the spool files
    already read); it starts empty.  ``probe`` runs the local collectors (the
    ``local`` source calls it; tests pass their own).
    """

    config: Any  # glueinfo.core.config.Config
    clock: Callable[[], float] = time.time
    deadline: float = float("inf")  # clock() value by which gather() must return
    memory: dict[str, Any] = field(default_factory=dict)
    probe: Optional[Callable[[], HostSnapshot]] = None
    # Host keys other sources know (the gatherer's last good snapshots): a target claiming one is refused.
    known_hosts: Callable[[], frozenset[str]] = frozenset

    def remaining(self) -> float:
        return self.deadline - self.clock()


@dataclass
class SourceFailure:
    """One thing a source could not read; ``error`` is one line."""

    target: str  # what was asked: "wn001.example.org:7170", a spool file, "gmond01:8649"
    error: str
    host: Optional[str] = None  # the host it concerns, when known
    source: str = ""  # filled in by the gatherer
    claim: bool = False  # a document refused for claiming a host that is not its target's

    def __str__(self) -> str:
        who = self.target if self.host in (None, self.target) else f"{self.host} ({self.target})"
        prefix = f"{self.source}: " if self.source else ""
        return f"{prefix}{who}: {self.error}"


@dataclass
class SourceReport:
    """What one source brought from one gather: the snapshots it read and the targets that failed."""

    snapshots: list[HostSnapshot] = field(default_factory=list)
    failures: list[SourceFailure] = field(default_factory=list)
    # Host key -> the target whose answer named it, for every snapshot whose host nothing decided
    # before the answer was read (an address with no listed or reverse name, pinned this round).
    # The gatherer checks these once every source of the round has reported (Gatherer.gather).
    unbound: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Source:
    """A source of host snapshots: its name and its ``gather`` function (see the module doc)."""

    name: str
    gather: Callable[[SourceContext], SourceReport]
    description: str = ""
    origin: str = "builtin"  # "builtin" or the distribution that provides it
    # The [sources] keys this source reads besides glueinfo's own: accepted with their type and default.
    config_keys: Mapping[str, Option] = field(default_factory=dict)
    # For a source that binds each target to one host (agents, node_exporter): config -> the host
    # keys its listed targets name.  A saved snapshot of another host from it came from a pin and is
    # checked again when the state is loaded (glueinfo.gather.identity.restorable).
    listed_hosts: Optional[Callable[[Any], frozenset[str]]] = None


class SourceError(ConfigurationError):
    """A source that cannot be loaded or named, or is misconfigured as a whole."""


def builtin_sources() -> list[Source]:
    return plugins.builtin(Source, "SOURCE", BUILTIN_PACKAGE, BUILTIN_MODULES, SourceError)


def entry_point_sources(on_error: Callable[[str], None] = lambda msg: None) -> list[Source]:
    """The sources installed packages register under the ``glueinfo.sources`` entry points."""
    return plugins.entry_point_plugins(ENTRY_POINT_GROUP, Source, "SOURCE", "source", SourceError, on_error,
                                       origin_field="origin")


def all_sources(on_error: Callable[[str], None] = lambda msg: None) -> dict[str, Source]:
    """Built-in sources, then those installed packages register (:func:`entry_point_sources`)."""
    found = entry_point_sources(on_error)
    return {s.name: s for s in plugins.merge(builtin_sources(), found, "source", on_error, origin_field="origin")}


def enabled_sources(config: Any, on_error: Callable[[str], None] = lambda msg: None) -> list[Source]:
    """The sources ``[sources] enabled`` names, in that order; an unknown name is an error.  Only
    the built-ins named are imported (a command imports only what it runs: the agents source
    alone costs asyncio and http.client), and installed packages are looked at only for a name
    no built-in has."""
    names = list(dict.fromkeys(config.get("sources", "enabled")))
    if all(name in BUILTIN_MODULES for name in names):
        return plugins.builtin(Source, "SOURCE", BUILTIN_PACKAGE, names, SourceError)
    known = all_sources(on_error)
    unknown = [n for n in names if n not in known]
    if unknown:
        from glueinfo.core.suggest import did_you_mean

        hints = [did_you_mean(name, known) for name in unknown]
        hint = "; ".join(hints) if all(hints) else f"known: {', '.join(sorted(known))}"
        raise SourceError(f"[sources] enabled: unknown source(s) {', '.join(unknown)} ({hint})")
    return [known[n] for n in names]
