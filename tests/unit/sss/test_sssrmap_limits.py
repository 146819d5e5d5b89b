"""SSSRMAP queries that must be refused, bounded or answered exactly (issue 12):
the RE2 matcher, fields the object class does not have, values a number field
cannot compare with, the per-request budget on a clock the test controls, and
absurd requests (deep groups, long values, exploding GroupBy).

As in test_sssrmap.py, expected answers are computed from the fixture's own
JSON in plain Python, never through the engine; responses are read with lxml.
"""

from __future__ import annotations

import itertools
import math
import re
from xml.sax.saxutils import escape

import pytest
from lxml import etree
from paths import REPO
from test_sssrmap import GB, GET_ID, NOW, OFFLINE, RAW, features, hosts, ids, request, service, where

from glueinfo.core.model import HostSnapshot
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_xml import data_element
from glueinfo.sss.sssrmap import ObjectSet, QueryService
from glueinfo.sss.sssrmap.fields import JOB, NODE

SERVICE = service()


def answer(body: bytes, svc: QueryService = SERVICE) -> etree._Element:
    (envelope,) = svc.handle(body)
    (response,) = etree.fromstring(envelope).find("Body")
    return response


def failure(body: bytes, code: str, svc: QueryService = SERVICE) -> str:
    response = answer(body, svc)
    assert [c.tag for c in response] == ["Status"], etree.tostring(response)
    assert (response.findtext("Status/Value"), response.findtext("Status/Code")) == ("Failure", code), etree.tostring(response)
    return response.findtext("Status/Message")


def success(body: bytes, svc: QueryService = SERVICE) -> list[str]:
    response = answer(body, svc)
    assert response.findtext("Status/Code") == "000", etree.tostring(response)
    return ids(response.find("Data"))


# -- Match: RE2, searched, never backtracking ---------------------------------------------------------


@pytest.mark.parametrize("pattern, expected", [
    ("example", lambda name: True),  # searched anywhere in the value, not matched whole
    (r"^wn00[1-5]\.", lambda name: re.match(r"wn00[1-5]\.", name) is not None),
    (r"org$", lambda name: name.endswith("org")),
    (r"(?i)WN01", lambda name: "wn01" in name),
    (r"\.example\.org\z", lambda name: name.endswith(".example.org")),
    # The patterns of issue 12: Python's re backtracks for minutes on these; the answer is simply "no Z".
    (r"(.|.)*Z", lambda name: "Z" in name),
    (r"^(.|.){0,27}Z", lambda name: "Z" in name[:28]),
    (r"(x+x+)+y", lambda name: False),
])
def test_match_searches_with_re2(pattern, expected):
    assert success(request(GET_ID + where("Id", pattern, op="Match"))) == [h["hostname"] for h in RAW if expected(h["hostname"])]


@pytest.mark.parametrize("pattern, reason", [
    (r"(wn)\1", r"invalid escape sequence: \1 (RE2 has no backreferences or lookaround)"),
    (r"wn(?=0)", "invalid perl operator: (?= (RE2 has no backreferences or lookaround)"),
    (r"(?<!x)wn", "invalid perl operator: (?<"),
    (r"org\Z", r"invalid escape sequence: \Z (RE2 writes the end of the text \z or $)"),
    (r"a{1001}", "invalid repetition size: {1001}"),
    (r"(", "missing )"),
    (r"\p{L}{1000}", "its compiled form is over the matcher's 1024 KiB"),
])
def test_what_re2_cannot_run_is_a_failure_naming_the_pattern_and_the_reason(pattern, reason):
    message = failure(request(GET_ID + where("Id", escape(pattern), op="Match")), "316")
    assert message.startswith(f"Where Id Match pattern {pattern!r} is refused by the RE2 matcher: ")
    assert reason in message


def test_match_patterns_are_bounded_in_length_and_program_size():
    message = failure(request(GET_ID + where("Id", "a" * 300, op="Match")), "316")
    assert "is 300 characters, over the 256 accepted" in message
    message = failure(request(GET_ID + where("Id", ".{1000}.{1000}", op="Match")), "316")
    assert message == "Where Id Match pattern '.{1000}.{1000}' compiles to 16004 RE2 instructions, over the 10000 accepted " \
                      "(simplify the repetitions)"
    assert success(request(GET_ID + where("Id", ".{1000}", op="Match"))) == []  # large but allowed: no name is 1000 long


# -- fields: the object class's vocabulary, not the data ------------------------------------------------------


