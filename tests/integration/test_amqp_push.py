"""Pushing to a real broker (issue 28 item 2): `glueinfo run` with the amqp output and Debian's RabbitMQ.

One private broker for the module (tests/harness/rabbitmq.py: about 4-7 s to start), stopped and
started again where a test needs it away.  Each test has its own exchange, and a consumer of
its own, as a federation view would be: a durable queue bound to the exchange with ``#``,
read with pika's basic_get, so what the broker kept while nobody read is there too.

The site is test_one_site's five recorded hosts (this host a recorded tree, four workers in a
spool), with a [site] id and the clock stopped ($GLUEINFO_CLOCK), so `glueinfo glue2-json`
and `node-xml --site` print, for the same inputs, what the daemon must have pushed: those
commands are the reference, the broker's messages what is checked.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from paths import REPO
from test_one_site import CLOCK, glueinfo, hostname_of, make_site
from waiting import wait_until

OUTBOX = "amqp-outbox"
GLUE21 = "glue21.json.EXAMPLE-SITE"
NODES = "node.xml.EXAMPLE-SITE"
_exchanges = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from rabbitmq import RabbitMQ, missing_rabbitmq

    missing = missing_rabbitmq()
    if missing:
        pytest.skip("a real RabbitMQ needed, missing: " + ", ".join(missing))
    # Not below pytest's own temporary directory: that is root's, mode 0700, and the broker runs as rabbitmq.
    import tempfile

    server = RabbitMQ(tempfile.mkdtemp(prefix="glueinfo-rabbitmq-"), tls=True).start()
    try:
        yield server
    finally:
        server.remove()


class Consumer:
    """A consumer with its own durable queue on the exchange (bound with ``#``)."""

    def __init__(self, broker: Any, exchange: str) -> None:
        self.broker, self.exchange, self.queue = broker, exchange, f"{exchange}.consumer"
        self.received: list[tuple[str, Any, bytes]] = []
        connection = broker.connect()
        channel = connection.channel()
        channel.exchange_declare(exchange, "topic", durable=True)  # as glueinfo declares it
        channel.queue_declare(self.queue, durable=True)
        channel.queue_bind(self.queue, exchange, "#")
        connection.close()

    def drain(self) -> list[tuple[str, Any, bytes]]:
        """Every message waiting in the queue now, added to ``received``."""
        connection = self.broker.connect()
        try:
            channel = connection.channel()
            while True:
                method, properties, body = channel.basic_get(self.queue, auto_ack=True)
                if method is None:
                    break
                self.received.append((method.routing_key, properties, body))
        finally:
            connection.close()
        return self.received

    def bodies(self, key: str) -> list[bytes]:
        return [body for routing_key, _p, body in self.received if routing_key == key]

    def wait_for(self, condition: Callable[[], bool], what: str, log: Callable[[], str] = lambda: "",
                 timeout: float = 60) -> None:
        def ready() -> bool:
            if condition():
                return True
            self.drain()  # what the broker holds now, for the next look
            return False

        wait_until(ready, what, timeout, step=0.2, detail=lambda: log()[-4000:])


def push_site(tmp: Path, broker: Any, documents: str = "glue21-json, node-xml", **run: str) -> tuple[Path, str]:
    """test_one_site's site with [site] id, pushing with the amqp output; (config, exchange)."""
    exchange = f"glueinfo-test-{next(_exchanges)}"
    password = tmp / "amqp-password"
    password.write_text(broker.password + "\n")
    run.setdefault("outputs", "amqp")
    config = make_site(tmp, extra_run="\n".join(f"{key} = {value}" for key, value in run.items()))
    config.write_text(config.read_text() + f"""
[site]
id = EXAMPLE-SITE
name = Example site
[amqp]
url = {broker.url}
password_file = {password}
exchange = {exchange}
documents = {documents}
retry_min = 0.5
retry_max = 2
timeout = 5
""")
    return config, exchange


def set_documents(config: Path, documents: str) -> None:
    config.write_text(re.sub(r"(?m)^documents = .*$", f"documents = {documents}", config.read_text()))


class Daemon:
    """`glueinfo run` as a process, its log in a file."""

    def __init__(self, config: Path, log: Path) -> None:
        self.log = log
        with open(log, "ab") as handle:
            self.process = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "run", "--config", str(config)],
                                            stdout=handle, stderr=handle, cwd=REPO,
                                            env={**os.environ, "GLUEINFO_CLOCK": CLOCK})

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        match: re.Match[str] = wait_until(lambda: re.search(pattern, self.text()), f"logged {pattern!r}", timeout,
                                          step=0.1, detail=lambda: self.text()[-4000:],
                                          still_running=lambda: self.process.poll() is None)
        return match

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def waiting_in_outbox(tmp: Path, key: str) -> tuple[dict[str, Any], bytes] | None:
    """The document waiting for ``key`` in the daemon's outbox: its header line and its bytes."""
    try:
        data = (tmp / "state" / OUTBOX / f"{key}.msg").read_bytes()
    except FileNotFoundError:
        return None
    line, _newline, body = data.partition(b"\n")
    return json.loads(line), body


