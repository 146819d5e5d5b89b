"""static: the facts no probe can measure, as the site admin wrote them in the
config ([static] and [extensions]): benchmarks, run-time environments, node
features, IP connectivity, extension properties."""

from __future__ import annotations

from glueinfo.core.model import StaticFacts
from glueinfo.host.collect import CollectContext, Collector


def collect(ctx: CollectContext) -> StaticFacts:
    config = ctx.config
    return StaticFacts(
        si00=config.get("si00"),
        sf00=config.get("sf00"),
        runtime_environment=list(config.get("runtime_environment") or []),
        features=list(config.get("features") or []),
        inbound_ip=config.get("inbound_ip"),
        outbound_ip=config.get("outbound_ip"),
        extensions={str(k): str(v) for k, v in (config.get("extensions") or {}).items()},
    )


COLLECTOR = Collector(name="static", collect=collect, default_enabled=True, field="static",
                      description="admin-declared facts from the config: SI00/SF00, run-time environments, features")
