"""Host identity: when two names denote the same host (the one rule every source and the site use).

Host names are compared case-insensitively without a trailing dot; a short
name (``wn001``, as Ganglia often reports) is the same host as the one FQDN
whose first label it is (``wn001.example.org``), when exactly one is known.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


def host_key(name: str) -> str:
    """How host names are compared: case-insensitive, no trailing dot."""
    return name.strip().rstrip(".").lower()


def same_host(reported: str, expected: str) -> bool:
    """Does a reported name denote the expected host?  Equal, or equal in the
    first label when one of the two is a short name (``wn01`` vs ``wn01.example.org``)."""
    a, b = host_key(reported), host_key(expected)
    if a == b:
        return True
    if "." in a and "." in b:
        return False
    return a.split(".", 1)[0] == b.split(".", 1)[0]


def fold_short_names(keys: Iterable[str]) -> dict[str, str]:
    """Map every key to its canonical key: a short name to the single FQDN it abbreviates."""
    keys = set(keys)
    by_label: dict[str, list[str]] = {}
    for key in keys:
        if "." in key and not looks_like_ip(key):
            by_label.setdefault(key.split(".", 1)[0], []).append(key)
    canonical = {}
    for key in keys:
        fqdns = by_label.get(key, []) if "." not in key else []
        canonical[key] = fqdns[0] if len(fqdns) == 1 else key
    return canonical


def looks_like_ip(key: str) -> bool:
    return bool(re.match(r"^[0-9.]+$", key)) or ":" in key