def arrived(consumer: Consumer, tmp: Path, daemon: Daemon, **expected: bytes) -> None:
    """Wait until the last message of each routing key (GLUE21=..., NODES=...) is the expected
    document and nothing waits in the outbox: the daemon has pushed the site as it now is."""
    keys = {"GLUE21": GLUE21, "NODES": NODES}
    consumer.wait_for(lambda: all(consumer.bodies(keys[name])[-1:] == [body] for name, body in expected.items())
                      and all(waiting_in_outbox(tmp, keys[name]) is None for name in expected),
                      f"the site's documents arrived: {', '.join(expected)}", daemon.text)


def add_worker(tmp: Path, name: str) -> None:
    """A new worker drops its Node XML into the spool (a copy of wn-nfs-lustre's under another name)."""
    spool = tmp / "spool"
    template = hostname_of("wn-nfs-lustre")
    node = (spool / f"{template}.xml").read_bytes().replace(template.encode(), name.encode())
    (spool / f".{name}.xml.tmp").write_bytes(node)
    os.replace(spool / f".{name}.xml.tmp", spool / f"{name}.xml")



def waits_in_outbox(tmp: Path, document: str, daemon: Any) -> None:
    """Until the outbox holds ``document`` as its GLUE 2.1 JSON (the daemon still running)."""
    wait_until(lambda: (waiting_in_outbox(tmp, GLUE21) or ({}, b""))[1] == document, "the document in the outbox",
               60, step=0.2, detail=lambda: daemon.text()[-4000:], still_running=lambda: daemon.process.poll() is None)

@pytest.mark.integration
def test_run_pushes_the_glue21_json_and_node_xml_the_commands_print(tmp_path, broker):
    config, exchange = push_site(tmp_path, broker, gather_interval="1", lrms_interval="1", serve="yes")
    consumer = Consumer(broker, exchange)
    daemon = Daemon(config, tmp_path / "run.log")
    try:
        served = daemon.wait_for(r"serving http://([0-9.]+):(\d+)/")
        arrived(consumer, tmp_path, daemon, GLUE21=glueinfo("glue2-json", config=config).stdout,
                NODES=glueinfo("node-xml", "--site", config=config).stdout)
        with urllib.request.urlopen(f"http://{served.group(1)}:{served.group(2)}/metrics", timeout=30) as answer:
            metrics = answer.read().decode()
        # A reload (SIGHUP) hands the outbox to a new output, which goes on pushing.
        daemon.process.send_signal(signal.SIGHUP)
        daemon.wait_for(r"SIGHUP: config .* reloaded")
        add_worker(tmp_path, "wn-joined-1.example.org")
        arrived(consumer, tmp_path, daemon, GLUE21=glueinfo("glue2-json", config=config).stdout,
                NODES=glueinfo("node-xml", "--site", config=config).stdout)
        assert b"wn-joined-1.example.org" in consumer.bodies(NODES)[-1]
    finally:
        assert daemon.stop() == 0, daemon.text()[-4000:]
    consumer.drain()
    assert "Traceback" not in daemon.text() and "not closed cleanly" not in daemon.text(), daemon.text()[-4000:]

    # What a consumer gets is what the commands print for the same site, byte for byte.
    assert consumer.bodies(GLUE21)[-1] == glueinfo("glue2-json", config=config).stdout
    assert consumer.bodies(NODES)[-1] == glueinfo("node-xml", "--site", config=config).stdout
    routing_key, properties, body = [m for m in consumer.received if m[0] == GLUE21][-1]
    assert properties.delivery_mode == 2  # persistent: kept through a broker restart
    assert properties.content_type == "application/json"
    assert properties.headers == {"document": "glue21.json", "site_id": "EXAMPLE-SITE"}
    assert properties.timestamp == int(CLOCK) and properties.app_id == "glueinfo"
    assert json.loads(body)["AdminDomain"][0]["ID"] == "EXAMPLE-SITE"
    assert len({p.message_id for _k, p, _b in consumer.received}) == len(consumer.received)  # one id per document

    # Monitoring: nothing waiting, a confirm time, the output's own record.
    assert re.search(r'^glueinfo_outbox_documents\{output="amqp"\} 0\.0$', metrics, re.M), metrics
    assert re.search(r'^glueinfo_outbox_last_confirm_timestamp_seconds\{output="amqp"\} \d', metrics, re.M), metrics
    assert re.search(r'^glueinfo_outbox_broker_up\{output="amqp"\} 1\.0$', metrics, re.M), metrics
    assert re.search(r'^glueinfo_output_failures_total\{output="amqp"\} 0\.0$', metrics, re.M), metrics


