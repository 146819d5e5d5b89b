"""`glueinfo serve` over real HTTP on loopback: documents fetched and validated
against the XSD, SSSRMAP requests sent as hand-built byte strings (correct
HTTP framing and the Gold/Maui peers' chunked framing), signatures, hostile
bodies refused while the server keeps serving, many clients at once, and a
store that answers from memory while a refresh hangs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import waiting
from glueinfo_processes import Served, start_glueinfo, stop_glueinfo
from lxml import etree
from paths import REPO

from glueinfo.core.model import CpuInfo, HostSnapshot, LoadInfo
from glueinfo.run.http import NodeStore, Refreshed, Server, ServeSettings, parse_listen
from glueinfo.sss.node_settings import NodeSettings

ROOT = REPO
FIXTURE = ROOT / "tests" / "fixtures" / "nodes" / "site50.json"
RAW = json.loads(FIXTURE.read_text(encoding="utf-8"))
SCHEMA = etree.XMLSchema(etree.parse(str(ROOT / "glueinfo" / "sss" / "xsd" / "sss-node.xsd")))
KEY = b"s3cret-shared-key"
MAX_BODY = 65536


def start_server(tmp: Path, name: str, extra: str = "") -> Served:
    config = tmp / f"{name}.conf"
    config.write_text(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\nmax_body = {MAX_BODY}\ntimeout = 2\n{extra}\n"
                      f"[node]\nsite_snapshots = {FIXTURE}\n"
                      f"[run]\nstate_dir = {tmp / name}-state\n")  # not the shared default: other runs' hosts would show
    return start_glueinfo(config, tmp / f"{name}.log")


def stop_server(served: Served) -> None:
    stop_glueinfo(served)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    served = start_server(tmp_path_factory.mktemp("serve"), "open")
    yield served
    stop_server(served)
    assert served.process.returncode == 0, served.log.read_text()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("keyed")
    (tmp / "key").write_bytes(KEY + b"\n")
    served = start_server(tmp, "keyed", f"key_file = {tmp / 'key'}\nmax_connections = 4")
    yield served
    stop_server(served)


class PeerResponse:
    """An answer in the Gold/Maui peers' own chunk framing (``<HEX>\r\n<data>`` per chunk, then
    ``0\r\n``, then the server closes), read the way Gold's reply reader does: each size line
    straight after the previous chunk's data."""

    def __init__(self, raw: bytes) -> None:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
        chunks = []
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)  # an empty or CRLF-led size line (correct HTTP framing) fails here
            if size == 0:
                assert rest == b"", f"bytes after the last chunk: {rest[:40]!r}"
                break
            chunks.append(rest[:size])
            rest = rest[size:]
        self.chunks = chunks
        self.body = b"".join(chunks)

    def getheader(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def is_peer_framed(raw: bytes) -> bool:
    return b"Transfer-Encoding: chunked" in raw and raw.endswith(b"0\r\n") and not raw.endswith(b"\r\n0\r\n\r\n")


def exchange(served: Served, raw: bytes, shut: bool = False, source: str | None = None) -> http.client.HTTPResponse:
    """Send hand-built request bytes on a new connection (from ``source``, a loopback address) and read one
    response: as HTTP, or, for a request in the peers' chunk framing, as those peers read the answer."""
    sock = served.connect(source=source)
    sock.sendall(raw)
    if shut:
        sock.shutdown(socket.SHUT_WR)
    if is_peer_framed(raw):  # the server answers in the same framing and closes
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        sock.close()
        return PeerResponse(data)  # type: ignore[return-value]
    response = http.client.HTTPResponse(sock, method=raw.split(b" ", 1)[0].decode())
    response.begin()
    response.body = response.read()  # type: ignore[attr-defined]
    sock.close()
    return response


def get(served: Served, path: str, method: str = "GET", source: str | None = None) -> http.client.HTTPResponse:
    return exchange(served, f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode(),
                    source=source)


def post(body: bytes, framing: str = "length") -> bytes:
    head = b'POST /SSSRMAP3 HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/xml; charset="utf-8"\r\n'
    if framing == "length":
        return head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    if framing == "chunked":  # correct HTTP: split mid-tag, CRLF after every chunk, empty trailer
        pieces = [body[:17], body[17:90], body[90:]]
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    if framing == "peer":  # what Gold/Maui send: <hexlen>\r\n<payload>0\r\n
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"0\r\n"
    raise ValueError(framing)


def envelope_request(inner: bytes) -> bytes:
    return b'<Envelope><Body><Request action="Query" actor="tester"><Object>Node</Object>' + inner + b"</Request></Body></Envelope>"


def response_of(answer: bytes) -> etree._Element:
    envelope = etree.fromstring(answer)
    assert envelope.tag == "Envelope"
    (response,) = envelope.find("Body")
    return response


# Fixture hosts with at least 64 GB (the local host is left out by the Id pattern).
BIG = envelope_request(b'<Get name="Id"/><Get name="Configured/Memory"/>'
                       b'<Where name="Id" op="Match">^wn[0-9]+[.]example[.]org$</Where>'
                       b'<Where name="Configured/Memory" op="GE">64GB</Where>')
BIG_IDS = [h["hostname"] for h in RAW if h["memory"]["ram_mb"] >= 65536]


def check_big_answer(body: bytes) -> None:
    response = response_of(body)
    assert [c.tag for c in response] == ["Status", "Count", "Data"]
    assert (response.findtext("Status/Value"), response.findtext("Status/Code")) == ("Success", "000")
    assert int(response.findtext("Count")) == len(BIG_IDS)
    nodes = list(response.find("Data"))
    assert [n.findtext("Id") for n in nodes] == BIG_IDS
    for node, host in zip(nodes, [h for h in RAW if h["memory"]["ram_mb"] >= 65536], strict=True):
        assert [c.tag for c in node] == ["Id", "Configured"]
        memory = node.find("Configured/Memory")
        assert (memory.get("units"), int(memory.text)) == ("MB", host["memory"]["ram_mb"])


# -- documents ----------------------------------------------------------------------------------------


def test_node_xml_is_this_host_and_valid(server):
    response = get(server, "/node.xml")
    assert response.status == 200 and response.getheader("Content-Type") == "application/xml; charset=utf-8"
    root = etree.fromstring(response.body)
    assert SCHEMA.validate(root), SCHEMA.error_log
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert int(root.findtext("Configured/Processors")) == sum(1 for line in cpuinfo.splitlines() if line.startswith("processor"))
    assert root.findtext("Arch") == os.uname().machine
    assert root.findtext("State") in ("Idle", "Busy")
    # this host as probed: what the site's assembly adds (its sources, a batch system's view of the
    # node) is not in it, so a head node's agents source reads the worker, not the worker's site
    assert {e.get("name") for e in root.iter("Extension")}.isdisjoint({"gather", "lrms"})
    head = get(server, "/node.xml", "HEAD")
    assert head.status == 200 and head.body == b"" and int(head.getheader("Content-Length")) == len(response.body)


def test_nodes_xml_holds_this_host_and_the_site_files(server):
    response = get(server, "/nodes.xml")
    root = etree.fromstring(response.body)
    assert response.status == 200 and SCHEMA.validate(root), SCHEMA.error_log
    ids = [n.findtext("Id") for n in root]
    local = etree.fromstring(get(server, "/node.xml").body).findtext("Id")
    assert ids == [local] + [h["hostname"] for h in RAW]
    # the fixture was collected in 2023: on the real clock it is stale, so Unknown
    assert {n.findtext("State") for n in root[1:]} == {"Unknown"}


def test_health_ldif_and_unknown_paths(server):
    health = json.loads(get(server, "/health").body)
    assert health["status"] == "ok" and health["refresh"]["success"] is True and health["refresh"]["count"] == 1
    assert health["hosts"]["total"] == 51 and health["hosts"]["states"]["Unknown"] >= 50
    assert 0 <= health["snapshot_age_s"] < 120
    assert {c["name"] for c in health["collectors"]} >= {"cpu", "memory", "load"}
    assert all(c["success"] for c in health["collectors"]) and all(c["duration_s"] >= 0 for c in health["collectors"])
    ldif = get(server, "/ldif")
    assert ldif.status == 200 and ldif.body.startswith(b"dn: ") and b"objectClass: GlueCE" in ldif.body
    missing = get(server, "/secrets")
    assert missing.status == 404 and b"/node.xml" in missing.body


# -- SSSRMAP framing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["length", "chunked", "peer"])
def test_sssrmap_query_with_each_framing(server, framing):
    response = exchange(server, post(BIG, framing))
    assert response.status == 200 and response.getheader("Content-Type") == 'text/xml; charset="utf-8"'
    # the answer mirrors the framing: chunked for chunked requests, in the peers' own form for theirs
    assert (response.getheader("Transfer-Encoding") == "chunked") == (framing != "length")
    check_big_answer(response.body)


def test_peer_framing_raw_answer_starts_with_a_hex_length(server):
    sock = server.connect()
    sock.sendall(post(BIG, "peer"))
    raw = b""
    while chunk := sock.recv(65536):  # the server closes after a peer-framed answer
        raw += chunk
    sock.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    size_line, _, rest = body.partition(b"\r\n")
    # the peers' framing mirrored: no CRLF after the data, "0\r\n" and nothing more
    assert rest[:int(size_line, 16)].startswith(b"<Envelope>") and rest.endswith(b"</Envelope>0\r\n")


def test_keep_alive_serves_several_requests_on_one_connection(server):
    sock = server.connect()
    for raw in (post(BIG), b"GET /node.xml HTTP/1.1\r\nHost: x\r\n\r\n", post(BIG, "chunked"), post(BIG)):
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
        assert response.status == 200
        if raw.startswith(b"POST"):
            check_big_answer(body)
    sock.close()


def test_chunked_sssrmap_answer_over_http(server):
    body = envelope_request(b'<Get name="Id"/>').replace(b'actor="tester"', b'actor="tester" chunking="True" chunkSize="20"')
    response = exchange(server, post(body))
    envelopes = re.findall(rb"<Envelope>.*?</Envelope>", response.body, re.S)
    assert len(envelopes) == 3
    numbers = [(response_of(e).get("chunkNum"), response_of(e).get("chunkMax"), response_of(e).findtext("Count")) for e in envelopes]
    # Gold's convention: chunkMax -1 until the last chunk, which carries its own number
    assert numbers == [("1", "-1", "20"), ("2", "-1", "20"), ("3", "3", "11")]


# -- signatures ---------------------------------------------------------------------------------------------


def sign(body: bytes, key: bytes = KEY) -> bytes:
    digest = hashlib.sha1(body).digest()
    return (b"<Envelope>" + body + b"<Signature><DigestValue>" + base64.b64encode(digest) + b"</DigestValue><SignatureValue>" +
            base64.b64encode(hmac.new(key, digest, hashlib.sha1).digest()) +
            b'</SignatureValue><SecurityToken type="Symmetric" name="tester"/></Signature></Envelope>')


SIGNED_BODY = BIG[len(b"<Envelope>"):-len(b"</Envelope>")]


def test_keyed_server_refuses_unsigned_and_badly_signed_requests(keyed):
    for body, code in ((BIG, "421"), (sign(SIGNED_BODY, b"guess"), "422"),
                       (sign(SIGNED_BODY).replace(b"64GB", b"1GB"), "422")):
        response = exchange(keyed, post(body, "peer"))
        assert response.status == 200
        failure = response_of(response.body)
        assert (failure.findtext("Status/Value"), failure.findtext("Status/Code")) == ("Failure", code)


def test_keyed_server_answers_signed_requests_and_signs_the_answer(keyed):
    response = exchange(keyed, post(sign(SIGNED_BODY), "peer"))
    check_big_answer(response.body)
    body = re.search(rb"<Body>.*</Body>", response.body, re.S).group(0)
    envelope = etree.fromstring(response.body)
    digest = hashlib.sha1(body).digest()
    assert base64.b64decode(envelope.findtext("Signature/DigestValue")) == digest
    assert base64.b64decode(envelope.findtext("Signature/SignatureValue")) == hmac.new(KEY, digest, hashlib.sha1).digest()


def test_connection_cap_answers_503_at_once_then_recovers(keyed):
    idle = [keyed.connect() for _ in range(4)]
    time.sleep(0.3)
    refused = get(keyed, "/health")
    assert refused.status == 503 and refused.getheader("Retry-After") == "1"
    for sock in idle:
        sock.close()
    time.sleep(0.3)
    assert get(keyed, "/health").status == 200


# -- hostile input --------------------------------------------------------------------------------------------


XXE = b'<?xml version="1.0"?><!DOCTYPE Envelope [<!ENTITY x SYSTEM "file:///etc/passwd">]><Envelope><Body>&x;</Body></Envelope>'
LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">' +
          b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10) for i in range(1, 10)) +
          b"]><Envelope><Body>&lol9;</Body></Envelope>")


