"""SSSRMAP conformance: what the message format (sssrmap-message-format-3.0.3,
our partial copy) and, beyond it, Gold (the reference implementation) decide.

Inputs are the requests under tests/fixtures/sssrmap/, written in the spec's
namespace with the spec schema's own spellings (lower-case Get ops, Set ops),
and checked first against the Request schema copied from the spec
(spec-request.xsd).  Expected answers are computed from the fixture's JSON
(tests/fixtures/nodes/site50.json) in plain Python, or from the server's own
/nodes.xml, never through the engine.  The last tests talk to a real
`glueinfo serve` over a raw socket, framed as Gold and Maui frame requests.
"""

from __future__ import annotations

import json
import re
import statistics

import pytest
from glueinfo_processes import Served, start_glueinfo, stop_glueinfo
from lxml import etree
from paths import REPO

from glueinfo.core.model import HostSnapshot
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_xml import data_element
from glueinfo.sss.sssrmap import ObjectSet, QueryService

FIXTURES = REPO / "tests" / "fixtures" / "sssrmap"
SITE = REPO / "tests" / "fixtures" / "nodes" / "site50.json"
RAW = json.loads(SITE.read_text(encoding="utf-8"))
SCHEMA = etree.XMLSchema(etree.parse(str(FIXTURES / "spec-request.xsd")))
NOW = 1_700_000_100.0
ACTIONS = ("Create", "Modify", "Delete", "Undelete")


def service() -> QueryService:
    nodes = data_element([HostSnapshot.from_dict(d) for d in RAW], NOW, NodeSettings())
    objects = ObjectSet("Node", list(nodes), sss_node.DEFAULT_UNITS)
    svc = QueryService()
    svc.register("Node", lambda: objects)
    return svc


SERVICE = service()


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes().strip()


def envelope(request: bytes) -> bytes:
    return b"<Envelope><Body>" + request + b"</Body></Envelope>"


def responses(request: bytes) -> list[etree._Element]:
    return [etree.fromstring(answer).find("Body/Response") for answer in SERVICE.handle(envelope(request))]


def status(response: etree._Element) -> tuple[str, str, str]:
    return response.findtext("Status/Value"), response.findtext("Status/Code"), response.findtext("Status/Message")


def cpus(host: dict) -> int:
    return host["cpu"]["logical_cpus"]


# -- the inputs are the spec's form ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.xml") if p.name != "query-file.xml"))
def test_every_fixture_request_is_valid_against_the_specs_request_schema(name):
    SCHEMA.assertValid(etree.fromstring(fixture(name)))


def test_the_specs_schema_and_text_disagree_on_file_and_file_is_still_answered():
    # The text lets a Request hold File; the schema, which "takes precedence", has no File: a peer may send it
    # either way, so it is answered (with a Warning naming it) rather than refused.
    assert not SCHEMA.validate(etree.fromstring(fixture("query-file.xml")))
    (response,) = responses(fixture("query-file.xml"))
    value, code, message = status(response)
    assert (value, code) == ("Warning", "118") and "File" in message
    assert sorted(n.findtext("Id") for n in response.find("Data")) == sorted(h["hostname"] for h in RAW if cpus(h) >= 32)


# -- Get: the request's order, aggregates marked --------------------------------------------------------


def test_get_results_keep_the_requests_order():
    (response,) = responses(fixture("query-order.xml"))
    expected = [h for h in RAW if cpus(h) >= 32]
    assert response.findtext("Count") == str(len(expected)) and expected
    for node, host in zip(response.find("Data"), expected, strict=True):
        # Configured/Memory, Id, Configured/Processors, State: Id splits the two Configured Gets
        assert [c.tag for c in node] == ["Configured", "Id", "Configured", "State"]
        assert node[0][0].tag == "Memory" and int(node[0][0].text) == host["memory"]["ram_mb"]
        assert node[1].text == host["hostname"]
        assert node[2][0].tag == "Processors" and int(node[2][0].text) == cpus(host)


def test_each_aggregate_says_which_op_made_it():
    (response,) = responses(fixture("query-aggregates.xml"))
    per_os: dict[str, list[int]] = {}
    for host in RAW:
        per_os.setdefault(host["os"]["name"], []).append(cpus(host))
    seen = {}
    for node in response.find("Data"):
        assert [c.tag for c in node] == ["Opsys", "Configured", "Id"]
        figures = [(p.tag, p.get("op"), float(p.text)) for p in node.find("Configured")]
        assert [(tag, op) for tag, op, _ in figures] == [("Processors", "Sum"), ("Processors", "Average"),
                                                         ("Processors", "Max"), ("Processors", "Min")]
        assert node.find("Id").get("op") == "Count"
        values = per_os[node.findtext("Opsys")]
        assert [v for _, _, v in figures] == pytest.approx([sum(values), statistics.mean(values), max(values), min(values)],
                                                           abs=0.01)
        seen[node.findtext("Opsys")] = int(node.findtext("Id"))
    assert seen == {name: len(values) for name, values in per_os.items()}


