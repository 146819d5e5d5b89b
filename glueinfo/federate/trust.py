"""Which broker identity may publish for which site: the federation view's senders file.

RabbitMQ refuses a message whose ``user_id`` property is not the user that
logged in (the password user, or the name it derives from a client
certificate), so ``user_id`` says who sent a message.  The senders file
binds each site id to the identities that may send for it, one line each::

    # SITE-ID   SENDER (the rest of the line: a user name or a certificate subject)
    EXAMPLE-SITE  example-site
    OTHER-SITE    CN=ce01.other.example.org,O=Grid,C=XX

A site may have several lines (several CEs sending for it); a sender may
send for several sites.  ``#`` starts a comment line; blank lines are
skipped.  The file is read again when its modification time or size
changes, so a new site joins without a restart.

Failure behaviour: a file that cannot be read, or has a line with a site id
but no sender, is a :class:`TrustError` (one line naming the file and line)
at start; when it becomes unreadable or malformed later, the last good
bindings stay and one WARNING says why.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Optional

from glueinfo.core.errors import ConfigurationError
from glueinfo.core.text import one_line

log = logging.getLogger(__name__)


class TrustError(ConfigurationError):
    """The senders file cannot be read or is malformed; one line."""


def parse_senders(text: str, path: str) -> dict[str, frozenset[str]]:
    """``site id -> senders`` from the file's text; TrustError naming ``path:line``."""
    bindings: dict[str, set[str]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) < 2:
            raise TrustError(f"{path}:{number}: {parts[0]!r} has no sender (write: SITE-ID SENDER)")
        bindings.setdefault(parts[0], set()).add(parts[1].strip())
    return {site: frozenset(senders) for site, senders in bindings.items()}


@dataclass
class Senders:
    """The bindings of one senders file, read again when it changes (module docstring)."""

    path: str
    bindings: dict[str, frozenset[str]]
    _seen: Optional[tuple[float, int]] = None

    @classmethod
    def load(cls, path: str) -> Senders:
        """Read ``path`` now; TrustError (one line) when it cannot be read or is malformed."""
        senders = cls(path, {})
        problem = senders.refresh()
        if problem is not None:
            raise TrustError(problem)
        return senders

    def refresh(self) -> Optional[str]:
        """Read the file again if it changed; returns the problem (one line) when it cannot be read,
        keeping the last good bindings."""
        try:
            stat = os.stat(self.path)
            seen = (stat.st_mtime, stat.st_size)
            if seen == self._seen:
                return None
            with open(self.path, encoding="utf-8") as stream:
                text = stream.read(1 << 22)
            self.bindings = parse_senders(text, self.path)
        except TrustError as exc:
            return str(exc)
        except (OSError, UnicodeDecodeError) as exc:
            return f"senders file {self.path}: cannot be read: {one_line(exc)}"
        self._seen = seen
        return None

    def may_send(self, sender: str, site_id: str) -> bool:
        """Whether ``sender`` (a message's user_id) is bound to ``site_id``."""
        return sender in self.bindings.get(site_id, ())
