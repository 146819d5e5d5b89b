"""What GLUE 2 publishes of each CE, resolved once from its CESpec: the CE type's defaults
(glueinfo.glue.glue2.ids) under the admin's ``[ce:NAME]`` GLUE 2 keys.

The values come from the typed ``[ce:NAME]`` section the site model keeps
(``CESpec.options``); nothing here reads the config file.  Bad values (a
benchmark without ``=``, a value that is not a number) raise Glue2Error
naming the section and key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from glueinfo.core.errors import ConfigurationError
from glueinfo.core.records import dataclass
from glueinfo.glue.glue2.health import HealthTarget
from glueinfo.glue.glue2.ids import CeKind, ce_kind
from glueinfo.site.model import CESpec, SiteModel


class Glue2Error(ConfigurationError, ValueError):
    """A GLUE 2 setting that cannot be published; the message names the section and key."""


@dataclass(frozen=True)
class CloseStorage:
    """One ``close_se`` item of a CE: a storage service, the path the CE mounts it at, and the path on the service."""

    service_id: str
    local_path: str
    remote_path: str


@dataclass(frozen=True)
class CeView:
    """One CE as GLUE 2 sees it.  ``url``, ``interface_name`` and ``service_type`` are "" when
    neither its CE type nor its ``[ce:NAME]`` section says them (``known`` is then False)."""

    spec: CESpec
    kind: CeKind
    url: str
    interface_name: str
    interface_version: str
    service_type: str
    quality_level: str
    implementation_name: str
    implementation_version: str
    daemon: str
    health_timeout: float
    close_storage: tuple[CloseStorage, ...]
    benchmarks: tuple[tuple[str, float], ...]
    cpu_scaling: Optional[float]
    wall_scaling: Optional[float]
    limits: Mapping[str, Optional[int]]  # default_wall_clock_time ... guaranteed_virtual_memory

    @property
    def known(self) -> bool:
        """Whether its endpoint's URL, interface and service type are all known."""
        return bool(self.url and self.interface_name and self.service_type)


LIMIT_KEYS = ("default_wall_clock_time", "default_cpu_time", "max_main_memory", "guaranteed_main_memory",
              "max_virtual_memory", "guaranteed_virtual_memory")


def _option(options: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = options.get(key, default)
    return default if value is None else value


def ce_view(ce: CESpec) -> CeView:
    """The CE's GLUE 2 values; raises Glue2Error for a malformed benchmark or close_se value."""
    options = ce.options
    section = f"[ce:{ce.section or 'NAME'}]"
    kind = ce_kind(ce.implementation_name)
    url = _option(options, "endpoint_url", "") or (kind.url_form.format(host=ce.host, port=ce.port, jobmanager=ce.jobmanager,
                                                                        lrms=ce.lrms) if kind.url_form else "")
    benchmarks = []
    for item in _option(options, "benchmarks", ()):
        name, sep, value = str(item).partition("=")
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not sep or not name or number < 0:
            raise Glue2Error(f"{section} benchmarks: {item!r} is not TYPE=VALUE with a number, e.g. HEP-SPEC06=12.5")
        benchmarks.append((name, number))
    storages = []
    for item in _option(options, "close_se", ()):
        service_id, _, paths = str(item).partition("=")
        local, _, remote = paths.partition(":")
        if not service_id:
            raise Glue2Error(f"{section} close_se: {item!r} names no storage service")
        storages.append(CloseStorage(service_id, local, remote or local))
    return CeView(
        spec=ce, kind=kind, url=url,
        interface_name=_option(options, "interface_name", "") or kind.interface_name,
        interface_version=_option(options, "interface_version", ""),
        service_type=_option(options, "service_type", "") or kind.service_type,
        quality_level=_option(options, "quality_level", "production"),
        implementation_name=kind.implementation_name or ce.implementation_name,
        implementation_version=ce.implementation_version,
        daemon=_option(options, "daemon_process", "") or kind.daemon,
        health_timeout=float(_option(options, "health_timeout", 3.0)),
        close_storage=tuple(storages), benchmarks=tuple(benchmarks),
        cpu_scaling=_option(options, "cpu_scaling_factor"), wall_scaling=_option(options, "wall_scaling_factor"),
        limits={key: _option(options, key) for key in LIMIT_KEYS})


def ce_views(site: SiteModel) -> list[CeView]:
    return [ce_view(ce) for ce in site.ces]


def health_targets(site: SiteModel, local_fqdn: str) -> list[HealthTarget]:
    """What the publish step checks before rendering (glueinfo.glue.glue2.health.check_endpoints):
    one target per endpoint URL, with the daemon looked for when the CE host is ``local_fqdn``.  A CE
    whose URL is not known has none (its endpoint's health is unknown, not checked)."""
    targets: dict[str, HealthTarget] = {}
    for view in ce_views(site):
        if not view.url:
            continue
        local = view.spec.host.lower() == local_fqdn.lower()
        targets.setdefault(view.url, HealthTarget(view.url, local=local, process=view.daemon if local else "",
                                                  timeout_s=view.health_timeout))
    return list(targets.values())