def assert_still_serving(served: Served) -> None:
    assert get(served, "/node.xml").status == 200
    check_big_answer(exchange(served, post(BIG)).body)


@pytest.mark.parametrize("body", [XXE, LAUGHS], ids=["external-entity", "billion-laughs"])
def test_entities_are_refused(server, body):
    for framing in ("length", "peer"):
        response = exchange(server, post(body, framing))
        failure = response_of(response.body)
        assert (failure.findtext("Status/Value"), failure.findtext("Status/Code")) == ("Failure", "301")
        assert "DTDs and entity declarations are not accepted" in failure.findtext("Status/Message")
        assert b"root:" not in response.body
    assert_still_serving(server)


def test_a_50_mb_body_is_refused_without_being_read(server):
    sock = server.connect()
    size = 50 * 2**20
    sock.sendall(b'POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n' % size)
    sock.sendall(b"<Envelope>" + b"x" * 65536)
    response = http.client.HTTPResponse(sock)
    response.begin()
    failure = response_of(response.read())
    assert response.status == 413 and response.getheader("Connection") == "close"
    assert failure.findtext("Status/Code") == "211" and "over the limit" in failure.findtext("Status/Message")
    sock.close()
    assert_still_serving(server)


def test_a_50_mb_chunked_body_is_cut_off_at_the_limit(server):
    sock = server.connect()
    sock.sendall(b'POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n')
    piece = b"x" * 2**20
    sent = 0
    try:
        while sent < 50 * 2**20:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server stopped reading at the limit and answered
    assert sent < 50 * 2**20
    response = http.client.HTTPResponse(sock)
    response.begin()
    assert response.status == 413 and response_of(response.read()).findtext("Status/Code") == "211"
    sock.close()
    assert_still_serving(server)


