"""NodeFileReader (a spool file read again and again) is held to read_node byte for byte: the same
snapshot for every rewrite, the same one-line error for every bad or hostile one, whether it took
the quick way or the full one."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest
from glue_sites import CLASSES, hostile_host, make_host, synthetic_site

from glueinfo.core.model import HostSnapshot
from glueinfo.sss.node_file_reader import NodeFileReader
from glueinfo.sss.node_reader import NodeXMLError, read_node
from glueinfo.sss.node_xml import render_node

NOW = 1_700_000_100.0


def outcome(read, data: bytes) -> tuple[str, object]:
    try:
        return "ok", read(data)
    except NodeXMLError as exc:
        return "error", str(exc)


def same_as_read_node(reader: NodeFileReader, name: str, data: bytes) -> tuple[str, object]:
    """The reader's outcome for ``data``, asserted equal to read_node's (snapshot or message)."""
    what = f"Node XML in /spool/{name}"
    mine = outcome(lambda d: reader.read(name, d, what=what, source="spool"), data)
    theirs = outcome(lambda d: read_node(d, what=what, source="spool"), data)
    assert mine == theirs
    if mine[0] == "ok":
        assert mine[1].to_json() == theirs[1].to_json()  # types too (1 and 1.0 compare equal)
    return mine


def new_load(host: HostSnapshot, rng: random.Random) -> HostSnapshot:
    threads = host.cpu.logical_cpus
    free = rng.randint(0, host.memory.ram_mb)
    return dataclasses.replace(
        host, collected_at=host.collected_at + 60,
        load=dataclasses.replace(host.load, load1=round(rng.uniform(0, 1.3 * threads), 2), load5=round(rng.uniform(0, threads), 2),
                                 runnable_tasks=rng.randint(0, threads)),
        memory=dataclasses.replace(host.memory, ram_available_mb=free, virtual_available_mb=free))


def test_rewrites_with_new_loads_read_quickly_and_exactly_as_read_node():
    rng = random.Random(7)
    hosts = synthetic_site(40) + [hostile_host()]
    reader = NodeFileReader()
    for _ in range(6):
        hosts = [new_load(h, rng) for h in hosts]
        for host in hosts:
            same_as_read_node(reader, host.hostname, render_node(host, NOW))
    assert reader.full == len(hosts)  # the first read of each; every rewrite after it was quick
    assert reader.quick == 5 * len(hosts)


def test_a_quick_read_shares_the_unchanged_facts_and_never_hands_out_what_it_keeps():
    rng = random.Random(1)
    host = make_host(CLASSES[0][0], 3)
    reader = NodeFileReader()
    first = reader.read("a", render_node(host, NOW))
    first.collected_at = 0.0  # a receiver may set the top level (the gatherer does)
    first.extra["x"] = {}
    second = reader.read("a", render_node(new_load(host, rng), NOW))
    assert reader.quick == 1
    assert second.cpu is first.cpu and second.os is first.os and second.filesystems is first.filesystems
    assert second.load != first.load and second.collected_at > 0 and "x" not in second.extra


def test_another_change_reads_fully():
    host = make_host(CLASSES[1][0], 2)
    reader = NodeFileReader()
    reader.read("a", render_node(host, NOW))
    upgraded = dataclasses.replace(host, os=dataclasses.replace(host.os, release="13"))
    same_as_read_node(reader, "a", render_node(upgraded, NOW))
    assert (reader.quick, reader.full) == (0, 2)


def _lines_with(data: bytes, pattern: str) -> list[int]:
    return [i for i, line in enumerate(data.split(b"\n")) if re.search(pattern.encode(), line)]


def _edit(data: bytes, pattern: str, change) -> bytes:
    lines = data.split(b"\n")
    (index,) = _lines_with(data, pattern)[:1]
    lines[index] = change(lines[index])
    return b"\n".join(lines)


def _text(new: bytes):
    return lambda line: re.sub(rb">[^<]*</", b">" + new + b"</", line)


# Each: a pattern naming the line changed, and the change.  Bad values, markup, references,
# encodings and layout changes in the volatile lines, and structure around them.
HOSTILE = [
    ("LoadAverage1", _text(b"-1")),
    ("LoadAverage1", _text(b"nan")),
    ("LoadAverage1", _text(b"1e999")),
    ("LoadAverage1", _text(b"1 2")),
    ("LoadAverage1", _text(b"")),
    ("LoadAverage1", _text(b"&amp;")),
    ("LoadAverage1", _text(b"&#49;")),
    ("LoadAverage1", _text(b"&lol;")),
    ("LoadAverage1", _text(b"<![CDATA[3]]>")),
    ("LoadAverage1", _text(b"1<!-- x -->2")),
    ("LoadAverage1", _text(b"<b>1</b>")),
    ("LoadAverage1", lambda line: line + b"<!--"),
    ("LoadAverage1", lambda line: b"<!--" + line),
    ("LoadAverage1", lambda line: line.replace(b'type="Load"', b'type="Load" extra="1"')),
    ("LoadAverage1", lambda line: line.replace(b"LoadAverage1", b"LoadAverage5")),
    ("LoadAverage1", lambda line: line + b"\r"),
    ("LoadAverage1", lambda line: line.replace(b"</Extension>", b"</Extension >")),
    ("LoadAverage1", lambda line: line + b"\n" + line),
    ("LoadAverage1", lambda line: line.replace(b"Extension", b"Extensio")),
    ("RunnableTasks", _text(b"1.5")),
    ("RunnableTasks", _text(b"99999999999999999999")),
    ("RunnableTasks", _text(b"9" * 5000)),  # more digits than int() takes
    ("RunnableTasks", _text(b"0" * 5000 + b"7")),
    ("CollectedAt", _text(b"2023-11-14T22:13:20")),
    ("CollectedAt", _text(b"3023-11-14T22:13:20Z")),
    ("CollectedAt", _text(b"yesterday")),
    ("CollectedAt", _text(b"1700000000")),
    ("VirtualMemoryAvailable", _text(b"-5")),
    ("<State>", _text(b"Whatever")),
    ("<State>", _text(b"Busy&amp;")),
    ("<State>", lambda line: line.replace(b"<State>", b"<State a=\"1\">")),
    ("<Available>", lambda line: line.replace(b"<Available>", b"<Available><!--")),
    ("Available.*|Utilized.*", lambda line: line),
    ('<Memory units="MB" metric="Instantaneous">', _text(b"99999999999")),  # more than Configured
    ('<Memory units="MB" metric="Instantaneous">', _text(b"12.5e3")),
    ('<Memory units="MB" metric="Instantaneous">', lambda line: line.replace(b'units="MB"', b'units="GB"')),
    ('<Memory units="MB" metric="Instantaneous">', lambda line: line.replace(b'units="MB"', b'units="parsecs"')),
    ('<Processors metric="Average"', _text(b"100000")),
    ('<Processors metric="Average"', _text(b"9" * 5000)),
    ('<Memory units="MB" metric="Instantaneous">', _text(b"0" * 5000 + b"12")),
    ('<Processors metric="Average"', lambda line: line.replace(b'">', b'" consumptionRate="0.5">', 1)),
    ('<Processors metric="Average"', lambda line: line.replace(b'">', b'" consumptionRate="-1">', 1)),
    ('<Processors metric="Average"', lambda line: line.replace(b'">', b'" consumptionRate="0.5" consumptionRate="0.5">', 1)),
    ('<Processors metric="Average"', lambda line: line.replace(b'">', b'" consumptionRate="0.5>', 1)),
    ('<Processors metric="Average"', lambda line: line.replace(b'wallDuration="60"', b'wallDuration="soon"')),
    ("<Id>", _text(b"wn-other.example.org")),
    ("<\\?xml", lambda line: line.replace(b"UTF-8", b"ISO-8859-1")),
    ("<\\?xml", lambda line: line + b"<!DOCTYPE Node [<!ENTITY lol \"1\">]>"),
    ("</Node>", lambda line: line + b"<Node/>"),
    ("</Node>", lambda line: b""),
]


@pytest.mark.parametrize("pattern, change", HOSTILE)
def test_every_hostile_rewrite_gets_exactly_read_nodes_answer(pattern, change):
    rng = random.Random(3)
    host = make_host(CLASSES[0][0], 5)
    reader = NodeFileReader()
    same_as_read_node(reader, "h", render_node(host, NOW))
    data = _edit(render_node(new_load(host, rng), NOW), pattern, change)
    same_as_read_node(reader, "h", data)
    same_as_read_node(reader, "h", render_node(new_load(host, rng), NOW))  # and back to normal


def test_hostile_first_documents_then_rewrites():
    """Documents whose volatile elements are not alone on their lines (comments, CDATA, two on a line,
    spread over lines) are read right, and so are their rewrites."""
    host = make_host(CLASSES[2][0], 1)
    base = render_node(host, NOW)
    variants = [
        base.replace(b"\n  <Extension name=\"LoadAverage1\"", b"<!--\n  <Extension name=\"LoadAverage1\" type=\"Load\">7</Extension>\n-->"
                     b"\n  <Extension name=\"LoadAverage1\""),
        base.replace(b"</Extension>\n  <Extension name=\"LoadAverage5\"", b"</Extension><Extension name=\"LoadAverage5\""),
        base.replace(b"<Extension name=\"LoadAverage5\" type=\"Load\">", b"<Extension name=\"LoadAverage5\"\n type=\"Load\">"),
        base.replace(b"<State>", b"<State><![CDATA[Busy]]>"),
    ]
    rng = random.Random(5)
    for variant in variants:
        reader = NodeFileReader()
        same_as_read_node(reader, "v", variant)
        for _ in range(3):
            changed = render_node(new_load(host, rng), NOW)
            same_as_read_node(reader, "v", changed)
            same_as_read_node(reader, "v", variant)


def test_bytes_moved_from_a_fixed_text_into_a_volatile_one_read_fully():
    """The same length overall and the same lines, but the kernel lost the byte the load gained: another
    skeleton, so the full read's answer (the new kernel)."""
    host = make_host(CLASSES[0][0], 4)
    reader = NodeFileReader()
    same_as_read_node(reader, "h", render_node(host, NOW))
    data = render_node(new_load(host, random.Random(9)), NOW)
    moved = _edit(_edit(data, 'name="LoadAverage1"', lambda line: line.replace(b"</", b"1</")),
                  'name="Kernel"', lambda line: line.replace(b"amd64<", b"amd6<"))
    assert len(moved) == len(data) and moved.count(b"\n") == data.count(b"\n")
    status, snapshot = same_as_read_node(reader, "h", moved)
    assert status == "ok" and snapshot.os.kernel_release == "6.1.0-13-amd6"
    assert (reader.quick, reader.full) == (0, 2)