@pytest.mark.parametrize("body, code, message", [
    (request(GET_ID + where("Configured/Memroy", "4GB", op="GE")), "316",
     "Where 'Configured/Memroy': Node objects have no field 'Configured/Memroy' (fields in Configured: Disk, Memory, Network, "
     "Processors, Resource, Swap)"),
    (request(GET_ID + where("Bogus", "1")), "316", "Node objects have no field 'Bogus' (fields at the top level: Arch, "),
    (request(GET_ID + where("Id/Part", "x")), "316", "no field 'Id/Part' (it holds no fields)"),
    (request('<Get name="Configured/Speed"/>'), "315", "Get 'Configured/Speed': Node objects have no field 'Configured/Speed'"),
    (request('<Get name="Colour" op="GroupBy"/><Get name="Id" op="Count"/>'), "315", "no field 'Colour'"),
])
def test_a_name_the_object_class_does_not_have_is_a_failure_naming_it(body, code, message):
    assert message in failure(body, code)


def rendered(path: str) -> int:
    """How many fixture Nodes carry ``path``: counted on the renderer's XML with plain lxml, not through the engine."""
    return sum(1 for node in data_element([HostSnapshot.from_dict(d) for d in RAW], NOW, NodeSettings(offline_hosts=OFFLINE))
               if node.find(path) is not None)


def test_an_optional_field_no_object_has_is_a_legal_query_with_no_results():
    assert rendered("Utilized/Network") == 0 and rendered("Configured/Resource") == 5
    assert success(request(GET_ID + where("Utilized/Network", "1", op="GE"))) == []
    assert success(request(GET_ID + where("Configured/Resource[@name='FPGA']", "1", op="GE"))) == []
    assert success(request(GET_ID + where("Extension[@name='NoSuchFact']", "x"))) == []  # Extension names are open
    response = answer(request('<Get name="Id"/><Get name="Utilized/Network"/>' + where("Id", "wn001.example.org")))
    assert etree.tostring(response.find("Data")) == b"<Data><Node><Id>wn001.example.org</Id></Node></Data>"


def test_an_object_class_without_a_vocabulary_accepts_every_name():
    things = etree.fromstring(b"<Data><Thing><Id>a</Id><Size units='GB'>2</Size></Thing><Thing><Id>b</Id></Thing></Data>")
    svc = QueryService()
    svc.register("Thing", lambda: ObjectSet("Thing", list(things), {}))
    body = b'<Envelope><Body><Request action="Query" actor="x"><Object>Thing</Object><Get name="Id"/>' \
           b'<Where name="Size" op="GE">1GB</Where><Where name="Whatever/Else" conj="Or"/></Request></Body></Envelope>'
    assert success(body, svc) == ["a"]


def test_the_vocabularies_are_the_xml_schemas():
    xs = "{http://www.w3.org/2001/XMLSchema}"

    def children(schema: str, type_name: str) -> set[str]:
        tree = etree.parse(str(REPO / "glueinfo" / "sss" / "xsd" / schema))
        (complex_type,) = tree.getroot().iterfind(f"{xs}complexType[@name='{type_name}']")
        return {e.get("name") for e in complex_type.iter(f"{xs}element")}

    assert children("sss-node.xsd", "NodeType") == set(NODE.children)
    for category in ("Configured", "Available", "Utilized"):
        assert children("sss-node.xsd", "CategoryType") == set(NODE.children[category].children)
    assert children("sss-job.xsd", "JobType") == set(JOB.children)
    assert children("sss-job.xsd", "RequestedType") == set(JOB.children["Requested"].children)
    assert children("sss-job.xsd", "DeliveredType") == set(JOB.children["Delivered"].children)


# -- values: a number field compares numbers; nothing falls back to text --------------------------------------------


