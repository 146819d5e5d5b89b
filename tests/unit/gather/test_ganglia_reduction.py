"""The byte-level reduction Ganglia documents go through before parsing.

glueinfo reads documents as gmond and gmetad write them by keeping only the
GRID/CLUSTER/HOST tags and the metrics it maps (packed_document) and parsing
that with glueinfo.core.xmlsafe; anything else takes the general path that parses
the whole document.  These tests check what a user relies on: the reduction
is taken for real gmond/gmetad output (else the speed is lost silently), it
changes no result (values worked out by hand, and the general path, checked
against hand-worked fixtures in test_ganglia.py, as the reference), documents
it cannot follow safely give it up, and hostile or broken input is still
refused in one line.
"""

from __future__ import annotations

import socket
import threading

import pytest
from paths import FIXTURES

from glueinfo.core.hostrange import Target
from glueinfo.gather.sources.ganglia import GangliaError, packed_document, parse_ganglia, parse_general, read_port

FIXTURES = FIXTURES / "ganglia"
NOW = 1800000000.0
GMOND = (FIXTURES / "gmond-3.7.2-one-host.xml").read_bytes()
DTD = GMOND[: GMOND.index(b"<GANGLIA_XML")]  # gmond's own header: XML declaration and internal DTD


def metric(name: str, val: str, kind: str = "float", units: str = "", extra: bool = True) -> str:
    """A METRIC as gmond 3.7 writes it (with EXTRA_DATA), or as before 3.1 (self-closing)."""
    head = f'<METRIC NAME="{name}" VAL="{val}" TYPE="{kind}" UNITS="{units}" TN="3" TMAX="60" DMAX="0" SLOPE="both"'
    if not extra:
        return head + "/>\n"
    return (head + f'>\n<EXTRA_DATA>\n<EXTRA_ELEMENT NAME="GROUP" VAL="g"/>\n<EXTRA_ELEMENT NAME="DESC" VAL="{name}"/>\n'
            "</EXTRA_DATA>\n</METRIC>\n")


def host(name: str, *metrics: str, tn: int = 5) -> str:
    return (f'<HOST NAME="{name}" IP="10.0.0.1" TAGS="" REPORTED="1799999995" TN="{tn}" TMAX="20" DMAX="0" '
            f'LOCATION="unspecified" GMOND_STARTED="1799990000">\n' + "".join(metrics) + "</HOST>\n")


def document(*hosts: str, header: bytes = DTD) -> bytes:
    return header + ('<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">\n<CLUSTER NAME="c" LOCALTIME="1800000000" OWNER="o" '
                     'LATLONG="unspecified" URL="unspecified">\n' + "".join(hosts) + "</CLUSTER>\n</GANGLIA_XML>\n").encode("latin-1")


WORKER = host("wn1", metric("cpu_num", "16", "uint16", "CPUs"), metric("bytes_in", "1.5", units="bytes/sec"),
              metric("mem_total", "2097152", units="KB"), metric("load_one", "0.50", units=" "),
              metric("os_release", "6.1.0-18-amd64", "string"))


def parse(data: bytes):
    return parse_ganglia(data, fetched_at=NOW, max_bytes=2**20)


def same_as_general(data: bytes):
    """parse_ganglia's report, after checking it equals the general path's (the reference)."""
    report = parse(data)
    reference = parse_general(data, fetched_at=NOW, max_bytes=2**20)
    assert report.snapshots == reference.snapshots
    assert report.failures == reference.failures
    return report


# -- the reduction is taken for what gmond and gmetad write ---------------------------------------


@pytest.mark.parametrize("name", ["gmond-3.7.2-one-host.xml", "gmetad-example-site.xml"])
def test_recorded_gmond_and_gmetad_documents_take_the_reduction(name):
    data = (FIXTURES / name).read_bytes()
    packed = packed_document(data)
    assert packed is not None and len(packed) < len(data) / 3
    assert b"EXTRA_DATA" not in packed and b"<METRIC" not in packed and b"<!DOCTYPE" not in packed
    same_as_general(data)


def test_packed_document_keeps_the_tags_and_lists_the_mapped_metrics():
    packed = packed_document(document(WORKER))
    assert packed == (
        b'<?xml version="1.0" encoding="ISO-8859-1" standalone="yes"?>\n'
        b'\n<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">\n<CLUSTER NAME="c" LOCALTIME="1800000000" OWNER="o" '
        b'LATLONG="unspecified" URL="unspecified">\n'
        b'<HOST NAME="wn1" IP="10.0.0.1" TAGS="" REPORTED="1799999995" TN="5" TMAX="20" DMAX="0" LOCATION="unspecified" '
        b'GMOND_STARTED="1799990000" names="cpu_num mem_total=KB load_one os_release" values="16 2097152 0.50 6.1.0-18-amd64"/>'
        b"\n</CLUSTER>\n</GANGLIA_XML>\n")


