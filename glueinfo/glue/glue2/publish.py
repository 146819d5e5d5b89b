"""The GLUE 2 tree of an assembled site, as every publisher makes it (the publish step, not a renderer).

Called by the publish layer (glueinfo.publish.documents) only: the endpoints' health is
checked (glueinfo.glue.glue2.health: a TCP connect, the daemon's process on this host), the
entries are rendered with the caller's CreationTime memory and checked against GLUE20.schema; the
GLUE 2.1 accelerator entries stay out of LDAP (JSON only) unless ``[glue] accelerator_schema`` says
the site's slapd loads glueinfo's extension schema.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from glueinfo.glue.glue2.accelerators import is_glue21
from glueinfo.glue.glue2.ces import health_targets
from glueinfo.glue.glue2.check import Glue2Build, check_glue2, load_glue2_schema
from glueinfo.glue.glue2.health import check_endpoints
from glueinfo.glue.glue2.render import Glue2Options, glue2_entries
from glueinfo.glue.glue2.times import CreationTimes

if TYPE_CHECKING:
    from glueinfo.site.assemble import AssembledSite

log = logging.getLogger(__name__)

LOAD_SCHEMA: Any = object()  # build_glue2's default: read GLUE20.schema now (a one-shot command)


def build_glue2(site: AssembledSite, options: Glue2Options, now: float, times: Optional[CreationTimes] = None,
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
    health = check_endpoints(health_targets(site.model, local)) if check_health else {}
    warnings: list[str] = []
    entries = glue2_entries(site, options, health=health, now=now, times=times, warnings=warnings)
    if schema is LOAD_SCHEMA:
        schema = load_glue2_schema(site.model.glue.schema_dir) if entries else None
    build = check_glue2(entries, schema)
    build.warnings[:0] = warnings
    if not site.model.glue.accelerator_schema:
        # GLUE20.schema has no accelerator class: the GLUE 2.1 entries go to the JSON rendering only.
        build.json_only = [e for e in build.entries if is_glue21(e)]
        if build.json_only:
            build.entries = [e for e in build.entries if not is_glue21(e)]
    return build


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


def schema_for(publishes_glue2: bool, schema_dir: str) -> Any:
    """GLUE20.schema loaded once for a publisher that builds often (``run``, ``serve``), or
    LOAD_SCHEMA when this site publishes no GLUE 2 tree (nothing to check, nothing to warn about)."""
    if not publishes_glue2:
        return LOAD_SCHEMA
    return load_glue2_schema(schema_dir)
