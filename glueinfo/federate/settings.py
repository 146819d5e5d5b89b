"""The federation view's settings, typed and checked from its config file: ``[federate]`` for the
view, ``[amqp]`` for the broker it consumes from (the same keys the amqp output uses),
``[ldap]`` for the server it writes (none: JSON only).

Failure behaviour: ValueError (one line naming the section and key) for
anything missing or wrong, before anything is started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from glueinfo.core.ldif import DNError, parse_dn
from glueinfo.federate.receive import Limits
from glueinfo.federate.view import Ages
from glueinfo.publish.outputs.amqp import DOCUMENTS, AmqpSettings, amqp_settings
from glueinfo.run.http import parse_listen
from glueinfo.run.http_server import IPNetwork, is_loopback, parse_allow
from glueinfo.site.publish_settings import LdapSettings, ldap_binds


@dataclass(frozen=True)
class FederateSettings:
    queue: str
    kinds: tuple[str, ...]  # routing-key kinds bound and kept: glue21.json, glue.ldif, crr.json
    state_dir: str
    senders_file: str
    host: str
    port: int
    allow: Optional[tuple[IPNetwork, ...]]
    ages: Ages
    limits: Limits
    bases: tuple[str, str]
    full_sync_s: float
    prefetch: int
    amqp: AmqpSettings
    ldap: Optional[LdapSettings]


def federate_settings(config: Any) -> FederateSettings:
    """From a loaded config (glueinfo.core.config.Config); ValueError naming the key."""
    section = config.section("federate")
    queue = str(section["queue"] or "")
    if not queue:
        raise ValueError("[federate] queue is not set: name this view's own queue (e.g. queue = federate-egi)")
    amqp = amqp_settings(config.section("amqp"))
    kinds = tuple(DOCUMENTS[name][0] for name in section["documents"])
    if not kinds:
        raise ValueError("[federate] documents: none kept")
    try:
        host, port = parse_listen(section["listen"])
    except ValueError as exc:
        raise ValueError(f"[federate] listen: {exc}") from None
    allow_words = [str(word) for word in section["allow"]]
    try:
        allow = parse_allow(allow_words)
    except ValueError as exc:
        raise ValueError(f"[federate] allow: {exc}") from None
    if allow is None and not allow_words and not is_loopback(host):
        raise ValueError(f"[federate] listen: {host}:{port} is not loopback: set [federate] allow to your consumers' "
                         "networks, or allow = any")
    bases = (str(section["grid_base"]), str(section["glue_base"]))
    for name, base in zip(("grid_base", "glue_base"), bases, strict=True):
        try:
            suffix = parse_dn(base)[-1]
        except (DNError, IndexError):
            raise ValueError(f"[federate] {name}: {base!r} is not a DN") from None
        wanted = "grid" if name == "grid_base" else "glue"
        if [(a.lower(), v.lower()) for a, v in suffix] != [("o", wanted)]:
            raise ValueError(f"[federate] {name}: {base!r} is not below o={wanted}")
    ldap_section = config.section("ldap")
    ldap = None
    if ldap_section["url"]:
        ldap = LdapSettings(url=ldap_section["url"], binds=ldap_binds(ldap_section["bind_dn"], ldap_section["password_file"]),
                            timeout_s=float(ldap_section["timeout"]), window=int(ldap_section["window"]))
    stale, withdraw = float(section["stale_after"]), float(section["withdraw_after"])
    if withdraw < stale:
        raise ValueError(f"[federate] withdraw_after ({withdraw:g} s) is shorter than stale_after ({stale:g} s)")
    return FederateSettings(
        queue=queue, kinds=kinds, state_dir=str(section["state_dir"]), senders_file=str(section["senders_file"]),
        host=host, port=port, allow=allow, ages=Ages(stale, withdraw),
        limits=Limits(int(section["max_message_bytes"]), int(section["max_unpacked_bytes"])), bases=bases,
        full_sync_s=float(section["full_sync"]), prefetch=int(section["prefetch"]), amqp=amqp, ldap=ldap)