@pytest.mark.integration
def test_while_the_broker_is_away_the_newest_document_waits_the_files_keep_their_pace_and_it_arrives(tmp_path, broker):
    config, exchange = push_site(tmp_path, broker, documents="glue21-json", gather_interval="1", lrms_interval="1")
    consumer = Consumer(broker, exchange)
    ldif = tmp_path / "out" / "glue.ldif"
    daemon = Daemon(config, tmp_path / "run.log")
    try:
        before_away = glueinfo("glue2-json", config=config).stdout
        arrived(consumer, tmp_path, daemon, GLUE21=before_away)

        broker.stop()
        away_since = ldif.stat().st_mtime
        # Two workers join while the broker is away, one after the other.
        add_worker(tmp_path, "wn-joined-1.example.org")
        daemon.wait_for(r"cycle \w+: 6 hosts ")
        middle = glueinfo("glue2-json", config=config).stdout
        assert middle != before_away
        add_worker(tmp_path, "wn-joined-2.example.org")
        daemon.wait_for(r"cycle \w+: 7 hosts ")
        newest = glueinfo("glue2-json", config=config).stdout
        assert newest != middle
        waits_in_outbox(tmp_path, newest, daemon)
        # The outbox holds the newest document of the key, not a backlog.
        assert sorted(p.name for p in (tmp_path / "state" / OUTBOX).glob("*.msg")) == [f"{GLUE21}.msg"]
        # The LDIF file went on being written while the broker was away, with the workers who joined.
        assert ldif.stat().st_mtime > away_since
        assert "wn-joined-2.example.org" in ldif.read_text()
        assert re.search(r"WARNING: AMQP amqp://127\.0\.0\.1:\d+: .*; \d+ documents wait in ", daemon.text())

        broker.start()
        consumer.wait_for(lambda: consumer.bodies(GLUE21)[-1] == newest, "the newest document arrived", daemon.text)
        daemon.wait_for(r"AMQP amqp://127\.0\.0\.1:\d+: confirmed again after \d+ s")
    finally:
        assert daemon.stop() == 0, daemon.text()[-4000:]
    consumer.drain()
    sent = consumer.bodies(GLUE21)
    # 0 lost: the document before the broker left (persistent, kept through its restart), then the
    # newest; the one superseded while it was away never went out.
    assert before_away in sent and sent[-1] == newest and middle not in sent
    assert waiting_in_outbox(tmp_path, GLUE21) is None


@pytest.mark.integration
def test_a_document_left_unconfirmed_by_a_killed_glueinfo_is_sent_after_the_restart(tmp_path, broker):
    config, exchange = push_site(tmp_path, broker, documents="glue21-json", lrms_interval="1")
    consumer = Consumer(broker, exchange)
    expected = glueinfo("glue2-json", config=config).stdout
    broker.stop()
    try:
        daemon = Daemon(config, tmp_path / "run.log")
        try:
            waits_in_outbox(tmp_path, expected, daemon)
            daemon.wait_for(r"AMQP amqp://127\.0\.0\.1:\d+: .*documents wait in")  # it tried, the broker is away
        finally:
            daemon.process.send_signal(signal.SIGKILL)
            daemon.process.wait()
        header, body = waiting_in_outbox(tmp_path, GLUE21)
        assert body == expected and header["size"] == len(expected)
    finally:
        broker.start()

    # The restarted glueinfo pushes only the Node XML now: the GLUE 2.1 JSON the consumer gets can
    # only be the one the killed process left in the outbox.
    set_documents(config, "node-xml")
    restarted = Daemon(config, tmp_path / "restarted.log")
    try:
        consumer.wait_for(lambda: consumer.bodies(GLUE21), "the left document arrived", restarted.text)
        consumer.wait_for(lambda: consumer.bodies(NODES), "the Node XML arrived too", restarted.text)
    finally:
        assert restarted.stop() == 0, restarted.text()[-4000:]
    consumer.drain()
    [(_key, properties, body)] = [m for m in consumer.received if m[0] == GLUE21]
    assert body == expected and properties.message_id == header["id"]
    assert waiting_in_outbox(tmp_path, GLUE21) is None


