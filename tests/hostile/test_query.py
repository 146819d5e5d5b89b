"""Hostile SSSRMAP queries (issue 12, cases 1, 5 and the end of 9) against a real
`glueinfo serve` on loopback serving the 50-host fixture: a pattern that
backtracks for minutes under Python's re, syntax RE2 cannot run, numbers and
units and names a number field cannot compare with, absurd attribute values,
and a query longer than the server's budget.  Only HTTP is used: every test
means the same against any version of the code.
"""

from __future__ import annotations

import http.client
import threading
import time
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from glueinfo_processes import Served, start_glueinfo, stop_glueinfo
from lxml import etree
from paths import REPO

FIXTURE = REPO / "tests" / "fixtures" / "nodes" / "site50.json"


def start(tmp: Path, name: str, extra: str = "") -> Served:
    config = tmp / f"{name}.conf"
    config.write_text(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n{extra}\n"
                      f"[node]\nsite_snapshots = {FIXTURE}\n"
                      f"[run]\nstate_dir = {tmp / name}-state\n")
    return start_glueinfo(config, tmp / f"{name}.log")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    served = start(tmp_path_factory.mktemp("query"), "query")
    yield served
    stop_glueinfo(served)


def post(served: Served, inner: str, attributes: str = 'action="Query" actor="hostile"', timeout: float = 30.0) -> etree._Element:
    """One SSSRMAP Query; the Response element of its (single) answer."""
    body = f'<Envelope><Body><Request {attributes}><Object>Node</Object>{inner}</Request></Body></Envelope>'.encode()
    connection = http.client.HTTPConnection(served.host, served.port, timeout=timeout)
    try:
        connection.request("POST", "/SSSRMAP3", body, {"Content-Type": 'text/xml; charset="utf-8"'})
        answer = connection.getresponse().read()
    finally:
        connection.close()
    return etree.fromstring(answer).find("Body/Response")


def failure(response: etree._Element) -> tuple[str, str]:
    """(code, message) of a Failure; the test fails on a Success (the wrong answers issue 12 found)."""
    assert response.findtext("Status/Value") == "Failure", etree.tostring(response)[:400]
    return response.findtext("Status/Code"), response.findtext("Status/Message")


def get_health(served: Served, timeout: float) -> int:
    connection = http.client.HTTPConnection(served.host, served.port, timeout=timeout)
    try:
        connection.request("GET", "/health")
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_case1_a_catastrophic_pattern_is_answered_and_the_server_stays_alive(tmp_path):
    # Its own server: on a backtracking matcher this query freezes the whole process for minutes.
    served = start(tmp_path, "catastrophic")
    try:
        answers: list[etree._Element] = []
        query = threading.Thread(target=lambda: answers.append(
            post(served, '<Get name="Id"/><Where name="Extension" op="Match">(.|.)*Z</Where>', timeout=10)), daemon=True)
        query.start()
        time.sleep(0.3)  # the query is in the server now
        # A liveness bound, not a speed target: 5 s is orders of magnitude more than /health needs; a frozen
        # process (the GIL held by a backtracking match) never answers within it.
        assert get_health(served, timeout=5) == 200
        query.join(10)
        assert answers, "the Match query got no answer within 10 s"
        assert answers[0].findtext("Status/Code") == "000"
    finally:
        stop_glueinfo(served, timeout=5)


@pytest.mark.parametrize("pattern, reason", [
    (r"(wn)\1", "backreferences"),
    (r"wn(?=0)", "invalid perl operator: (?="),
    (r"(?<!x)wn", "invalid perl operator: (?<"),
])
def test_case1_syntax_re2_cannot_run_is_a_failure_naming_the_pattern(server, pattern, reason):
    code, message = failure(post(server, f'<Get name="Id"/><Where name="Id" op="Match">{escape(pattern)}</Where>'))
    assert code == "316" and repr(pattern) in message and reason in message


@pytest.mark.parametrize("where, value", [
    ('<Where name="Configured/Memory" op="GE">64XB</Where>', "64XB"),
    ('<Where name="Configured/Memory" op="GE">1e400</Where>', "1e400"),
    ('<Where name="Configured/Memory" op="GE">0x10</Where>', "0x10"),
    ('<Where name="Configured/Memory" op="LT">nan</Where>', "nan"),
    ('<Where name="Configured/Memory" op="GE" units="XB">64</Where>', "XB"),
    ('<Where name="Configured/Memroy" op="GE">64GB</Where>', "Configured/Memroy"),
    ('<Where name="NoSuchField">x</Where>', "NoSuchField"),
])
def test_case5_a_value_or_name_a_number_field_cannot_compare_is_a_failure_naming_it(server, where, value):
    code, message = failure(post(server, '<Get name="Id"/>' + where))
    assert code.startswith("3") and repr(value) in message


def test_case9_chunk_size_message_says_what_was_wrong(server):
    code, message = failure(post(server, '<Get name="Id"/>', 'action="Query" actor="hostile" chunking="True" chunkSize="1e9"'))
    assert code == "317" and "chunkSize='1e9'" in message and "from 1 to 1000000000" in message


def test_case9_group_message_says_what_was_wrong(server):
    code, message = failure(post(server, '<Get name="Id"/><Where name="Id" group="+1000000">x</Where>'))
    assert code == "316" and "group='+1000000' is out of range" in message and "from 0 to 32" in message


def test_case1_a_query_past_the_servers_budget_is_a_failure_naming_it(tmp_path):
    served = start(tmp_path, "budget", "query_budget = 0.01")
    try:
        # 254 distinct patterns, none matching, over every Extension of every host: well over 10 ms of work anywhere
        wheres = "".join(f'<Where name="Extension" op="Match" conj="Or">q{n}zq</Where>' for n in range(254))
        code, message = failure(post(served, '<Get name="Id"/>' + wheres))
        assert code.startswith("7") and "budget of 0.01 s" in message
        assert get_health(served, timeout=5) == 200
    finally:
        stop_glueinfo(served, timeout=5)