@pytest.mark.parametrize("extra", [True, False], ids=["gmond 3.1+ open METRIC with EXTRA_DATA", "pre-3.1 self-closing METRIC"])
def test_open_and_self_closing_metrics_read_the_same(extra):
    data = document(host("wn1", metric("cpu_num", "16", "uint16", "CPUs", extra), metric("mem_total", "2097152", units="KB", extra=extra),
                         metric("disk_total", "931.512", "double", "GB", extra), metric("machine_type", "x86_64", "string", extra=extra)))
    assert packed_document(data) is not None
    (wn1,) = same_as_general(data).snapshots
    assert (wn1.cpu.logical_cpus, wn1.memory.ram_mb, wn1.cpu.instruction_set) == (16, 2048, "x86_64")
    assert wn1.extra["ganglia"]["disk_total_mb"] == 953868  # 931.512 GB, rounded down


# -- documents the reduction does not follow: the general path reads them, to the same result -----


CPU16 = metric("cpu_num", "16", "uint16", "CPUs")
# Each: the HOSTs, then the CPU count each HOST reports (worked out by hand).
VARIANTS = {
    "attributes in another order": (host("wn1", '<METRIC VAL="16" NAME="cpu_num" TYPE="uint16" UNITS="CPUs"/>\n'), {"wn1": 16}),
    "single quotes": (host("wn1", "<METRIC NAME='cpu_num' VAL='16' TYPE='uint16' UNITS='CPUs'/>\n"), {"wn1": 16}),
    "two spaces between attributes": (host("wn1", '<METRIC NAME="cpu_num"  VAL="16" TYPE="uint16" UNITS="CPUs"/>\n'), {"wn1": 16}),
    "a mapped number typed string": (host("wn1", metric("cpu_num", "16", "string")), {"wn1": None}),
    "an empty mapped value": (host("wn1", metric("os_name", "", "string"), CPU16), {"wn1": 16}),
    "white space in a mapped value": (host("wn1", metric("os_release", "6.1 custom", "string"), CPU16), {"wn1": 16}),
    "a size in an odd unit": (host("wn1", metric("mem_total", "2", units="GiB bytes")), {"wn1": None}),
    "a character reference": (host("wn1", metric("cpu_num", "1&#54;", "uint16")), {"wn1": 16}),
    "an entity reference in unmapped metadata": (host("wn1", CPU16.replace('VAL="g"', 'VAL="a &amp; b"')), {"wn1": 16}),
    "a comment": (host("wn1", "<!-- a note -->\n", CPU16), {"wn1": 16}),
    "CDATA": (host("wn1", CPU16.replace("<EXTRA_DATA>", "<![CDATA[x]]><EXTRA_DATA>")), {"wn1": 16}),
    "a processing instruction": (host("wn1", "<?note x?>\n", CPU16), {"wn1": 16}),
    "a HOST inside a HOST": (host("wn1", host("wn2", metric("cpu_num", "8", "uint16"))), {"wn1": None, "wn2": 8}),
    "white space before a HOST tag's end": (host("wn1", CPU16).replace('GMOND_STARTED="1799990000">', 'GMOND_STARTED="1799990000"\n >'),
                                            {"wn1": 16}),
}


@pytest.mark.parametrize("hosts, cpus", VARIANTS.values(), ids=VARIANTS.keys())
def test_forms_the_reduction_does_not_follow_read_the_same(hosts, cpus):
    report = same_as_general(document(hosts))
    assert {s.hostname: s.cpu.logical_cpus if s.cpu else None for s in report.snapshots} == cpus


def test_a_non_ascii_document_is_read_by_the_general_path():
    data = document(host("wn1", metric("cpu_num", "16", "uint16")).replace("unspecified", "Z\xfcrich, rack 2"))
    assert packed_document(data) is None
    (wn1,) = same_as_general(data).snapshots
    assert wn1.extra["ganglia"]["location"] == "Z\u00fcrich, rack 2" and wn1.cpu.logical_cpus == 16


@pytest.mark.parametrize("hiding", ["<!-- {} -->", "<![CDATA[{}]]>"], ids=["comment", "CDATA"])
def test_a_host_inside_a_comment_or_cdata_is_not_read(hiding):
    ghost = host("ghost.example.org", metric("cpu_num", "64", "uint16"))
    data = document(WORKER, hiding.format(ghost))
    assert [s.hostname for s in same_as_general(data).snapshots] == ["wn1"]


@pytest.mark.parametrize("hiding", ["<!-- {} -->", "<![CDATA[{}]]>", "<?note {} ?>"], ids=["comment", "CDATA", "processing instruction"])
def test_a_metric_inside_a_comment_cdata_or_instruction_is_not_read(hiding):
    data = document(host("wn1", CPU16, hiding.format(metric("cpu_num", "64", "uint16")), metric("load_one", "0.5")))
    (wn1,) = same_as_general(data).snapshots
    assert wn1.cpu.logical_cpus == 16 and wn1.load.load1 == 0.5