def test_an_alias_names_the_result_as_gold_does():
    request = (b'<Request action="Query" actor="peer"><Object>Node</Object><Get name="Configured/Processors" op="Sum" '
               b'alias="TotalProcessors"/><Get name="Id" op="Count" alias="Hosts"/></Request>')
    (response,) = responses(request)
    (node,) = response.find("Data")
    assert [(c.tag, c.get("op"), c.text) for c in node] == [("TotalProcessors", "Sum", str(sum(map(cpus, RAW)))),
                                                            ("Hosts", "Count", str(len(RAW)))]
    (response,) = responses(b'<Request action="Query" actor="peer"><Object>Node</Object><Get name="Id" alias="Host"/></Request>')
    assert [n[0].tag for n in response.find("Data")] == ["Host"] * len(RAW)
    assert [n.findtext("Host") for n in response.find("Data")] == [h["hostname"] for h in RAW]


def test_a_bad_alias_is_a_failure_naming_it():
    (response,) = responses(b'<Request action="Query" actor="p"><Object>Node</Object><Get name="Id" alias="a b"/></Request>')
    value, code, message = status(response)
    assert (value, code) == ("Failure", "315") and "alias='a b' is not an element name" in message


# -- Options, Count, Data, File, other namespaces --------------------------------------------------------


def test_offset_and_limit_options_are_honoured_after_sorting():
    (response,) = responses(fixture("query-options.xml"))
    ordered = sorted(RAW, key=lambda h: (-cpus(h), h["hostname"]))  # Tros on processors first, then Sort on Id
    assert [n.findtext("Id") for n in response.find("Data")] == [h["hostname"] for h in ordered[3:8]]
    assert status(response)[:2] == ("Success", "000") and response.findtext("Count") == "5"


def test_the_unique_option_returns_identical_records_once():
    (response,) = responses(fixture("query-unique.xml"))
    assert [n.findtext("Opsys") for n in response.find("Data")] == list(dict.fromkeys(h["os"]["name"] for h in RAW))


def test_ignored_parts_are_a_warning_naming_each_and_the_data_is_unchanged():
    (response,) = responses(fixture("query-ignored.xml"))
    value, code, message = status(response)
    assert (value, code) == ("Warning", "118")
    for part in ("Option Time", "Option ShowHidden", "Option Colour", "Data", "Count",
                 "{urn:example:site-extension}Priority"):
        assert part in message
    # the request's Data (a host that does not exist) and Count (1) change nothing
    assert [n.findtext("Id") for n in response.find("Data")] == [h["hostname"] for h in RAW if cpus(h) >= 32]


@pytest.mark.parametrize("option, message", [
    ('<Option name="Limit">ten</Option>', "Option Limit='ten' is not a whole number"),
    ('<Option name="Offset">-1</Option>', "Option Offset='-1' is not a whole number"),
    ('<Option name="Unique">perhaps</Option>', "Option Unique='perhaps' must be True or False"),
    ('<Option name="Time">yesterday</Option>', "Option Time value 'yesterday' is not a time stamp"),
    ('<Option>1</Option>', "Option needs a name attribute"),
])
def test_a_bad_option_value_is_a_failure_naming_it(option, message):
    (response,) = responses(f'<Request action="Query" actor="p"><Object>Node</Object><Get name="Id"/>{option}</Request>'.encode())
    value, code, text = status(response)
    assert (value, code) == ("Failure", "317") and message in text


def test_an_element_of_no_namespace_the_spec_does_not_define_is_still_refused():
    (response,) = responses(b'<Request action="Query" actor="p"><Object>Node</Object><Get name="Id"/><Bogus/></Request>')
    value, code, message = status(response)
    assert (value, code) == ("Failure", "302") and "unexpected element 'Bogus'" in message


# -- actions ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ACTIONS)
def test_actions_other_than_query_get_golds_answer_naming_action_and_object(action):
    (response,) = responses(fixture(f"{action.lower()}.xml"))
    value, code, message = status(response)
    assert (value, code) == ("Failure", "740")
    assert message.startswith(f"{action} is not a valid action for a Node object")
    assert response.find("Data") is None


# -- chunks ----------------------------------------------------------------------------------------------


def test_chunks_follow_golds_numbering():
    answers = responses(fixture("query-chunked.xml"))
    assert [(r.get("chunkNum"), r.get("chunkMax"), r.get("id")) for r in answers] == [
        ("1", "-1", "chunks"), ("2", "-1", "chunks"), ("3", "3", "chunks")]
    assert [int(r.findtext("Count")) for r in answers] == [20, 20, 10]
    assert [n.findtext("Id") for r in answers for n in r.find("Data")] == [h["hostname"] for h in RAW]


