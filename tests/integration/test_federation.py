"""The federation view (issue 28 items 3 and 4) with Debian's RabbitMQ and a slapd laid out as BDII's.

Three sites push with `glueinfo run --once` (the amqp output, GLUE 2.1 JSON and the gzipped LDIF),
each logged in as its own broker user; one of them while the broker is down, its documents
waiting in its outbox until the broker is back.  `glueinfo federate` consumes them into a
slapd with BDII's three databases, each written by its own rootdn, and serves them as JSON.

What is checked is what the consumers read:
- lcg-info --list-ce: its query, ``(objectClass=GlueCE)`` below ``Mds-Vo-name=local,o=grid``
  (the base DIRAC's Grid.ldapsearchBDII also uses); lcg-info itself is not packaged for Debian;
- ginfo: its share listing, ``(objectClass=GLUE2ComputingShare)`` below ``o=glue`` (ginfo is
  not packaged for Debian nor on PyPI);
- DIRAC's own reader, getGlue2CEInfo (the dirac wheel run-tests.sh installs), against the view;
- the JSON each site pushed, byte for byte, and in /glue2.json.
The expected CEs and shares come from each site's own `glueinfo ldif` and `glue2-json`, not
from the view.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from paths import HOSTS, REPO
from servers import Slapd, free_port, missing_slapd_tools, run_ldapsearch
from waiting import wait_until

CLOCK = "1790000000"
SITES = ("SITE-A", "SITE-B", "SITE-C")
EXCHANGE = "glueinfo-federation"


@pytest.fixture(scope="module")
def broker():
    from rabbitmq import RabbitMQ, missing_rabbitmq

    missing = missing_rabbitmq() + missing_slapd_tools()
    if missing:
        pytest.skip("a real RabbitMQ and slapd needed, missing: " + ", ".join(missing))
    # Not below pytest's own temporary directory: that is root's, mode 0700, and the broker runs as rabbitmq.
    server = RabbitMQ(tempfile.mkdtemp(prefix="glueinfo-rabbitmq-")).start()
    try:
        yield server
    finally:
        server.remove()


def add_password_user(broker: Any, name: str, password: str) -> None:
    """A site's broker user: it may publish to the exchange and declare it, nothing else."""
    broker.ctl("add_user", name, password)
    broker.ctl("set_permissions", "-p", "/", name, f"^{EXCHANGE}", f"^{EXCHANGE}", "^$")


def glueinfo(*args: str, config: Path, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", *args, "--config", str(config)], capture_output=True,
                          env={**os.environ, "GLUEINFO_CLOCK": CLOCK}, cwd=REPO, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"glueinfo {' '.join(args)}: {proc.returncode}: {proc.stderr.decode()}"
    return proc


def site_config(tmp: Path, broker: Any, site: str, user: str) -> Path:
    """A small site: this recorded host, one HTCondor-CE queue open to atlas, pushing as ``user``."""
    directory = tmp / site
    directory.mkdir()
    password = directory / "amqp-password"
    password.write_text(f"{user}-secret\n")
    host = f"ce.{site.lower()}.example.org"
    config = directory / "glueinfo.conf"
    config.write_text(f"""
[glueinfo]
host_root = {HOSTS / "xeon-gold-2s-ht"}
[site]
id = {site}
name = {site} of the federation test
[ce:atlas]
lrms = fork
queue = atlas
host = {host}
port = 9619
implementation_name = HTCondorCE
access = VO:atlas
[run]
outputs = amqp
state_dir = {directory / "state"}
ldif_file = {directory / "glue.ldif"}
node_xml_file = {directory / "nodes.xml"}
[amqp]
url = amqp://{user}@127.0.0.1:{broker.port}/
password_file = {password}
exchange = {EXCHANGE}
documents = glue21-json, glue-ldif
retry_min = 0.5
retry_max = 2
timeout = 5
drain_timeout = 10
""")
    return config


class Federate:
    """`glueinfo federate` as a process, its log in a file."""

    def __init__(self, config: Path, log: Path, port: int) -> None:
        self.config, self.log, self.port = config, log, port
        self.start()

    def start(self) -> None:
        with open(self.log, "ab") as handle:
            self.process = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "federate", "--config", str(self.config)],
                                            stdout=handle, stderr=handle, cwd=REPO)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 90) -> None:
        wait_until(condition, what, timeout, step=0.2, detail=lambda: self.text()[-4000:],
                   still_running=lambda: self.process.poll() is None, ignore=(OSError, ValueError))  # not listening yet

    def sites(self) -> dict[str, Any]:
        status, body = self.get("/sites")
        assert status == 200, body
        return {row["id"]: row for row in json.loads(body)["sites"]}

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def ldap_values(server: Slapd, base: str, filter: str, attribute: str) -> set[str]:
    return {str(value) for entry in run_ldapsearch(server.url, base, filter, [attribute]) for value in entry.get(attribute)}