@pytest.mark.parametrize("condition, message", [
    # issue 12 item 5: each of these used to answer Success with text comparison's wrong answer
    (where("Configured/Memory", "64XB", op="GE"), "value '64XB': unknown unit 'XB'"),
    (where("Configured/Memory", "1e400", op="GE"), "value '1e400' is not a number"),
    (where("Configured/Memory", "0x10", op="GE"), "value '0x10' is not a number"),
    (where("Configured/Memory", "nan", op="LT"), "value 'nan' is not a number"),
    (where("Configured/Memory", "inf", op="LE"), "value 'inf' is not a number"),
    (where("Configured/Memory", "-inf", op="GT"), "value '-inf' is not a number"),
    (where("Configured/Memory", "64", op="GE", units="XB"), "units='XB': unknown unit 'XB'"),
    (where("Configured/Memory", "big"), "value 'big' is not a number"),  # EQ on a number field too
    (where("Configured/Memory", "10Gbps", op="GE"), "value '10Gbps': Gbps is a unit of rate, but Configured/Memory is in bytes (MB)"),
    (where("Configured/Network", "1GB", op="GE"), "GB is a unit of bytes, but Configured/Network is in rate (Mbps)"),
    (where("Configured/Processors", "4GB", op="GE"), "GB is a unit of bytes, but Configured/Processors is a plain number"),
    (where("Extension[@name='ClockSpeed']", "fast", op="GT"), "value 'fast' is not a number"),
    (where("Opsys", "Rocky Linux", units="GB"), "units='GB' given, but Opsys is text"),
    (where("Configured", "4", op="GE"), "Configured holds other fields"),
    (where("Configured/Memory", "4GB", op="GE", units="MB"), "value '4GB' and units='MB' disagree"),
])
def test_a_value_a_number_field_cannot_compare_with_is_a_failure_naming_it(condition, message):
    assert message in failure(request(GET_ID + condition), "316")


@pytest.mark.parametrize("get, message", [
    ('<Get name="Configured/Memory" units="XB"/>', "units='XB': unknown unit 'XB', cannot convert Configured/Memory (MB) to it"),
    ('<Get name="Configured/Memory" units="Gbps"/>', "cannot convert Configured/Memory (MB) to Gbps, a unit of rate"),
    ('<Get name="Configured/Processors" units="GB"/>', "cannot convert Configured/Processors (a plain number) to GB"),
    ('<Get name="Opsys" units="GB"/>', "Opsys is text; units apply to numbers"),
])
def test_get_units_are_checked_against_the_field_whatever_the_data(get, message):
    # the same answer with no object selected: the vocabulary decides, not the data
    for condition in ("", where("Id", "nosuchhost")):
        assert message in failure(request('<Get name="Id"/>' + get + condition), "315")


@pytest.mark.parametrize("condition, expected", [
    (where("Configured/Memory", "1e2", op="GT", units="GB"), lambda h: h["memory"]["ram_mb"] > 100 * GB),  # exponent form is fine
    (where("Configured/Memory", "-1", op="GT"), lambda h: True),
    (where("Configured/Memory", "+16384"), lambda h: h["memory"]["ram_mb"] == 16384),
    (where("Configured/Memory", "4096", op="NE"), lambda h: h["memory"]["ram_mb"] != 4096),
    (where("Configured/Memory", "16GiB", op="GE"), lambda h: h["memory"]["ram_mb"] >= 16 * GB),
    (where("Extension[@name='ClockSpeed']", "2300", op="GT"), lambda h: h["cpu"]["clock_mhz"] > 2300),
    (where("Extension[@name='CpuModel']", "5", op="GT"), lambda h: h["cpu"]["model_name"] > "5"),  # text: compared as text
    (where("Extension[@name='Rack']", "R2", op="GE"), lambda h: h["static"]["extensions"]["Rack"] >= "R2"),
    (where("Configured/Resource[@name='GPU']", "4"), lambda h: "node_resources" in h["extra"]),
    (where("Feature", "IB", op="NE"), lambda h: "IB" not in features(h)),
])
def test_values_a_field_can_compare_with_still_answer(condition, expected):
    assert success(request(GET_ID + condition)) == hosts(expected)


def test_units_the_data_names_compare_where_some_value_carries_them():
    nodes = etree.fromstring(b"<Data><Node><Id>a</Id><Configured><Resource name='Licences' units='seats'>10</Resource></Configured></Node>"
                             b"<Node><Id>b</Id><Configured><Resource name='Licences' units='seats'>3</Resource></Configured></Node></Data>")
    svc = QueryService()
    svc.register("Node", lambda: ObjectSet("Node", list(nodes), {}))
    body = b'<Envelope><Body><Request action="Query" actor="x"><Object>Node</Object><Get name="Id"/>' \
           b'<Where name="Configured/Resource" op="GE" units="%s">5</Where></Request></Body></Envelope>'
    assert success(body % b"seats", svc) == ["a"]
    assert "unknown unit 'cores'" in failure(body % b"cores", "316", svc)


# -- the budget, on a clock the test controls -------------------------------------------------------------------------


