"""The GLUE 1.3 pipeline: snapshots -> site model -> aggregate -> LRMS -> render -> check.

One function for every caller that needs the resource tree: ``glueinfo
ldif``, ``glueinfo publish``, and the long-running service (``build_site``
returns entries, ``build_site_ldif`` the LDIF text).

The check is the schema check of glueinfo.ldapschema against the installed
glue-schema files ([glue] schema_dir): every entry is normalised (ASCII for
IA5 attributes, TRUE/FALSE, integers) and then checked; an entry slapd
would still reject is left out with its children and reported by DN in
``errors``, so what is published always loads.  Without schema files the
output is normalised without a schema and published unchecked (one warning,
logged by the caller that loads the schema).
"""

from __future__ import annotations

import glob
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from glueinfo.aggregate import SiteGroups, aggregate
from glueinfo.config import Config
from glueinfo.ldapschema import Problem, Schema, SchemaUnavailable, load_schema, normalise_unchecked
from glueinfo.ldif import Entry, LDIFError, format_ldif, normalise_dn, parent_dn, parse_ldif, tree_order
from glueinfo.model import HostSnapshot, QueueState
from glueinfo.render_glue13 import iter_glue13
from glueinfo.site import SiteModel, site_from_config
from glueinfo.templates import Template, load_templates

log = logging.getLogger("glueinfo.glue")

AUTO = "auto"  # load the schema named by [glue] schema_dir

# What the rendered tree uses; parsing GLUE20.schema and the SE schema too
# would triple the start-up time of `glueinfo ldif`.  Static LDIF files may
# hold anything, so with [glue] static_ldif_dir the whole default set is read.
GLUE13_SCHEMA_FILES = ("Glue-CORE.schema", "Glue-MDS.schema", "Glue-CE.schema", "Glue-CESEBind.schema")


@dataclass
class SiteBuild:
    """The checked tree and what was found on the way."""

    site: SiteModel
    groups: SiteGroups
    states: dict[str, QueueState]  # CE unique id -> state
    entries: list[Entry]  # normalised, checked, parents first
    errors: list[Problem] = field(default_factory=list)  # entries left out, by DN
    warnings: list[str] = field(default_factory=list)  # values changed, names merged, ...
    checked: bool = True  # False when no schema files were found

    def ldif(self) -> str:
        return format_ldif(self.entries, sort=False)


def default_local_fqdn(config: Config) -> str:
    """This host's name as the collectors would publish it ([glueinfo] hostname, else the FQDN)."""
    from glueinfo.collect import CollectContext, local_hostname

    general = config.section("glueinfo")
    try:
        return local_hostname(CollectContext(host_root=general["host_root"], config={"hostname": general["hostname"]}))
    except Exception:  # a recorded tree without a readable name: fall back to this machine's
        return local_hostname(CollectContext(config={"hostname": general["hostname"]}))


def load_glue_schema(schema_dir: str, everything: bool = False) -> Optional[Schema]:
    """The schema to check the tree against, or None after one warning when the files are absent."""
    try:
        return load_schema(schema_dir) if everything else load_schema(schema_dir, GLUE13_SCHEMA_FILES)
    except SchemaUnavailable as exc:
        log.warning("%s: publishing without a schema check", exc)
        return None


def query_states(site: SiteModel, groups: SiteGroups, clock: Callable[[], float] = time.time,
                 queue_state: Optional[Callable[..., QueueState]] = None) -> dict[str, QueueState]:
    """Ask each CE's LRMS plugin for its queue's state (never raises: failures are states with an error)."""
    from glueinfo.lrms import LrmsContext
    from glueinfo.lrms import queue_state as default_queue_state

    ask = queue_state or default_queue_state
    states = {}
    for ce in site.ces:
        try:
            hosts = groups.cluster(ce.cluster).hosts
        except KeyError:
            hosts = []
        ctx = LrmsContext(queue=ce.queue, ce_config=ce.options, hosts=hosts, clock=clock,
                          timeout_s=ce.lrms_timeout, with_jobs=ce.publish_jobs)
        states[ce.unique_id] = ask(ce.lrms, ctx)
    return states


