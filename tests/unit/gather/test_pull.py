"""glueinfo.gather.pull.pull_and_pin: the one round both pulling sources (agents, node_exporter)
run: list, pull, read each answer, report failures under the host expected, pin what nothing
names.  Pulls are canned here (no network); what the report and the pins say is written by hand."""

from __future__ import annotations

import pytest

from glueinfo.core.config import parse_text
from glueinfo.core.model import HostSnapshot
from glueinfo.gather import pull
from glueinfo.gather.pull import Answer, PullOutcome, Refused, pull_and_pin
from glueinfo.gather.registry import SourceContext
from glueinfo.gather.sources import agents, node_exporter

NOW = 1_800_000_000.0


def context(agents_line: str, memory: dict) -> SourceContext:
    config = parse_text(f"[sources]\nagents = {agents_line}\n[node]\nstale_after = 300\n", "test.conf")
    return SourceContext(config=config, clock=lambda: NOW, deadline=NOW + 30, memory=memory)


@pytest.fixture
def canned(monkeypatch):
    """Answers by target (host:port): bytes, or an error string."""
    answers: dict[str, object] = {}

    def pull_all(targets, settings, budget_s, clock):
        outcomes = []
        for target in targets:
            answer = answers[str(target)]
            if isinstance(answer, str):
                outcomes.append(PullOutcome(target, error=answer, attempts=1))
            else:
                outcomes.append(PullOutcome(target, body=answer, attempts=1, received_at=NOW - 1))
        return outcomes

    monkeypatch.setattr(pull, "pull_all", pull_all)
    return answers


def by_body(answer: Answer):
    """A reader whose page is the host name it reports ("bad" is refused)."""
    reported = answer.body.decode()
    if reported == "bad":
        return Refused("not a page")
    if answer.expected is not None and reported != answer.expected:
        return Refused(f"claims to be {reported!r}", reported)
    return HostSnapshot(hostname=reported, collected_at=answer.received_at)


def test_an_unnamed_address_is_pinned_to_the_first_host_it_reports_and_held_to_it(canned):
    memory: dict = {"rdns": {"10.0.0.5": (None, NOW)}}  # reverse DNS says nothing
    canned["10.0.0.5:7170"] = b"wn05.example.org"
    report = pull_and_pin(context("10.0.0.5", memory), pull.AGENT_KEYS, by_body)
    assert [s.hostname for s in report.snapshots] == ["wn05.example.org"] and report.failures == []
    assert memory["pins"] == {"10.0.0.5:7170": ("wn05.example.org", NOW - 1)}

    canned["10.0.0.5:7170"] = b"wn99.example.org"  # the next gather: the address now claims another host
    report = pull_and_pin(context("10.0.0.5", memory), pull.AGENT_KEYS, by_body)
    assert report.snapshots == []
    [failure] = report.failures
    assert (failure.target, failure.host, failure.error) == ("10.0.0.5:7170", "wn99.example.org",
                                                             "claims to be 'wn99.example.org'")


def test_failures_are_reported_under_the_host_the_target_stands_for(canned):
    canned["wn01.example.org:7170"] = "Connection refused"
    canned["wn02.example.org:7170"] = b"bad"
    canned["wn03.example.org:7170"] = b"wn03.example.org"
    report = pull_and_pin(context("wn[01-03].example.org", {}), pull.AGENT_KEYS, by_body)
    assert [(f.target, f.host, f.error) for f in report.failures] == [
        ("wn01.example.org:7170", "wn01.example.org", "Connection refused"),
        ("wn02.example.org:7170", "wn02.example.org", "not a page"),
    ]
    assert [s.hostname for s in report.snapshots] == ["wn03.example.org"]


def test_a_bad_target_list_is_the_one_failure(tmp_path):
    # The config's own list is refused when the file is read (tests/unit/cli/test_config_errors.py);
    # a host file is read at every round, and a bad line there fails the round alone.
    listed = tmp_path / "agents.list"
    listed.write_text("wn01\nwn[01-\n")
    ctx = context("wn01", {})
    ctx.config = ctx.config.with_values("sources", agents_file=str(listed))
    report = pull_and_pin(ctx, pull.AGENT_KEYS, by_body)
    assert report.snapshots == [] and len(report.failures) == 1
    assert report.failures[0].target == "[sources] agents"
    assert report.failures[0].error.startswith(f"{listed}:2: ")


@pytest.mark.parametrize("source", [agents, node_exporter])
def test_both_pulling_sources_run_the_one_round(source, monkeypatch):
    seen = []
    monkeypatch.setattr(source, "pull_and_pin", lambda ctx, keys, read, path=None: seen.append(keys) or "report")
    assert source.gather(context("wn01", {})) == "report"
    assert seen == [pull.AGENT_KEYS if source is agents else node_exporter.TARGET_KEYS]


def test_a_page_that_is_not_the_exposition_format_is_a_glueinfo_error():
    from glueinfo.core.errors import GlueinfoError

    with pytest.raises(GlueinfoError) as caught:
        node_exporter.parse_page(b"\xff\xfe")
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == "not UTF-8 text (byte 0)"