@pytest.mark.parametrize("raw, code", [
    (b'POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n' + BIG[:100], "212"),
    (b'POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n' + BIG[:100], "212"),
    (b'POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n' + BIG, "212"),
    (b'POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\n\r\n' + BIG, "212"),
], ids=["short-content-length", "short-chunk", "bad-chunk-size", "no-length"])
def test_truncated_or_unframed_bodies_are_refused(server, raw, code):
    response = exchange(server, raw, shut=True)
    assert response.status in (400, 411)
    failure = response_of(response.body)
    assert (failure.findtext("Status/Value"), failure.findtext("Status/Code")) == ("Failure", code)
    assert_still_serving(server)


def test_a_truncated_xml_document_in_a_complete_body(server):
    failure = response_of(exchange(server, post(BIG[:-30])).body)
    assert failure.findtext("Status/Code") == "301" and "not well-formed" in failure.findtext("Status/Message")


def test_a_silent_connection_is_closed_after_the_timeout(server):
    sock = server.connect()
    sock.settimeout(1.0)
    with pytest.raises(TimeoutError):  # still open a second in: [serve] timeout = 2 s has not passed
        sock.recv(1)
    sock.settimeout(10.0)  # a safety net against a hang, not a speed claim
    assert sock.recv(1) == b""  # then closed by the server
    sock.close()
    assert_still_serving(server)


