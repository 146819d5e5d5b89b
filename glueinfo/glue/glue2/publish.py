"""The GLUE 2 tree of an assembled site, as every publisher makes it (the publish step, not a renderer).

One function for `ldif`, `gather --format ldif`, `serve` and `run`: the endpoints' health is
checked (glueinfo.glue.glue2.health: a TCP connect, the daemon's process on this host), the
entries are rendered with the caller's CreationTime memory and checked against GLUE20.schema.
Which trees are published is ``[glue] versions`` (``1.3`` is o=grid, ``2.0`` is o=glue).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from glueinfo.glue.glue2.ces import health_targets
from glueinfo.glue.glue2.check import Glue2Build, check_glue2, glue2_options, load_glue2_schema
from glueinfo.glue.glue2.health import check_endpoints
from glueinfo.glue.glue2.render import RESOURCE_GROUP, glue2_entries
from glueinfo.glue.glue2.times import CreationTimes

if TYPE_CHECKING:
    from glueinfo.site.assemble import AssembledSite

log = logging.getLogger("glueinfo.glue")

VERSIONS = ("1.3", "2.0")
LOAD_SCHEMA: Any = object()  # build_glue2's default: read GLUE20.schema now (a one-shot command)


def publishes(config: Any, version: str) -> bool:
    """Does ``[glue] versions`` name this GLUE version (``1.3`` or ``2.0``)?"""
    return version in [str(v) for v in config.get("glue", "versions")]


def build_glue2(site: AssembledSite, config: Any, now: float, times: Optional[CreationTimes] = None,
                check_health: bool = True, schema: Any = LOAD_SCHEMA) -> Glue2Build:
    """The site's GLUE 2 entries, parents first, checked (entries left out are in ``errors``, one
    per DN; entities without the values the schema needs and a site without ``[site] id`` are in
    ``warnings``).  ``times``: the publisher's CreationTime memory (a daemon keeps one; a one-shot
    command stamps everything ``now``).  ``schema``: GLUE20.schema as :func:`load_glue2_schema` gave it
    (None: unchecked), for a publisher that builds often (parsing it costs more than rendering a
    1,000-host site's GLUE 2 tree); by default it is read now.  Raises Glue2Error for malformed GLUE 2
    CE settings."""
    if not site.model.site.unique_id:
        # Every GLUE 2 ComputingService names its AdminDomain: without [site] id there is no o=glue tree.
        # Said once at INFO (docs/glue2-mapping.md), not as a warning on every run of every such site.
        log.info("GLUE 2: no [site] id, so no o=glue tree is published")
        return Glue2Build([], checked=False)
    local = site.local.hostname if site.local is not None else ""
    health = check_endpoints(health_targets(site.model, local)) if check_health else None
    warnings: list[str] = []
    entries = glue2_entries(site, glue2_options(config), health=health, now=now, times=times, warnings=warnings)
    if schema is LOAD_SCHEMA:
        schema = load_glue2_schema(site.model.glue.schema_dir) if entries else None
    build = check_glue2(entries, schema)
    build.warnings[:0] = warnings
    return build


def glue2_ldif_tail(site: AssembledSite, config: Any, now: float, times: Optional[CreationTimes] = None,
                    after_glue13: bool = True, schema: Any = LOAD_SCHEMA) -> tuple[str, Optional[Glue2Build]]:
    """The o=glue records to write after the o=grid ones in one LDIF stream (a blank line between the
    trees), and their build; ("", None) when ``[glue] versions`` leaves GLUE 2 out.  What ``ldif``,
    ``gather --format ldif``, ``serve``'s /ldif and ``run``'s file all append, so they stay equal.
    ``schema`` as for :func:`build_glue2`."""
    if not publishes(config, "2.0"):
        return "", None
    build = build_glue2(site, config, now, times, schema=schema)
    if not build.entries:
        return "", build
    return ("\n" if after_glue13 else "") + build.ldif(), build


def glue2_base(config: Any) -> Optional[str]:
    """The subtree an LDAP publisher keeps equal to the GLUE 2 entries when ``[ldap] extra_bases``
    names none: ``GLUE2GroupID=resource,o=glue`` for the resource form, ``o=glue`` for the site
    form (``[glue] dit``); None when this site publishes no GLUE 2 tree (no ``[site] id``, or
    ``[glue] versions`` without 2.0): then nothing under o=glue is touched, whoever wrote it."""
    if not publishes(config, "2.0") or not config.get("site", "id"):
        return None
    return "o=glue" if config.get("glue", "dit") == "site" else RESOURCE_GROUP


def load_times(path: str) -> CreationTimes:
    """The CreationTime memory a one-shot publisher kept at ``path`` (empty when there is none or it
    cannot be read: every entry is then renewed once, one write each, never an error)."""
    import json

    from glueinfo.core.files import read_capped

    try:
        return CreationTimes.from_json(json.loads(read_capped(path, 64 * 2**20)))
    except (ValueError, OSError):
        return CreationTimes()


def save_times(path: str, times: CreationTimes) -> Optional[str]:
    """Keep the memory at ``path`` (atomically); the one-line reason when it cannot be written."""
    import json

    from glueinfo.core.atomicwrite import WriteError, write_atomic

    try:
        write_atomic(path, json.dumps(times.to_json(), separators=(",", ":")).encode())
    except (WriteError, OSError) as exc:
        return f"{path}: not written: {exc}"
    return None


def schema_for(config: Any, schema_dir: str) -> Any:
    """GLUE20.schema loaded once for a publisher that builds often (``run``, ``serve``), or
    LOAD_SCHEMA when this site publishes no GLUE 2 tree (nothing to check, nothing to warn about)."""
    if glue2_base(config) is None:
        return LOAD_SCHEMA
    return load_glue2_schema(schema_dir)
