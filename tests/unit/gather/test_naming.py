"""The names an accepted snapshot is published under (issue 26, finding 7): a host listed by FQDN
keeps it whatever short Id it reports, and a published Name naming another host becomes the
listed name.  Expected names are written out."""

from __future__ import annotations

import pytest

from glueinfo.core.model import HostSnapshot, PublishedNode, PublishedPart
from glueinfo.gather.identity import parse_aliases
from glueinfo.gather.naming import as_listed

NO_ALIASES = parse_aliases([])


def node(node_id: str, name: str | None = None) -> HostSnapshot:
    published = None if name is None else PublishedNode(name=name, state="Idle",
                                                        parts=[PublishedPart("Id"), PublishedPart("Name")])
    return HostSnapshot(hostname=node_id, collected_at=1.0, source="agents", published=published)


@pytest.mark.parametrize("listed, reported, published_as", [
    ("wn33.example.org", "wn33", "wn33.example.org"),  # listed by FQDN: keeps it
    ("wn33.example.org.", "wn33", "wn33.example.org"),  # a trailing dot is no part of the name
    ("WN33.example.org", "wn33", "WN33.example.org"),  # as the admin wrote it
    ("wn33", "wn33.example.org", "wn33.example.org"),  # listed short: the full Id names it more fully
    ("wn33.example.org", "WN33.EXAMPLE.ORG", "WN33.EXAMPLE.ORG"),  # the same name: as reported
    (None, "wn33", "wn33"),  # an address nothing names: pinned to what it reports
])
def test_a_host_listed_by_fqdn_keeps_its_fqdn(listed, reported, published_as):
    assert as_listed(node(reported), listed, NO_ALIASES).hostname == published_as


def test_an_alias_the_host_reports_is_left_as_reported():
    aliases = parse_aliases(["wn17.example.org=wn17-ib.example.org"])
    assert as_listed(node("wn17-ib.example.org"), "wn17.example.org", aliases).hostname == "wn17-ib.example.org"


@pytest.mark.parametrize("listed, reported, name, shown", [
    ("wn29.example.org", "wn29", "wn01.example.org", "wn29.example.org"),  # another host's name: the listed one
    (None, "wn29", "wn01.example.org", "wn29"),  # pinned: the Id it is pinned to
    ("wn29.example.org", "wn29", "wn01", "wn29.example.org"),
    ("wn29.example.org", "wn29", "wn29", "wn29"),  # its own short name: kept as given
    ("wn29.example.org", "wn29.example.org", "WN29.example.org", "WN29.example.org"),
])
def test_a_published_name_is_the_listed_name_unless_it_names_the_host(listed, reported, name, shown):
    assert as_listed(node(reported, name), listed, NO_ALIASES).published.name == shown


def test_a_published_alias_name_is_kept():
    aliases = parse_aliases(["wn17.example.org=wn17-ib.example.org"])
    published = as_listed(node("wn17.example.org", "wn17-ib.example.org"), "wn17.example.org", aliases).published
    assert published.name == "wn17-ib.example.org"


def test_nothing_to_change_gives_the_snapshot_itself_and_a_change_never_touches_the_callers():
    own = node("wn29.example.org", "wn29")
    assert as_listed(own, "wn29.example.org", NO_ALIASES) is own
    lying = node("wn29", "wn01.example.org")
    renamed = as_listed(lying, "wn29.example.org", NO_ALIASES)
    assert (renamed.hostname, renamed.published.name) == ("wn29.example.org", "wn29.example.org")
    assert (lying.hostname, lying.published.name) == ("wn29", "wn01.example.org")
    assert renamed.published.parts == lying.published.parts