def test_many_clients_at_once(server):
    # 40 clients, each from its own address: one address alone is capped at [serve] max_per_address (32).
    errors: list[str] = []

    def client(source: str) -> None:
        try:
            for _ in range(3):
                assert get(server, "/node.xml", source=source).status == 200
                check_big_answer(exchange(server, post(BIG, "peer"), source=source).body)
        except Exception as exc:  # collected and reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=client, args=(f"127.0.2.{i + 1}",)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []


# -- in-process: answers come from memory --------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_requests_never_wait_for_a_refresh_and_states_follow_the_clock():
    clock = Clock(1_700_000_000.0)
    release = threading.Event()
    calls = []

    def refresh() -> Refreshed:
        calls.append(clock.now)
        if len(calls) > 1:
            release.wait(30)  # a collector that hangs
        snapshot = HostSnapshot(hostname="wn1.example.org", collected_at=clock.now, cpu=CpuInfo(logical_cpus=4),
                                load=LoadInfo(load1=0.5))
        return Refreshed(local=snapshot, snapshots=[snapshot])

    store = NodeStore(refresh, NodeSettings(stale_after_s=300), clock=clock)
    assert store.view() is None
    store.refresh_once()
    server = Server(ServeSettings(port=0, refresh_interval_s=3600), store)
    server.start()
    try:
        port = server.address[1]
        hung = threading.Thread(target=store.refresh_once, daemon=True)
        hung.start()
        time.sleep(0.2)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/node.xml")
        answer = connection.getresponse()  # answered while the refresh hangs (it never ends), not after it
        assert answer.status == 200
        assert etree.fromstring(answer.read()).findtext("State") == "Idle"
        assert store.refresh_once() is False and store.skipped == 1  # never two refreshes at once
        clock.now += 301  # no refresh came: the same snapshot is now stale
        connection.request("GET", "/node.xml")
        assert etree.fromstring(connection.getresponse().read()).findtext("State") == "Unknown"
        connection.request("GET", "/health")
        health = json.loads(connection.getresponse().read())
        assert health["status"] == "degraded" and health["state"] == "Unknown" and health["snapshot_age_s"] == 301
        release.set()
        hung.join(5)
        connection.request("GET", "/node.xml")
        assert etree.fromstring(connection.getresponse().read()).findtext("State") == "Idle"  # the late refresh landed
        connection.close()
    finally:
        release.set()
        server.stop()