@pytest.mark.integration
def test_a_hung_broker_never_holds_up_the_other_outputs(tmp_path, broker):
    # A broker that accepts connections and then answers nothing, and an output told to wait an
    # hour for it: were the push in the publishes' way, the LDIF would stop following the site.
    config, exchange = push_site(tmp_path, broker, documents="glue21-json", gather_interval="1", lrms_interval="1")
    config.write_text(config.read_text().replace("timeout = 5\n", "timeout = 3600\ndrain_timeout = 0\n"))
    consumer = Consumer(broker, exchange)
    ldif = tmp_path / "out" / "glue.ldif"
    daemon = Daemon(config, tmp_path / "run.log")
    try:
        arrived(consumer, tmp_path, daemon, GLUE21=glueinfo("glue2-json", config=config).stdout)
        broker.freeze()
        try:
            # Two workers join one after the other: the publish that sees the first writes the LDIF
            # before it reaches the amqp output, so only the second one's shows later publishes go on.
            for worker in ("wn-joined-1.example.org", "wn-joined-2.example.org"):
                add_worker(tmp_path, worker)
                wait_until(lambda worker=worker: ldif.exists() and worker in ldif.read_text(), f"{worker} in the LDIF",
                           60, step=0.2, detail=lambda: daemon.text()[-4000:])
            newest = glueinfo("glue2-json", config=config).stdout
            waits_in_outbox(tmp_path, newest, daemon)
        finally:
            broker.thaw()
        consumer.wait_for(lambda: consumer.bodies(GLUE21)[-1] == newest, "the newest document arrived", daemon.text)
    finally:
        assert daemon.stop() == 0, daemon.text()[-4000:]


def run_once(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", "run", "--once", "--config", str(config)],
                          capture_output=True, text=True, cwd=REPO, timeout=120, env={**os.environ, "GLUEINFO_CLOCK": CLOCK})


@pytest.mark.integration
def test_amqps_with_a_client_certificate_and_a_site_logged_in_by_its_certificate(tmp_path, broker):
    files = broker.certificates  # the broker demands a client certificate of its CA on its TLS port
    config, exchange = push_site(tmp_path, broker, documents="glue21-json")
    tls = (f"ca_file = {files['ca.pem']}\ncert_file = {files['client.pem']}\nkey_file = {files['client.key']}\n")
    plain = config.read_text()
    consumer = Consumer(broker, exchange)
    expected = glueinfo("glue2-json", config=config).stdout

    # Without a client certificate the broker refuses the connection: nothing is lost, run --once says so.
    config.write_text(plain.replace(f"url = {broker.url}", f"url = amqps://guest@127.0.0.1:{broker.tls_port}/\n"
                                    f"ca_file = {files['ca.pem']}"))
    refused = run_once(config)
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert re.search(rf"WARNING: AMQP amqps://127\.0\.0\.1:{broker.tls_port}: .+; 1 documents wait in ", refused.stderr)
    assert waiting_in_outbox(tmp_path, GLUE21)[1] == expected

    # With its certificate, as guest (password), then as the user its certificate names (EXTERNAL):
    # that user may only declare and write this test's exchange.
    broker.add_user("example-site", f"^{exchange}$", f"^{exchange}$")
    for url in (f"amqps://guest@127.0.0.1:{broker.tls_port}/", f"amqps://127.0.0.1:{broker.tls_port}/"):
        config.write_text(plain.replace(f"url = {broker.url}", f"url = {url}\n{tls}"))
        done = run_once(config)
        assert done.returncode == 0, done.stderr[-3000:]
        assert waiting_in_outbox(tmp_path, GLUE21) is None
        consumer.wait_for(lambda: consumer.bodies(GLUE21), f"the document arrived over {url}")
        assert consumer.bodies(GLUE21) == [expected]
        consumer.received.clear()
        (tmp_path / "state" / OUTBOX / f"{GLUE21}.sent").unlink()  # so that the next run sends it again

    # Logged in by its certificate, the site stamps the name the broker derives from it ([amqp] user_id),
    # which is what a federation view trusts; a name that is not its own is refused by the broker itself.
    certificate_url = f"url = amqps://127.0.0.1:{broker.tls_port}/\n{tls}"
    config.write_text(plain.replace(f"url = {broker.url}", certificate_url) + "user_id = example-site\n")
    done = run_once(config)
    assert done.returncode == 0, done.stderr[-3000:]
    consumer.wait_for(lambda: consumer.received, "the document stamped with its sender arrived")
    assert [properties.user_id for _key, properties, _body in consumer.received] == ["example-site"]
    (tmp_path / "state" / OUTBOX / f"{GLUE21}.sent").unlink()
    config.write_text(plain.replace(f"url = {broker.url}", certificate_url) + "user_id = another-site\n")
    refused = run_once(config)
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "another-site" in refused.stderr and waiting_in_outbox(tmp_path, GLUE21) is not None
