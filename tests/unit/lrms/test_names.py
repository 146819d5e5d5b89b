"""LRMS node names to site hosts: FQDN, or a short name unique in the site."""

from glueinfo.lrms.names import host_matcher, site_host


def test_full_names_and_unique_short_names_match_site_hosts():
    lookup = host_matcher(["wn01.example.org", "wn02.a.example.org", "wn02.b.example.org", "gpu1"])
    assert site_host("WN01.example.org.", lookup) == "wn01.example.org"
    assert site_host("wn01", lookup) == "wn01.example.org"
    assert site_host("wn02", lookup) == "wn02"  # two hosts have that short name: no guess
    assert site_host("wn02.b.example.org", lookup) == "wn02.b.example.org"
    assert site_host("gpu1", lookup) == "gpu1" and site_host("unknown7", lookup) == "unknown7"