def test_a_failed_refresh_keeps_the_last_good_documents():
    snapshots = [HostSnapshot(hostname="wn2", collected_at=time.time(), cpu=CpuInfo(logical_cpus=2))]

    def refresh() -> Refreshed:
        if len(snapshots) > 1:
            raise OSError("disk full")
        snapshots.append(snapshots[0])
        return Refreshed(local=snapshots[0], snapshots=snapshots[:1])

    store = NodeStore(refresh)
    assert store.refresh_once() is True
    before = store.view().node_xml
    assert store.refresh_once() is False
    assert store.view().node_xml == before
    assert store.health()["refresh"]["error"] == "OSError: disk full"
    assert store.ldif() == (None, "no LDIF built yet")


def test_sssrmap_objects_are_read_from_the_served_document_only_once_someone_queries():
    """The store holds the Node XML document, not a tree of it (issue 24: a tree of 10,000 Nodes is
    ten times the document): the objects are read at the first query, and from then on with each
    refresh, so a queried server keeps answering at once."""
    load = [0.5]

    def refresh() -> Refreshed:
        snapshot = HostSnapshot(hostname="wn3.example.org", collected_at=time.time(), cpu=CpuInfo(logical_cpus=8),
                                load=LoadInfo(load1=load[0]))
        return Refreshed(local=snapshot, snapshots=[snapshot])

    store = NodeStore(refresh)
    store.refresh_once()
    view = store.view()
    assert not view.objects.built
    assert store.refresh_once() and not store.view().objects.built  # nobody asked: still no tree
    objects = store.view().objects.get()  # the first query
    assert [element.findtext("Id") for element in objects.elements] == ["wn3.example.org"]
    served = etree.fromstring(b"".join(store.view().nodes_xml), etree.XMLParser(remove_blank_text=True))
    assert etree.tostring(objects.elements[0]) == etree.tostring(served[0])  # the very Node /nodes.xml serves
    load[0] = 7.5  # the next refresh: read with it, and what a query sees follows the document
    assert store.refresh_once() and store.view().objects.built
    busy = store.view().objects.get().elements[0]
    assert busy.findtext("State") == "Busy" and b"<State>Busy</State>" in b"".join(store.view().nodes_xml)


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:7170", ("127.0.0.1", 7170)), ("0.0.0.0:80", ("0.0.0.0", 80)), ("[::1]:9000", ("::1", 9000)),
    ("localhost", ("localhost", 7170)), (":8080", ("127.0.0.1", 8080)),
])
def test_listen_addresses(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["host:port", "::1:80", "h:70000", "[::1]x"])
def test_bad_listen_addresses(text):
    with pytest.raises(ValueError, match="listen address"):
        parse_listen(text)


