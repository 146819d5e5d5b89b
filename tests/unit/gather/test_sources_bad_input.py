"""Hostile workers: the agents source against real HTTP servers on loopback.

Each in-test agent first answers with a good Node document, then turns bad:
malformed XML, external entities, a 100 MB body (declared or streamed), a
Node claiming another host's Id, negative or absurd numbers, a 500, not HTTP
at all, an answer dripped a byte at a time, or a connection accepted and
never answered.  Each must be logged with the host's name, that host's last
good snapshot kept until it goes stale (then dropped), and the well-behaved
hosts unaffected, within the per-host timeout.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from glueinfo.core.config import parse_text
from glueinfo.core.model import CpuInfo, HostSnapshot, LoadInfo, MemoryInfo
from glueinfo.gather.gatherer import Gatherer
from glueinfo.sss.node_xml import render_node

TIMEOUT = 1.0


class Clock:
    """Real time plus an offset the test moves forward."""

    def __init__(self):
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def node_document(hostname: str, clock: Clock, ram_mb: int = 16000) -> bytes:
    snap = HostSnapshot(hostname=hostname, collected_at=clock(), source="local",
                        cpu=CpuInfo(logical_cpus=8), memory=MemoryInfo(ram_mb=ram_mb, ram_available_mb=ram_mb // 2),
                        load=LoadInfo(load1=1.0, load5=1.0, load15=1.0))
    return render_node(snap, clock())


def http(body: bytes, status: str = "200 OK", length: bool = True) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/xml\r\n"
    if length:
        head += f"Content-Length: {len(body)}\r\n"
    return (head + "Connection: close\r\n\r\n").encode() + body


class Agent:
    """A tiny HTTP server on loopback whose behaviour the test switches."""

    def __init__(self, hostname: str, clock: Clock, address: str = "127.0.0.1"):
        self.hostname, self.clock = hostname, clock
        self.mode = "good"
        self.claim = hostname  # the Id served in mode "wrong-id"
        self.requests = 0
        self.first_modes: list[str] = []  # the modes of the first requests, in order; then self.mode
        self.sock = socket.create_server((address, 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self.accept, daemon=True).start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket):
        self.requests += 1
        number = self.requests
        try:
            with conn:
                conn.settimeout(5)
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    request += chunk
                scripted = number <= len(self.first_modes)
                self.answer(conn, self.first_modes[number - 1] if scripted else self.mode)
        except OSError:
            pass  # the client gave up on us: that is the point of several modes

    def answer(self, conn: socket.socket, mode: str):
        good = node_document(self.hostname, self.clock)
        if mode == "good":
            conn.sendall(http(good))
        elif mode == "malformed":
            conn.sendall(http(good[: len(good) // 2]))
        elif mode == "xxe":
            conn.sendall(http(b'<?xml version="1.0"?>\n<!DOCTYPE Node [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
                              b"<Node><Id>&xxe;</Id><State>Idle</State></Node>\n"))
        elif mode == "billion-laughs":
            conn.sendall(http(b'<?xml version="1.0"?><!DOCTYPE Node [<!ENTITY a "aaaaaaaaaa">'
                              b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
                              b"<Node><Id>&c;</Id></Node>"))
        elif mode in ("huge-declared", "huge-streamed"):
            size = 100 * 2**20
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"
            if mode == "huge-declared":
                head += f"Content-Length: {size}\r\n"
            conn.sendall((head + "Connection: close\r\n\r\n").encode())
            block = b"<Node><Id>" + b"x" * (2**20 - 10)
            for _ in range(size // len(block)):
                conn.sendall(block)
        elif mode == "wrong-id":
            conn.sendall(http(node_document(self.claim, self.clock)))
        elif mode == "negative":
            conn.sendall(http(good.replace(b'<Memory units="MB">16000</Memory>', b'<Memory units="MB">-16000</Memory>', 1)))
        elif mode == "absurd":
            conn.sendall(http(good.replace(b"<Processors>8</Processors>", b"<Processors>80000000000</Processors>", 1)))
        elif mode == "error-500":
            conn.sendall(http(b"<html>oops</html>", status="500 Internal Server Error"))
        elif mode == "not-http":
            conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
        elif mode == "drip":
            for byte in http(good):
                conn.sendall(bytes([byte]))
                time.sleep(0.2)
        elif mode == "hang":
            self.stop.wait(30)
        else:  # pragma: no cover - a typo in the test
            raise AssertionError(mode)

    def close(self):
        self.stop.set()
        self.sock.close()


def make_config(targets, **overrides):
    keys = {"enabled": "agents", "agents": ", ".join(targets), "timeout": TIMEOUT, "retries": 2, "retry_backoff": 0.05,
            "max_body": 1048576, "gather_timeout": 20, "drop_after": 3600, **overrides}
    lines = "".join(f"{key} = {value}\n" for key, value in keys.items())
    return parse_text(f"[sources]\n{lines}[node]\nstale_after = 300\n", "test.conf")


HOSTILE = {
    "malformed": "not well-formed",
    "xxe": "not accepted",
    "billion-laughs": "not accepted",
    "huge-declared": "over the limit of 1048576 bytes",
    "huge-streamed": "over the limit of 1048576 bytes",
    "wrong-id": "Node claims to be 'good0.example.org'",
    "negative": "Memory",
    "absurd": "Processors",
    "error-500": "HTTP 500",
    "not-http": "not an HTTP answer",
    "drip": f"within {TIMEOUT:g} s",
    "hang": f"within {TIMEOUT:g} s",
}


@pytest.fixture
def agents():
    clock = Clock()
    started = [Agent(f"good{i}.example.org", clock) for i in range(3)]
    started += [Agent(f"{mode}.example.org", clock) for mode in HOSTILE]
    yield clock, started
    for agent in started:
        agent.close()


def test_hostile_workers_keep_their_last_good_snapshot_and_harm_nobody(agents, caplog):
    clock, all_agents = agents
    good, hostile = all_agents[:3], all_agents[3:]
    gatherer = Gatherer(make_config([a.target for a in all_agents]), clock=clock)

    first = gatherer.gather()
    assert first.failures == []
    assert [h.snapshot.hostname for h in first.hosts] == sorted(a.hostname for a in all_agents)
    first_seen = {h.snapshot.hostname: h.snapshot.collected_at for h in first.hosts}

    for agent, mode in zip(hostile, HOSTILE, strict=True):
        agent.mode = mode
    hostile[HOSTILE_INDEX["wrong-id"]].claim = good[0].hostname
    time.sleep(0.05)  # so that a fresh answer is visibly newer than the first one
    caplog.set_level(logging.WARNING, logger="glueinfo.gather")
    # One dead, slow or hostile worker costs its own failure (below), not the others' answers.
    second = gatherer.gather()
    hosts = {h.snapshot.hostname: h for h in second.hosts}
    assert sorted(hosts) == sorted(a.hostname for a in all_agents)  # nobody lost, nobody added
    for agent in good:
        assert hosts[agent.hostname].snapshot.collected_at > first_seen[agent.hostname]
    failures = {f.host: f for f in second.failures}
    assert sorted(failures) == sorted(a.hostname for a in hostile)
    for agent, (mode, words) in zip(hostile, HOSTILE.items(), strict=True):
        kept = hosts[agent.hostname]
        assert kept.snapshot.collected_at == first_seen[agent.hostname], mode
        assert kept.snapshot.memory.ram_mb == 16000 and kept.snapshot.cpu.logical_cpus == 8
        assert not kept.stale
        assert words in failures[agent.hostname].error, (mode, failures[agent.hostname].error)
        assert failures[agent.hostname].target == agent.target
        # Logged with the host's name, on one line.
        assert any(agent.hostname in r.getMessage() and "\n" not in r.getMessage() for r in caplog.records), mode
    # The worker claiming good0's Id did not overwrite good0.
    assert hosts[good[0].hostname].snapshot.memory.ram_mb == 16000
    with open("/etc/passwd", encoding="utf-8") as handle:
        secret = handle.readline().strip()
    assert all(secret not in h.snapshot.to_json() for h in second.hosts)
    assert all(secret not in str(f) for f in second.failures)

    # Still failing 301 s later: the hostile hosts go stale; the good ones stay fresh.
    clock.offset = 301
    third = gatherer.gather()
    stale = sorted(h.snapshot.hostname for h in third.hosts if h.stale)
    assert stale == sorted(a.hostname for a in hostile)
    assert sorted(s.hostname for s in third.fresh_snapshots()) == sorted(a.hostname for a in good)

    # And after drop_after they are gone.
    clock.offset = 3602
    fourth = gatherer.gather()
    assert sorted(h.snapshot.hostname for h in fourth.hosts) == sorted(a.hostname for a in good)
    assert sorted(fourth.dropped) == sorted(a.hostname for a in hostile)


HOSTILE_INDEX = {mode: index for index, mode in enumerate(HOSTILE)}


def test_an_agent_listed_by_name_must_report_that_name():
    clock = Clock()
    agent = Agent("wn099.example.org", clock)
    try:
        result = Gatherer(make_config([f"localhost:{agent.port}"]), clock=clock).gather()
    finally:
        agent.close()
    assert result.hosts == []
    (failure,) = result.failures
    assert failure.host == "localhost"
    assert failure.error == "Node claims to be 'wn099.example.org', not 'localhost': refused"


def test_a_5xx_is_retried_within_the_timeout():
    clock = Clock()
    agent = Agent("flaky.example.org", clock)
    agent.first_modes = ["error-500", "error-500"]  # then good: decided per request, not by a racing thread
    try:
        result = Gatherer(make_config([agent.target], retry_backoff=0.2), clock=clock).gather()
    finally:
        agent.close()
    assert result.failures == []
    assert [h.snapshot.hostname for h in result.hosts] == ["flaky.example.org"]
    assert agent.requests == 3


def test_many_hung_agents_cannot_hold_the_gather_past_its_deadline():
    clock = Clock()
    hung = [Agent(f"hung{i}.example.org", clock) for i in range(12)]
    for agent in hung:
        agent.mode = "hang"
    config = make_config([a.target for a in hung], pool_size=3, gather_timeout=1.5)
    try:
        result = Gatherer(config, clock=clock).gather()
    finally:
        for agent in hung:
            agent.close()
    errors = sorted({f.error for f in result.failures})
    # The first pool-full time out on their own budget; the rest never got their turn.
    assert errors == ["no complete answer within 1 s ([sources] timeout)",
                      "not finished when the gather's time was up ([sources] gather_timeout)"]
    assert len(result.failures) == 12


def test_a_dead_agent_is_one_failure_after_its_retries():
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    result = Gatherer(make_config([f"127.0.0.1:{port}"]), clock=Clock()).gather()
    (failure,) = result.failures
    assert failure.target == f"127.0.0.1:{port}"
    assert "refused" in failure.error.lower() and "after 3 attempts" in failure.error
