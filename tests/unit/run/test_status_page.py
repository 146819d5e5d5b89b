"""The status page renderer and the CE history behind its charts, from hand-made Status values."""

from __future__ import annotations

import json
from xml.etree import ElementTree

from glueinfo.core.model import QueueState
from glueinfo.run.history import FILE_NAME, History
from glueinfo.run.stats import CeStatus, HealthRow, HostRow, Status, SubClusterRow
from glueinfo.run.status_page import chart, render

NOW = 1_700_000_000.0
EVIL = '<img src=x onerror=alert(1)> & "q"'


def status(**kwargs) -> Status:
    values = dict(generated_at=NOW, version="1.0", role="site", site_name=EVIL, hostname="head.example.org",
                  host_state="Idle", states={"Idle": 3, "Unknown": 1}, hosts_total=4, hosts_stale=1, hosts_dropped=0)
    values.update(kwargs)
    return Status(**values)


def test_every_outside_text_is_escaped_and_nothing_is_fetched():
    page = render(status(
        ces=(CeStatus(unique_id=EVIL, name="ce", cluster="c", lrms="slurm", queue=EVIL, free_cpus=5, total_cpus=8,
                      error=EVIL),),
        subclusters=(SubClusterRow("sc1", EVIL, "c", (EVIL,), (("CPU", EVIL),)),),
        notable_hosts=(HostRow("wn1.example.org", "Unknown", True, NOW - 3600, (EVIL,)),),
        sources=(HealthRow(EVIL, False, 0.5, 3, 1, EVIL),))).decode()
    assert "<img" not in page and page.count("&lt;img src=x onerror=alert(1)&gt; &amp; &quot;q&quot;") >= 7
    assert "src=" not in page.replace("&lt;img src=x", "") and "<script" not in page and "<link" not in page
    assert '<meta http-equiv="refresh" content="30">' in page
    assert "5 / 8" in page and "1 h ago" in page.replace("60 min ago", "1 h ago")


def test_unknown_figures_are_shown_as_unknown_never_zero():
    page = render(status(ces=(CeStatus("ce1", "", "c", "fork", "default"),))).decode()
    assert "unknown / unknown" in page and "0 / 0" not in page


def test_agent_page_shows_its_one_host_only():
    page = render(status(role="agent", local_host=(("CPUs", "16"),), ces=(CeStatus("ce1", "", "c", "fork", "q"),),
                         subclusters=(SubClusterRow("sc1", "sc1", "c", ("h",), ()),))).decode()
    assert "head.example.org (worker agent)" in page and "<th>CPUs</th><td>16</td>" in page
    assert "SubClusters" not in page and "CE ce1" not in page


def test_chart_is_svg_with_gaps_where_unknown():
    svg = chart([(NOW - 7200, 4, 1, None), (NOW - 3600, None, 2, None), (NOW, 6, 3, None)], NOW)
    root = ElementTree.fromstring(svg)
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    dots = root.findall("{http://www.w3.org/2000/svg}circle")
    assert len(lines) == 1 and len(dots) == 2  # running: one line; free CPUs broken by the unknown in two dots
    assert ">6<" in svg  # the scale's top is the largest figure


def test_history_keeps_a_day_one_point_per_step_and_survives_a_restart(tmp_path):
    start = 1_700_000_040.0  # a whole minute
    now = [start]
    history = History(str(tmp_path), lambda: now[0], step_s=60)
    for second in range(0, 180, 10):
        now[0] = start + second
        history.record(now[0], {"ce1": QueueState(free_cpus=second, running_jobs=1, waiting_jobs=None)})
    points = history.series()["ce1"]
    assert [p[1] for p in points] == [50, 110, 170]  # the latest sample of each minute
    assert all(p[3] is None for p in points)
    history.save()
    again = History(str(tmp_path), lambda: now[0], step_s=60)
    assert again.load() == 1 and again.series() == history.series()
    now[0] = start + 2 * 86400
    assert again.series() == {"ce1": []}  # older than a day: gone


def test_history_is_bounded_and_a_bad_file_is_a_warning(tmp_path, caplog):
    history = History(str(tmp_path), lambda: NOW, max_series=2)
    history.record(NOW, {f"ce{i}": QueueState(free_cpus=i) for i in range(5)})
    assert sorted(history.series()) == ["ce0", "ce1"]
    (tmp_path / FILE_NAME).write_text("{not json")
    assert History(str(tmp_path), lambda: NOW).load() == 0
    assert "status history not read" in caplog.text
    (tmp_path / FILE_NAME).write_text(json.dumps({"format": 1, "series": {"ce": [[NOW, -3, "x", 2]]}}))
    loaded = History(str(tmp_path), lambda: NOW)
    assert loaded.load() == 1 and loaded.series() == {"ce": [(NOW, None, None, 2)]}


def test_a_broker_away_shows_the_documents_waiting_in_the_outbox_and_the_last_confirm():
    from glueinfo.publish.outbox import OutboxState

    confirmed_at = NOW - 300
    page = render(status(outboxes=(
        OutboxState("amqp", 2, confirmed_at, 17, False, "amqps://broker:5671: ConnectionRefusedError"),))).decode()
    assert "Outbox of the amqp output" in page
    assert "not confirming" in page
    assert '<th>documents waiting</th><td class="bad">2</td>' in page
    assert "2023-11-14 22:08:20 UTC (5 min ago)" in page  # 300 s before the page's time, 22:13:20
    assert "ConnectionRefusedError" in page