def ldif_values(ldif: str, object_class: str, attribute: str) -> set[str]:
    found = set()
    for block in ldif.split("\n\n"):
        if re.search(rf"(?m)^objectClass: {object_class}$", block):
            found.update(re.findall(rf"(?m)^{attribute}: (.*)$", block))
    return found


@pytest.mark.integration
def test_three_sites_one_while_the_broker_is_down_answer_lcg_info_ginfo_dirac_and_json(tmp_path, broker):
    server = Slapd(tmp_path / "slapd", layout="bdii").start()
    view = None
    try:
        configs = {}
        for site in SITES:
            user = f"{site.lower()}-pusher"
            add_password_user(broker, user, f"{user}-secret")
            configs[site] = site_config(tmp_path, broker, site, user)
        intruder = "site-d-pusher"  # a real broker user, bound to no site: it sends SITE-A's id
        add_password_user(broker, intruder, f"{intruder}-secret")
        configs["intruder"] = site_config(tmp_path, broker, "SITE-A-INTRUDER", intruder)
        configs["intruder"].write_text(configs["intruder"].read_text().replace("id = SITE-A-INTRUDER", "id = SITE-A"))

        senders = tmp_path / "federate-senders"
        senders.write_text("# SITE-ID SENDER\n" + "".join(f"{s} {s.lower()}-pusher\n" for s in SITES))
        ldap_password = tmp_path / "ldap-password"
        ldap_password.write_text(server.password + "\n")
        guest_password = tmp_path / "guest-password"
        guest_password.write_text(broker.password + "\n")
        port = free_port()
        federate_config = tmp_path / "federate.conf"
        federate_config.write_text(f"""
[federate]
queue = federate-test
state_dir = {tmp_path / "federate-state"}
senders_file = {senders}
listen = 127.0.0.1:{port}
[amqp]
url = amqp://guest@127.0.0.1:{broker.port}/
password_file = {guest_password}
exchange = {EXCHANGE}
retry_min = 0.5
retry_max = 2
[ldap]
url = {server.url}
bind_dn = o=grid; o=glue; o=infosys
password_file = {ldap_password}
""")
        view = Federate(federate_config, tmp_path / "federate.log", port)
        view.wait_for(lambda: view.get("/health")[0] == 200, "the view consumes")
        # A second view (another community's: its own queue, JSON only) on the same exchange.
        second_port = free_port()
        second_config = tmp_path / "federate-2.conf"
        second_config.write_text(federate_config.read_text().split("[ldap]")[0]
                                 .replace("queue = federate-test", "queue = federate-test-2")
                                 .replace(str(tmp_path / "federate-state"), str(tmp_path / "federate-state-2"))
                                 .replace(f"listen = 127.0.0.1:{port}", f"listen = 127.0.0.1:{second_port}"))
        second = Federate(second_config, tmp_path / "federate-2.log", second_port)
        second.wait_for(lambda: second.get("/health")[0] == 200, "the second view consumes")

        for site in ("SITE-A", "SITE-B"):
            glueinfo("run", "--once", config=configs[site])
        # SITE-C publishes while the broker is away: its documents wait in its outbox.
        broker.stop()
        offline = glueinfo("run", "--once", config=configs["SITE-C"], check=False)
        assert offline.returncode != 0
        outbox = tmp_path / "SITE-C" / "state" / "amqp-outbox"
        assert sorted(p.name for p in outbox.glob("*.msg")) == ["glue.ldif.SITE-C.msg", "glue21.json.SITE-C.msg"]
        broker.start()
        glueinfo("run", "--once", config=configs["SITE-C"])  # the next start sends what waited
        assert not list(outbox.glob("*.msg"))
        view.wait_for(lambda: sorted(view.sites()) == list(SITES), "three sites in /sites")
        second.wait_for(lambda: sorted(second.sites()) == list(SITES), "three sites in the second view too")
        assert second.stop() == 0, second.text()[-4000:]
        view.wait_for(lambda: len(ldap_values(server, "mds-vo-name=local,o=grid", "(objectClass=GlueCE)",
                                              "GlueCEUniqueID")) == 3, "three CEs in LDAP")

        # The intruder's message for SITE-A is refused with one line, and changes nothing.
        before = view.get("/sites/SITE-A/glue21.json")[1]
        glueinfo("run", "--once", config=configs["intruder"])
        # Both its documents (the JSON and the LDIF: two messages, maybe taken in two reads of the broker)
        view.wait_for(lambda: 'glueinfo_federate_documents_refused_total{reason="untrusted"} 2.0'
                      in view.get("/metrics")[1].decode(), "the intruder's two documents refused")
        assert "refused 'glue21.json.SITE-A' from site-d-pusher" in view.text()
        assert "may not publish for site 'SITE-A'" in view.text()
        assert view.get("/sites/SITE-A/glue21.json")[1] == before

        # What lcg-info --list-ce and ginfo's share listing read: every site's, as each site publishes it.
        expected_ces: set[str] = set()
        expected_shares: set[str] = set()
        for site in SITES:
            ldif = glueinfo("ldif", config=configs[site]).stdout.decode()
            expected_ces |= ldif_values(ldif, "GlueCE", "GlueCEUniqueID")
            expected_shares |= ldif_values(ldif, "GLUE2ComputingShare", "GLUE2ShareID")
        assert len(expected_ces) == 3 and len(expected_shares) == 3
        assert ldap_values(server, "mds-vo-name=local,o=grid", "(objectClass=GlueCE)", "GlueCEUniqueID") == expected_ces
        assert ldap_values(server, "o=glue", "(objectClass=GLUE2ComputingShare)", "GLUE2ShareID") == expected_shares
        # BDII's statistics entry, written as bdii-update writes it
        assert ldap_values(server, "o=infosys", "(objectClass=UpdateStats)", "TotalEntries")

        # The JSON each site pushed, byte for byte, and all of them in /glue2.json.
        union = json.loads(view.get("/glue2.json")[1])
        for site in SITES:
            pushed = glueinfo("glue2-json", config=configs[site]).stdout
            assert view.get(f"/sites/{site}/glue21.json") == (200, pushed)
            for service in json.loads(pushed)["ComputingService"]:
                assert service in union["ComputingService"]
        assert sorted(d["ID"] for d in union["AdminDomain"]) == list(SITES)
        ldif_served = view.get("/sites/SITE-B/glue.ldif")[1].decode()
        assert ldif_values(ldif_served, "GlueCE", "GlueCEUniqueID") == \
            ldif_values(glueinfo("ldif", config=configs["SITE-B"]).stdout.decode(), "GlueCE", "GlueCEUniqueID")

        # kill -9 and a restart: the view comes back with every site, before any site sends again.
        view.stop(signal.SIGKILL)
        view.start()
        view.wait_for(lambda: sorted(view.sites()) == list(SITES), "three sites after the restart")
        assert view.get("/sites/SITE-C/glue21.json") == (200, glueinfo("glue2-json", config=configs["SITE-C"]).stdout)

        # DIRAC's own reader finds each site's CE in the view (last: it skips where the dirac wheel is missing).
        from test_minimal_site import dirac_python, dirac_read

        found = dirac_read(dirac_python(), "atlas", server, tmp_path / "dirac.json")
        assert found["OK"], found
        assert sorted(found["Value"]) == list(SITES)
        for site in SITES:
            assert list(found["Value"][site]["CEs"]) == [f"ce.{site.lower()}.example.org"]
    finally:
        if view is not None:
            assert view.stop() in (0, -9), view.text()[-4000:]
        server.stop()


