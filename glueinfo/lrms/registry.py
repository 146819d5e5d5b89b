"""LRMS stage: ask the batch system behind a CE for its queue's state.

A plugin is an :class:`LrmsPlugin` value: a name (the ``lrms`` a CE names in
its config, e.g. ``fork``, ``slurm``) and one function ``query(ctx) ->
QueueState``.  Built-ins live in ``glueinfo.lrms.plugins`` (modules
``lrms_fork``, ``lrms_slurm``, each with a module-level ``LRMS``); third-party
packages register theirs under the entry-point group ``glueinfo.lrms.registry`` (the
entry point names an ``LrmsPlugin`` or a module holding ``LRMS``).

:func:`queue_state` is what the aggregation calls, once per CE and cycle.  It
never raises: a plugin that fails, hangs past its deadline or is unknown
gives ``QueueState(lrms_type=..., error="one line")`` with every unknown field
None, and the failure is logged once (one WARNING per call).  Renderers leave
None fields out, so a broken batch system never publishes stale or invented
numbers.  A queue the batch system does not have (glueinfo.lrms.queues) is
one ERROR instead, naming the CE's ``[ce:NAME] queue`` and the closest queue
that exists.

:func:`resolve_lrms` checks a CE's ``lrms`` when the site model is read: a
name no plugin has is a config error listing the plugins, and ``torque`` is
the pbs plugin reading Torque (``pbs_flavour = torque``).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any, Optional

from glueinfo.core import plugins as plugin_registry
from glueinfo.core.errors import ConfigurationError, UpstreamError
from glueinfo.core.model import HostSnapshot, QueueState, VoJobCounts
from glueinfo.core.options import Option
from glueinfo.core.records import dataclass
from glueinfo.core.text import one_line
from glueinfo.lrms.queues import mark_missing, missing_message
from glueinfo.lrms.vo_map import VoMap

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "glueinfo.lrms"

# Built-in plugin modules: every module of glueinfo.lrms.plugins, each named as its plugin.
BUILTIN_PACKAGE = "glueinfo.lrms.plugins"


def builtin_module_names() -> tuple[str, ...]:
    """The built-in plugins' module names, found in the package (a new plugin is one new file):
    its ``NAME.py`` files and ``NAME/__init__.py`` folders, ``_private`` ones left out."""
    # Listed here rather than with pkgutil.iter_modules, whose import was a visible part of a fresh
    # one-host `glueinfo ldif`; the package holds source files and folders only.
    package = importlib.import_module(BUILTIN_PACKAGE)
    names = set()
    for directory in package.__path__:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".py") and entry.is_file():
                name = entry.name[:-3]
            elif entry.is_dir() and os.path.isfile(os.path.join(entry.path, "__init__.py")):
                name = entry.name
            else:
                continue
            if name.isidentifier() and not name.startswith("_"):
                names.add(name)
    return tuple(sorted(names))

# The key under which the site model puts a CE's [ce:NAME] NAME in its options (LrmsContext.ce_config):
# the ERROR of a queue the batch system does not have names the section to fix.
SECTION_OPTION = "ce_section"

# LRMS names that are a dialect of another plugin: (plugin, the options that choose the dialect).
DIALECTS: dict[str, tuple[str, dict[str, str]]] = {"torque": ("pbs", {"pbs_flavour": "torque"})}

# Extra time a plugin gets beyond ctx.timeout_s before it is abandoned: the
# built-ins bound every command by the deadline themselves, this only catches
# third-party plugins that hang.
GRACE_S = 1.0


@dataclass(frozen=True)
class LrmsContext:
    """What an LRMS plugin may know about the run: never global state.

    ``ce_config`` is the CE's typed ``[ce:NAME]`` section (the plugin reads its
    own keys from it, e.g. ``slurm_bin_dir``); ``hosts`` are the snapshots of
    the hosts behind the CE (fork derives its state from them).  ``timeout_s``
    bounds the whole query, not each command.
    """

    queue: Optional[str]
    ce_config: Mapping[str, Any]
    hosts: Sequence[HostSnapshot]
    clock: Callable[[], float] = time.time
    timeout_s: float = 10.0
    with_jobs: bool = False
    # Runs an external command: (argv, timeout_s, env) -> (returncode, stdout, stderr).
    # None means subprocess; tests and benchmarks pass recorded outputs.
    run: Optional[Callable[[Sequence[str], float, Mapping[str, str]], tuple[int, str, str]]] = None
    # Jobs to VOs ([vos]): plugins set each job's vo with it and fill QueueState.vo_counts.
    vo_map: VoMap = VoMap()


@dataclass(frozen=True)
class LrmsPlugin:
    """A named batch-system query returning a queue's state."""

    name: str
    query: Callable[[LrmsContext], QueueState]
    source: str = "builtin"
    description: str = ""
    # The job owners the batch system tells (the [vos] map rule kinds that can match its jobs): a VO a
    # rule of those kinds gives has 0 jobs when none is seen.  None declared: nothing is known of
    # the VOs without jobs (a plugin that counts no VO must not publish 0 for every one).
    owner_kinds: tuple[str, ...] = ()
    # The [ce:NAME] keys this plugin reads besides glueinfo's own (e.g. ``myplugin_bin_dir``): a
    # config using them is accepted with their type and default (glueinfo.core.config.parse_text).
    config_keys: Mapping[str, Option] = field(default_factory=dict)