class Clock:
    """Reads 0 until ``after`` reads have been made, then ``later``: a query overruns at a place the test picks."""

    def __init__(self, after: int = 1, later: float = 100.0):
        self.reads, self.after, self.later = 0, after, later

    def __call__(self) -> float:
        self.reads += 1
        return 0.0 if self.reads <= self.after else self.later


def node_objects() -> ObjectSet:
    """The fixture's Nodes with empty caches (test_sssrmap's service() builds the same)."""
    nodes = data_element([HostSnapshot.from_dict(d) for d in RAW], NOW, NodeSettings(offline_hosts=OFFLINE))
    return ObjectSet("Node", list(nodes), sss_node.DEFAULT_UNITS)


def budgeted(clock: Clock, budget: float | None = 2.0, objects: ObjectSet | None = None) -> QueryService:
    chosen = objects if objects is not None else node_objects()
    svc = QueryService(budget_s=budget, clock=clock)
    svc.register("Node", lambda: chosen)
    return svc


@pytest.mark.parametrize("inner, step", [
    (GET_ID + where("Feature", "IB"), "finding Feature"),
    (GET_ID + where("Id", "wn0", op="Match"), "finding Id"),
    ('<Get name="Configured/Memory" op="Sort"/>', "finding Configured"),
    ('<Get name="Opsys" op="GroupBy"/><Get name="Id" op="Count"/>', "finding Opsys"),
    ("", "writing whole Node objects"),
])
def test_a_query_past_its_budget_is_a_740_failure_naming_the_budget(inner, step):
    message = failure(request(inner), "740", budgeted(Clock()))
    assert message.startswith(f"the query ran past its budget of 2 s of work while {step}")


def test_the_budget_is_checked_in_every_phase_of_a_query():
    inner = ('<Get name="Configured/Memory" op="Tros"/><Get name="Id"/><Get name="Available/Memory" units="GB"/>'
             + where("Configured/Memory", "8GB", op="GE") + where("Feature", "IB", conj="Or") + where("Id", "wn", op="Match", conj="And"))
    expected = sorted((h for h in RAW if h["memory"]["ram_mb"] >= 8 * GB or "IB" in features(h)), key=lambda h: -h["memory"]["ram_mb"])
    objects = node_objects()
    unhurried = Clock(after=10**9)
    assert success(request(inner), budgeted(unhurried, objects=objects)) == [h["hostname"] for h in expected]
    # the caches are warm now: the clock is read only by the query's own loops
    reads = Clock(after=10**9)
    success(request(inner), budgeted(reads, objects=objects))
    steps = set()
    for after in range(1, reads.reads):
        message = failure(request(inner), "740", budgeted(Clock(after=after), objects=objects))
        steps.add(message.split(" while ", 1)[1].split(";", 1)[0])
    # (Configured/Memory GE is a binary search in a warm sorted column: no loop over objects to check in)
    assert steps == {"evaluating Where Feature EQ", "evaluating Where Id Match",
                     "combining Where conditions", "sorting by Configured/Memory", "converting Available/Memory to GB",
                     "putting the records together"}


def test_without_a_budget_or_within_it_the_query_is_answered():
    assert success(request(GET_ID + where("Feature", "IB")), budgeted(Clock(), None)) == hosts(lambda h: "IB" in features(h))
    assert success(request(GET_ID + where("Feature", "IB")), budgeted(Clock(after=10**9))) == hosts(lambda h: "IB" in features(h))


def test_the_budget_is_checked_every_slice_of_objects_not_only_between_steps():
    elements = [etree.fromstring(f"<Node><Id>n{i}</Id><Feature>F{i % 7}</Feature></Node>".encode()) for i in range(20_000)]
    objects = ObjectSet("Node", elements, {})
    clock = Clock(after=10)
    svc = QueryService(budget_s=1.0, clock=clock)
    svc.register("Node", lambda: objects)
    message = failure(request(GET_ID + where("Feature", "F3")), "740", svc)
    assert "budget of 1 s" in message
    assert clock.reads == 11  # stopped at the first look after the deadline: ~10 slices of 256, not 20,000 objects


@pytest.mark.parametrize("budget", [0, -1, math.nan])
def test_a_budget_must_be_a_positive_number_of_seconds(budget):
    with pytest.raises(ValueError, match="query budget must be a positive number"):
        QueryService(budget_s=budget)


# -- absurd requests: each answered or refused with a message, in bounded time ------------------------------------------


