"""Issue 12, items 4 and 9 and the server's part of 1 and 3: hostile HTTP
clients against a real `glueinfo serve` on loopback.

Slow clients (trickling a byte at a time, sending headers without end, or
idle) spread over many 127.0.x.y addresses must not keep anyone else from
being answered, and are cut off after [serve] request_deadline; one address
is capped at [serve] max_per_address; requests HTTP forbids are refused;
[serve] allow closes the door to other addresses, and a server reachable
beyond loopback without a key or an allow list does not start; SIGTERM stops
the process within [run] shutdown_grace whatever the clients do; /health is
not ok when the LDIF cannot be built.

Times asserted here are liveness bounds, not speed: an answer "within 5 s"
while under attack only tells a server that answers from one that makes the
client wait for the attack to end (the old server answered 503 or never).
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from glueinfo_processes import Served, run_glueinfo, start_glueinfo, stop_glueinfo
from paths import REPO
from waiting import wait_until

LIVENESS_S = 5.0  # see the module's docstring: an answer, not a speed
QUERY = (b'<Envelope><Body><Request action="Query" actor="tester"><Object>Node</Object><Get name="Id"/>'
         b"</Request></Body></Envelope>")


def write_config(tmp: Path, name: str, serve: str = "", extra: str = "") -> Path:
    config = tmp / f"{name}.conf"
    config.write_text(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n{serve}\n"
                      f"[run]\nstate_dir = {tmp / name}-state\n{extra}\n")
    return config


@contextmanager
def serving(tmp: Path, name: str, serve: str = "", extra: str = "") -> Iterator[Served]:
    served = start_glueinfo(write_config(tmp, name, serve, extra), tmp / f"{name}.log")
    try:
        yield served
    finally:
        stop_glueinfo(served)


def read_response(sock: socket.socket, method: str = "GET") -> http.client.HTTPResponse:
    response = http.client.HTTPResponse(sock, method=method)
    response.begin()
    response.body = response.read()  # type: ignore[attr-defined]
    return response


def get(served: Served, path: str, source: str | None = None, timeout: float = LIVENESS_S) -> http.client.HTTPResponse:
    with served.connect(timeout=timeout, source=source) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        return read_response(sock)


def query(served: Served, timeout: float = LIVENESS_S) -> http.client.HTTPResponse:
    with served.connect(timeout=timeout) as sock:
        sock.sendall(b"POST /SSSRMAP3 HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(QUERY), QUERY))
        return read_response(sock, "POST")


def closed_by_server(sock: socket.socket, wait: float = 0.0) -> bool:
    """Whether the server has ended this connection (an answer then EOF, EOF, or a reset)."""
    sock.settimeout(wait or 0.001)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (TimeoutError, BlockingIOError):
        return False
    except OSError:
        return True


class Crowd:
    """Hostile connections from many loopback addresses, kept busy by one thread:
    'trickle' sends a request one byte every ``every`` seconds, 'headers' sends one more
    header line every ``every`` seconds without end, 'idle' sends nothing."""

    LINE = b"GET /node.xml HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 100000

    def __init__(self, served: Served, addresses: list[str], per_address: int, every: float = 0.5):
        self.every = every
        self.sockets: list[tuple[str, socket.socket, int]] = []
        kinds = ("trickle", "headers", "idle")
        for index, address in enumerate(addresses):
            for n in range(per_address):
                sock = served.connect(timeout=5, source=address)
                self.sockets.append((kinds[(index + n) % 3], sock, 0))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for i, (kind, sock, sent) in enumerate(self.sockets):
                if kind == "idle":
                    continue
                piece = self.LINE[sent:sent + 1] if kind == "trickle" else (
                    b"GET /node.xml HTTP/1.1\r\nHost: localhost\r\n" if sent == 0 else b"X-More-%d: x\r\n" % sent)
                try:
                    sock.send(piece)
                except OSError:
                    continue  # closed by the server
                self.sockets[i] = (kind, sock, sent + 1)

    def busy(self) -> list[socket.socket]:
        return [sock for kind, sock, _ in self.sockets if kind != "idle"]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for _, sock, _ in self.sockets:
            sock.close()


def addresses(count: int) -> list[str]:
    """127.0.1.1, 127.0.1.2, ... 127.0.2.1, ...: loopback addresses other than 127.0.0.1."""
    return [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(count)]


# -- item 4: slow clients ----------------------------------------------------------------------------------------


def test_a_crowd_of_slow_clients_neither_starves_others_nor_stays(tmp_path):
    """240 trickling, header-spewing and idle connections from 120 addresses (under the
    per-address cap): a GET and a query from another address are answered all along, and
    every busy slow client is cut off once [serve] request_deadline has passed."""
    with serving(tmp_path, "crowd", "request_deadline = 3\ntimeout = 30\n") as served:
        crowd = Crowd(served, addresses(120), per_address=2)
        try:
            started = time.monotonic()
            while time.monotonic() - started < 2.0:  # during the attack, before the deadline
                assert get(served, "/node.xml").status == 200
                answer = query(served)
                assert answer.status == 200 and b"<Value>Success</Value>" in answer.body
                time.sleep(0.2)
            time.sleep(max(0.0, started + 5.0 - time.monotonic()))  # request_deadline 3 s, and some slack
            busy = crowd.busy()
            still_open = [sock for sock in busy if not closed_by_server(sock, 0.01)]
            assert len(busy) == 160 and still_open == [], f"{len(still_open)} of {len(busy)} slow clients still held"
            assert get(served, "/health").status == 200
        finally:
            crowd.close()


def test_a_trickled_request_gets_408_at_the_deadline(tmp_path):
    with serving(tmp_path, "deadline", "request_deadline = 1.5\ntimeout = 30\n") as served:
        sock = served.connect(timeout=10, source="127.0.0.3")
        request = b"GET /node.xml HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 100
        answer, sent = b"", 0
        try:
            for byte in request:  # a byte every 0.2 s: the whole would take 30 s
                sock.send(bytes([byte]))
                time.sleep(0.2)
                if closed_by_server(sock):
                    break
                sent += 1
        except OSError:
            pass
        sock.settimeout(5)
        try:
            answer = sock.recv(4096)
        except OSError:
            pass
        sock.close()
        # Kept open within the deadline (the first second's five bytes were taken), closed at it: long
        # before the request's end.
        assert 5 <= sent < len(request)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408")


def test_one_address_is_capped_others_are_served(tmp_path):
    with serving(tmp_path, "cap", "max_per_address = 4\n") as served:
        held = [served.connect(source="127.0.0.5") for _ in range(4)]
        try:
            time.sleep(0.3)
            refused = get(served, "/node.xml", source="127.0.0.5")
            assert refused.status == 503 and refused.getheader("Retry-After") == "1"
            assert get(served, "/node.xml", source="127.0.0.6").status == 200
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.3)
        assert get(served, "/node.xml", source="127.0.0.5").status == 200


# -- item 9: requests HTTP forbids -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("strict"), "strict", "max_body = 4096\n") as served:
        yield served


@pytest.mark.parametrize("raw", [
    b"POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: 5\r\n\r\n%s" % (len(QUERY), QUERY),
    b"GET /node.xml HTTP/1.1\r\nHost: x\r\nThis line has no colon\r\n\r\n",
], ids=["two-different-content-lengths", "header-without-colon"])
def test_malformed_heads_are_refused(strict, raw):
    with strict.connect() as sock:
        sock.sendall(raw)
        assert read_response(sock, raw.split(b" ")[0].decode()).status == 400
    assert get(strict, "/node.xml").status == 200


def test_content_length_with_transfer_encoding_is_refused_and_closed(strict):
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(QUERY), QUERY)
    with strict.connect() as sock:
        sock.sendall(b"POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s"
                     % (len(body), body))
        response = read_response(sock, "POST")
        assert response.status == 400
        assert closed_by_server(sock, LIVENESS_S)


def test_expect_100_continue_with_an_oversized_body_gets_413_without_100(strict):
    with strict.connect() as sock:
        sock.sendall(b"POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: 10000000\r\n"
                     b"Expect: 100-continue\r\n\r\n")
        first = b""
        while b"\r\n" not in first:
            data = sock.recv(4096)
            if not data:
                break
            first += data
    assert first.startswith(b"HTTP/1.1 413 "), first[:80]


# -- safe defaults beyond loopback ------------------------------------------------------------------------------------


def test_an_address_outside_allow_is_not_served(tmp_path):
    with serving(tmp_path, "allow", "allow = 127.0.0.1/32\n") as served:
        with served.connect(source="127.0.0.9") as sock:
            sock.sendall(b"GET /node.xml HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.settimeout(LIVENESS_S)
            try:
                answer = sock.recv(4096)
            except ConnectionResetError:
                answer = b""
        assert answer == b""
        assert get(served, "/node.xml", source="127.0.0.1").status == 200
        health = json.loads(get(served, "/health").body)
        assert health["http"]["refused_not_allowed"] == 1


def test_no_start_beyond_loopback_without_key_or_allow(tmp_path):
    config = tmp_path / "open.conf"
    config.write_text(f"[serve]\nlisten = 0.0.0.0:0\n[run]\nstate_dir = {tmp_path / 'state'}\n")
    result = run_glueinfo("serve", "--config", str(config), timeout=60)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert "allow" in lines[0] and "key_file" in lines[0] and "0.0.0.0" in lines[0]


# -- SIGTERM -----------------------------------------------------------------------------------------------------------


def test_sigterm_stops_within_shutdown_grace_under_attack(tmp_path):
    """Slow clients from 100 addresses, and a query with a pattern that backtracks badly in a
    backtracking matcher (seconds on a 50-character Id), running when SIGTERM comes: the
    process is gone within the grace."""
    grace = 3.0
    redos = (b'<Envelope><Body><Request action="Query" actor="t"><Object>Node</Object><Get name="Id"/>'
             b'<Where name="Id" op="Match">^(.|.){0,27}Z</Where></Request></Body></Envelope>')
    host = json.loads((REPO / "tests" / "fixtures" / "nodes" / "site50.json").read_text())[0]
    host["hostname"] = "wn-" + "x" * 36 + ".example.org"
    (tmp_path / "long.json").write_text(json.dumps([host]))
    with serving(tmp_path, "sigterm", "", f"shutdown_grace = {grace}\n[node]\nsite_snapshots = {tmp_path / 'long.json'}\n") as served:
        crowd = Crowd(served, addresses(100), per_address=2)
        try:
            hostile = served.connect(source="127.0.0.4")
            hostile.sendall(b"POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(redos), redos))
            time.sleep(0.5)
            # A deadline, not a speed: the grace plus one second for the interpreter to exit, then SIGKILL.
            code = stop_glueinfo(served, timeout=grace + 1)
            hostile.close()
        finally:
            crowd.close()
    assert code == 0, (code, served.log_text()[-2000:])


# -- item 3: /health and a failed publication ----------------------------------------------------------------------


def broken_templates(tmp: Path) -> Path:
    """The built-in templates with WEB made mandatory: with [site] web empty, every LDIF build fails."""
    templates = tmp / "templates"
    shutil.copytree(REPO / "templates", templates)
    site = templates / "site.ldif"
    site.write_text(site.read_text().replace("@mandatory SITE_ID SITE_NAME PARENT_DN",
                                             "@mandatory SITE_ID SITE_NAME PARENT_DN WEB")
                    .replace("LONGITUDE WEB ", "LONGITUDE "))
    return templates


def test_health_is_not_ok_when_the_ldif_cannot_be_built(tmp_path):
    templates = broken_templates(tmp_path)
    with serving(tmp_path, "health", "", f"[site]\nid = hostile-site\n[glue]\ntemplates_dir = {templates}\n") as served:
        assert get(served, "/ldif").status == 503
        health = json.loads(get(served, "/health").body)
    assert health["status"] != "ok"
    assert any("mandatory variable WEB" in reason for reason in health["reasons"]), health


def test_run_health_is_not_ok_when_the_last_publication_failed(tmp_path):
    """`run` with serve = yes: the daemon's publish fails at every cycle; /health says so and why
    (it said "starting" for ever before, as if nothing were wrong yet)."""
    templates = broken_templates(tmp_path)
    extra = (f"serve = yes\nldif_file = {tmp_path / 'site.ldif'}\nnode_xml_file = {tmp_path / 'nodes.xml'}\n"
             f"[site]\nid = hostile-site\n[glue]\ntemplates_dir = {templates}\n")
    served = start_glueinfo(write_config(tmp_path, "run", "", extra), tmp_path / "run.log", command=("run",))
    try:
        wait_until(lambda: "publish after" in served.log_text(), "the daemon's failed publish logged", 30, step=0.1,
                   detail=served.log_text)
        health = json.loads(get(served, "/health").body)
    finally:
        stop_glueinfo(served)
    assert health["status"] == "degraded", health
    assert any("publication failed" in r and "mandatory variable WEB" in r for r in health["reasons"]), health
