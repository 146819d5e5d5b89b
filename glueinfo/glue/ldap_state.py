"""The state file of a sync: what the server held of each entry when glueinfo last wrote or
confirmed it, so that a no-change publish need not read 40,000 entries in full.

For each entry (its DN key) the file remembers the entryCSN the server gave it then and
:func:`entry_digest` of the entry glueinfo published; an entry whose entryCSN and digest
both still match is as glueinfo left it (slapd changes an entry's entryCSN on every write,
whoever makes it).  The file is only a cache: missing, unreadable, of another version or for
another server or other bases, :func:`load_state` gives an empty state (everything is then
read in full); :func:`save_state` rewrites it atomically, and a failure to is a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from glueinfo.core.ldif import Entry, dn_key

log = logging.getLogger(__name__)

STATE_VERSION = 3  # 3: several bases, the newest entryCSN per base


def entry_digest(entry: Entry) -> str:
    """What we published, as a short digest of its DN and attributes (in glueinfo's stable order).
    marshal is three times faster than repr here; a value it cannot take falls back to repr."""
    try:
        data = marshal.dumps((entry.dn, entry.attributes), 2)  # version 2: no back-references, so no refcount dependence
    except ValueError:
        data = f"{entry.dn}\n{entry.attributes!r}".encode()
    return hashlib.blake2b(data, digest_size=10).hexdigest()


def default_state_file(url: str, base_dn: str) -> str:
    """$XDG_CACHE_HOME/glueinfo (or ~/.cache/glueinfo) / publish-<hash of url and base>.json"""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha1(f"{url}\n{dn_key(base_dn)}".encode()).hexdigest()[:12]
    return os.path.join(cache, "glueinfo", f"publish-{digest}.json")


@dataclass
class PublishState:
    """What the state file remembers: dn key -> [entryCSN, digest], and per base (its
    key) the newest entryCSN seen below it (read only by the glueinfo versions that listed DNs
    and entryCSNs in two searches; still written, so that going back to one finds the file good)."""

    entries: dict[str, list[str]] = field(default_factory=dict)
    max_csn: dict[str, str] = field(default_factory=dict)


def _bases_key(bases: Sequence[str]) -> list[str]:
    return sorted(dn_key(b) for b in bases)


def load_state(path: Optional[str], url: str, bases: Sequence[str]) -> PublishState:
    """The state file's content; empty when absent, unreadable or for another server/bases."""
    if not path:
        return PublishState()
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("version") != STATE_VERSION or data.get("url") != url or data.get("bases") != _bases_key(bases):
            return PublishState()
        entries, max_csn = data.get("entries"), data.get("max_csn")
        if not isinstance(entries, dict) or not isinstance(max_csn, dict):
            return PublishState()
        return PublishState(entries=entries, max_csn={str(k): str(v) for k, v in max_csn.items()})
    except FileNotFoundError:
        return PublishState()
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("publish state file %s unreadable (%s): comparing every entry in full", path, exc)
        return PublishState()


def save_state(path: Optional[str], url: str, bases: Sequence[str], state: PublishState) -> None:
    """Write the state file atomically (temporary file + rename); a failure is a warning, not an error."""
    if not path:
        return
    try:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".publish-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"version": STATE_VERSION, "url": url, "bases": _bases_key(bases), "max_csn": state.max_csn,
                           "entries": state.entries}, handle, separators=(",", ":"))
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        log.warning("cannot write publish state file %s: %s (the next run compares every entry in full)", path, exc)
