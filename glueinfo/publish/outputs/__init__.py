"""Outputs: where a publish's documents go, a plugin family like collectors, sources and LRMS plugins.

An output is an :class:`OutputPlugin` value: a name, whether it is on by
default, and ``make`` (typed context -> :class:`Output`).  Built-ins are the
modules of this folder (``stdout``, ``file``, ``ldap``, ``amqp``,
``htcondor-ce``); the daemon adds ``http`` (glueinfo.run.http_output, which
holds the server); installed packages register more under the
``glueinfo.outputs`` entry point group.  Each output reads only its own
config section (the context's ``sections``, already typed by the config
parser) and typed settings.

Every publish hands each output the same :class:`Publication`;
:func:`publish_all` runs them one after the other, each timed, and one that
raises or reports an error fails alone: the others still publish, and its
record (runs, failures, last duration, last success, last error) is what
``/metrics`` and the status page show.

An output that holds a thread or a connection has ``close(drain=True)``
(:func:`close_outputs`: the daemon's stop, and a reload for the outputs it
replaces); one that pushes through an outbox has ``outbox_state()``
(:func:`outbox_states`: ``/metrics``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Optional, Protocol

from glueinfo.core.errors import ConfigurationError
from glueinfo.core.options import Option
from glueinfo.core.plugins import OnError, builtin, entry_point_plugins, merge
from glueinfo.core.records import dataclass
from glueinfo.core.text import one_line

if TYPE_CHECKING:
    from glueinfo.core.runstats import JobStats
    from glueinfo.publish.documents import Documents
    from glueinfo.publish.outbox import OutboxState
    from glueinfo.site.publish_settings import PublishSettings

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "glueinfo.outputs"
BUILTIN_MODULES = ("stdout", "file", "ldap", "amqp", "htcondor_ce")


class OutputError(ConfigurationError):
    """An output that cannot be made (a bad setting) or cannot be loaded; one line."""


@dataclass(frozen=True)
class Publication:
    """What every output is handed at one publish.

    ``documents`` is None when nothing changed since the last publish (outputs then only mark
    what they hold as fresh); ``hosts_changed`` is False when only the CE figures changed (the
    Node XML is as last time)."""

    documents: Optional[Documents]
    hosts_changed: bool = True
    local: Any = None  # this host's snapshot with the daemon's self-metrics (the HTTP output's /node.xml)


@dataclass
class OutputResult:
    """What one output did: a short ``note`` for the publish's log line, ``error`` (one line) when
    it failed, ``written`` when it changed what it holds."""

    note: str = ""
    error: Optional[str] = None
    written: bool = False


class Output(Protocol):
    """One destination.  ``publish`` never raises on purpose: a failure is its result's ``error``
    (an exception is caught and counted the same way by :func:`publish_all`)."""

    name: str

    def publish(self, publication: Publication) -> OutputResult: ...


@dataclass(frozen=True)
class OutputContext:
    """What an output is made from: typed settings, its config sections as the parser typed them,
    the clock, and the one-line error sink for warnings."""

    settings: PublishSettings
    sections: Mapping[str, Mapping[str, Any]]
    clock: Callable[[], float] = time.time
    options: Mapping[str, Any] = field(default_factory=dict)  # a command's own choices (e.g. stdout's document)


@dataclass(frozen=True)
class OutputPlugin:
    """An output family member: ``make`` builds the Output for one process."""

    name: str
    make: Callable[[OutputContext], Output]
    default: bool = False
    description: str = ""
    source: str = "glueinfo"  # the distribution that provides it
    # The keys of its own section, [output:NAME]: accepted with their type and default, and handed
    # to it typed (OutputContext.sections["output:NAME"]).
    config_keys: Mapping[str, Option] = field(default_factory=dict)
    # Whether it reads Documents.entries() (every entry as an object): a daemon's publisher then keeps
    # them, which costs memory; otherwise it keeps the entries' texts only.
    needs_entries: bool = False


def installed_outputs(on_error: OnError = lambda message: None) -> list[OutputPlugin]:
    """The outputs installed packages register under the ``glueinfo.outputs`` entry points."""
    return entry_point_plugins(ENTRY_POINT_GROUP, OutputPlugin, "OUTPUT", "output", OutputError, on_error)


def all_outputs(on_error: OnError = lambda message: None, extra: Sequence[OutputPlugin] = ()) -> list[OutputPlugin]:
    """Built-ins, then ``extra`` (the daemon's http), then installed plugins whose name is free."""
    builtins = builtin(OutputPlugin, "OUTPUT", __name__, BUILTIN_MODULES, OutputError)
    return merge([*builtins, *extra], installed_outputs(on_error), "output", on_error)


def make_outputs(names: Iterable[str], context: OutputContext, available: Sequence[OutputPlugin]) -> list[Output]:
    """The named outputs, made in that order; OutputError (one line) for a name no plugin has or an
    output that refuses its settings."""
    by_name = {plugin.name: plugin for plugin in available}
    made = []
    for name in names:
        plugin = by_name.get(name)
        if plugin is None:
            raise OutputError(f"unknown output {name!r} (known: {', '.join(sorted(by_name))})")
        try:
            made.append(plugin.make(context))
        except (ValueError, OSError) as exc:
            raise OutputError(f"output {name}: {one_line(exc)}") from None
    return made


def publish_all(outputs: Sequence[Output], publication: Publication, records: dict[str, JobStats],
                clock: Callable[[], float] = time.time) -> dict[str, OutputResult]:
    """Hand ``publication`` to every output in turn; each is timed and recorded in ``records``
    (by name), and one that fails (raises, or reports an error) fails alone."""
    from glueinfo.core.runstats import JobStats  # the daemon's records: a one-shot command keeps none

    results: dict[str, OutputResult] = {}
    for output in outputs:
        record = records.setdefault(output.name, JobStats())
        record.runs += 1
        record.last_started_at = clock()
        began = time.perf_counter()
        try:
            result = output.publish(publication)
        except Exception as exc:  # one output's bug or failure must not stop the others
            result = OutputResult(error=f"{type(exc).__name__}: {one_line(exc)}")
            log.warning("output %s failed: %s", output.name, result.error, exc_info=log.isEnabledFor(logging.DEBUG))
        record.last_duration_s = time.perf_counter() - began
        if result.error is not None:
            record.failures += 1
            record.last_error = result.error
        else:
            record.last_error = None
            record.last_success_at = clock()
        results[output.name] = result
    return results


def close_outputs(outputs: Sequence[Output], drain: bool = True) -> None:
    """Close the outputs that have a ``close(drain)`` (a sender thread, a connection); ``drain``:
    let them send what waits first, within their own limit.  One that raises is logged and the
    others are still closed."""
    for output in outputs:
        close = getattr(output, "close", None)
        if callable(close):
            try:
                close(drain=drain)
            except Exception as exc:  # closing down anyway
                log.warning("output %s: not closed cleanly: %s", output.name, one_line(exc))


def outbox_states(outputs: Sequence[Output]) -> list[OutboxState]:
    """What each output that pushes through an outbox reports of it (``outbox_state()``)."""
    states: list[OutboxState] = []
    for output in outputs:
        state = getattr(output, "outbox_state", None)
        if callable(state):
            states.append(state())
    return states