class LrmsError(ConfigurationError):
    """A plugin that cannot be loaded or named."""


class LrmsQueryError(UpstreamError):
    """Raised by a plugin for an expected failure; its message is published as is (one line)."""


def builtin_plugins() -> list[LrmsPlugin]:
    return plugin_registry.builtin(LrmsPlugin, "LRMS", BUILTIN_PACKAGE, builtin_module_names(), LrmsError)


def entry_point_plugins(on_error: Callable[[str], None] = lambda msg: None) -> list[LrmsPlugin]:
    """Plugins registered by installed packages under ``glueinfo.lrms.registry``."""
    return plugin_registry.entry_point_plugins(ENTRY_POINT_GROUP, LrmsPlugin, "LRMS", "LRMS", LrmsError, on_error)


def all_plugins(on_error: Callable[[str], None] = lambda msg: None) -> list[LrmsPlugin]:
    return plugin_registry.merge(builtin_plugins(), entry_point_plugins(on_error), "LRMS", on_error)


def find_plugin(lrms_type: str, plugins: Optional[Sequence[LrmsPlugin]] = None,
                on_error: Callable[[str], None] = lambda msg: None) -> LrmsPlugin:
    """The plugin called ``lrms_type``; built-ins are found without scanning entry points."""
    if plugins is None:
        for name in builtin_module_names():
            if name == lrms_type:
                return plugin_registry.unwrap(importlib.import_module(f"{BUILTIN_PACKAGE}.{name}"), LrmsPlugin, "LRMS", name, LrmsError)
        plugins = all_plugins(on_error)
    for plugin in plugins:
        if plugin.name == lrms_type:
            return plugin
    known = ", ".join(sorted(p.name for p in plugins))
    dialects = ", ".join(f"{name} (= {plugin})" for name, (plugin, _) in sorted(DIALECTS.items()))
    raise LrmsError(f"unknown LRMS {lrms_type!r} (known: {known}; also {dialects})")