@pytest.mark.integration
def test_oversized_and_unparsable_messages_are_refused_and_never_loaded(tmp_path, broker):
    """A message over [federate] max_message_bytes, one that is not JSON, and a gzip bomb: each one
    logged line and counted; the site's document held stays."""
    import pika

    user = "site-z-pusher"
    add_password_user(broker, user, f"{user}-secret")
    senders = tmp_path / "senders"
    senders.write_text(f"SITE-Z {user}\n")
    guest_password = tmp_path / "guest-password"
    guest_password.write_text(broker.password + "\n")
    port = free_port()
    config = tmp_path / "federate.conf"
    config.write_text(f"""
[federate]
queue = federate-limits
state_dir = {tmp_path / "state"}
senders_file = {senders}
listen = 127.0.0.1:{port}
max_message_bytes = 100000
max_unpacked_bytes = 1000000
[amqp]
url = amqp://guest@127.0.0.1:{broker.port}/
password_file = {guest_password}
exchange = {EXCHANGE}-limits
retry_min = 0.5
""")
    view = Federate(config, tmp_path / "federate.log", port)
    try:
        view.wait_for(lambda: view.get("/health")[0] == 200, "the view consumes")
        connection = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", broker.port, credentials=pika.PlainCredentials(user, f"{user}-secret")))
        channel = connection.channel()
        channel.exchange_declare(f"{EXCHANGE}-limits", "topic", durable=True)

        def send(key: str, body: bytes, encoding: str | None = None) -> None:
            channel.basic_publish(f"{EXCHANGE}-limits", key, body, pika.BasicProperties(
                user_id=user, headers={"site_id": "SITE-Z"}, content_encoding=encoding, timestamp=int(time.time())))

        good = b'{"AdminDomain": [{"ID": "SITE-Z"}]}\n'
        send("glue21.json.SITE-Z", good)
        view.wait_for(lambda: view.get("/sites/SITE-Z/glue21.json") == (200, good), "the good document kept")
        send("glue21.json.SITE-Z", b"[" * 200000)
        send("glue21.json.SITE-Z", b'{"AdminDomain": [')
        send("glue.ldif.SITE-Z", gzip.compress(b"\n" * 50_000_000), "gzip")  # 50 KB packed, 50 MB unpacked
        connection.close()
        view.wait_for(lambda: view.text().count("refused '") == 3, "three refusals")
        log = view.text()
        assert "200000 bytes, over the limit of 100000" in log
        assert "not JSON" in log
        assert "over 1000000 bytes once unpacked" in log
        assert all(len(line) < 400 for line in log.splitlines() if "refused '" in line)
        assert view.get("/sites/SITE-Z/glue21.json") == (200, good)
        metrics = view.get("/metrics")[1].decode()
        assert 'glueinfo_federate_documents_refused_total{reason="oversized"} 2.0' in metrics
        assert 'glueinfo_federate_documents_refused_total{reason="invalid"} 1.0' in metrics
    finally:
        assert view.stop() == 0, view.text()[-4000:]