@pytest.mark.parametrize("attributes, message", [
    ('chunkSize="1e9"', "chunkSize='1e9' is not written as a whole number in decimal digits: chunkSize must be a whole number "
                        "of objects per chunk from 1 to 1000000000"),
    ('chunkSize="10000000000"', "chunkSize='10000000000' is out of range: chunkSize must be a whole number of objects per chunk "
                                "from 1 to 1000000000"),
    ('chunkSize="0"', "chunkSize='0' is out of range"),
    ('chunkSize="-5"', "chunkSize='-5' is not written as a whole number in decimal digits"),
    ('chunkSize="' + "9" * 5000 + '"', "chunkSize='99999999999999999999' is out of range"),
])
def test_chunk_size_messages_say_what_was_wrong(attributes, message):
    assert message in failure(request(GET_ID, f'action="Query" actor="x" chunking="True" {attributes}'), "317")


def test_the_largest_chunk_size_is_one_chunk():
    response = answer(request(GET_ID, 'action="Query" actor="x" chunking="True" chunkSize="1000000000"'))
    assert (response.get("chunkNum"), response.get("chunkMax"), response.findtext("Count")) == ("1", "1", str(len(RAW)))


@pytest.mark.parametrize("group, message", [
    ("+1000000", "Where Id group='+1000000' is out of range: N in +N/-N must be from 0 to 32 (parentheses nest at most 32 deep)"),
    ("-1000000", "group='-1000000' is out of range"),
    ("+" + "9" * 5000, "is out of range: N in +N/-N must be from 0 to 32"),
    ("+33", "group='+33' is out of range"),
    ("1.5", "Where Id group='1.5' is not +N or -N: group is a whole number of parentheses to open (+N) or close (-N), N from 0 to 32"),
])
def test_group_messages_say_what_was_wrong(group, message):
    assert message in failure(request(GET_ID + where("Id", "a", group=group)), "316")


def test_groups_nest_up_to_the_limit_and_no_deeper():
    # 32 deep: ((((...(IB or GPU)...)))) and 16 cores: answered exactly
    deep = where("Feature", "IB", group="+32") + where("Feature", "GPU", conj="Or", group="-32") + \
        where("Configured/Processors", "16", op="GE")
    assert success(request(GET_ID + deep)) == \
        hosts(lambda h: ("IB" in features(h) or "GPU" in features(h)) and h["cpu"]["logical_cpus"] >= 16)
    deeper = where("Feature", "IB", group="+16") + where("Feature", "GPU", conj="Or", group="+16") + \
        where("Feature", "SSD", group="+16") + "".join(where("Id", "x", group="-16") for _ in range(3))
    assert "Where Feature group=+16 nests parentheses 48 deep, over the 32 accepted" in failure(request(GET_ID + deeper), "316")


def test_many_conditions_are_answered_and_too_many_refused():
    # Object, Get and 254 Wheres: the 256 elements accepted
    wheres = where("Feature", "IB") + "".join(where("Feature", "GPU", conj="OrNot" if n % 2 else "Or") for n in range(253))
    assert success(request(GET_ID + wheres)) == hosts(lambda h: True)  # IB or GPU or not GPU ...: everything
    wheres = where("Feature", "IB") + "".join(where("Feature", "GPU", conj="Or") for _ in range(253))
    assert success(request(GET_ID + wheres)) == hosts(lambda h: "IB" in features(h) or "GPU" in features(h))
    message = failure(request(GET_ID + wheres + where("Id", "x")), "318")
    assert "Request has 257 elements, more than the 256 accepted" in message


def test_long_values_are_refused_with_their_length():
    message = failure(request(GET_ID + where("Id", "w" * 100_000)), "316")
    assert "is 100000 characters, over the 1024 accepted" in message and len(message) < 300
    assert success(request(GET_ID + where("Id", "w" * 1024))) == []


def test_group_by_that_would_explode_is_refused_before_it_is_built():
    # k GroupBy Gets on the multi-valued Feature put each host in (its feature count)^k groups
    per_host = [max(1, len(features(h))) for h in RAW]
    k = next(k for k in itertools.count(1) if sum(n ** k for n in per_host) > 1_000_000)
    gets = '<Get name="Feature" op="GroupBy"/>' * k + '<Get name="Id" op="Count"/>'
    assert "the objects fall in over 1000000 groups in all" in failure(request(gets), "315")
    fewer = '<Get name="Feature" op="GroupBy"/>' * 2 + '<Get name="Id" op="Count"/>'
    response = answer(request(fewer))
    assert int(response.findtext("Count")) == len({(a, b) for h in RAW for a in (features(h) or [None]) for b in (features(h) or [None])})