def test_serve_command_refuses_a_bad_listen_address_in_one_line():
    result = subprocess.run([sys.executable, "-m", "glueinfo.cli", "serve", "--listen", "nowhere:99999"],
                            capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, GLUEINFO_CONFIG=os.devnull), timeout=60)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0 and "port '99999'" in result.stderr


def test_expect_100_continue_with_a_fitting_body_gets_100_then_the_answer(server):
    # The other side of the hostile suite's oversized case: 100 comes for a body that will be read.
    with server.connect() as sock:
        sock.sendall(b"POST /SSSRMAP3 HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n"
                     b"Expect: 100-continue\r\n\r\n" % len(BIG))
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            interim += sock.recv(1)
        assert interim.startswith(b"HTTP/1.1 100 ")
        sock.sendall(BIG)
        response = http.client.HTTPResponse(sock, method="POST")
        response.begin()
        check_big_answer(response.read())


def test_a_peer_request_without_host_header_is_answered(server):
    # Gold/Maui peers send no Host header: HTTP/1.1 requires one, glueinfo lets it pass.
    raw = post(BIG, "peer").replace(b"Host: localhost\r\n", b"")
    assert b"Host" not in raw.split(b"\r\n\r\n")[0]
    check_big_answer(exchange(server, raw).body)


def test_serving_beyond_loopback_with_an_allow_list(tmp_path):
    config = tmp_path / "allowed.conf"
    config.write_text(f"[serve]\nlisten = 0.0.0.0:0\nallow = 127.0.0.0/8\n[run]\nstate_dir = {tmp_path / 'state'}\n")
    served = start_glueinfo(config, tmp_path / "allowed.log")
    try:
        assert get(Served(served.process, served.port, served.log, "127.0.0.1"), "/node.xml").status == 200
    finally:
        stop_server(served)


@pytest.mark.parametrize("allow, error", [
    (["10.0.0.0/33"], "'10.0.0.0/33' is not an address or network"),
    (["any", "10.0.0.0/8"], "'any' opens the server to every address; write it alone"),
])
def test_bad_allow_lists(allow, error):
    from glueinfo.core.config import Config

    config = Config(values={"serve": {"allow": allow}})
    with pytest.raises(ValueError, match=error):
        ServeSettings.from_config(config)


def test_job_objects_are_served_too(server):
    # The default site is fork-only: Job is served, with no jobs in it (Slurm jobs: tests/test_slurm_live.py).
    body = b'<Envelope><Body><Request action="Query" actor="t"><Object>Job</Object><Get name="Id"/></Request></Body></Envelope>'
    response = response_of(exchange(server, post(body)).body)
    assert (response.findtext("Status/Value"), response.findtext("Count")) == ("Success", "0")


def test_a_clock_re_render_never_replaces_the_view_of_a_refresh_that_landed_meanwhile():
    clock = Clock(1_700_000_000.0)
    hosts = [["wn1.example.org"]]

    def refresh() -> Refreshed:
        snapshots = [HostSnapshot(hostname=name, collected_at=clock.now, cpu=CpuInfo(logical_cpus=4)) for name in hosts[-1]]
        return Refreshed(local=snapshots[0], snapshots=snapshots)

    store = NodeStore(refresh, NodeSettings(stale_after_s=300), clock=clock)
    store.refresh_once()
    render = store._render
    landed = []

    def slow_render(data, now):  # a request's re-render, during which a publish with a third host lands
        view = render(data, now)
        if not landed:
            landed.append(True)
            hosts.append(["wn1.example.org", "wn2.example.org", "wn3.example.org"])
            assert store.refresh_once()
        return view

    store._render = slow_render
    clock.now += 301  # the first host goes stale: the next request re-renders
    served = store.view()
    assert landed and b"".join(served.nodes_xml).count(b"<Node>") == 3
    assert b"".join(store.view().nodes_xml).count(b"<Node>") == 3


# -- serve is `glueinfo run` with the http output alone ----------------------------------------------------------


def nodes_served(served: Served) -> list[str]:
    return [n.findtext("Id") for n in etree.fromstring(get(served, "/nodes.xml").body)]