@pytest.mark.parametrize("name", ["cpu_num.*", "(cpu_num)", "cpu_num|mem_total", "[cpu_num]", "cpu_num\\", "cpu_numX",
                                  "xcpu_num", "cpu_num ", "load_one?", "mem_total+"])
def test_metric_names_with_regex_characters_are_not_taken_for_mapped_ones(name):
    data = document(host("wn1", metric(name, "999", "uint16"), metric("cpu_num", "16", "uint16"), metric(name, "999", units="KB")))
    assert packed_document(data) is not None
    (wn1,) = same_as_general(data).snapshots
    assert wn1.cpu.logical_cpus == 16 and wn1.memory is None


def full_set(cpus: str, ram_kb: str, units: str = "KB", order=None) -> list[str]:
    """All 21 mapped metrics, the CPU count and RAM given."""
    metrics = {
        "boottime": metric("boottime", "1700000000", "uint32", "s"), "cpu_idle": metric("cpu_idle", "70.0", units="%"),
        "cpu_num": metric("cpu_num", cpus, "uint16", "CPUs"), "cpu_speed": metric("cpu_speed", "2400", "uint32", "MHz"),
        "cpu_wio": metric("cpu_wio", "5.0", units="%"), "disk_free": metric("disk_free", "10.5", "double", "GB"),
        "disk_total": metric("disk_total", "20.0", "double", "GB"), "load_fifteen": metric("load_fifteen", "1.5", units=" "),
        "load_five": metric("load_five", "1.0", units=" "), "load_one": metric("load_one", "0.5", units=" "),
        "machine_type": metric("machine_type", "x86_64", "string"), "mem_buffers": metric("mem_buffers", "1024", units=units),
        "mem_cached": metric("mem_cached", "2048", units=units), "mem_free": metric("mem_free", "4096", units=units),
        "mem_total": metric("mem_total", ram_kb, units=units), "os_name": metric("os_name", "Linux", "string"),
        "os_release": metric("os_release", "6.1.0", "string"), "proc_run": metric("proc_run", "3", "uint32"),
        "proc_total": metric("proc_total", "300", "uint32"), "swap_free": metric("swap_free", "0", units=units),
        "swap_total": metric("swap_total", "0", units=units),
    }
    return [metrics[name] for name in (order or sorted(metrics))]


def test_hosts_listing_their_metrics_differently_in_one_document():
    reversed_order = sorted(full_set("1", "1"), reverse=True)
    data = document(
        host("a", *full_set("16", "2097152")),                     # every mapped metric, once
        host("b", *full_set("8", "1048576")),                      # the same list again
        host("c", metric("cpu_num", "4", "uint16"), metric("load_one", "0.25")),  # only two
        host("d", *reversed_order),                                # all of them, in another order
        host("e", *full_set("32", "4194304"), metric("cpu_num", "64", "uint16")),  # one twice
        host("f", *full_set("2", "2048", units="MB")),             # sizes in MB
        host("g", *full_set("2", "2048", units="parsecs")),        # sizes in a unit glueinfo does not know
        host("h", *full_set("12", "1048576")),                     # back to the first list
    )
    assert packed_document(data) is not None
    hosts = {s.hostname: s for s in same_as_general(data).snapshots}
    assert {name: (s.cpu.logical_cpus, s.memory.ram_mb if s.memory else None) for name, s in hosts.items()} == {
        "a": (16, 2048), "b": (8, 1024), "c": (4, None), "d": (1, 0), "e": (64, 4096), "f": (2, 2048), "g": (2, None), "h": (12, 1024)}
    assert hosts["a"].memory.ram_available_mb == 4 + 1 + 2  # free + buffers + cached, KB -> MB
    assert hosts["a"].extra["ganglia"]["disk_free_mb"] == 10752 and hosts["g"].extra["ganglia"].get("disk_free_mb") == 10752
    assert hosts["c"].load.load1 == 0.25 and hosts["c"].os is None


def test_a_metric_given_twice_reads_as_the_general_path_does():
    data = document(host("wn1", metric("cpu_num", "8", "uint16"), metric("cpu_num", "16", "uint16")))
    (wn1,) = same_as_general(data).snapshots
    assert wn1.cpu.logical_cpus == 16  # the last one, as the general path reads it


def test_a_host_with_two_bad_metrics_is_reported_by_the_first_in_the_document():
    data = document(WORKER, host("bad1", metric("load_one", "high"), metric("cpu_num", "lots", "uint16")),
                    host("bad2", metric("mem_total", "inf", units="KB"), metric("load_one", "nan")))
    report = same_as_general(data)
    assert [s.hostname for s in report.snapshots] == ["wn1"]
    assert [(f.host, f.error) for f in report.failures] == [
        ("bad1", "metric load_one has a non-numeric value 'high'"), ("bad2", "metric mem_total is 'inf'")]


