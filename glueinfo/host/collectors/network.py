"""network: every adapter, its addresses, MTU, state and speed; the primary one.

The primary adapter is the one carrying the default route (IPv4 first, then
IPv6, lowest metric first).  Loopback is recorded but never primary; a host
without a default route has no primary adapter.
"""

from __future__ import annotations

from glueinfo.core.model import NetworkAdapter
from glueinfo.host.collect import CollectContext, Collector
from glueinfo.host.linux import LinuxHost


def collect(ctx: CollectContext) -> list[NetworkAdapter]:
    host = LinuxHost(ctx.host_root)
    adapters = [NetworkAdapter(name=i.name, ipv4=i.ipv4, ipv6=i.ipv6, mtu=i.mtu, is_up=i.is_up,
                               speed_mbps=i.speed_mbps, mac=i.mac, is_loopback=i.is_loopback)
                for i in host.interfaces()]
    by_name = {a.name: a for a in adapters}
    for name in host.default_route_interfaces():
        adapter = by_name.get(name)
        if adapter is not None and not adapter.is_loopback:
            adapter.is_primary = True
            break
    return adapters


COLLECTOR = Collector(name="network", collect=collect, default_enabled=True, field="network",
                      description="network adapters: addresses, MTU, up/down, speed; primary = default route")
