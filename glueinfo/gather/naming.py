"""The names an accepted document's snapshot is published under.

A document from an agent or a spool file is accepted for the host its
target stands for (glueinfo.gather.identity: the listed name, the name
beside an address, reverse DNS, a spool file's name).  What the document
says about names after that is not believed further than the identity rule
allows:

- **A host listed by FQDN keeps its FQDN** whatever short Id it reports: a
  worker listed as ``wn33.example.org`` whose Node says ``<Id>wn33</Id>`` is
  published as ``wn33.example.org`` (GlueHostUniqueID, the Node's Id), as it
  is listed.  A full Id reported by a host listed by its short name is kept
  (it names the same host, only more fully).
- **A Node's Name is the listed name**: a ``<Name>`` given by other software
  that does not name the accepted host (its own name, short or full form, or
  a ``[sources] aliases`` alias) is replaced by the host's listed name, so a
  worker cannot make the site's Node XML call it ``wn01.example.org``.  A Name
  that does name it is kept as given.

Nothing here decides whether a document is accepted; that is
glueinfo.gather.identity's rule, applied before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Optional

from glueinfo.core.model import HostSnapshot, replaced
from glueinfo.gather.identity import answers_to, host_key, looks_like_ip, same_host


def as_listed(snapshot: HostSnapshot, listed: Optional[str], aliases: Mapping[str, frozenset[str]]) -> HostSnapshot:
    """``snapshot``, already accepted as the host ``listed`` names (None: a target nothing names,
    pinned to the Id it reports), with its host name and published Name as the module docstring
    says.  Returns ``snapshot`` itself when nothing changes, else a copy; never raises."""
    hostname = snapshot.hostname
    if listed:
        name = listed.strip().rstrip(".")
        if "." in name and not looks_like_ip(host_key(name)) and "." not in hostname.rstrip(".") \
                and same_host(hostname, name):
            hostname = name
    published = snapshot.published
    if published is not None and published.name and not answers_to(published.name, hostname, aliases):
        published = dataclasses.replace(published, name=hostname)
    if hostname == snapshot.hostname and published is snapshot.published:
        return snapshot
    return replaced(snapshot, hostname=hostname, published=published)
