"""What ``glueinfo run`` derives from one config, checked whole before it replaces the running one."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from glueinfo.core.config import Config, ConfigError
from glueinfo.core.errors import ConfigurationError

log = logging.getLogger(__name__)


class ServiceError(ConfigurationError):
    """A config the provider cannot run with (unknown collector or source, bad site model); one line."""


@dataclass(frozen=True)
class RunSettings:
    """The [run] section, typed."""

    fast_interval_s: float = 60.0
    slow_interval_s: float = 3600.0
    gather_interval_s: float = 60.0
    lrms_interval_s: float = 60.0
    fast_collectors: tuple[str, ...] = ("load", "memory", "filesystems")
    jitter_s: float = 0.0
    misfire_grace_s: float = 30.0
    ldif_file: str = "/var/lib/glueinfo/glue.ldif"
    node_xml_file: str = "/var/lib/glueinfo/nodes.xml"
    state_dir: str = "/var/lib/glueinfo/state"
    ldap_sync: bool = False
    ldap_retry_min_s: float = 5.0
    ldap_retry_max_s: float = 300.0
    serve: bool = False
    shutdown_grace_s: float = 5.0

    @classmethod
    def from_config(cls, config: Config) -> RunSettings:
        s = config.section("run")
        return cls(fast_interval_s=s["fast_interval"], slow_interval_s=s["slow_interval"], gather_interval_s=s["gather_interval"],
                   lrms_interval_s=s["lrms_interval"],
                   fast_collectors=tuple(s["fast_collectors"]), jitter_s=s["jitter"], misfire_grace_s=s["misfire_grace"],
                   ldif_file=s["ldif_file"], node_xml_file=s["node_xml_file"], state_dir=s["state_dir"],
                   ldap_sync=s["ldap_sync"], ldap_retry_min_s=s["ldap_retry_min"],
                   ldap_retry_max_s=max(s["ldap_retry_max"], s["ldap_retry_min"]), serve=s["serve"],
                   shutdown_grace_s=s["shutdown_grace"])


@dataclass
class Plan:
    """Everything derived from one config; built whole before it replaces the running one."""

    config: Config
    settings: RunSettings
    collector_names: tuple[str, ...]  # every enabled collector, in the order a whole probe runs them
    fast_names: tuple[str, ...]
    slow_names: tuple[str, ...]
    remote_sources: list[Any]
    sources: list[Any]
    node_settings: Any
    schema: Any
    glue2_schema: Any  # GLUE20.schema, read once (glueinfo.glue.glue2.publish.schema_for)
    templates: Any
    site_files: tuple[str, ...]
    publish_settings: Any  # glueinfo.site.publish_settings.PublishSettings: what the publish layer makes


def _selected_collector_names(config: Config, enable: Iterable[str], disable: Iterable[str]) -> list[str]:
    """The collectors glueinfo probe would run with this config and these command-line lists."""
    from glueinfo.host.collect import all_collectors, select

    section = config.section("collectors")
    enable, disable = set(enable), set(disable)
    chosen = select(all_collectors(lambda message: log.warning("%s", message)),  # CollectorError: a ConfigurationError
                    enable=(set(section["enable"]) - disable) | enable,
                    disable=(set(section["disable"]) - enable) | disable)
    return [c.name for c in chosen]


def make_plan(config: Config, enable: Iterable[str] = (), disable: Iterable[str] = ()) -> Plan:
    """Check a config as far as running it needs; a ConfigurationError (one line: ServiceError,
    ConfigError, CollectorError, SourceError, TemplateError) when it cannot run."""
    from glueinfo.gather.registry import enabled_sources
    from glueinfo.glue.glue2.publish import schema_for
    from glueinfo.glue.schema import load_glue_schema
    from glueinfo.glue.templates import load_templates
    from glueinfo.site.assemble import default_local_fqdn
    from glueinfo.site.from_config import site_from_config
    from glueinfo.site.publish_settings import publish_settings

    settings = RunSettings.from_config(config)
    names = _selected_collector_names(config, enable, disable)
    unknown_fast = [n for n in settings.fast_collectors if n not in names]
    if unknown_fast:
        log.debug("[run] fast_collectors names collectors not enabled: %s", ", ".join(unknown_fast))
    fast = tuple(n for n in names if n in settings.fast_collectors)
    slow = tuple(n for n in names if n not in settings.fast_collectors)
    if not fast:  # nothing fast: every collector runs at the fast interval, so this host never goes stale
        fast, slow = tuple(names), ()
    # SourceError, TemplateError: ConfigurationErrors, as the caller expects of a config it cannot run with.
    sources = enabled_sources(config, on_error=lambda message: log.warning("%s", message))
    site = site_from_config(config, default_local_fqdn(config))
    templates = load_templates(site.glue.templates_dir)
    schema = load_glue_schema(site.glue.schema_dir, bool(site.glue.static_ldif_dir))
    publish = publish_settings(config)
    glue2_schema = schema_for(publish.publishes("2.0") and bool(publish.site_id), site.glue.schema_dir)
    node_settings = publish.node
    if settings.ldap_sync and not config.get("ldap", "url"):
        raise ConfigError(f"{config.path or '<config>'}: [run] ldap_sync is on but [ldap] url is not set")
    return Plan(config=config, settings=settings, collector_names=tuple(names), fast_names=fast, slow_names=slow,
                remote_sources=[s for s in sources if s.name != "local"], sources=list(sources), node_settings=node_settings,
                schema=schema, glue2_schema=glue2_schema, templates=templates, site_files=tuple(config.section("node")["site_snapshots"]),
                publish_settings=publish)
