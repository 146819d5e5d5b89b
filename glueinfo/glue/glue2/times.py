"""GLUE2EntityCreationTime and Validity: nothing stale by the profile's clock, no LDAP write for nothing.

EGI's profile (glue-validator E002) reports an entry whose CreationTime +
Validity is in the past; an LDAP synchroniser writes every entry whose
values changed.  The rule (docs/glue2-mapping.md, "Validity"):

- every entity carries ``Validity = V`` (``[glue] validity``, 3 hours by
  default);
- its CreationTime is the time it was last *renewed*: renewed when any other
  attribute of the entry changed since the last render, or when the last
  renewal is older than V / 2, else kept.

So an unchanged entry is rewritten at most once per V / 2 (one attribute,
CreationTime), an entry is never older than V / 2 by its own CreationTime
while glueinfo renders at least every V / 2, and a changed entry costs no
extra write (it is written anyway).  The memory of renewals is a
:class:`CreationTimes` the caller keeps between renders (the daemon keeps
one; a one-shot command starts empty and stamps everything ``now``).
"""

from __future__ import annotations

import binascii
import time
from collections.abc import Iterable
from typing import Optional

from glueinfo.core.ldif import Entry, value_text

CREATION_TIME = "GLUE2EntityCreationTime"
VALIDITY = "GLUE2EntityValidity"


def iso_time(when: float) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` (UTC), the form the profile parses."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def _digest(entry: Entry) -> int:
    text = "\n".join(f"{name.lower()}:{value_text(v)}" for name, values in sorted(entry.attributes.items())
                     if name != CREATION_TIME for v in values)
    return binascii.crc32(text.encode("utf-8"))


class CreationTimes:
    """DN (lower case) -> (digest of the entry's other values, when it was last renewed).
    Only the DNs of the last stamp are kept."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[int, float]] = {}

    def stamp(self, entries: Iterable[Entry], now: float, validity_s: int) -> list[Entry]:
        """The entries with CreationTime and Validity set by the rule above (entries that carry
        no GLUE2Entity class, e.g. the GLUE2Group, are left as they are)."""
        known: dict[str, tuple[int, float]] = {}
        result = []
        for entry in entries:
            if "GLUE2Entity" not in entry.object_classes:
                result.append(entry)
                continue
            entry.set(VALIDITY, [str(validity_s)])
            key = entry.dn.lower()
            digest = _digest(entry)
            last: Optional[tuple[int, float]] = self._known.get(key)
            renewed = now if last is None or last[0] != digest or now - last[1] >= validity_s / 2 or last[1] > now else last[1]
            known[key] = (digest, renewed)
            entry.set(CREATION_TIME, [iso_time(renewed)])
            result.append(entry)
        self._known = known
        return result

    def to_json(self) -> dict[str, list[float]]:
        """The memory as JSON (a one-shot publisher keeps it beside its LDAP state between runs)."""
        return {dn: [digest, renewed] for dn, (digest, renewed) in self._known.items()}

    @classmethod
    def from_json(cls, data: object) -> CreationTimes:
        """The memory of :meth:`to_json`; anything malformed is skipped (those entries are renewed)."""
        times = cls()
        if isinstance(data, dict):
            for dn, value in data.items():
                if isinstance(dn, str) and isinstance(value, list) and len(value) == 2 \
                        and all(isinstance(v, (int, float)) for v in value):
                    times._known[dn] = (int(value[0]), float(value[1]))
        return times
