"""The checked GLUE 1.3 tree of a site made of exactly some snapshots: for tests, benchmarks and
scripts that hold snapshots rather than a config's sources.

The site is assembled by glueinfo.site.assemble.assemble_snapshots (no
sources, no state) and rendered by glueinfo.glue.build; a daemon or command
goes through :class:`glueinfo.publish.documents.Publisher` instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, Optional, Union

from glueinfo.core.config import Config
from glueinfo.core.model import HostSnapshot, QueueState
from glueinfo.glue.build import AUTO, SiteBuild, render_site, write_site
from glueinfo.glue.schema import Problem, Schema
from glueinfo.glue.templates import Template
from glueinfo.site.assemble import assemble_snapshots

log = logging.getLogger(__name__)


def build_site(config: Config, snapshots: Sequence[HostSnapshot], clock: Callable[[], float] = time.time, *,
               publish_hosts: Optional[bool] = None, schema: Union[Schema, None, str] = AUTO,
               local_fqdn: Optional[str] = None, states: Optional[Mapping[str, QueueState]] = None,
               templates: Optional[Mapping[str, Template]] = None,
               queue_state: Optional[Callable[..., Any]] = None) -> SiteBuild:
    """The checked GLUE 1.3 tree of a site made of exactly these snapshots
    (glueinfo.site.assemble.assemble_snapshots: no sources, no state).

    ``states``: CE id -> QueueState to use instead of asking the LRMS
    plugins.  ``local_fqdn``: the name of the host the default cluster and
    CE are named after (default: this host's).  Raises ConfigError and
    TemplateError (bad config or templates).
    """
    assembled = assemble_snapshots(config, snapshots, clock, local_fqdn=local_fqdn,
                                   states=dict(states) if states is not None else None, queue_state=queue_state)
    return render_site(assembled, publish_hosts=publish_hosts, schema=schema, templates=templates)


def write_site_ldif(config: Config, snapshots: Sequence[HostSnapshot], stream: IO[str],
                    clock: Callable[[], float] = time.time, **options: Any) -> SiteBuild:
    """build_site, written to ``stream`` as it is produced; the returned SiteBuild has no entries."""
    assembled = assemble_snapshots(config, snapshots, clock, local_fqdn=options.pop("local_fqdn", None),
                                   states=options.pop("states", None), queue_state=options.pop("queue_state", None))
    return write_site(assembled, stream, **options)


def build_site_ldif(config: Config, snapshots: Sequence[HostSnapshot], clock: Callable[[], float] = time.time,
                    **options: Any) -> tuple[str, list[Problem]]:
    """(LDIF text of the checked tree, the entries left out by DN): for ``glueinfo serve`` and ``run``.
    Warnings (values transliterated, names merged) are logged at INFO."""
    build = build_site(config, snapshots, clock, **options)
    for warning in build.warnings:
        log.info("%s", warning)
    return build.ldif(), build.errors
