"""The site model read from the config: ``site_from_config`` types and cross-checks the admin's sections.

The types themselves are glueinfo.site.model (renderers read them without
touching the config); this module is the only place that turns config
sections into them, raising ConfigError with file, line and key.
"""

from __future__ import annotations

from typing import Any, Optional

from glueinfo.core.config import Config, ConfigError
from glueinfo.lrms.registry import SECTION_OPTION, LrmsError, resolve_lrms
from glueinfo.lrms.vo_map import VoMap, VoMapError
from glueinfo.site.discovery import ce_sections
from glueinfo.site.model import (
    DEFAULT_QUEUE,
    GROUP_FACTS,
    KEY_NAMES,
    MAX_RDN_BYTES,
    POLICY_KEYS,
    CESpec,
    ClusterSpec,
    GlueOptions,
    SiteInfo,
    SiteModel,
    SubClusterPin,
    ce_unique_id,
    derived_id,
    rdn_too_long,
)


def _where(config: Config, section: str, key: Optional[str] = None) -> str:
    """``FILE:LINE`` of a section or key, for messages about cross references."""
    line = config.lines.get((section, key), config.lines.get((section, None), 0))
    return f"{config.path or '<config>'}:{line}"


def _check_id(config: Config, section: str, key: str, attr: str, value: str) -> None:
    if rdn_too_long(attr, value):
        raise ConfigError(f"{_where(config, section, key)}: [{section}] {key}: {attr} {value[:40]!r}... is too long "
                          f"to name an LDAP entry (at most about {MAX_RDN_BYTES - len(attr) - 1} characters)")


def _tuple(values: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in values or ())


def _facts(raw: dict[str, Any]) -> dict[str, Any]:
    """The GROUP_FACTS a [cluster:NAME] or [subcluster:NAME] section states (unset ones left out)."""
    return {name: raw[name] for name in GROUP_FACTS if raw.get(name) not in (None, "")}


def _contact_strings(raw: dict[str, Any], host: str) -> tuple[str, ...]:
    """GlueCEInfoContactString: the configured ones; else the GRAM-style HOST:PORT/JOBMANAGER-LRMS only
    for a CE whose type is declared (implementation_name): for one of unknown type it would claim a
    gatekeeper that does not exist, and the attribute is optional."""
    configured = _tuple(raw["contact_string"])
    if configured or not raw["implementation_name"]:
        return configured
    return (f"{host}:{raw['port']}/{raw['jobmanager']}-{raw['lrms']}",)


