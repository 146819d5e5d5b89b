"""The one way this host is probed for the site: the collectors the config and command line
choose, then the [node] resources attached (what the ``local`` source reports).

``glueinfo`` commands (glueinfo.commands.site_options.local_probe) and the
daemon (glueinfo.run.local_host, which splits the collectors into its slow
and fast jobs) both call it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Optional

from glueinfo.core.model import HostSnapshot
from glueinfo.sss.node_resources import attach_resources
from glueinfo.sss.node_settings import NodeSettings


def probe_this_host(config: Any, settings: NodeSettings, *, host_root: Optional[str] = None, enable: Iterable[str] = (),
                    disable: Iterable[str] = (), on_error: Callable[[str], None] = lambda message: None,
                    clock: Callable[[], float] = time.time) -> HostSnapshot:
    """This host's snapshot with its [node] resources; CollectorError (one line) for a collector
    name nobody provides or a host name that cannot be published."""
    from glueinfo.host.collect import probe

    snapshot = probe(config, host_root=host_root, enable=enable, disable=disable, on_error=on_error, clock=clock)
    return attach_resources(snapshot, settings.resources)
