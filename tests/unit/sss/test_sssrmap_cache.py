"""The SSSRMAP per-field caches are bounded (issue 26, finding 6): a client asking for ever new
field names (``Extension[@name='a1']``, ``'a2'``...) made the server keep a column per name
and per host, for good.  Here: the cache keeps at most its bound of fields and of estimated
bytes, forgets the least recently used first, keeps the server's warmed fields, and a
forgotten field asked again gives the answer it gave the first time.

Nodes are hand-written XML; every expected answer is read from that XML by the test, never
computed through the engine.  Memory itself is measured in benchmarks/sssrmap_names.py.
"""

from __future__ import annotations

import threading

import pytest
from lxml import etree

from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.sssrmap import ObjectSet, QueryService
from glueinfo.sss.sssrmap.cache import PathCache

RACKS = {f"wn{i:02d}": f"R{i % 3}" for i in range(12)}
CLOCKS = {f"wn{i:02d}": 2000 + 100 * i for i in range(12)}


def nodes() -> list[etree._Element]:
    return [etree.fromstring(f'<Node><Id>{host}</Id><Configured><Processors>8</Processors></Configured>'
                             f'<Extension name="Rack" type="Site">{RACKS[host]}</Extension>'
                             f'<Extension name="ClockSpeed" type="Cpu">{CLOCKS[host]}</Extension></Node>')
            for host in RACKS]


def service(objects: ObjectSet) -> QueryService:
    svc = QueryService()
    svc.register("Node", lambda: objects)
    return svc


def records(svc: QueryService, inner: str) -> list[etree._Element]:
    """The Node records of a successful answer."""
    body = f'<Envelope><Body><Request action="Query" actor="tester"><Object>Node</Object>{inner}</Request></Body></Envelope>'
    (answer,) = svc.handle(body.encode())
    response = etree.fromstring(answer).find("Body/Response")
    assert response.findtext("Status/Code") == "000", etree.tostring(response)[:300]
    return list(response.find("Data"))


def racks(svc: QueryService) -> dict[str, str]:
    return {node.findtext("Id"): node.findtext("Extension") for node in
            records(svc, "<Get name=\"Id\"/><Get name=\"Extension[@name='Rack']\"/>")}


def fast_hosts(svc: QueryService) -> set[str]:
    return {node.findtext("Id") for node in
            records(svc, "<Get name=\"Id\"/><Where name=\"Extension[@name='ClockSpeed']\" op=\"GE\">2500</Where>")}


# -- the cache itself --------------------------------------------------------------------------------


def test_the_cache_holds_at_most_its_bound_of_fields_the_least_recently_used_forgotten_first():
    cache = PathCache(max_paths=3, max_bytes=1 << 30)
    for name in ("a", "b", "c"):
        cache.columns(name)
    cache.columns("a")  # used again: now the most recent
    cache.columns("d")
    assert len(cache) == 3
    assert "b" not in cache and all(name in cache for name in ("a", "c", "d"))
    for n in range(100):
        cache.columns(f"x{n}")
    assert len(cache) == 3 and all(f"x{n}" in cache for n in (97, 98, 99))


def test_the_cache_holds_at_most_its_bound_of_bytes_but_keeps_the_field_just_filled():
    cache = PathCache(max_paths=100, max_bytes=1000)
    first = cache.columns("a")
    cache.grew("a", first, 600)
    second = cache.columns("b")
    cache.grew("b", second, 300)
    assert "a" in cache and cache.bytes == 900
    cache.grew("b", second, 300)  # 1,200 in all: the field used longest ago goes
    assert "a" not in cache and "b" in cache and cache.bytes == 600
    huge = cache.columns("c")
    cache.grew("c", huge, 5000)  # alone over the bound: kept, the others go
    assert list(name for name in "abc" if name in cache) == ["c"] and cache.bytes == 5000
    cache.grew("a", first, 100)  # a query still filling a forgotten field: not counted
    assert cache.bytes == 5000


def test_pinned_fields_stay_outside_the_bound():
    cache = PathCache(max_paths=2, max_bytes=100)
    pinned = cache.pin("Id")
    cache.grew("Id", pinned, 10_000)
    for n in range(10):
        cache.grew(f"x{n}", cache.columns(f"x{n}"), 60)
    assert "Id" in cache and cache.columns("Id") is pinned
    assert len(cache) <= 2 and cache.bytes <= 120


@pytest.mark.parametrize("paths, size", [(0, 100), (10, 0), (-1, -1)])
def test_a_bound_under_one_is_refused(paths, size):
    with pytest.raises(ValueError, match="at least 1"):
        PathCache(max_paths=paths, max_bytes=size)


# -- through the query service -----------------------------------------------------------------------


def test_an_object_set_keeps_at_most_its_bound_of_fields_whatever_names_clients_ask():
    objects = ObjectSet("Node", nodes(), sss_node.DEFAULT_UNITS, max_paths=8)
    svc = service(objects)
    for n in range(200):
        records(svc, f"<Get name=\"Id\"/><Get name=\"Extension[@name='a{n}']\"/>"
                     f"<Where name=\"Extension[@name='b{n}']\" op=\"NE\">x</Where>")
        assert len(objects.cache) <= 8
    assert objects.cache.evicted > 0


def test_an_object_set_keeps_about_its_bound_of_bytes():
    objects = ObjectSet("Node", nodes(), sss_node.DEFAULT_UNITS, max_bytes=4000)
    svc = service(objects)
    for n in range(200):
        records(svc, f"<Get name=\"Extension[@name='a{n}']\"/>")
        assert objects.cache.bytes <= 4000 or len(objects.cache) == 1
    assert objects.cache.evicted > 0


def test_a_forgotten_field_asked_again_gives_the_same_answer():
    svc = service(ObjectSet("Node", nodes(), sss_node.DEFAULT_UNITS, max_paths=4))
    first_racks, first_fast = racks(svc), fast_hosts(svc)
    assert first_racks == RACKS  # read from the XML the test wrote
    assert first_fast == {host for host, clock in CLOCKS.items() if clock >= 2500}
    for n in range(50):
        records(svc, f"<Get name=\"Extension[@name='a{n}']\"/><Get name=\"Configured/Resource[@name='r{n}']\"/>")
    assert racks(svc) == first_racks and fast_hosts(svc) == first_fast


def test_warmed_fields_are_kept_while_client_names_come_and_go():
    objects = ObjectSet("Node", nodes(), sss_node.DEFAULT_UNITS, max_paths=2)
    objects.warm(["Id", "Configured/Processors"])
    svc = service(objects)
    for n in range(20):
        records(svc, f"<Get name=\"Id\"/><Get name=\"Extension[@name='a{n}']\"/>")
    assert "Id" in objects.cache and "Configured/Processors" in objects.cache and len(objects.cache) <= 2


def test_concurrent_queries_on_a_small_cache_give_right_answers():
    svc = service(ObjectSet("Node", nodes(), sss_node.DEFAULT_UNITS, max_paths=3, max_bytes=2000))
    wrong: list[str] = []

    def client(number: int) -> None:
        try:
            for n in range(60):
                if racks(svc) != RACKS:
                    wrong.append(f"client {number}: racks")
                records(svc, f"<Get name=\"Extension[@name='c{number}n{n}']\"/>")
        except Exception as exc:  # a failed assertion in a thread must fail the test
            wrong.append(f"client {number}: {exc!r}")

    threads = [threading.Thread(target=client, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads) and not wrong