def test_sighup_reloads_the_config_as_the_daemon_does(tmp_path):
    config = tmp_path / "serve.conf"
    first = f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n[run]\nstate_dir = {tmp_path / 'state'}\n"
    config.write_text(first)
    served = start_glueinfo(config, tmp_path / "serve.log")
    try:
        local = etree.fromstring(get(served, "/node.xml").body).findtext("Id")
        assert nodes_served(served) == [local]
        # New site files, and a [serve] change that a running server cannot take (said, not ignored)
        config.write_text(first.replace("refresh_interval = 3600\n", "refresh_interval = 3600\nmax_body = 4096\n")
                          + f"[node]\nsite_snapshots = {FIXTURE}\n")
        served.process.send_signal(1)  # SIGHUP
        waiting.wait_until(lambda: nodes_served(served) != [local], "the site's snapshots served after SIGHUP", 30, step=0.1)
        assert nodes_served(served) == [local] + [h["hostname"] for h in RAW]
        assert "WARNING: [serve] changed: takes effect at the next restart" in served.log_text()
    finally:
        assert stop_glueinfo(served) == 0, served.log_text()


def spawn(command: str, config: Path, log: Path) -> subprocess.Popen:
    """`glueinfo COMMAND --config CONFIG` as a child process, its output in ``log``."""
    with open(log, "wb") as handle:
        return subprocess.Popen([sys.executable, "-m", "glueinfo.cli", command, "--config", str(config)],
                                stdout=handle, stderr=handle, cwd=REPO)


def wait_until(ready, process: subprocess.Popen, log: Path, seconds: float = 60) -> None:
    """Until ``ready()``, failing with the child's log if it exits first or ``seconds`` pass."""
    waiting.wait_until(ready, "the child was ready", seconds, detail=log.read_text,
                       still_running=lambda: process.poll() is None)


def test_serve_runs_beside_the_daemon_that_holds_the_state_directory(tmp_path):
    state = tmp_path / "state"
    daemon_config = tmp_path / "run.conf"
    daemon_config.write_text(f"[run]\nstate_dir = {state}\nldif_file = {tmp_path / 'glue.ldif'}\n"
                             f"node_xml_file = {tmp_path / 'nodes.xml'}\n")
    daemon_log = tmp_path / "run.log"
    daemon = spawn("run", daemon_config, daemon_log)
    try:
        wait_until(lambda: "running:" in daemon_log.read_text(), daemon, daemon_log)
        serve_config = tmp_path / "serve.conf"
        serve_config.write_text(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n[run]\nstate_dir = {state}\n")
        served = start_glueinfo(serve_config, tmp_path / "serve.log")  # a second `run` would be refused here
        try:
            assert get(served, "/node.xml").status == 200
        finally:
            assert stop_glueinfo(served) == 0, served.log_text()
        assert daemon.poll() is None, daemon_log.read_text()  # the daemon keeps its directory
        second = subprocess.run([sys.executable, "-m", "glueinfo.cli", "run", "--once", "--config", str(daemon_config)],
                                capture_output=True, text=True, cwd=REPO, timeout=60)
        assert second.returncode == 2 and "lock" in second.stderr  # still held by the first daemon
    finally:
        daemon.terminate()
        daemon.wait(30)


def test_sigterm_while_the_batch_system_hangs_at_start_stops_within_the_grace(tmp_path):
    """serve runs every job once before it answers; a batch system that hangs then (here every
    Slurm command sleeps) must not keep SIGTERM waiting for the LRMS timeout."""
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir()
    asked = tmp_path / "asked"
    for tool in ("sinfo", "squeue", "scontrol", "sacctmgr"):
        (bin_dir / tool).write_text(f"#!/bin/sh\ntouch {asked}\nexec sleep 120\n")
        (bin_dir / tool).chmod(0o755)
    config = tmp_path / "serve.conf"
    config.write_text(f"[serve]\nlisten = 127.0.0.1:0\n[run]\nstate_dir = {tmp_path / 'state'}\nshutdown_grace = 2\n"
                      "[cluster:main]\nunique_id = ce01.example.org\n[ce:grid]\nhost = ce01.example.org\nlrms = slurm\n"
                      f"lrms_timeout = 100\nslurm_bin_dir = {bin_dir}\n")
    log = tmp_path / "serve.log"
    process = spawn("serve", config, log)
    try:
        wait_until(asked.exists, process, log)
        process.terminate()
        process.wait(20)  # the grace (2 s) and the publication's finish, far below the LRMS timeout (100 s)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, log.read_text()
    assert "serving http://" not in log.read_text()  # stopped before it ever answered
