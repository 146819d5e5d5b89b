"""The GLUE 2 endpoint health check: a real TCP connect, and the CE daemon's process when local.

Called by the assembly/publish step (never by the renderer): its results are
handed to glue2_entries as ``health`` (endpoint URL -> EndpointHealth).  A
check never raises: what could not be checked is said in ``info``.

- ``ok``: the port accepted a TCP connection within the timeout and, when
  the CE runs on this host and its daemon's process name is known, such a
  process runs;
- ``critical``: the connection was refused or timed out, or the daemon is
  not running on this host;
- ``unknown``: the URL names no host and port to connect to.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from typing import Optional
from urllib.parse import urlsplit

from glueinfo.core.records import dataclass

DEFAULT_PORTS = {"https": 443, "http": 80, "condor": 9619, "gram": 2119, "gsiftp": 2811, "ldap": 2170}


@dataclass(frozen=True)
class EndpointHealth:
    """GLUE2EndpointHealthState and HealthStateInfo of one endpoint."""

    state: str  # ok, warning, critical, unknown
    info: str


@dataclass(frozen=True)
class HealthTarget:
    """One endpoint to check: its URL, whether its CE host is this host, its daemon's process name."""

    url: str
    local: bool = False
    process: str = ""
    timeout_s: float = 3.0


def host_port(url: str) -> Optional[tuple[str, int]]:
    """(host, port) an endpoint URL names (the scheme's usual port when none is written), or None."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return None
    if not parts.hostname or not port:
        return None
    return parts.hostname, port


def tcp_connect(host: str, port: int, timeout_s: float) -> Optional[str]:
    """None when ``host:port`` accepts a TCP connection within ``timeout_s``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except OSError as exc:
        return exc.strerror or str(exc)
    except (UnicodeError, ValueError) as exc:  # a host name no resolver can take (a label over 63 characters)
        return f"not a host name to connect to: {exc}"


def running_processes() -> set[str]:
    """Names (comm) of the processes of this host, read through glueinfo.host.linux."""
    from glueinfo.host.linux import LinuxHost

    host = LinuxHost("/")
    names = set()
    for pid in host.listdir("proc"):
        if pid.isdigit():
            comm = host.read(f"proc/{pid}/comm")
            if comm:
                names.add(comm.strip())
    return names


def check_endpoint(target: HealthTarget, processes: Callable[[], set[str]] = running_processes,
                   connect: Callable[[str, int, float], Optional[str]] = tcp_connect) -> EndpointHealth:
    """The health of one endpoint (see the module docstring); never raises."""
    where = host_port(target.url)
    if where is None:
        return EndpointHealth("unknown", f"not checked: {target.url!r} names no host and port")
    host, port = where
    failure = connect(host, port, target.timeout_s)
    said = [f"TCP connect to {host}:{port}: " + ("accepted" if failure is None else failure)]
    state = "ok" if failure is None else "critical"
    if target.local and target.process:
        try:
            running = target.process in processes()
        except OSError as exc:  # /proc unreadable: say so, do not guess
            said.append(f"process {target.process}: not checked ({exc})")
        else:
            said.append(f"process {target.process}: " + ("running" if running else "not running"))
            if not running:
                state = "critical"
    return EndpointHealth(state, "; ".join(said))


def check_endpoints(targets: Iterable[HealthTarget],
                    processes: Callable[[], set[str]] = running_processes) -> dict[str, EndpointHealth]:
    """Every target checked once (URL -> health); the process list is read once for all."""
    cache: dict[str, set[str]] = {}

    def listed() -> set[str]:
        if "names" not in cache:
            cache["names"] = processes()
        return cache["names"]

    results = {}
    for target in targets:
        if target.url not in results:
            results[target.url] = check_endpoint(target, listed)
    return results