@pytest.mark.parametrize("units, mb", [("KB", 2048), ("kb", 2048), ("MB", 2097152), ("B", 2), ("furlongs", None), ("", None)])
def test_size_units_read_as_the_general_path_reads_them(units, mb):
    data = document(host("wn1", metric("mem_total", "2097152", units=units), metric("cpu_num", "4", "uint16")))
    (wn1,) = same_as_general(data).snapshots
    assert (wn1.memory.ram_mb if wn1.memory else None) == mb


# -- hostile and broken input ----------------------------------------------------------------------


HOSTILE = {
    "external entity in a mapped value": document(host("wn1", metric("os_name", "&xxe;", "string")),
                                                  header=b'<?xml version="1.0"?><!DOCTYPE GANGLIA_XML [<!ENTITY xxe SYSTEM '
                                                         b'"file:///etc/passwd">]>'),
    "external entity in an unmapped value": document(host("wn1", metric("bytes_in", "&xxe;")),
                                                     header=b'<!DOCTYPE GANGLIA_XML [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'),
    "billion laughs": document(host("wn1", metric("os_name", "&b;", "string")),
                               header=b'<!DOCTYPE GANGLIA_XML [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'),
    "an entity declaration after the DTD": document(host("wn1", metric("cpu_num", "16", "uint16"))).replace(
        b"<CLUSTER", b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><CLUSTER', 1),
    "a ']>' hidden in the DTD": document(host("wn1", metric("os_name", "&x;", "string")),
                                         header=b'<!DOCTYPE GANGLIA_XML [<!ENTITY a "]>"><!ENTITY x SYSTEM "file:///etc/passwd">]>'),
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_dtds_and_entities_are_still_never_used(data):
    with pytest.raises(GangliaError) as info:
        parse(data)
    message = str(info.value)
    assert "\n" not in message and "root:" not in message
    assert "not well-formed" in message or "DTDs and entity declarations are not accepted" in message


GOOD = document(WORKER, host("wn2", metric("cpu_num", "8", "uint16")))
BROKEN = {
    "cut inside unmapped metadata": GOOD[: GOOD.index(b'VAL="g"') + 3],
    "cut inside a mapped METRIC": GOOD[: GOOD.index(b'VAL="2097152"') + 6],
    "cut inside a HOST tag": GOOD[: GOOD.index(b'<HOST NAME="wn2"') + 12],
    "cut after a HOST": GOOD[: GOOD.index(b"</HOST>") + 7],
    "cut before the root's end": GOOD[: GOOD.index(b"</GANGLIA_XML>")],
    "a HOST never closed": GOOD.replace(b"</HOST>\n</CLUSTER>", b"</CLUSTER>"),
    "a CLUSTER closed twice": GOOD.replace(b"</CLUSTER>", b"</CLUSTER></CLUSTER>"),
    "a raw < in a mapped value": GOOD.replace(b'VAL="16"', b'VAL="1<6"'),
    "a raw < in a HOST attribute": GOOD.replace(b'LOCATION="unspecified"', b'LOCATION="a<b"', 1),
    "a duplicate HOST attribute": GOOD.replace(b'TAGS=""', b'TAGS="" TAGS=""', 1),
    "an undefined entity in a HOST attribute": GOOD.replace(b'TAGS=""', b'TAGS="&nope;"', 1),
    "binary garbage": b"\x00\x01\x02GANGLIA\xff\xfe" * 100,
    "not XML": b"HTTP/1.1 200 OK\r\n\r\nhello",
    "empty": b"",
}


@pytest.mark.parametrize("data", BROKEN.values(), ids=BROKEN.keys())
def test_malformed_documents_are_refused_in_one_line(data):
    with pytest.raises(GangliaError) as info:
        parse(data)
    assert str(info.value).strip() and "\n" not in str(info.value)


# -- reading the port ------------------------------------------------------------------------------


def test_a_multi_megabyte_document_is_read_from_the_port_whole():
    data = document(*(host(f"wn{i:04d}", metric("cpu_num", "16", "uint16"), metric("load_one", f"{i % 7}.5")) for i in range(6000)))
    assert len(data) > 3 * 2**20  # several receive buffers' worth
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    try:
        received = read_port(Target("127.0.0.1", server.getsockname()[1]), 10.0, 2**26)
    finally:
        server.close()
    assert received == data
    report = parse_ganglia(received, fetched_at=NOW, max_bytes=2**26)
    assert len(report.snapshots) == 6000 and report.snapshots[-1].load.load1 == 0.5  # wn5999: 5999 % 7 == 0