def site_from_config(config: Config, local_fqdn: str) -> SiteModel:
    """Build and cross-check the site model; raises ConfigError naming file, line and key."""
    raw_site = config.section("site")
    site = SiteInfo(
        unique_id=raw_site["id"], name=raw_site["name"] or raw_site["id"], description=raw_site["description"],
        location=raw_site["location"], latitude=raw_site["latitude"], longitude=raw_site["longitude"],
        web=raw_site["web"], email=raw_site["email"], sysadmin_contact=raw_site["sysadmin_contact"],
        user_support_contact=raw_site["user_support_contact"], security_contact=raw_site["security_contact"],
        sponsor=_tuple(raw_site["sponsor"]), other_info=_tuple(raw_site["other_info"]))

    if site.unique_id:
        _check_id(config, "site", "id", "GlueSiteUniqueID", site.unique_id)
    raw_glue = config.section("glue")
    unknown = [k for k in raw_glue["aggregation_key"] if k not in KEY_NAMES]
    if unknown:
        raise ConfigError(f"{_where(config, 'glue', 'aggregation_key')}: [glue] aggregation_key: unknown fact(s) "
                          f"{', '.join(unknown)} (known: {', '.join(KEY_NAMES)})")
    glue = GlueOptions(base_dn=raw_glue["base_dn"].strip(), aggregation_key=_tuple(raw_glue["aggregation_key"]),
                       ram_granularity_mb=raw_glue["ram_granularity_mb"], publish_hosts=raw_glue["publish_hosts"],
                       schema_dir=raw_glue["schema_dir"], templates_dir=raw_glue["templates_dir"],
                       static_ldif_dir=raw_glue["static_ldif_dir"],
                       information_service_url=raw_glue["information_service_url"],
                       accelerator_schema=raw_glue["accelerator_schema"])
    if not glue.base_dn:
        raise ConfigError(f"{_where(config, 'glue', 'base_dn')}: [glue] base_dn: must not be empty")

    clusters: list[ClusterSpec] = []
    by_section: dict[str, ClusterSpec] = {}
    for name, raw in config.sections("cluster").items():
        unique_id = raw["unique_id"] or name
        _check_id(config, f"cluster:{name}", "unique_id", "GlueClusterUniqueID", unique_id)
        spec = ClusterSpec(section=name, unique_id=unique_id, name=raw["name"] or unique_id,
                           host_patterns=_tuple(raw["hosts"]), tmp_dir=raw["tmp_dir"], wn_tmp_dir=raw["wn_tmp_dir"],
                           facts=_facts(raw))
        if any(c.unique_id.lower() == unique_id.lower() for c in clusters):
            raise ConfigError(f"{_where(config, f'cluster:{name}')}: [cluster:{name}] unique_id: {unique_id!r} is used twice")
        clusters.append(spec)
        by_section[name] = spec
    if not clusters:
        default_id = derived_id("GlueClusterUniqueID", local_fqdn)
        clusters.append(ClusterSpec(section="", unique_id=default_id, name=local_fqdn))
    catch_all = [c for c in clusters if not c.host_patterns]
    if len(catch_all) > 1:
        names = ", ".join(f"[cluster:{c.section}]" for c in catch_all)
        raise ConfigError(f"{_where(config, f'cluster:{catch_all[1].section}', 'hosts')}: "
                          f"[cluster:{catch_all[1].section}] hosts: only one cluster may omit its host list ({names} do)")

    def cluster_ref(section: str, value: str) -> ClusterSpec:
        if value:
            if value in by_section:
                return by_section[value]
            raise ConfigError(f"{_where(config, section, 'cluster')}: [{section}] cluster: no [cluster:{value}] section "
                              f"(known: {', '.join(by_section) or 'none'})")
        if len(clusters) == 1:
            return clusters[0]
        raise ConfigError(f"{_where(config, section)}: [{section}] cluster: required when there are several clusters "
                          f"({', '.join(by_section)})")

    pins: list[SubClusterPin] = []
    for name, raw in config.sections("subcluster").items():
        section = f"subcluster:{name}"
        if not raw["hosts"]:
            raise ConfigError(f"{_where(config, section)}: [{section}] hosts: required (names or patterns of the pinned hosts)")
        cluster = cluster_ref(section, raw["cluster"])
        unique_id = raw["unique_id"] or name
        _check_id(config, section, "unique_id", "GlueSubClusterUniqueID", unique_id)
        if any(p.unique_id.lower() == unique_id.lower() for p in pins):
            raise ConfigError(f"{_where(config, section)}: [{section}] unique_id: {unique_id!r} is used twice")
        pins.append(SubClusterPin(section=name, cluster=cluster.unique_id, unique_id=unique_id,
                                  name=raw["name"] or unique_id, host_patterns=_tuple(raw["hosts"]),
                                  tmp_dir=raw["tmp_dir"] or cluster.tmp_dir, wn_tmp_dir=raw["wn_tmp_dir"] or cluster.wn_tmp_dir,
                                  facts={**cluster.facts, **_facts(raw)}))

    ces: list[CESpec] = []
    raw_ces = ce_sections(config, local_fqdn)  # discovery hook: declared [ce:NAME] + CEs found on this host
    if not raw_ces:
        raw_ces = {"": config.section("ce:*")}  # the defaults: fork on this host
    for name, raw in raw_ces.items():
        section = f"ce:{name}"
        cluster = cluster_ref(section, raw["cluster"]) if name else clusters[0]
        host = raw["host"] or local_fqdn
        queue = raw["queue"] or name or DEFAULT_QUEUE
        if raw["unique_id"]:
            unique_id = raw["unique_id"]
            _check_id(config, section, "unique_id", "GlueCEUniqueID", unique_id)
        else:  # derived from a host name, which may be long: never a config error the admin did not write
            unique_id = derived_id("GlueCEUniqueID", ce_unique_id(host, raw["port"], raw["jobmanager"], raw["lrms"], queue))
        if any(c.unique_id.lower() == unique_id.lower() for c in ces):
            raise ConfigError(f"{_where(config, section)}: [{section}]: CE id {unique_id!r} is used twice")
        # A name no plugin has is refused (never half a CE); a dialect's (torque) is its plugin's.  The
        # id and contact string above keep the admin's word.
        try:
            lrms, options = resolve_lrms(raw["lrms"], raw)
        except LrmsError as exc:
            raise ConfigError(f"{_where(config, section, 'lrms')}: [{section}] lrms: {exc}") from None
        options["queue"] = queue
        options[SECTION_OPTION] = name  # named by the ERROR of a queue the batch system does not have
        ces.append(CESpec(
            section=name, cluster=cluster.unique_id, unique_id=unique_id, host=host, port=raw["port"],
            jobmanager=raw["jobmanager"], lrms=lrms, queue=queue, lrms_version=raw["lrms_version"],
            lrms_timeout=raw["lrms_timeout"], status=raw["status"], implementation_name=raw["implementation_name"],
            implementation_version=raw["implementation_version"], gram_version=raw["gram_version"],
            contact_string=_contact_strings(raw, host),
            application_dir=raw["application_dir"], data_dir=raw["data_dir"], default_se=raw["default_se"],
            capability=_tuple(raw["capability"]), access=_tuple(raw["access"]),
            policies={key: raw[key] for key in POLICY_KEYS}, publish_jobs=raw["publish_jobs"], options=options))

    try:
        vo_map = VoMap.from_config(config)
    except VoMapError as exc:
        raise ConfigError(f"{_where(config, 'vos', 'map')}: {exc}") from None
    return SiteModel(site=site, clusters=tuple(clusters), pins=tuple(pins), ces=tuple(ces), glue=glue, vo_map=vo_map)


