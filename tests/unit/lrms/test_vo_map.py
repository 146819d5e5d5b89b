"""Jobs to VOs ([vos]): proxy VO first, then the rules in order; unmapped jobs are local."""

from __future__ import annotations

import pytest

from glueinfo.core.config import Config, ConfigError, load
from glueinfo.core.job import JobInfo
from glueinfo.lrms.vo_map import VoMap, VoMapError, count_by_vo
from glueinfo.site.from_config import site_from_config

RULES = ["group:atlas*=atlas", "user:cms???=cms", "account:dteam=dteam", "user:*=ops"]


def job(status: str, user: str = "nobody", group: str = "users", account: str = "", proxy_vo: str = "") -> JobInfo:
    return JobInfo(local_id=f"{user}-{status}", local_owner=user, local_group=group, account=account or None,
                   proxy_vo=proxy_vo or None, glue_status=status)


@pytest.mark.parametrize("owner, vo", [
    ({"user": "atl001", "group": "atlasprd"}, "atlas"),
    ({"user": "cms042", "group": "users"}, "cms"),
    ({"user": "cms0420", "group": "users"}, "ops"),  # ??? is exactly three characters; the catch-all takes it
    ({"user": "alice", "account": "dteam"}, "dteam"),
    ({"user": "atl001", "group": "atlasprd", "proxy_vo": "lhcb"}, "lhcb"),  # the proxy's VO comes first
])
def test_first_matching_rule_wins_after_the_proxy_vo(owner, vo):
    assert VoMap.from_values(RULES).vo_of(**owner) == vo


def test_without_rules_every_job_is_local_and_proxy_vo_can_be_ignored():
    assert VoMap().vo_of(user="atl001", group="atlas") is None
    assert VoMap.from_values(["group:atlas=atlas"], proxy_vo=False).vo_of(group="users", proxy_vo="lhcb") is None


def test_counts_per_vo_leave_local_and_finished_jobs_out():
    jobs = [job("RUNNING", "atl001", "atlas"), job("WAITING", "atl002", "atlas"), job("SCHEDULED", "atl003", "atlas"),
            job("DONE", "atl004", "atlas"), job("RUNNING", "alice", "users"), job("RUNNING", "bob", "users", "dteam")]
    VoMap.from_values(["group:atlas=atlas", "account:dteam=dteam"]).assign(jobs)
    counts = count_by_vo(jobs)
    assert list(counts) == ["atlas", "dteam"]
    assert (counts["atlas"].running, counts["atlas"].waiting, counts["atlas"].total) == (1, 2, 3)
    assert (counts["dteam"].running, counts["dteam"].waiting, counts["dteam"].total) == (1, 0, 1)


@pytest.mark.parametrize("rule", ["atlas=atlas", "host:atlas=atlas", "group:=atlas", "group:atlas="])
def test_a_bad_rule_is_named(rule):
    with pytest.raises(VoMapError, match=f"{rule!r} is not KIND:PATTERN=VO"):
        VoMap.from_values([rule])


def test_the_config_error_names_file_and_line(tmp_path):
    path = tmp_path / "glueinfo.conf"
    path.write_text("[vos]\n\nmap = group:atlas=atlas, atlas\n")
    config = load(str(path))
    with pytest.raises(ConfigError, match=r"glueinfo.conf:3: \[vos\] map: 'atlas' is not KIND:PATTERN=VO"):
        site_from_config(config, "ce.example.org")
    assert site_from_config(Config(), "ce.example.org").vo_map == VoMap()


TOKEN_RULES = ["issuer:https://atlas-auth.web.cern.ch/=atlas", "token_group:/cms=cms", "token_group:/dune/*=dune",
               "group:*=local-by-group"]


@pytest.mark.parametrize("token, vo", [
    # AuthTokenIssuer as HTCondor-CE sets it, with or without the trailing slash the rule was written with
    ({"token_issuer": "https://atlas-auth.web.cern.ch/"}, "atlas"),
    ({"token_issuer": "https://atlas-auth.web.cern.ch"}, "atlas"),
    ({"token_issuer": "https://cms-auth.web.cern.ch/", "token_groups": ("/cms", "/cms/pilot")}, "cms"),
    ({"token_issuer": "https://cilogon.org/dune", "token_groups": ("/dune/production",)}, "dune"),
    ({"token_issuer": "https://evil.example.org/atlas-auth.web.cern.ch/", "group": "users"}, "local-by-group"),
    ({"token_issuer": "https://atlas-auth.web.cern.ch/", "proxy_vo": "lhcb"}, "lhcb"),  # the proxy VO still first
])
def test_token_issuer_and_groups_map_to_vos(token, vo):
    assert VoMap.from_values(TOKEN_RULES).vo_of(**token) == vo


def test_token_rules_apply_to_jobs_as_the_plugins_report_them():
    jobs = [JobInfo(local_id="1", local_owner="pilot01", token_issuer="https://atlas-auth.web.cern.ch/", glue_status="RUNNING"),
            JobInfo(local_id="2", local_owner="pilot02", token_groups=("/cms", "/cms/pilot"), glue_status="WAITING"),
            JobInfo(local_id="3", local_owner="pilot03", glue_status="RUNNING")]
    VoMap.from_values(TOKEN_RULES[:2]).assign(jobs)
    assert [j.vo for j in jobs] == ["atlas", "cms", None]


def test_the_counts_only_and_cached_paths_read_the_token_too():
    """glueinfo.lrms.commands: the counts-only tuples may carry the token (issuer, groups) after the
    GLUE status, and assign_vos (the map once per distinct owners) tells two tokens of one owner apart."""
    from glueinfo.lrms.commands import assign_vos, vo_counts

    vo_map = VoMap.from_values(TOKEN_RULES[:2])
    counts = vo_counts(vo_map, [
        ("pilot", None, None, None, "RUNNING", "https://atlas-auth.web.cern.ch/", ()),
        ("pilot", None, None, None, "RUNNING", "https://atlas-auth.web.cern.ch/", ()),
        ("pilot", None, None, None, "SCHEDULED", None, ("/cms", "/cms/pilot")),
        ("pilot", None, None, None, "RUNNING")])  # no token: local
    assert {vo: (c.running, c.waiting, c.total) for vo, c in counts.items()} == {"atlas": (2, 0, 2), "cms": (0, 1, 1)}
    jobs = [JobInfo(local_id="1", local_owner="pilot", token_issuer="https://atlas-auth.web.cern.ch/"),
            JobInfo(local_id="2", local_owner="pilot", token_groups=("/cms",)),
            JobInfo(local_id="3", local_owner="pilot")]
    assign_vos(vo_map, jobs)
    assert [j.vo for j in jobs] == ["atlas", "cms", None]
