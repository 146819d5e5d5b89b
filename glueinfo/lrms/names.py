"""Which site host an LRMS node name is: the one documented rule every plugin uses.

Batch systems name nodes their own way, often by short name (``wn017``)
where glueinfo knows hosts by FQDN (``wn017.example.org``).  A node name is
the host whose FQDN equals it (case-insensitive, no trailing dot), else the
host whose first label equals it when exactly one host of the site has that
short name; otherwise it stays the LRMS's name (a node glueinfo does not
know).  This is matching, not identity: it never lets a document speak for
a host (glueinfo.gather.identity is that rule).
"""

from __future__ import annotations

from collections.abc import Iterable


def host_matcher(hostnames: Iterable[str]) -> dict[str, str]:
    """A lookup from node names (lower-case FQDNs and unique short names) to the site's host names."""
    by_key: dict[str, str] = {}
    by_label: dict[str, list[str]] = {}
    for name in hostnames:
        key = name.strip().rstrip(".").lower()
        by_key[key] = name
        by_label.setdefault(key.split(".", 1)[0], []).append(name)
    lookup = {label: names[0] for label, names in by_label.items() if len(names) == 1}
    lookup.update(by_key)  # a full name always wins over a short one
    return lookup


def site_host(node: str, lookup: dict[str, str]) -> str:
    """The site host a node name denotes, or the node name itself when none (see the module docstring)."""
    return lookup.get(node.strip().rstrip(".").lower(), node)