@pytest.mark.integration
def test_a_withdrawn_site_leaves_the_ldap_tree_and_a_changed_one_is_written_by_its_changes_only(tmp_path):
    """In-process view (no broker: documents handed to take() as the consumer hands them), a real
    slapd in BDII's layout, the clock in the test's hand."""
    import types

    from glueinfo.federate.ldap_view import LdapView
    from glueinfo.federate.store import SiteStore
    from glueinfo.federate.trust import Senders
    from glueinfo.federate.view import Ages, Federation
    from glueinfo.site.publish_settings import LdapSettings, ldap_binds

    missing = missing_slapd_tools()
    if missing:
        pytest.skip("slapd needed, missing: " + ", ".join(missing))
    documents = {}
    for site in ("SITE-A", "SITE-B"):
        config = site_config(tmp_path, types.SimpleNamespace(port=5672), site, "unused")
        documents[site] = glueinfo("ldif", config=config).stdout
    senders = tmp_path / "senders"
    senders.write_text("SITE-A a\nSITE-B b\n")
    password = tmp_path / "ldap-password"
    with Slapd(tmp_path / "slapd", layout="bdii") as server:
        password.write_text(server.password + "\n")
        now = [1_790_000_000.0]
        ldap = LdapView(LdapSettings(url=server.url, binds=ldap_binds("o=grid; o=glue; o=infosys", str(password))),
                        ("mds-vo-name=local,o=grid", "GLUE2GroupID=grid,o=glue"), str(tmp_path / "ldap-state.json"),
                        clock=lambda: now[0])
        federation = Federation(SiteStore(str(tmp_path / "state")), Senders.load(str(senders)), ages=Ages(600, 3600),
                                ldap=ldap, clock=lambda: now[0])

        def push(site: str, ldif: bytes) -> None:
            federation.take(f"glue.ldif.{site}", types.SimpleNamespace(
                headers={"site_id": site}, user_id=site[-1].lower(), content_encoding="gzip", message_id="m",
                timestamp=int(now[0])), gzip.compress(ldif))

        def ces() -> set[str]:
            return ldap_values(server, "mds-vo-name=local,o=grid", "(objectClass=GlueCE)", "GlueCEUniqueID")

        for site, ldif in documents.items():
            push(site, ldif)
        federation.tick()
        assert ces() == {"ce.site-a.example.org:9619/jobmanager-fork-atlas",
                         "ce.site-b.example.org:9619/jobmanager-fork-atlas"}
        assert ldap.state.full_syncs_total == 1
        # SITE-A's CE closes: the entries whose text changed (the CE and its VOView) are all that is written.
        writes_before = ldap.state.writes_total
        closed = documents["SITE-A"].replace(b"GlueCEStateStatus: Production", b"GlueCEStateStatus: Closed")
        changed_entries = set(closed.split(b"\n\n")) - set(documents["SITE-A"].split(b"\n\n"))
        assert changed_entries
        now[0] += 300
        push("SITE-A", closed)
        push("SITE-B", documents["SITE-B"])  # unchanged: only its age is renewed
        federation.tick()
        assert ldap.state.writes_total - writes_before == len(changed_entries)
        assert ldap_values(server, "mds-vo-name=SITE-A,mds-vo-name=local,o=grid", "(objectClass=GlueCE)",
                           "GlueCEStateStatus") == {"Closed"}
        # SITE-B goes on sending; SITE-A falls silent and is withdrawn after withdraw_after.
        now[0] += 3500
        push("SITE-B", documents["SITE-B"])
        now[0] += 200
        federation.tick()
        assert ces() == {"ce.site-b.example.org:9619/jobmanager-fork-atlas"}
        assert run_ldapsearch(server.url, "o=glue", "(GLUE2DomainID=SITE-A)", ["GLUE2DomainID"]) == []
        assert ldap_values(server, "o=glue", "(objectClass=GLUE2AdminDomain)", "GLUE2DomainID") == {"SITE-B"}
