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
- DIRAC's own reader, getGlue2CEInfo (the dirac wheel run-tests.sh installs, tests/harness/dirac_reader.py),
  against the view: per VO, every site's CEs open to it, with the sites' limits and environments;
- the JSON each site pushed, byte for byte, and in /glue2.json.
The expected CEs, shares and figures come from each site's own config, `glueinfo ldif` and `glue2-json`,
not from the view.  The three sites are pushed once per module (the `federation` fixture).
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
import types
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dirac_reader import dirac_python, dirac_read
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


def ce_section(name: str, host: str, access: str, **settings: object) -> str:
    """One HTCondor-CE queue (lrms fork) of ``host``; ``settings`` are further [ce:NAME] keys (limits)."""
    lines = [f"[ce:{name}]", "lrms = fork", f"queue = {name}", f"host = {host}", "port = 9619",
             "implementation_name = HTCondorCE", f"access = {access}"]
    return "\n".join(lines + [f"{key} = {value}" for key, value in settings.items()]) + "\n"


def site_config(tmp: Path, broker: Any, site: str, user: str, ces: str | None = None,
                host_tree: str = "xeon-gold-2s-ht") -> Path:
    """A small site: a recorded host, pushing as ``user``; its CEs ``ces`` (default: one HTCondor-CE queue open
    to atlas)."""
    directory = tmp / site
    directory.mkdir()
    password = directory / "amqp-password"
    password.write_text(f"{user}-secret\n")
    if ces is None:
        ces = ce_section("atlas", f"ce.{site.lower()}.example.org", "VO:atlas")
    config = directory / "glueinfo.conf"
    config.write_text(f"""
[glueinfo]
host_root = {HOSTS / host_tree}
[site]
id = {site}
name = {site} of the federation test
{ces}
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

    def consuming(self) -> bool:
        """Whether the view's consumer is up: its queue bound, so a message sent now reaches it (/health
        answers 200 before that, while the broker is not yet known to be failing)."""
        status, body = self.get("/health")
        return status == 200 and json.loads(body)["broker"]["up"] is True

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


# The federation's sites, as their admins declare them: per site, its queues (queue, CE host, access, limits in
# minutes as [ce:NAME] takes them) and the recorded host its workers are.  SITE-A: two queues on one HTCondor-CE,
# both open to atlas, one to cms too; SITE-B: a CE for atlas and dteam, and a second CE for cms alone; SITE-C: one
# queue for atlas stating no limits, on an aarch64 host.  No site grants lhcb.
QUEUES: dict[str, list[tuple[str, str, str, dict[str, int]]]] = {
    "SITE-A": [("atlas", "ce.site-a.example.org", "VO:atlas",
                {"max_wall_clock_time": 4320, "max_cpu_time": 2880, "max_running_jobs": 200, "max_slots_per_job": 8}),
               ("long", "ce.site-a.example.org", "VO:atlas VO:cms",
                {"max_wall_clock_time": 10080, "max_cpu_time": 9000, "max_running_jobs": 50, "max_slots_per_job": 1})],
    "SITE-B": [("atlas", "ce.site-b.example.org", "VO:atlas VO:dteam",
                {"max_wall_clock_time": 2880, "max_cpu_time": 2000, "max_running_jobs": 120, "max_slots_per_job": 4,
                 "max_waiting_jobs": 30})],
    "SITE-C": [("atlas", "ce.site-c.example.org", "VO:atlas", {})],
}
QUEUES["SITE-B"].append(("cms", "ce2.site-b.example.org", "VO:cms", {}))
HOST_TREES = {"SITE-A": "xeon-gold-2s-ht", "SITE-B": "xeon-gold-2s-ht", "SITE-C": "arm-altra-q32"}


def federation_site_config(tmp: Path, broker: Any, site: str) -> Path:
    ces = "\n".join(ce_section(queue, host, access, **limits) for queue, host, access, limits in QUEUES[site])
    return site_config(tmp, broker, site, f"{site.lower()}-pusher", ces=ces, host_tree=HOST_TREES[site])


@pytest.fixture(scope="module")
def federation(tmp_path_factory, broker):
    """The three sites of QUEUES pushing into one view that writes a slapd laid out as BDII's, each logged in as
    its own broker user; SITE-C while the broker is down, its documents waiting in its outbox until the broker is
    back.  A second view (another community's: its own queue, JSON only) on the same exchange gets every document
    too.  Yields once every site's CEs and shares, as each site's own `glueinfo ldif` has them, are in LDAP."""
    tmp_path = tmp_path_factory.mktemp("federation")
    server = Slapd(tmp_path / "slapd", layout="bdii").start()
    views: list[Federate] = []
    try:
        configs = {}
        for site in SITES:
            add_password_user(broker, f"{site.lower()}-pusher", f"{site.lower()}-pusher-secret")
            configs[site] = federation_site_config(tmp_path, broker, site)
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
        views.append(view)
        view.wait_for(view.consuming, "the view consumes")
        second_port = free_port()
        second_config = tmp_path / "federate-2.conf"
        second_config.write_text(federate_config.read_text().split("[ldap]")[0]
                                 .replace("queue = federate-test", "queue = federate-test-2")
                                 .replace(str(tmp_path / "federate-state"), str(tmp_path / "federate-state-2"))
                                 .replace(f"listen = 127.0.0.1:{port}", f"listen = 127.0.0.1:{second_port}"))
        second = Federate(second_config, tmp_path / "federate-2.log", second_port)
        views.append(second)
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

        # What each site publishes itself: its GLUE 1.3 CEs and GLUE 2 shares, until the view has written them all.
        ces: set[str] = set()
        shares: set[str] = set()
        for site in SITES:
            ldif = glueinfo("ldif", config=configs[site]).stdout.decode()
            ces |= ldif_values(ldif, "GlueCE", "GlueCEUniqueID")
            shares |= ldif_values(ldif, "GLUE2ComputingShare", "GLUE2ShareID")
        view.wait_for(lambda: ldap_values(server, "mds-vo-name=local,o=grid", "(objectClass=GlueCE)", "GlueCEUniqueID")
                      == ces and ldap_values(server, "o=glue", "(objectClass=GLUE2ComputingShare)", "GLUE2ShareID")
                      == shares, "every site's CEs and shares in LDAP")
        yield types.SimpleNamespace(server=server, view=view, configs=configs, tmp=tmp_path, ces=ces, shares=shares)
    finally:
        for each in views:
            assert each.stop() in (0, -9), each.text()[-4000:]
        server.stop()


@pytest.mark.integration
def test_three_sites_one_while_the_broker_is_down_answer_lcg_info_ginfo_and_json(federation, broker):
    server, view, configs = federation.server, federation.view, federation.configs
    # An intruder: a real broker user, bound to no site, sending SITE-A's id.
    intruder = "site-d-pusher"
    add_password_user(broker, intruder, f"{intruder}-secret")
    intruder_config = site_config(federation.tmp, broker, "SITE-A-INTRUDER", intruder)
    intruder_config.write_text(intruder_config.read_text().replace("id = SITE-A-INTRUDER", "id = SITE-A"))

    # The intruder's message for SITE-A is refused with one line, and changes nothing.
    before = view.get("/sites/SITE-A/glue21.json")[1]
    glueinfo("run", "--once", config=intruder_config)
    # Both its documents (the JSON and the LDIF: two messages, maybe taken in two reads of the broker)
    view.wait_for(lambda: 'glueinfo_federate_documents_refused_total{reason="untrusted"} 2.0'
                  in view.get("/metrics")[1].decode(), "the intruder's two documents refused")
    assert "refused 'glue21.json.SITE-A' from site-d-pusher" in view.text()
    assert "may not publish for site 'SITE-A'" in view.text()
    assert view.get("/sites/SITE-A/glue21.json")[1] == before

    # What lcg-info --list-ce and ginfo's share listing read: every site's, as each site publishes it
    # (federation.ces and .shares: from each site's own `glueinfo ldif`).
    assert len(federation.ces) == sum(len(queues) for queues in QUEUES.values())
    assert len(federation.shares) == sum(len(access.split()) for queues in QUEUES.values() for _, _, access, _ in queues)
    assert ldap_values(server, "mds-vo-name=local,o=grid", "(objectClass=GlueCE)", "GlueCEUniqueID") == federation.ces
    assert ldap_values(server, "o=glue", "(objectClass=GLUE2ComputingShare)", "GLUE2ShareID") == federation.shares
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


# What getGlue2CEInfo answers for what a share does not state (DIRAC/Core/Utilities/Glue2.py, dirac 9.1): MaxCPUTime
# and MaxWallTime 86400 s, MaxRunningJobs 10000, MaxSlotsPerJob 1 (capped at the CS's default limit, 8),
# MaxWaitingJobs -1; and the capability and benchmark it puts on every queue and CE.
DIRAC_UNSTATED = {"max_cpu_time": 1440, "max_wall_clock_time": 1440, "max_running_jobs": 10000, "max_slots_per_job": 1,
                  "max_waiting_jobs": -1}
DIRAC_SLOTS_LIMIT = 8


def dirac_expectation(vo: str, documents: dict[str, dict]) -> dict[str, dict[str, list[dict]]]:
    """What getGlue2CEInfo(vo) should find: per site, per CE host with a queue open to ``vo``, what DIRAC makes
    of each of the CE's shares open to ``vo`` (it keeps one of them, see the test).  Limits from what the site's
    admin declared (QUEUES); the environment and the serving state from the site's own GLUE 2 document (``glueinfo
    glue2-json``), never from the view."""
    expected: dict[str, dict[str, list[dict]]] = {}
    for site, queues in QUEUES.items():
        services = {s["ID"]: s for s in documents[site]["ComputingService"]}
        for queue, host, access, declared in queues:
            if f"VO:{vo}" not in access.split():
                continue
            limits = {**DIRAC_UNSTATED, **declared}
            (share,) = [s for s in services[host]["ComputingShare"] if s["MappingQueue"] == queue
                        and any(f"VO:{vo}" in p["Rule"] for p in s["MappingPolicy"])]
            (environment,) = [e for e in services[host]["ExecutionEnvironment"]
                              if e["ID"] in share["Associations"]["ExecutionEnvironmentID"]]
            condor = {"GlueCEStateStatus": share["ServingState"],
                      "GlueCEPolicyMaxCPUTime": str(limits["max_cpu_time"]),
                      "GlueCEPolicyMaxWallClockTime": str(limits["max_wall_clock_time"]),
                      "GlueCEInfoTotalCPUs": str(limits["max_running_jobs"]),
                      "NumberOfProcessors": min(limits["max_slots_per_job"], DIRAC_SLOTS_LIMIT),
                      "GlueCEImplementationName": "HTCondorCE",
                      "GlueCECapability": ["CPUScalingReferenceSI00=2552"]}
            ce = {"MaxWaitingJobs": str(limits["max_waiting_jobs"]),
                  "Queues": {"condor": condor},
                  # the environment, under the GLUE 1 names DIRAC gives it (OSName as ...Version, OSVersion as ...Release)
                  "GlueHostMainMemoryRAMSize": str(environment["MainMemorySize"]),
                  "GlueHostOperatingSystemName": environment["OSFamily"],
                  "GlueHostOperatingSystemVersion": environment["OSName"],
                  "GlueHostOperatingSystemRelease": environment["OSVersion"],
                  "GlueHostArchitecturePlatformType": environment["Platform"],
                  "GlueHostBenchmarkSI00": "2500",
                  "MANAGER": environment["Associations"]["ComputingManagerID"]}
            expected.setdefault(site, {}).setdefault(host, []).append(ce)
    return expected


@pytest.mark.integration
def test_diracs_reader_finds_every_sites_ces_for_a_vo_with_what_the_sites_pushed(federation, tmp_path):
    """DIRAC's own getGlue2CEInfo (the dirac wheel run-tests.sh installs), pointed at the view's LDAP server as at
    a top BDII, finds for each VO every site's CEs with a queue open to it, with the limits the sites' admins
    declared and each CE's environment as the site's own GLUE 2 document has it; a CE open only to other VOs is
    not listed, and for a VO no site grants it finds nothing.

    DIRAC's own limits, asserted as it reads: an HTCondor-CE is one queue to it, named "condor", whatever the
    site's queues (it reads no MappingQueue); a CE with several shares open to the VO (SITE-A's atlas and long
    queues, for atlas) gets the figures of whichever share LDAP answered last, so they are one of those shares',
    whole.  Limits a share does not state are DIRAC's defaults (DIRAC_UNSTATED), MaxSlotsPerJob is capped at 8,
    times come back in minutes."""
    python = dirac_python()
    view = federation.view
    view.wait_for(lambda: view.get("/health")[0] == 200, "the view writes LDAP")
    documents = {site: json.loads(glueinfo("glue2-json", config=federation.configs[site]).stdout) for site in SITES}
    for vo, sites in (("atlas", SITES), ("cms", ("SITE-A", "SITE-B")), ("dteam", ("SITE-B",))):
        found = dirac_read(python, vo, federation.server, tmp_path / f"{vo}.json")
        assert found["OK"], found
        expected = dirac_expectation(vo, documents)
        assert sorted(found["Value"]) == sorted(expected) == sorted(sites), (vo, found)
        for site, ces in expected.items():
            assert sorted(found["Value"][site]["CEs"]) == sorted(ces), (vo, site, found)
            for host, candidates in ces.items():
                assert found["Value"][site]["CEs"][host] in candidates, (vo, host, found["Value"][site]["CEs"][host])
    # SITE-B's second CE is open to cms alone; SITE-A's CE is reached for cms by its long queue alone.
    atlas = json.loads((tmp_path / "atlas.json").read_text())["Value"]
    assert sorted(atlas["SITE-B"]["CEs"]) == ["ce.site-b.example.org"]

    # No site grants lhcb: DIRAC finds no policy, so no CE.  Its 9.1 then fails on its own error path (its log line
    # names a share variable it never set when no policy names a share): UnboundLocalError, not an empty answer.
    nobody = dirac_read(python, "lhcb", federation.server, tmp_path / "lhcb.json")
    assert "Found 0 policies for this VO lhcb" in nobody["log"], nobody
    assert nobody.get("Value") == {} if nobody["OK"] else nobody["raised"].startswith("UnboundLocalError"), nobody


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
        view.wait_for(view.consuming, "the view consumes")
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
