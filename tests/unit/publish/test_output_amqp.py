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
import waiting

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


def written(output: AmqpOutput) -> None:
    """Returns once what the output was handed is in its outbox (or found unchanged)."""
    output.writer.write_handed()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    waiting.wait_until(condition, what, 20, step=0.01)


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
    written(output)
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
    output.publish(Publication(documents(b"{}", b"<Data>1</Data>")))
    output.publish(Publication(None))
    written(output)
    assert output.outbox.depth() == 0 and len(broker.received) == 2  # nothing new waits to be sent
    # Hosts unchanged: the Node XML is not even asked for.
    output.publish(Publication(documents(b'{"x": 1}', b"<Data>never made</Data>"), hosts_changed=False))
    written(output)
    wait_until(lambda: len(broker.received) == 3 and output.outbox.depth() == 0, "the changed document confirmed")
    assert broker.received[2].body == b'{"x": 1}'
    now[0] += 601
    output.publish(Publication(None))
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


def hold_writes(output: AmqpOutput) -> tuple[threading.Event, threading.Event]:
    """Makes the output's outbox writes wait until the first event is set; the second is set
    when a write has begun waiting."""
    release, waiting = threading.Event(), threading.Event()
    put = output.outbox.put

    def held_put(*args: Any, **kwargs: Any) -> None:
        waiting.set()
        release.wait()
        put(*args, **kwargs)

    output.outbox.put = held_put  # type: ignore[method-assign]
    return release, waiting


def test_a_publish_returns_before_its_documents_are_written_and_the_newest_handed_is_what_goes_out(make, broker):
    # A glue-ldif push (tens of MB gzipped) must not lengthen the publish: compression and the
    # outbox's write happen after it returns.  Here the write is held: the publish still returns.
    output = make()
    release, waiting = hold_writes(output)
    try:
        done = threading.Event()
        worker = threading.Thread(target=lambda: (output.publish(Publication(documents(b'{"v": 1}'))), done.set()))
        worker.start()
        wait_until(done.is_set, "the publish returned while its document was not yet written")
        wait_until(waiting.is_set, "the first document's write began")
        # Not in the outbox yet, but counted as waiting (/metrics, run --once's exit status).
        assert output.outbox.depth() == 0 and output.outbox_state().depth == 1
        for version in (2, 3):  # handed while the first is being written: the newer replaces the older
            result = output.publish(Publication(documents(b'{"v": %d}' % version)))
            assert result.error is None and result.written and output.outbox_state().depth == 1
    finally:
        release.set()
    wait_until(lambda: [m.body for m in broker.received][-1:] == [b'{"v": 3}'] and output.outbox_state().depth == 0,
               "the newest document confirmed")
    assert b'{"v": 2}' not in [m.body for m in broker.received]


def test_the_gzipped_ldif_is_made_from_the_publishs_texts_after_the_publish(make, broker):
    import gzip

    texts = [f"dn: GlueHostUniqueID=wn{i:04d}.example.org,mds-vo-name=resource,o=grid\nGlueHostName: wn{i:04d}\n\n"
             for i in range(3000)]
    build = SimpleNamespace(texts=texts)
    tail = b"\ndn: GLUE2GroupID=resource,o=glue\nobjectClass: GLUE2Group\n\n"
    made = documents(b"{}")
    made.ldif_pieces = lambda: SimpleNamespace(build=build, tail=tail)
    output = make(documents=("glue-ldif",))
    output.publish(Publication(made))
    wait_until(lambda: len(broker.received) == 1 and output.outbox_state().depth == 0, "the LDIF confirmed")
    [message] = broker.received
    assert message.header.routing_key == "glue.ldif.EXAMPLE-SITE" and message.header.size == len(message.body)
    assert gzip.decompress(message.body) == "".join(texts).encode() + tail


def test_a_full_disk_is_one_line_in_the_outputs_status_and_the_next_publish_writes_it(make, broker, monkeypatch):
    import errno

    from glueinfo.core.atomicwrite import WriteError
    from glueinfo.publish import outbox

    def full(path: str, chunks: Any, **_kwargs: Any) -> Any:
        raise WriteError(path, OSError(errno.ENOSPC, "No space left on device"))

    output = make()
    with monkeypatch.context() as disk:
        disk.setattr(outbox, "write_atomic_chunks", full)
        output.publish(Publication(documents(b'{"v": 1}')))
        written(output)
        result = output.publish(Publication(None))  # nothing new: the document the disk refused is still in hand
        written(output)
        assert result.error is not None and "\n" not in result.error
        assert "glue21.json.EXAMPLE-SITE.msg: not written: No space left on device" in result.error
        state = output.outbox_state()
        assert state.depth == 1 and "No space left on device" in (state.error or "")
        assert broker.received == []
    # The disk has room again: the next publish's hand-over writes it, on the writer's thread.
    output.publish(Publication(None))
    wait_until(lambda: [m.body for m in broker.received] == [b'{"v": 1}'], "the document written and confirmed")
    wait_until(lambda: output.outbox_state().depth == 0, "the outbox emptied")
    assert output.publish(Publication(None)).error is None and output.outbox_state().error is None


def test_closing_writes_what_was_handed_even_when_the_broker_is_away(make, broker, tmp_path):
    broker.down = True
    output = make()
    output.publish(Publication(documents(b'{"v": 1}')))
    output.close(drain=False)
    assert output.outbox.read("glue21.json.EXAMPLE-SITE").body == b'{"v": 1}'
    assert output.outbox_state().depth == 1  # what `run --once` exits 1 for


KILLED_CHILD = """
import sys, threading
from types import SimpleNamespace
from glueinfo.publish.outputs import Publication
from glueinfo.publish.outputs.amqp import AmqpOutput, AmqpSettings

def documents(body):
    return SimpleNamespace(glue2_json=body, site=SimpleNamespace(assembled_at=1_790_000_000.0))

def unreachable():
    raise ConnectionRefusedError(111, "Connection refused")

settings = AmqpSettings(url="amqp://glueinfo@broker.example.org/", host="broker.example.org", port=5672,
                        virtual_host="/", user="glueinfo", tls=False, retry_min_s=60.0, retry_max_s=60.0)
output = AmqpOutput(settings, "EXAMPLE-SITE", sys.argv[1], connect=unreachable)
output.publish(Publication(documents(b'{"v": 1}')))
output.writer.write_handed()
never = threading.Event()
output.outbox.put = lambda *args, **kwargs: never.wait()  # the next write never ends: killed before it
output.publish(Publication(documents(b'{"v": 2}')))
print("handed", flush=True)
never.wait()
"""


def test_a_kill_9_between_a_publish_and_its_outbox_write_costs_only_that_publish(tmp_path, make, broker):
    import os
    import signal
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(tmp_path / "outbox")], stdout=subprocess.PIPE,
                             cwd=root, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "handed\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # Killed with {"v": 2} handed and not written: the outbox still holds {"v": 1}, whole.
    before = make()
    assert before.outbox.read("glue21.json.EXAMPLE-SITE").body == b'{"v": 1}'
    before.close(drain=False)
    # The restarted daemon's first publish makes the documents again from the site as it is now.
    restarted = make()
    restarted.publish(Publication(documents(b'{"v": 2}')))
    wait_until(lambda: restarted.outbox_state().depth == 0, "the outbox emptied")
    assert [m.body for m in broker.received][-1] == b'{"v": 2}'
