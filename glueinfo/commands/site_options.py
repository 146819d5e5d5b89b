"""What the commands that publish the whole site share: one way to make the site assembler.

``ldif``, ``gather``, ``node-xml --site``, ``haizea`` and ``publish`` all
build their :class:`glueinfo.site.assemble.SiteAssembler` here, from the
config and the command line, so they see the same hosts (``serve`` and
``run`` are the daemon: glueinfo.run.provider).

``GLUEINFO_CLOCK`` (epoch seconds), when set, is the time every command
takes as now: freshness, CollectedAt of this host's probe, Node XML
timestamps.  It exists so that tests (and an admin replaying a problem) can
get the same bytes from every command; a service never sets it.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from glueinfo.core.config import Config

if TYPE_CHECKING:
    from glueinfo.site.assemble import AssembledSite, SiteAssembler

CLOCK_VARIABLE = "GLUEINFO_CLOCK"


def clock_from_environment() -> Callable[[], float]:
    """time.time, or a clock stopped at $GLUEINFO_CLOCK; UsageError when that is not a number."""
    raw = os.environ.get(CLOCK_VARIABLE, "").strip()
    if not raw:
        return time.time
    try:
        fixed = float(raw)
    except ValueError:
        from glueinfo.core.errors import UsageError

        raise UsageError(f"${CLOCK_VARIABLE}={raw[:40]!r} is not a time in epoch seconds") from None
    return lambda: fixed


def site_config(args: argparse.Namespace, config: Config) -> Config:
    """The config as the command line amends it (``--host-root``)."""
    if getattr(args, "host_root", None):
        config = config.with_values("glueinfo", host_root=args.host_root)
    return config


def local_probe(args: argparse.Namespace, config: Config, clock: Callable[[], float]) -> Callable[[], Any]:
    """How the ``local`` source probes this host (glueinfo.site.local_probe): the command line's
    collectors, collector failures warned about by name."""
    def probe() -> Any:  # CollectorError: the local source reports it as its failure
        from glueinfo.commands.probe import warn
        from glueinfo.site.local_probe import probe_this_host
        from glueinfo.site.node_settings import node_settings

        return probe_this_host(config, node_settings(config), host_root=args.host_root, enable=args.collector,
                               disable=args.no_collector, on_error=lambda message: warn(args, message), clock=clock)

    return probe


def make_assembler(args: argparse.Namespace, config: Config, *, without_local: bool = False,
                   clock: Callable[[], float] | None = None, probe: Callable[[], Any] | None = None) -> SiteAssembler:
    """The site assembler of a command (glueinfo.site.assemble); SourceError or ConfigError
    (ConfigurationErrors: exit 2) for unknown sources or a bad site model.  ``probe``: how the
    ``local`` source gets this host (default: a probe, as the command line says)."""
    from glueinfo.gather.registry import enabled_sources
    from glueinfo.site.assemble import SiteAssembler

    clock = clock or clock_from_environment()
    sources = enabled_sources(config, on_error=lambda message: None)
    if without_local:
        sources = [s for s in sources if s.name != "local"]
    return SiteAssembler(config, clock=clock, sources=sources, probe=probe or local_probe(args, config, clock))


def assemble_once(args: argparse.Namespace, config: Config, clock: Callable[[], float],
                  snapshots: list[str] | None = None, on_stage: Callable[[str], None] = lambda text: None) -> AssembledSite:
    """The site of a one-shot command: exactly these snapshot files (``--snapshots``) when given,
    else every source once (glueinfo.site.assemble).  ``on_stage``: told each step as it starts
    (a command's progress line, glueinfo.commands.progress)."""
    if snapshots:
        from glueinfo.commands.ldif import read_snapshots
        from glueinfo.site.assemble import assemble_snapshots

        on_stage("reading snapshots")
        read = read_snapshots(snapshots)
        on_stage(f"assembling {len(read):,} host{'' if len(read) == 1 else 's'}")
        return assemble_snapshots(config, read, clock)
    return make_assembler(args, config, clock=clock).once(on_stage)


def publisher_for(args: argparse.Namespace, config: Config, *, versions: tuple[str, ...] | None = None,
                  **options: Any) -> Any:
    """The publish layer's Publisher (glueinfo.publish.documents) for a one-shot command: [glue]
    versions unless the command line chose (``versions``), --no-hosts honoured; ConfigError (a
    ConfigurationError: exit 2) for bad settings."""
    from glueinfo.publish.documents import Publisher
    from glueinfo.site.publish_settings import publish_settings

    settings = publish_settings(config, versions=versions, publish_hosts=False if getattr(args, "no_hosts", False) else None)
    return Publisher(settings, **options)


def print_documents(documents: Any, document: str, *, pretty: bool = True) -> None:
    """One document on stdout through the ``stdout`` output; TemplateError or Glue2Error
    (ConfigurationErrors: exit 2) for a bad template or malformed GLUE 2 settings."""
    import sys

    from glueinfo.publish.outputs import Publication
    from glueinfo.publish.outputs.stdout import StdoutOutput

    sys.stdout.flush()
    StdoutOutput(document, sys.stdout.buffer, pretty).publish(Publication(documents))
