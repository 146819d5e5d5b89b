"""SSSRMAP queries over the 50-host fixture.  Requests are hand-built byte
strings; every expected answer is computed in plain Python from the
fixture's own JSON, never through glueinfo's engine; responses are read
element by element with plain lxml.  Signatures are checked with hashlib/hmac."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import statistics

import pytest
from lxml import etree
from paths import REPO

from glueinfo.core.model import HostSnapshot
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_xml import data_element
from glueinfo.sss.sssrmap import ObjectSet, QueryService

ROOT = REPO
FIXTURE = ROOT / "tests" / "fixtures" / "nodes" / "site50.json"
NOW = 1_700_000_100.0
RAW = json.loads(FIXTURE.read_text(encoding="utf-8"))
OFFLINE = ("wn00[1-5]",)  # Offline by config: a State we can predict without re-implementing the rules
GB = 1024


def service(key: bytes | None = None) -> QueryService:
    nodes = data_element([HostSnapshot.from_dict(d) for d in RAW], NOW, NodeSettings(offline_hosts=OFFLINE))
    objects = ObjectSet("Node", list(nodes), sss_node.DEFAULT_UNITS)
    svc = QueryService(key=key)
    svc.register("Node", lambda: objects)
    return svc


SERVICE = service()


def request(inner: str, attributes: str = 'action="Query" actor="tester"') -> bytes:
    return f"<Envelope><Body><Request {attributes}><Object>Node</Object>{inner}</Request></Body></Envelope>".encode()


def ask(body: bytes, svc: QueryService = SERVICE) -> list[etree._Element]:
    """The Response elements of the answer envelopes."""
    answers = svc.handle(body)
    responses = []
    for answer in answers:
        envelope = etree.fromstring(answer)
        assert envelope.tag == "Envelope" and [c.tag for c in envelope][0] == "Body"
        (response,) = envelope.find("Body")
        assert response.tag == "Response"
        responses.append(response)
    return responses


def ok(body: bytes, svc: QueryService = SERVICE) -> etree._Element:
    (response,) = ask(body, svc)
    assert response.findtext("Status/Value") == "Success", etree.tostring(response)
    assert response.findtext("Status/Code") == "000"
    data = response.find("Data")
    assert int(response.findtext("Count")) == len(data)
    return data


def ids(data: etree._Element) -> list[str]:
    return [node.findtext("Id") for node in data]


def hosts(predicate) -> list[str]:
    return [h["hostname"] for h in RAW if predicate(h)]


def features(h: dict) -> list[str]:
    return h["static"]["features"]


def where(name: str, value: str | None = None, **attributes: str) -> str:
    attrs = "".join(f' {k}="{v}"' for k, v in attributes.items())
    return f'<Where name="{name}"{attrs}>{value}</Where>' if value is not None else f'<Where name="{name}"{attrs}/>'


GET_ID = '<Get name="Id"/>'


# -- Where -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("condition, expected", [
    (where("Configured/Memory", "16GB", op="GT"), lambda h: h["memory"]["ram_mb"] > 16 * GB),
    (where("Configured/Memory", "16 GB", op="GE"), lambda h: h["memory"]["ram_mb"] >= 16 * GB),
    (where("Configured/Memory", "16384", op="LE"), lambda h: h["memory"]["ram_mb"] <= 16384),  # no unit: the field's MB
    (where("Configured/Memory", "8", op="LT", units="GB"), lambda h: h["memory"]["ram_mb"] < 8 * GB),
    (where("Configured/Memory", "1TB", op="EQ"), lambda h: h["memory"]["ram_mb"] == 1024 * GB),
    (where("Configured/Memory", "1.5GB"), lambda h: h["memory"]["ram_mb"] == 1536),
    (where("Configured/Memory", "0.25", op="GT", units="TB"), lambda h: h["memory"]["ram_mb"] > 256 * GB),
    (where("Available/Memory", "4GB", op="GE"), lambda h: h["memory"]["ram_available_mb"] >= 4 * GB),
    (where("Configured/Processors", "16", op="GE"), lambda h: h["cpu"]["logical_cpus"] >= 16),
    (where("Configured/Processors", "16", op="NE"), lambda h: h["cpu"]["logical_cpus"] != 16),
    (where("Configured/Network", "10Gbps", op="GE"), lambda h: (h["network"][0]["speed_mbps"] or 0) >= 10000),
    (where("Configured/Swap", "0", op="GT"), lambda h: (h["memory"]["swap_mb"] or 0) > 0),
    (where("Opsys", "Rocky Linux"), lambda h: h["os"]["name"] == "Rocky Linux"),
    (where("Arch", "x86_64", op="NE"), lambda h: h["os"]["platform_type"] != "x86_64"),
    (where("Extension[@name='CpuModel']", "EPYC|Neoverse", op="Match"), lambda h: bool(re.search("EPYC|Neoverse", h["cpu"]["model_name"]))),
    (where("Extension[@name='CpuModel']", "Xeon® Platinum"), lambda h: False),  # EQ is the whole value
    (where("Extension[@name='CpuModel']", "Xeon® Platinum", op="Match"), lambda h: "Xeon® Platinum" in h["cpu"]["model_name"]),
    (where("Extension[@name='ClockSpeed'][@type='Cpu']", "2300", op="GT"), lambda h: h["cpu"]["clock_mhz"] > 2300),
    (where("Extension[@name='Rack']", "R3"), lambda h: h["static"]["extensions"]["Rack"] == "R3"),
    (where("Feature", "IB"), lambda h: "IB" in features(h)),
    (where("Feature", "IB", op="NE"), lambda h: "IB" not in features(h)),  # NE: no value equals
    (where("Feature"), lambda h: bool(features(h))),  # a truth test: the field is there and not empty/0/false
    (where("Feature", op="NE"), lambda h: not features(h)),
    (where("Configured/Resource[@name='GPU']", "4", op="GE"), lambda h: "node_resources" in h["extra"]),
    (where("State", "Offline"), lambda h: re.fullmatch(r"wn00[1-5]\.example\.org", h["hostname"]) is not None),
    (where("Id", "wn010.example.org", op="LT"), lambda h: h["hostname"] < "wn010.example.org"),  # text compares as text
    (where("Id", "5", op="GT"), lambda h: h["hostname"] > "5"),  # a text field compares text, even with a number
    (where("Id", "(a+)+$", op="Match"), lambda h: bool(re.search("(a+)+$", h["hostname"]))),  # RE2 runs it in linear time
])
def test_where_selects_what_the_fixture_says(condition, expected):
    assert ids(ok(request(GET_ID + condition))) == hosts(expected)


def test_conjunctions_groups_and_precedence():
    ib, gpu, big = (lambda h: "IB" in features(h)), (lambda h: "GPU" in features(h)), (lambda h: h["cpu"]["logical_cpus"] >= 16)
    # (GPU or IB) and >= 16 processors
    grouped = where("Feature", "GPU", group="+1") + where("Feature", "IB", conj="Or", group="-1") + \
        where("Configured/Processors", "16", op="GE", conj="And")
    assert ids(ok(request(GET_ID + grouped))) == hosts(lambda h: (gpu(h) or ib(h)) and big(h))
    # without the group, And binds tighter: GPU or (IB and >= 16)
    plain = where("Feature", "GPU") + where("Feature", "IB", conj="Or") + where("Configured/Processors", "16", op="GE", conj="And")
    assert ids(ok(request(GET_ID + plain))) == hosts(lambda h: gpu(h) or (ib(h) and big(h)))
    # AndNot / OrNot, and a NOT applying to a whole group
    assert ids(ok(request(GET_ID + where("Feature", "IB") + where("Feature", "GPU", conj="AndNot")))) == \
        hosts(lambda h: ib(h) and not gpu(h))
    assert ids(ok(request(GET_ID + where("Feature", "IB") + where("Configured/Processors", "16", op="GE", conj="OrNot")))) == \
        hosts(lambda h: ib(h) or not big(h))
    negated_group = where("Arch", "aarch64") + where("Feature", "GPU", conj="AndNot", group="+1") + \
        where("Feature", "IB", conj="Or", group="-1")
    assert ids(ok(request(GET_ID + negated_group))) == \
        hosts(lambda h: h["os"]["platform_type"] == "aarch64" and not (gpu(h) or ib(h)))
    nested = where("Feature", "SSD", group="+2") + where("Feature", "IB", conj="Or", group="-1") + \
        where("Feature", "BigMem", conj="And", group="-1") + where("Configured/Processors", "64", op="GE", conj="Or")
    assert ids(ok(request(GET_ID + nested))) == \
        hosts(lambda h: (("SSD" in features(h) or ib(h)) and "BigMem" in features(h)) or h["cpu"]["logical_cpus"] >= 64)


# -- Get ------------------------------------------------------------------------------------------------


def test_get_keeps_the_nesting_and_the_units():
    gets = '<Get name="Id"/><Get name="Configured/Memory"/><Get name="Configured/Processors"/><Get name="Available/Memory"/>' \
           '<Get name="Extension[@name=\'CpuModel\']"/><Get name="Feature"/>'
    data = ok(request(gets + where("Configured/Memory", "64GB", op="GE")))
    expected = [h for h in RAW if h["memory"]["ram_mb"] >= 64 * GB]
    assert len(data) == len(expected)
    for node, h in zip(data, expected, strict=True):
        assert [c.tag for c in node] == ["Id", "Configured", "Available", "Extension"] + ["Feature"] * len(features(h))
        assert [c.tag for c in node.find("Configured")] == ["Memory", "Processors"]
        memory = node.find("Configured/Memory")
        assert memory.get("units") == "MB" and int(memory.text) == h["memory"]["ram_mb"]
        assert int(node.findtext("Configured/Processors")) == h["cpu"]["logical_cpus"]
        assert [c.tag for c in node.find("Available")] == ["Memory"]
        assert int(node.findtext("Available/Memory")) == h["memory"]["ram_available_mb"]
        extension = node.find("Extension")
        assert (extension.get("name"), extension.text) == ("CpuModel", h["cpu"]["model_name"])
        assert [f.text for f in node.findall("Feature")] == features(h)


def test_get_in_other_units():
    data = ok(request('<Get name="Id"/><Get name="Configured/Memory" units="GB"/>'))
    for node, h in zip(data, RAW, strict=True):
        memory = node.find("Configured/Memory")
        assert memory.get("units") == "GB" and float(memory.text) == pytest.approx(h["memory"]["ram_mb"] / 1024, abs=1e-6)


def test_no_get_returns_whole_nodes():
    data = ok(request(where("Id", "wn007.example.org")))
    (node,) = data
    whole = data_element([HostSnapshot.from_dict(RAW[6])], NOW, NodeSettings(offline_hosts=OFFLINE))[0]
    assert etree.tostring(node) == etree.tostring(whole)
    everything = ok(request(""))
    schema = etree.XMLSchema(etree.parse(str(ROOT / "glueinfo" / "sss" / "xsd" / "sss-node.xsd")))
    assert len(everything) == 50 and schema.validate(everything), schema.error_log


def test_sort_and_tros():
    data = ok(request('<Get name="Configured/Memory" op="Tros"/><Get name="Id" op="Sort"/>'))
    expected = sorted(RAW, key=lambda h: (-h["memory"]["ram_mb"], h["hostname"]))
    assert ids(data) == [h["hostname"] for h in expected]
    data = ok(request('<Get name="Id"/><Get name="Configured/Swap" op="Sort"/>'))
    with_swap = sorted((h for h in RAW if h["memory"]["swap_mb"] is not None), key=lambda h: h["memory"]["swap_mb"])
    assert ids(data) == [h["hostname"] for h in with_swap] + hosts(lambda h: h["memory"]["swap_mb"] is None)  # unknown last


def test_aggregates_over_everything():
    data = ok(request('<Get name="Id" op="Count"/><Get name="Configured/Memory" op="Sum" units="GB"/>'
                      '<Get name="Configured/Processors" op="Average"/><Get name="Available/Memory" op="Min"/>'
                      '<Get name="Available/Memory" op="Max"/>' + where("Arch", "x86_64")))
    chosen = [h for h in RAW if h["os"]["platform_type"] == "x86_64"]
    (record,) = data
    assert int(record.findtext("Id")) == len(chosen)
    memory = record.find("Configured/Memory")
    assert memory.get("units") == "GB" and float(memory.text) == pytest.approx(sum(h["memory"]["ram_mb"] for h in chosen) / 1024)
    assert float(record.findtext("Configured/Processors")) == pytest.approx(statistics.mean(h["cpu"]["logical_cpus"] for h in chosen),
                                                                             abs=1e-6)
    assert [float(m.text) for m in record.findall("Available/Memory")] == \
        [min(h["memory"]["ram_available_mb"] for h in chosen), max(h["memory"]["ram_available_mb"] for h in chosen)]


def test_group_by_opsys_and_by_a_multi_valued_feature():
    data = ok(request('<Get name="Opsys" op="GroupBy"/><Get name="Id" op="Count"/><Get name="Configured/Processors" op="Sum"/>'))
    expected = {}
    for h in RAW:
        count, cpus = expected.get(h["os"]["name"], (0, 0))
        expected[h["os"]["name"]] = (count + 1, cpus + h["cpu"]["logical_cpus"])
    assert {n.findtext("Opsys"): (int(n.findtext("Id")), int(n.findtext("Configured/Processors"))) for n in data} == expected
    assert [n.findtext("Opsys") for n in data] == sorted(expected)
    data = ok(request('<Get name="Feature" op="GroupBy"/><Get name="Id" op="Count"/>'))
    per_feature = {}
    for h in RAW:
        for feature in features(h) or [None]:
            per_feature[feature] = per_feature.get(feature, 0) + 1
    assert {n.findtext("Feature"): int(n.findtext("Id")) for n in data} == per_feature


def test_chunking():
    responses = ask(request(GET_ID, 'action="Query" actor="tester" chunking="True" chunkSize="7" id="q42"'))
    assert len(responses) == 8
    seen = []
    for number, response in enumerate(responses, 1):
        # Gold's convention: -1 while more chunks follow, the last one's own number on the last
        last = "8" if number == 8 else "-1"
        assert (response.get("chunkNum"), response.get("chunkMax"), response.get("id")) == (str(number), last, "q42")
        assert response.findtext("Status/Value") == "Success"
        assert int(response.findtext("Count")) == len(response.find("Data")) == (7 if number < 8 else 1)
        seen.extend(ids(response.find("Data")))
    assert seen == [h["hostname"] for h in RAW]
    (single,) = ask(request(GET_ID, 'action="Query" actor="tester" chunking="true"'))
    assert (single.get("chunkNum"), single.get("chunkMax"), single.findtext("Count")) == ("1", "1", "50")


def test_an_empty_answer_is_a_success_with_count_zero():
    (response,) = ask(request(GET_ID + where("Id", "nosuchhost")))
    assert [c.tag for c in response] == ["Status", "Count", "Data"]
    assert (response.findtext("Status/Value"), response.findtext("Count"), len(response.find("Data"))) == ("Success", "0", 0)


# -- failures -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, code, message", [
    (b"<Envelope><Body><Request", "301", "not well-formed"),
    (b"", "301", "empty"),
    (b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><Envelope><Body>&e;</Body></Envelope>', "301", "DTD"),
    (b"<Envelope><Body/></Envelope>", "302", "no Body/Request"),
    (b"<Reply/>", "302", "expected an Envelope"),
    (request("", 'actor="x"'), "312", "no action"),
    (request("", 'action="Query"'), "312", "no actor"),
    (b'<Envelope><Body><Request action="Query" actor="x"/></Body></Envelope>', "311", "names no Object"),
    (request("", 'action="Delete" actor="x"'), "740", "Delete is not a valid action for a Node object"),
    (b'<Envelope><Body><Request action="Query" actor="x"><Object>Job</Object></Request></Body></Envelope>', "313", "'Job' is not served"),
    (b'<Envelope><Body><Request action="Query" actor="x"><Object>Node</Object><Object>Job</Object></Request></Body></Envelope>',
     "318", "joins"),
    (request('<Get name="//Memory"/>'), "315", "'//Memory' is not a supported"),
    (request('<Get name="Configured/Memory" op="median"/>'), "315", "'median' is not one of"),
    (request('<Get name="Opsys"/><Get name="Id" op="Count"/>'), "315", "Opsys must be aggregated"),
    (request('<Get name="Opsys" op="GroupBy"/>'), "315", "GroupBy needs an aggregated"),
    (request('<Get name="Opsys" op="Sum"/>'), "315", "needs numbers"),
    (request('<Get name="Configured/Memory" units="Mbps"/>'), "315", "cannot convert"),
    (request(where("Configured/Memory", "4", op="BIGGER")), "316", "'BIGGER' is not one of"),
    (request(where("Configured/Memory", "4", conj="Xor")), "316", "'Xor' is not one of"),
    (request(where("Id", "a", group="+1")), "316", "parenthesis(es) open"),
    (request(where("Id", "a", group="-1")), "316", "closes a parenthesis never opened"),
    (request(where("Id", "a", group="two")), "316", "group='two' is not +N or -N"),
    (request(where("Configured/Memory", op="GT")), "316", "needs a value"),
    (request(where("Configured/Memory", "lots", op="LT")), "316", "value 'lots' is not a number"),
    (request(where("Id", "[", op="Match")), "316", "'[' is refused by the RE2 matcher: missing ]"),
    (request(where("Configured/Memory", "4GB", units="MB")), "316", "disagree"),
    (request('<Where>x</Where>'), "316", "needs a name"),
    (request("", 'action="Query" actor="x" chunkSize="0"'), "317", "chunkSize"),
    (request("", 'action="Query" actor="x" chunking="maybe"'), "317", "chunking"),
    (request('<Set name="State">Offline</Set>'), "318", "Set belongs"),
])
def test_malformed_or_unsupported_requests_get_a_failure_naming_the_problem(body, code, message):
    (response,) = ask(body)
    assert [c.tag for c in response] == ["Status"]
    assert response.findtext("Status/Value") == "Failure"
    assert response.findtext("Status/Code") == code
    assert message in response.findtext("Status/Message")


# -- signatures -------------------------------------------------------------------------------------------------

KEY = b"7f3a-shared-secret"


def signed(body: bytes, key: bytes = KEY, actor: str = "tester", tamper: bytes | None = None) -> bytes:
    """An Envelope signed by hand: SHA1 over the Body bytes as sent, HMAC-SHA1 over that digest."""
    digest = hashlib.sha1(body).digest()
    signature = hmac.new(key, digest, hashlib.sha1).digest()
    sent_body = tamper if tamper is not None else body
    return (b"<Envelope>" + sent_body + b"<Signature><DigestValue>" + base64.b64encode(digest) +
            b"</DigestValue><SignatureValue>" + base64.b64encode(signature) +
            b'</SignatureValue><SecurityToken type="Symmetric" name="' + actor.encode() + b'"></SecurityToken></Signature></Envelope>')


BODY = b'<Body><Request action="Query" actor="tester"><Object>Node</Object><Get name="Id"/>' \
       b'<Where name="Feature">IB</Where></Request></Body>'


def test_with_a_key_requests_must_be_signed_and_answers_are():
    keyed = service(KEY)
    (response,) = ask(signed(BODY), keyed)
    assert response.findtext("Status/Code") == "000"
    assert ids(response.find("Data")) == hosts(lambda h: "IB" in features(h))
    # the answer's own signature, checked independently
    (answer,) = keyed.handle(signed(BODY))
    body = re.search(rb"<Body>.*</Body>", answer, re.S).group(0)
    envelope = etree.fromstring(answer)
    digest = hashlib.sha1(body).digest()
    assert base64.b64decode(envelope.findtext("Signature/DigestValue")) == digest
    assert base64.b64decode(envelope.findtext("Signature/SignatureValue")) == hmac.new(KEY, digest, hashlib.sha1).digest()
    assert envelope.find("Signature/SecurityToken").attrib == {"type": "Symmetric", "name": "tester"}


@pytest.mark.parametrize("body, code, message", [
    (b"<Envelope>" + BODY + b"</Envelope>", "421", "requires signed requests"),
    (BODY[6:-7], "421", "requires signed requests"),  # a bare Request
    (signed(BODY, key=b"wrong key"), "422", "SignatureValue does not match"),
    (signed(BODY, tamper=BODY.replace(b"IB", b"GPU")), "422", "DigestValue does not match"),
    (signed(BODY).replace(b"<DigestValue>", b"<DigestValue>!!"), "422", "not base64"),
    (signed(BODY).replace(b'type="Symmetric"', b'type="Password"'), "423", "not supported"),
    (re.sub(rb"<SignatureValue>.*</SignatureValue>", b"", signed(BODY)), "422", "needs both"),
])
def test_unsigned_or_badly_signed_requests_are_refused(body, code, message):
    (response,) = ask(body, service(KEY))
    assert response.findtext("Status/Value") == "Failure"
    assert response.findtext("Status/Code") == code and message in response.findtext("Status/Message")
    assert response.find("Data") is None


def test_without_a_key_signatures_are_optional_but_a_wrong_digest_is_still_refused():
    assert ids(ok(signed(BODY))) == hosts(lambda h: "IB" in features(h))
    assert ids(ok(b"<Envelope>" + BODY + b"</Envelope>")) == hosts(lambda h: "IB" in features(h))
    (response,) = ask(signed(BODY, tamper=BODY.replace(b"IB", b"GPU")))
    assert response.findtext("Status/Code") == "422"


def test_a_digest_over_the_reserialized_body_is_accepted_too():
    # A peer that builds the tree and serializes <Body> with libxml2 (Gold's XML::LibXML does) after
    # writing it with other spacing: the digest is over libxml2's form, not the bytes sent.
    sent = b'<Body>\n  <Request actor="tester" action="Query" ><Object>Node</Object><Get name="Id"></Get></Request>\n</Body>'
    canonical = etree.tostring(etree.fromstring(sent))
    digest = hashlib.sha1(canonical).digest()
    envelope = (b"<Envelope>" + sent + b"<Signature><DigestValue>" + base64.b64encode(digest) + b"</DigestValue><SignatureValue>" +
                base64.b64encode(hmac.new(KEY, digest, hashlib.sha1).digest()) + b"</SignatureValue></Signature></Envelope>")
    (response,) = ask(envelope, service(KEY))
    assert response.findtext("Status/Code") == "000" and response.findtext("Count") == "50"


# -- another object class: the engine is not tied to Node -----------------------------------------------------------


def test_a_registered_job_source_is_queried_the_same_way():
    jobs = etree.fromstring(b"<Data>"
                            b"<Job><Id>1</Id><State>Running</State><User>ann</User><Requested><Memory units='GB'>2</Memory>"
                            b"<Processors>4</Processors></Requested></Job>"
                            b"<Job><Id>2</Id><State>Idle</State><User>bob</User><Requested><Memory>512</Memory>"
                            b"<Processors>1</Processors></Requested></Job>"
                            b"<Job><Id>3</Id><State>Running</State><User>bob</User><Requested><Memory>4096</Memory></Requested></Job>"
                            b"</Data>")
    svc = QueryService()
    svc.register("Job", lambda: ObjectSet("Job", list(jobs), {"Memory": "MB"}))
    body = (b'<Envelope><Body><Request action="Query" actor="x"><Object>Job</Object><Get name="Id"/><Get name="Requested/Memory"/>'
            b'<Where name="Requested/Memory" op="GE">1GB</Where><Where name="State" conj="And">Running</Where></Request></Body></Envelope>')
    data = ok(body, svc)
    assert [(j.findtext("Id"), j.find("Requested/Memory").text, j.find("Requested/Memory").get("units")) for j in data] == \
        [("1", "2", "GB"), ("3", "4096", None)]
    grouped = ok(b'<Envelope><Body><Request action="Query" actor="x"><Object>Job</Object><Get name="User" op="GroupBy"/>'
                 b'<Get name="Requested/Processors" op="Sum"/></Request></Body></Envelope>', svc)
    assert [(j.findtext("User"), j.findtext("Requested/Processors")) for j in grouped] == [("ann", "4"), ("bob", "1")]


def test_a_jobs_node_list_answers_for_each_of_its_nodes():
    # Job XML writes a job on several nodes as one <Node aggregation="List"> (the spec allows one Node)
    jobs = etree.fromstring(b"<Data>"
                            b"<Job><Id>102</Id><Delivered><Node aggregation='List'>n01.example.org,n02.example.org</Node>"
                            b"</Delivered></Job>"
                            b"<Job><Id>107</Id><Delivered><Node>n02.example.org</Node></Delivered></Job>"
                            b"<Job><Id>108</Id><Delivered><Node>n03.example.org</Node></Delivered></Job>"
                            b"<Job><Id>109</Id><Delivered><Node aggregation='List' delimiter=';'>n2;n03.example.org</Node>"
                            b"</Delivered></Job>"
                            b"</Data>")
    svc = QueryService()
    svc.register("Job", lambda: ObjectSet("Job", list(jobs)))

    def ids(where: bytes) -> list[str]:
        body = (b'<Envelope><Body><Request action="Query" actor="x"><Object>Job</Object><Get name="Id"/>' + where +
                b'</Request></Body></Envelope>')
        return [j.findtext("Id") for j in ok(body, svc)]

    assert ids(b'<Where name="Delivered/Node">n02.example.org</Where>') == ["102", "107"]
    assert ids(b'<Where name="Delivered/Node" op="NE">n02.example.org</Where>') == ["108", "109"]
    assert ids(b'<Where name="Delivered/Node">n03.example.org</Where>') == ["108", "109"]
    # Match tests each node name on its own: ^n2$ is one whole item of 109, in no other job
    assert ids(b'<Where name="Delivered/Node" op="Match">^n2$</Where>') == ["109"]
    grouped = ok(b'<Envelope><Body><Request action="Query" actor="x"><Object>Job</Object>'
                 b'<Get name="Delivered/Node" op="GroupBy"/><Get name="Id" op="Count"/></Request></Body></Envelope>', svc)
    assert [(j.findtext("Delivered/Node"), j.findtext("Id")) for j in grouped] == [
        ("n01.example.org", "1"), ("n02.example.org", "2"), ("n03.example.org", "2"), ("n2", "1")]
