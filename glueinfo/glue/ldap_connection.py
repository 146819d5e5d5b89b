"""The LDAP server a publish writes to, the bound connection to it, and its errors.

An :class:`LdapTarget` says where and as whom (the URL, the bind DN and password, the bases
kept equal to ours, the timeout, the state file, how many writes may be in flight);
:func:`connect` gives a bound ldap3 connection to it.  A server that cannot be used at all
(unreachable, bind refused, base missing) is a :class:`PublishError` with a one-line message;
one that closes the connection or stops answering in the middle of a search or of the writes
is a :class:`ConnectionLost`, a PublishError too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from glueinfo.core.errors import PublicationError
from glueinfo.core.ldif import dn_key

if TYPE_CHECKING:  # ldap3 is imported when a publish talks to a server, not when this module loads
    from ldap3 import Connection

# Writes in flight on the connection.  slapd answers in about 0.2 ms each; at 64 its
# worker threads stay busy while we encode the next ones (benchmarks/ldap_bulk.py).
DEFAULT_WINDOW = 64


class PublishError(PublicationError):
    """The server cannot be used at all (unreachable, bind refused, base missing); one line."""


class ConnectionLost(PublishError):
    """The server closed the connection or stopped answering in the middle of the writes or of a search."""


@dataclass(frozen=True)
class LdapTarget:
    """Where and as whom a sync or a delta writes, the bases it keeps equal to ours, and how."""

    url: str
    bind_dn: str
    password: str
    base_dn: str
    timeout_s: float = 10.0
    state_file: Optional[str] = None  # None: no state file, every common entry is compared in full
    extra_bases: tuple[str, ...] = ()  # further subtrees kept equal to ours, e.g. GLUE2GroupID=resource,o=glue
    window: int = DEFAULT_WINDOW  # writes sent before their answers are read (1: one at a time)

    @property
    def bases(self) -> tuple[str, ...]:
        """base_dn then the extra bases, each once."""
        seen: dict[str, str] = {}
        for base in (self.base_dn, *self.extra_bases):
            seen.setdefault(dn_key(base), base)
        return tuple(seen.values())


def connect(target: LdapTarget) -> Connection:
    """A bound ldap3 connection, or PublishError with one line."""
    import ldap3
    from ldap3.core.exceptions import LDAPException

    try:
        server = ldap3.Server(target.url, get_info=ldap3.NONE, connect_timeout=target.timeout_s)
        conn = ldap3.Connection(server, target.bind_dn or None, target.password or None, auto_bind=ldap3.AUTO_BIND_NONE,
                                check_names=False, auto_escape=False, raise_exceptions=False,
                                receive_timeout=max(1, math.ceil(target.timeout_s)),  # ldap3 packs it as an int
                                return_empty_attributes=False)
        conn.open()
        if not conn.bind():
            result = conn.result or {}
            raise PublishError(f"{target.url}: bind as {target.bind_dn or 'anonymous'} refused: "
                               f"{result.get('description', 'error')} ({result.get('result')}) {result.get('message', '')}".strip())
    except (LDAPException, OSError) as exc:
        raise PublishError(f"{target.url}: cannot reach the LDAP server: {' '.join(str(exc).split()) or type(exc).__name__}") from None
    except ValueError as exc:  # a malformed URL
        raise PublishError(f"{target.url}: {exc}") from None
    return conn

