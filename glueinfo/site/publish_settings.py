"""The ``[glue]`` and ``[ldap]`` sections as the publish layer's typed settings.

The publish layer (glueinfo.publish) and its outputs never read the config;
this is where a Config becomes their settings, once per command or service
start (as glueinfo.site.node_settings does for the Node XML renderer).
"""

from __future__ import annotations

from dataclasses import field
from typing import Optional

from glueinfo.core.config import Config, ConfigError
from glueinfo.core.records import dataclass
from glueinfo.site.node_settings import node_settings
from glueinfo.sss.node_settings import NodeSettings

VERSIONS = ("1.3", "2.0")


@dataclass(frozen=True)
class LdapBind:
    """One identity the LDAP output binds as, and the file holding its password ('' for none)."""

    dn: str
    password_file: str = ""


@dataclass(frozen=True)
class LdapSettings:
    """``[ldap]``: where the LDAP output writes and as whom.  ``binds`` holds one identity per
    suffix as BDII lays its server out (``o=grid; o=glue; o=infosys``, each database with its
    own rootdn), or one for every base."""

    url: str = ""
    binds: tuple[LdapBind, ...] = (LdapBind(""),)
    timeout_s: float = 10.0
    window: int = 64
    extra_bases: tuple[str, ...] = ()


@dataclass(frozen=True)
class PublishSettings:
    """What the publish layer makes, typed: which GLUE trees (``versions``), under which base,
    the GLUE 2 form, the schema files, the Node XML settings."""

    versions: tuple[str, ...] = VERSIONS
    base_dn: str = "mds-vo-name=resource,o=grid"
    site_id: str = ""
    dit: str = "resource"
    validity_s: int = 10800
    schema_dir: str = "/etc/ldap/schema"
    publish_hosts: Optional[bool] = None  # None: as [glue] says; False: no GlueHost entries (--no-hosts)
    node: NodeSettings = field(default_factory=NodeSettings)
    ldap: LdapSettings = field(default_factory=LdapSettings)

    def publishes(self, version: str) -> bool:
        """Is this GLUE version's tree published (``1.3``: o=grid, ``2.0``: o=glue)?"""
        return version in self.versions


def split_list(text: str) -> tuple[str, ...]:
    """A ';'-separated config value (DNs hold commas) as its non-empty parts."""
    return tuple(part.strip() for part in text.split(";") if part.strip())


def ldap_binds(bind_dn: str, password_file: str) -> tuple[LdapBind, ...]:
    """``[ldap] bind_dn`` and ``password_file`` as identities: one DN or several separated by
    ';', with one password file for all or one per DN (in the same order).  ValueError (one
    line) when the counts do not match."""
    dns = split_list(bind_dn) or ("",)
    files = split_list(password_file)
    if len(files) > 1 and len(files) != len(dns):
        raise ValueError(f"{len(dns)} bind DN(s) but {len(files)} password files: give one file for all, or one per DN")
    if len(files) <= 1:
        return tuple(LdapBind(dn, files[0] if files else "") for dn in dns)
    return tuple(LdapBind(dn, path) for dn, path in zip(dns, files, strict=True))


def publish_settings(config: Config, *, versions: Optional[tuple[str, ...]] = None,
                     publish_hosts: Optional[bool] = None) -> PublishSettings:
    """PublishSettings from ``[glue]``, ``[site] id``, ``[node]`` and ``[ldap]``; ``versions``
    overrides ``[glue] versions`` (a command's --glue).  ConfigError (one line, naming the key)
    for a version glueinfo does not publish or mismatched LDAP identities."""
    glue = config.section("glue")
    chosen = versions if versions is not None else tuple(str(v) for v in glue["versions"])
    unknown = [v for v in chosen if v not in VERSIONS]
    where = config.path or "<config>"
    if unknown:
        raise ConfigError(f"{where}: [glue] versions: {', '.join(unknown)} is not one of {', '.join(VERSIONS)}")
    ldap = config.section("ldap")
    try:
        binds = ldap_binds(ldap["bind_dn"], ldap["password_file"])
    except ValueError as exc:
        raise ConfigError(f"{where}: [ldap] bind_dn / password_file: {exc}") from None
    return PublishSettings(
        versions=tuple(v for v in VERSIONS if v in chosen),
        base_dn=glue["base_dn"], site_id=config.get("site", "id"), dit=glue["dit"], validity_s=int(glue["validity"]),
        schema_dir=glue["schema_dir"], publish_hosts=publish_hosts, node=node_settings(config),
        ldap=LdapSettings(url=ldap["url"], binds=binds, timeout_s=float(ldap["timeout"]), window=int(ldap["window"]),
                          extra_bases=split_list(ldap["extra_bases"])))