def static_ldif_entries(directory: str, warnings: list[str]) -> list[Entry]:
    """The entries of every *.ldif file in ``directory`` (sorted by name), published as they are."""
    entries: list[Entry] = []
    for path in sorted(glob.glob(os.path.join(directory, "*.ldif"))):
        try:
            with open(path, encoding="utf-8") as handle:
                entries.extend(parse_ldif(handle.read()))
        except (OSError, UnicodeDecodeError, LDIFError) as exc:
            warnings.append(f"static LDIF {path}: {exc}; not published")
    return entries


def check_and_order(entries: Iterable[Entry], schema: Optional[Schema]) -> tuple[list[Entry], list[Problem], list[str]]:
    """Normalise every entry, order them parents first, and leave out (with
    their descendants) those the schema check rejects or whose DN repeats."""
    warnings: list[str] = []
    normalised: list[Entry] = []
    for entry in entries:
        fixed, notes = schema.normalise(entry) if schema is not None else normalise_unchecked(entry)
        normalised.append(fixed)
        warnings.extend(str(note) for note in notes)
    errors: list[Problem] = []
    kept: list[Entry] = []
    dropped: set[str] = set()
    seen: set[str] = set()
    for entry in tree_order(normalised):
        key = normalise_dn(entry.dn)
        if parent_dn(key) in dropped:
            dropped.add(key)
            errors.append(Problem(entry.dn, "left out because its parent entry was left out"))
            continue
        if key in seen:
            errors.append(Problem(entry.dn, "the same DN appears twice; only the first is published"))
            continue
        problems = schema.check(entry) if schema is not None else []
        if problems:
            errors.extend(problems)
            dropped.add(key)
            continue
        seen.add(key)
        kept.append(entry)
    return kept, errors, warnings


def build_site(config: Config, snapshots: Sequence[HostSnapshot], clock: Callable[[], float] = time.time, *,
               publish_hosts: Optional[bool] = None, schema: Union[Schema, None, str] = AUTO,
               local_fqdn: Optional[str] = None, states: Optional[Mapping[str, QueueState]] = None,
               templates: Optional[Mapping[str, Template]] = None,
               queue_state: Optional[Callable[..., Any]] = None) -> SiteBuild:
    """The checked GLUE 1.3 tree for a config and host snapshots.

    ``schema``: a loaded Schema, None for no check, or "auto" to load [glue]
    schema_dir (warning once when absent).  ``states``: CE id -> QueueState
    to use instead of asking the LRMS plugins.  Raises ConfigError and
    TemplateError (bad config or templates); everything about the data is
    reported in the result instead.
    """
    site = site_from_config(config, local_fqdn or default_local_fqdn(config))
    if isinstance(schema, str):
        schema = load_glue_schema(site.glue.schema_dir, bool(site.glue.static_ldif_dir))
    templates = templates or load_templates(site.glue.templates_dir)
    groups = aggregate(site, snapshots)
    if states is None:
        states = query_states(site, groups, clock, queue_state)
    warnings = list(groups.warnings)
    rendered = list(iter_glue13(site, groups, states, templates, publish_hosts=publish_hosts, warnings=warnings))
    if site.glue.static_ldif_dir:
        rendered.extend(static_ldif_entries(site.glue.static_ldif_dir, warnings))
    entries, errors, notes = check_and_order(rendered, schema)
    warnings.extend(notes)
    return SiteBuild(site=site, groups=groups, states=dict(states), entries=entries, errors=errors,
                     warnings=warnings, checked=schema is not None)


def build_site_ldif(config: Config, snapshots: Sequence[HostSnapshot], clock: Callable[[], float] = time.time,
                    **options: Any) -> tuple[str, list[Problem]]:
    """(LDIF text of the checked tree, the entries left out by DN): for ``glueinfo serve`` and ``run``."""
    build = build_site(config, snapshots, clock, **options)
    for warning in build.warnings:
        log.info("%s", warning)
    return build.ldif(), build.errors