def test_a_consumption_rate_that_comes_and_goes_is_read_quickly():
    """glueinfo writes Utilized Processors' consumptionRate only while processors are in use."""
    host = make_host(CLASSES[0][0], 6)
    idle = dataclasses.replace(host, load=dataclasses.replace(host.load, load1=0.0, load5=0.0, load15=0.0))
    busy = dataclasses.replace(host, load=dataclasses.replace(host.load, load1=7.5, load5=7.5, load15=7.5))
    documents = [render_node(h, NOW) for h in (idle, busy, idle, busy)]
    assert [b"consumptionRate" in d for d in documents] == [False, True, False, True]
    reader = NodeFileReader()
    for data in documents:
        same_as_read_node(reader, "h", data)
    assert (reader.quick, reader.full) == (3, 1)


def test_hosts_alike_share_their_texts():
    """10,000 snapshots are kept: two hosts of one class hold one copy of each text they have in common."""
    reader = NodeFileReader()
    first, second = (reader.read(f"h{n}", render_node(make_host(CLASSES[0][0], n), NOW)) for n in (1, 2))
    assert first.hostname != second.hostname
    assert first.cpu.model_name == second.cpu.model_name and first.cpu.model_name is second.cpu.model_name
    assert first.os.kernel_release is second.os.kernel_release
    assert [f.fs_type for f in first.filesystems] == [f.fs_type for f in second.filesystems]
    assert all(a.fs_type is b.fs_type for a, b in zip(first.filesystems, second.filesystems, strict=True))