def resolve_lrms(lrms: str, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A CE's ``lrms`` and options as the plugin that serves it reads them: (plugin name, options).

    ``torque`` (:data:`DIALECTS`) is the pbs plugin with ``pbs_flavour = torque``; a section that
    sets another flavour contradicts it.  A name no built-in or installed plugin has is refused.
    Raises LrmsError (a ConfigurationError: exit 2) whose one line lists the plugins."""
    if lrms in DIALECTS:
        plugin, chosen = DIALECTS[lrms]
        for key, value in chosen.items():
            current = str(options.get(key) or "auto")
            if current not in ("auto", value):
                raise LrmsError(f"{lrms!r} is the {plugin} plugin with {key} = {value}, but {key} = {current} is set")
        return plugin, {**options, **chosen}
    find_plugin(lrms)  # LrmsError naming the known plugins
    return lrms, dict(options)


# GlueCEInfoLRMSType is GLUE's word for the batch system (EGI's validator checks it), which is not
# always the plugin's name; a plugin that can tell more (pbs: Torque or PBS) reports it in its state.
GLUE_LRMS_TYPES = {"htcondor": "condor"}


def glue_lrms_type(plugin_name: str) -> str:
    """The GlueCEInfoLRMSType of a plugin's batch system when its state does not say."""
    return GLUE_LRMS_TYPES.get(plugin_name, plugin_name)


def failed_state(lrms_type: str, ctx: LrmsContext, error: str) -> QueueState:
    """The state of a queue whose LRMS could not be read: everything unknown."""
    return QueueState(lrms_type=glue_lrms_type(lrms_type), queue=ctx.queue, collected_at=ctx.clock(), error=one_line(error))


def queue_state(lrms_type: str, ctx: LrmsContext, plugins: Optional[Sequence[LrmsPlugin]] = None) -> QueueState:
    """Ask the ``lrms_type`` plugin for the state of ``ctx.queue``.  Never raises.

    The plugin runs in a daemon thread: one that hangs past ``ctx.timeout_s``
    (plus a short grace) is abandoned and its late answer never read.  A
    failure is logged once at WARNING and returned as the state's ``error``;
    a queue the batch system does not have (``queue_missing``) is logged once
    at ERROR, and its ``error`` is that line (glueinfo.lrms.queues.missing_message),
    with no count kept whatever the plugin left in the state.
    """
    try:
        if lrms_type in DIALECTS:  # asked by a dialect's name (a config's is resolved by the site model)
            lrms_type, options = resolve_lrms(lrms_type, ctx.ce_config)
            ctx = dataclasses.replace(ctx, ce_config=options)
        plugin = find_plugin(lrms_type, plugins, on_error=log.warning)
    except Exception as exc:
        state = failed_state(lrms_type, ctx, str(exc))
        log.warning("LRMS %s queue %s: %s", lrms_type, ctx.queue or "-", state.error)
        return state

    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(plugin.query(ctx))
        except LrmsQueryError as exc:
            outcome.append(failed_state(lrms_type, ctx, str(exc)))
        except Exception as exc:  # isolation is the point: report and go on
            outcome.append(failed_state(lrms_type, ctx, f"{type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=run, name=f"lrms-{lrms_type}", daemon=True)
    thread.start()
    thread.join(ctx.timeout_s + GRACE_S)
    if not outcome:
        state = failed_state(lrms_type, ctx, f"{lrms_type} query timed out after {ctx.timeout_s:g} s")
    elif not isinstance(outcome[0], QueueState):
        state = failed_state(lrms_type, ctx, f"plugin {plugin.name} returned {type(outcome[0]).__name__}, not a QueueState")
    else:
        state = outcome[0]
        if not state.lrms_type:
            state.lrms_type = glue_lrms_type(lrms_type)
        if not state.collected_at:
            state.collected_at = ctx.clock()
        if state.queue_missing:  # whatever a plugin left in it: such a queue has no figure
            mark_missing(state, state.existing_queues)
            state.error = missing_message(str(ctx.ce_config.get(SECTION_OPTION) or ""), ctx.queue or "",
                                          plugin.name, state.existing_queues)
        if state.error:
            state.error = one_line(state.error)
        if state.total_jobs is not None:
            # A VO some rule gives, that no job had: 0 jobs, counted (QueueState.counts_of_vo).
            told = plugin.owner_kinds if state.owner_kinds is None else set(state.owner_kinds) & set(plugin.owner_kinds)
            reachable = ctx.vo_map.vos_by(told)
            if any(vo not in state.vo_counts for vo in reachable):
                state.vo_counts = dict(sorted({**{vo: VoJobCounts() for vo in reachable}, **state.vo_counts}.items()))
    if state.queue_missing:
        log.error("%s", state.error)
    elif state.error:
        log.warning("LRMS %s queue %s: %s", lrms_type, ctx.queue or "-", state.error)
    return state


# -- config ---------------------------------------------------------------------

def context_for_ce(ce_config: Mapping[str, Any], hosts: Sequence[HostSnapshot], clock: Callable[[], float] = time.time,
                   with_jobs: bool = False, queue: Optional[str] = None) -> LrmsContext:
    """Build the context for one ``[ce:NAME]`` section, reading the LRMS keys
    this module declares (``lrms_timeout``); ``queue`` defaults to the
    section's ``queue`` key."""
    timeout = ce_config.get("lrms_timeout")
    return LrmsContext(queue=queue if queue is not None else (ce_config.get("queue") or None),
                       ce_config=ce_config, hosts=hosts, clock=clock,
                       timeout_s=float(timeout) if timeout else 10.0, with_jobs=with_jobs)


# [ce:NAME] keys that say which batch system a CE's commands reach (its job ids are its own).
_SYSTEM_KEYS = ("lrms_command_prefix", "slurm_conf", "condor_config", "sge_root", "sge_cell", "lsf_envdir")


def batch_system_of(lrms: str, options: Mapping[str, Any]) -> tuple[str, ...]:
    """Which batch system a CE's commands reach: its plugin, the settings that choose a cluster
    (``slurm_conf``, ``lsf_envdir``, ``sge_root``/``sge_cell``, ``condor_config``, an ``ssh HEAD``
    prefix) and the directory of its tools."""
    tools = sorted(str(value or "") for key, value in options.items() if key.endswith("_bin_dir"))
    return (lrms, *(" ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value or "")
                    for value in (options.get(key) for key in _SYSTEM_KEYS)), *tools)


def site_jobs(ces: Sequence[Any], clock: Callable[[], float] = time.time,
              ask: Optional[Callable[[str, LrmsContext], QueueState]] = None) -> tuple[list[tuple[Any, str]], list[str]]:
    """Every batch job of the given CEs (site.CESpec values) once, as (JobInfo, cluster id) pairs,
    and the CE ids whose LRMS could not list its jobs.

    fork CEs are skipped (processes are not jobs); two CEs on queues of one
    batch system (same LRMS and :func:`batch_system_of` settings) list each job
    once, while equal job ids of two batch systems (two LSF clusters, two Grid
    Engine cells, two Slurms reached through ssh) are two jobs.
    """
    ask = ask or queue_state
    jobs: list[tuple[Any, str]] = []
    failed: list[str] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    for ce in ces:
        if ce.lrms == "fork":
            continue
        # Job lists need no host snapshots: batch systems know their own jobs.
        ctx = LrmsContext(queue=ce.queue, ce_config=ce.options, hosts=[], clock=clock,
                          timeout_s=ce.lrms_timeout, with_jobs=True)
        state = ask(ce.lrms, ctx)  # logs its own failure once
        if state.error and state.total_jobs is None:
            failed.append(ce.unique_id)
        system = batch_system_of(ce.lrms, ce.options)
        for job in state.jobs:
            key = (system, job.local_id)
            if key not in seen:
                seen.add(key)
                jobs.append((job, ce.cluster))
    return jobs, failed
