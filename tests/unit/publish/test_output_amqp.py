"""The amqp output (glueinfo.publish.outputs.amqp) against a broker played by a fake link.

What a site admin and a consumer rely on: a bad [amqp] setting is one line naming it; routing
keys are DOCUMENT.SITE with the site id kept as one topic word; a publish never waits for the
broker; while the broker fails, the newest document per key waits and is what arrives once it
answers; an unchanged document is not sent again until [amqp] resend has passed.  The real
broker is tests/integration/test_amqp_push.py's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from glueinfo.core.config import parse_text
from glueinfo.publish.outbox import Message
from glueinfo.publish.outputs import OutputContext, OutputError, Publication, all_outputs, make_outputs
from glueinfo.publish.outputs.amqp import AmqpOutput, AmqpSettings, amqp_settings, routing_key
from glueinfo.site.publish_settings import PublishSettings

SITE = "EXAMPLE-SITE"


def settings(**changes: Any) -> AmqpSettings:
    base = dict(url="amqp://glueinfo@broker.example.org/", host="broker.example.org", port=5672, virtual_host="/",
                user="glueinfo", tls=False, retry_min_s=0.01, retry_max_s=0.05, resend_s=600.0, drain_s=5.0)
    return AmqpSettings(**{**base, **changes})


def documents(json_body: bytes, node_xml: bytes = b"<Data/>") -> Any:
    return SimpleNamespace(glue2_json=json_body, node_xml_chunks=lambda: [node_xml],
                           site=SimpleNamespace(assembled_at=1_790_000_000.0))


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


class Broker:
    """Plays the broker: refuses connections while ``down``; each confirmed message is kept."""

    def __init__(self) -> None:
        self.down = False
        self.received: list[Message] = []
        self.connections = 0
        self.hold = threading.Event()  # set: confirms come at once; clear: the broker is slow
        self.hold.set()

    def connect(self) -> Any:
        if self.down:
            raise ConnectionRefusedError(111, "Connection refused")
        self.connections += 1
        broker = self

        class Link:
            def publish(self, message: Message) -> None:
                if broker.down:
                    raise ConnectionResetError(104, "Connection reset by peer")
                broker.hold.wait()
                broker.received.append(message)

            def idle(self) -> None:
                if broker.down:
                    raise ConnectionResetError(104, "Connection reset by peer")

            def close(self) -> None:
                pass

        return Link()


@pytest.fixture
def broker() -> Broker:
    return Broker()


@pytest.fixture
def make(tmp_path, broker):
    made = []

    def make(clock: Callable[[], float] = time.time, **changes: Any) -> AmqpOutput:
        output = AmqpOutput(settings(**changes), SITE, str(tmp_path / "outbox"), clock, connect=broker.connect)
        made.append(output)
        return output

    yield make
    for output in made:
        output.close(drain=False)


def test_routing_keys_carry_the_document_and_the_site_as_one_topic_word():
    assert routing_key("glue21-json", "EXAMPLE-SITE") == "glue21.json.EXAMPLE-SITE"
    assert routing_key("node-xml", "UKI_LT2-QMUL") == "node.xml.UKI_LT2-QMUL"
    # A dot would make two words of the site (a binding glue21.json.* would miss it): written %2E.
    assert routing_key("glue21-json", "ce.example.org") == "glue21.json.ce%2Eexample%2Eorg"
    assert routing_key("glue21-json", "Zürich site") == "glue21.json.Z%C3%BCrich%20site"


@pytest.mark.parametrize(("section", "message"), [
    ({}, r"^\[amqp\] url is not set"),
    ({"url": "http://broker/"}, r"^\[amqp\] url 'http://broker/': the scheme must be amqp or amqps$"),
    ({"url": "amqp://me:secret@broker/"}, r"^\[amqp\] url: holds a password; put it in \[amqp\] password_file"),
    ({"url": "amqp://broker/"}, r"no user \(amqp://USER@HOST/\), and no client certificate"),
    ({"url": "amqp://me@broker/", "ca_file": "/etc/hostname"}, r"^\[amqp\] ca_file: TLS files need an amqps:// url$"),
    ({"url": "amqps://me@broker/", "ca_file": "/nonexistent/ca.pem"}, r"^\[amqp\] ca_file /nonexistent/ca.pem: cannot be read$"),
    ({"url": "amqp://me@broker/", "password_file": "/nonexistent/pw"},
     r"^\[amqp\] password_file /nonexistent/pw: cannot be read: No such file or directory$"),
    ({"url": "amqp://me@broker:99999/"}, r"^\[amqp\] url 'amqp://me@broker:99999/': Port out of range"),
])
def test_a_bad_setting_is_one_line_naming_it(section, message):
    full = {"exchange": "glueinfo", "documents": ["glue21-json"], **section}
    with pytest.raises(ValueError, match=message):
        amqp_settings(full)


def test_the_url_gives_host_port_vhost_and_user():
    plain = amqp_settings({"url": "amqp://site%40x@broker.example.org/grid%2Finfo", "exchange": "e",
                           "documents": ["glue21-json"]})
    assert (plain.host, plain.port, plain.virtual_host, plain.user, plain.tls) == \
        ("broker.example.org", 5672, "grid/info", "site@x", False)
    tls = amqp_settings({"url": "amqps://me@broker.example.org", "exchange": "e", "documents": ["node-xml"]})
    assert (tls.port, tls.virtual_host, tls.tls) == (5671, "/", True)


def test_the_output_is_made_from_the_config_and_refuses_a_site_without_an_id(tmp_path):
    config = parse_text(f"[run]\nstate_dir = {tmp_path}\noutputs = amqp\n[amqp]\nurl = amqp://guest@127.0.0.1:5672/\n"
                        "documents = glue21-json, node-xml\n")
    sections = {name: config.section(name) for name in ("run", "amqp")}
    options = {"amqp_connect": lambda: None}
    [output] = make_outputs(["amqp"], OutputContext(PublishSettings(site_id=SITE), sections, options=options), all_outputs())
    assert isinstance(output, AmqpOutput) and sorted(output.keys.values()) == \
        ["glue21.json.EXAMPLE-SITE", "node.xml.EXAMPLE-SITE"]
    assert output.outbox.directory == str(tmp_path / "amqp-outbox")
    output.close(drain=False)
    with pytest.raises(OutputError, match=r"^output amqp: \[site\] id is not set: the amqp output's routing keys carry it"):
        make_outputs(["amqp"], OutputContext(PublishSettings(), sections, options=options), all_outputs())


def test_a_publish_returns_while_the_broker_is_slow_and_the_document_arrives_after(make, broker):
    broker.hold.clear()  # every confirm waits
    output = make()
    output.publish(Publication(documents(b'{"v": 1}')))
    wait_until(lambda: broker.connections == 1, "the sender connected")
    result = output.publish(Publication(documents(b'{"v": 2}')))  # while the first waits for its confirm
    assert result.error is None and result.written
    assert broker.received == []
    broker.hold.set()
    wait_until(lambda: [m.body for m in broker.received][-1:] == [b'{"v": 2}'], "the newest document confirmed")
    wait_until(lambda: output.outbox.depth() == 0, "the outbox emptied")
    message = broker.received[-1]
    assert message.header.routing_key == "glue21.json.EXAMPLE-SITE"
    assert message.header.content_type == "application/json"
    assert message.header.site_id == SITE and message.header.document == "glue21.json"
    assert output.outbox_state().confirmed == len(broker.received)


def test_while_the_broker_is_down_the_newest_document_waits_and_arrives_when_it_is_back(make, broker):
    broker.down = True
    output = make()
    first = output.publish(Publication(documents(b'{"v": 1}')))
    assert first.error is None  # nothing failed yet: the document waits
    wait_until(lambda: output.outbox_state().up is False, "the sender found the broker down")
    for version in (2, 3, 4):
        result = output.publish(Publication(documents(b'{"v": %d}' % version)))
    assert result.error is not None and "ConnectionRefusedError" in result.error and "1 documents wait" in result.error
    state = output.outbox_state()
    assert (state.depth, state.confirmed, state.last_confirm_at) == (1, 0, None)
    assert output.outbox.read("glue21.json.EXAMPLE-SITE").body == b'{"v": 4}'
    broker.down = False
    wait_until(lambda: output.outbox.depth() == 0, "the outbox emptied")
    assert [m.body for m in broker.received] == [b'{"v": 4}']
    assert output.outbox_state().up is True
    assert output.publish(Publication(documents(b'{"v": 4}'))).error is None


def test_a_restarted_output_sends_what_the_last_one_left(tmp_path, make, broker):
    broker.down = True
    before = make()
    before.publish(Publication(documents(b'{"left": true}')))
    wait_until(lambda: before.outbox_state().up is False, "the broker refused")
    before.close(drain=False)
    left = before.outbox.last("glue21.json.EXAMPLE-SITE")
    broker.down = False
    after = make()
    after.publish(Publication(None))  # nothing new to publish: what waits goes all the same
    wait_until(lambda: len(broker.received) == 1, "the document left behind was sent")
    assert broker.received[0].body == b'{"left": true}' and broker.received[0].header.id == left[0].id


def test_an_unchanged_document_is_sent_again_only_after_resend(make, broker):
    now = [1_790_000_000.0]
    output = make(clock=lambda: now[0], resend_s=600.0, documents=("glue21-json", "node-xml"))
    output.publish(Publication(documents(b"{}", b"<Data>1</Data>")))
    # Confirmed, not only received: the outbox marks a document sent just after the broker's confirm.
    wait_until(lambda: len(broker.received) == 2 and output.outbox.depth() == 0, "both documents confirmed")
    now[0] += 60
    assert output.publish(Publication(documents(b"{}", b"<Data>1</Data>"))).note.startswith("AMQP 0 queued")
    assert output.publish(Publication(None)).note.startswith("AMQP 0 queued")
    # Hosts unchanged: the Node XML is not even asked for.
    changed = output.publish(Publication(documents(b'{"x": 1}', b"<Data>never made</Data>"), hosts_changed=False))
    assert changed.note.startswith("AMQP 1 queued")
    wait_until(lambda: len(broker.received) == 3 and output.outbox.depth() == 0, "the changed document confirmed")
    now[0] += 601
    assert output.publish(Publication(None)).note.startswith("AMQP 2 queued")
    wait_until(lambda: len(broker.received) == 5, "both sent again")
    assert sorted(m.body for m in broker.received[3:]) == [b"<Data>1</Data>", b'{"x": 1}']


def test_stopping_gives_the_sender_its_drain_time_to_send_what_waits(make, broker):
    broker.hold.clear()
    output = make(drain_s=20.0)
    output.publish(Publication(documents(b"{}")))
    wait_until(lambda: broker.connections == 1, "the sender connected")
    threading.Timer(0.2, broker.hold.set).start()  # the broker answers while the output is closing
    output.close()
    assert [m.body for m in broker.received] == [b"{}"] and output.outbox.depth() == 0


def test_a_broker_that_cannot_be_reached_is_said_by_what_the_socket_said():
    import socket

    from glueinfo.publish.outputs.amqp import PikaLink, describe

    with socket.socket() as closed:  # a loopback port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(Exception) as raised:
        PikaLink(settings(url=f"amqp://guest@127.0.0.1:{port}/", host="127.0.0.1", port=port, timeout_s=5.0))
    assert describe(raised.value) == "ConnectionRefusedError: [Errno 111] Connection refused"


def test_the_ldif_is_pushed_as_one_gzip_stream_of_its_pieces_the_same_bytes_each_time():
    import gzip

    from glueinfo.publish.outputs.amqp import gzip_chunks

    pieces = [f"dn: GlueHostUniqueID=wn{i:05d}.example.org,o=grid\nobjectClass: GlueHost\n\n".encode()
              for i in range(20000)]
    packed = gzip_chunks(pieces)
    assert gzip.decompress(packed) == b"".join(pieces)
    assert gzip_chunks(iter(pieces)) == packed  # no time in the header: unchanged LDIF, unchanged message
    assert packed[4:8] == b"\0\0\0\0" and len(packed) < len(b"".join(pieces)) / 10