# -- a real `glueinfo serve`, framed as the peers frame -------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sssrmap-serve")
    config = tmp / "serve.conf"
    config.write_text(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\ntimeout = 5\n"
                      f"[node]\nsite_snapshots = {SITE}\n[run]\nstate_dir = {tmp / 'state'}\n")
    process = start_glueinfo(config, tmp / "serve.log")
    yield process
    stop_glueinfo(process)


def peer_exchange(served: Served, request: bytes) -> tuple[bytes, bytes]:
    """POST as Gold and Maui do (Transfer-Encoding: chunked, ``<hexlen>\\r\\n<payload>0\\r\\n``, no Host); (head, rest)."""
    body = envelope(request)
    sock = served.connect()
    sock.sendall(b'POST /SSSRMAP3 HTTP/1.1\r\nContent-Type: text/xml; charset="utf-8"\r\nTransfer-Encoding: chunked\r\n\r\n'
                 + b"%X\r\n" % len(body) + body + b"0\r\n")
    data = b""
    while chunk := sock.recv(65536):  # the server closes after answering such a peer
        data += chunk
    sock.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def http_chunks(rest: bytes) -> list[bytes]:
    """The chunks of a chunked body, whether each chunk's data is followed by CRLF (HTTP) or not (the peers' framing)."""
    chunks = []
    while True:
        line, _, rest = rest.partition(b"\n")
        size = int(line.strip().split(b";")[0], 16)
        if size == 0:
            return chunks
        chunks.append(rest[:size])
        rest = rest[size:]
        rest = rest[2:] if rest.startswith(b"\r\n") else rest


def served_ids(served: Served) -> list[str]:
    sock = served.connect()
    sock.sendall(b"GET /nodes.xml HTTP/1.0\r\n\r\n")
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    document = etree.fromstring(data.partition(b"\r\n\r\n")[2])
    return [n.findtext("Id") for n in document.iter("Node")]


def test_served_chunks_are_one_envelope_per_http_chunk_numbered_as_gold_does(served):
    head, rest = peer_exchange(served, fixture("query-chunked.xml"))
    assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head
    chunks = http_chunks(rest)
    ids = served_ids(served)  # the server's own list: the fixture's hosts and this machine
    assert len(chunks) == (len(ids) + 19) // 20 and len(chunks) > 1
    seen = []
    for number, chunk in enumerate(chunks, 1):
        root = etree.fromstring(chunk)  # each chunk is one whole Envelope
        assert root.tag == "Envelope"
        response = root.find("Body/Response")
        last = number == len(chunks)
        assert (response.get("chunkNum"), response.get("chunkMax")) == (str(number), str(number) if last else "-1")
        seen.extend(n.findtext("Id") for n in response.find("Data"))
    assert seen == ids


def test_served_answers_to_actions_options_and_aggregates(served):
    head, rest = peer_exchange(served, fixture("delete.xml"))
    (chunk,) = http_chunks(rest)
    assert status(etree.fromstring(chunk).find("Body/Response"))[:2] == ("Failure", "740")
    _, rest = peer_exchange(served, fixture("query-ignored.xml"))
    (chunk,) = http_chunks(rest)
    response = etree.fromstring(chunk).find("Body/Response")
    assert status(response)[:2] == ("Warning", "118")
    big = {h["hostname"] for h in RAW if cpus(h) >= 32}
    assert big <= {n.findtext("Id") for n in response.find("Data")}


def test_a_gold_style_reader_reads_the_served_chunks_one_by_one(served):
    _, rest = peer_exchange(served, fixture("query-chunked.xml"))
    numbers = []
    while True:  # as Gold::Reply::receiveChunk: size line up to LF (CR dropped), that many bytes, parse, repeat
        line, _, rest = rest.partition(b"\n")
        size = int(line.replace(b"\r", b"") or b"0", 16)
        assert size, "an empty or zero chunk size before the last chunk"
        response = etree.fromstring(rest[:size]).find("Body/Response")
        rest = rest[size:]
        numbers.append(response.get("chunkNum"))
        if response.get("chunkMax") in ("0", response.get("chunkNum")):
            break
    assert len(numbers) > 1 and re.match(rb"\s*0\r\n", rest)


def test_the_raw_socket_client_sees_the_connection_closed(served):
    # such peers send nothing after "0\r\n": the server must not wait for more, or the reads above would hang
    sock = served.connect(timeout=10)
    body = envelope(fixture("query-order.xml"))
    sock.sendall(b"POST /SSSRMAP3 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%X\r\n" % len(body) + body + b"0\r\n")
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pytest.fail("the server kept the connection open after answering a peer-framed request")
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 200")
