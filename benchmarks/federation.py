#!/usr/bin/env python3
"""The federation view (`glueinfo federate`) under issue 28's load.  Not a test: it prints figures.

    python3 benchmarks/federation.py                 # 200 sites every 60 s: ~10 min measured, then the broker outage
    python3 benchmarks/federation.py --quick         # a smoke run: period 15 s, 2 min measured, 30 s outage
    python3 benchmarks/federation.py --period 15     # 4x the changes in the same time; CPU scaled to 60 s
    python3 benchmarks/federation.py --retry-max 10  # the sites' and the view's [amqp] retry_max (default: glueinfo's)

Targets (issue 28):
- 200 sites each pushing every 60 s into one RabbitMQ on this machine: the
  view reflects a site's change in LDAP and in JSON within 5 s (median and
  99th percentile); the federate process below 300 MB and 30 CPU-s per hour;
- the broker stopped for 2 minutes while 20 sites keep publishing: 0
  documents lost, every site's newest document in the view within 30 s of
  the broker's return.
(The third, the push output's cost on a site's publish cycle, is
benchmarks/amqp_push.py's.)

What runs, all on this machine: Debian's RabbitMQ (tests/harness/rabbitmq.py),
a slapd laid out as BDII's (tests/harness/servers.py Slapd(layout="bdii"),
each suffix written by its own rootdn) and `glueinfo federate` as its own
process, configured as tests/integration/test_federation.py configures it
(documents, stale and withdraw ages, full_sync, prefetch and the [amqp]
retry times left at glueinfo's defaults unless --retry-max says).

The sites' documents are real: `glueinfo glue2-json` and `glueinfo ldif`
are run once for each of five small sites (the test's site config: one
fork CE queue open to atlas, on one of tests/fixtures/hosts' recorded
machines each).  Each of the 200 sites takes one of them with the site id
and CE host replaced (FEDSITE-000 -> FEDSITE-NNN, the LDIF unfolded first so
no fold splits them), its LDIF written again by glueinfo's own LDIF writer
(checked at start to give back the command's bytes unchanged).  A publish
changes what a cycle of a small site changes: the CE's waiting jobs
(GlueCEStateWaitingJobs, GLUE2ComputingServiceWaitingJobs, the JSON's
ComputingService WaitingJobs: the site's publish count), the service's
CreationTime (renewed with it, in both), and the host's 1-minute load.

Item 1 (latency, memory, CPU): each publish is sent as the amqp output
sends it, by its own link class (glueinfo.publish.outputs.amqp.PikaLink:
routing keys from routing_key(), headers document and site_id, user_id,
persistent, publisher confirms; glue.ldif gzip level 1, mtime 0), the GLUE
2.1 JSON then the LDIF.  RabbitMQ checks user_id against the login and
making 200 broker users is slow, so the sites are bound in the senders file
to --senders sender users (4 by default, 50 sites each; a sender may send
for several sites).  After one warm-up period (every site's first
documents: adds), every change of the --duration window is followed until
it is visible: in JSON by GET /sites/SITE/glue21.json (one keep-alive
connection, polled every 20 ms) from the broker's confirm of the JSON, in
LDAP by an ldap3 read of the GLUE 1.3 and GLUE 2 waiting jobs (both must
show it, polled every 20 ms) from the broker's confirm of the LDIF.  The
delays are upper bounds: the pollers share this process and the machine.
The view's CPU is then read (utime + stime, /proc/PID/stat) over a --quiet
window with the same publishing and no probes (a GET costs the view CPU
too), and over an --idle window with no publishing at all; per hour at the
60 s period is idle + (busy - idle) x the message rate's ratio (--period
15: x 0.25), plus one full LDAP reconciliation (the view's full_sync, 3600
s by default), measured as the CPU of a restarted view until its log says it
reconciled every site (a restart also loads the state directory, so this
overstates the hourly one).  The view reads the broker and writes LDAP in
rounds of a fixed length, so a shorter period puts more messages in each
and the scaled figure understates the one at 60 s (--quick gave 47 CPU-s
an hour at commit c9ae812 where the 60 s run gave 64, and 19 at 50b9aac
where it gave 23): measure the target at the default period.  Memory:
VmHWM, the peak resident set.

Item 2 (broker outage): --outage-sites of the sites publish through 20 real
AmqpOutput objects in this process (glueinfo's amqp output whole: its
outbox, one directory each, its sender thread and backoff), handed the
same documents as item 1 (a stand-in for the publish layer's Documents,
the output reads only its bytes).  Once each site's first document is in
the view the broker is stopped for --outage seconds while the sites keep
publishing every period, then started.  Measured from the broker's return
(its start accepting connections): each site's newest document published
before that, visible in JSON and in LDAP; the view's consumer back
(/health); each site's outbox empty.  Then the sites stop, their outputs
drain and close, and each site's newest document is compared with what the
view serves: JSON byte for byte, the LDIF unpacked byte for byte, LDAP's
waiting jobs.  The 1-minute load average is printed with the figures: the
machine may be shared.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import http.client
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
sys.path.insert(0, ROOT)

EXCHANGE = "glueinfo-federation-bench"
QUEUE = "federate-bench"
TEMPLATE_ID = "FEDSITE-000"
HOSTS = ("xeon-gold-2s-ht", "arm-altra-q32", "epyc-container", "wn-nfs-lustre", "vm-nonascii-cpu")
POLL_S = 0.02
TARGET_DELAY_S = 5.0
TARGET_RSS_MB = 300.0
TARGET_CPU_PER_HOUR = 30.0
TARGET_CATCH_UP_S = 30.0
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
# `glueinfo federate` with every thread under cProfile (the consumer, LDAP and HTTP work is on
# threads of their own), the statistics of the threads that ended dumped to argv[1] at exit.
PROFILED = """
import cProfile, pstats, sys, threading, time
profiles = []
run = threading.Thread.run
def profiled(self):
    profile = cProfile.Profile(time.thread_time)  # CPU time: a thread waiting costs nothing
    profiles.append((self, profile))
    profile.enable()
    try:
        run(self)
    finally:
        profile.disable()
threading.Thread.run = profiled
main_profile = cProfile.Profile(time.thread_time)
main_profile.enable()
from glueinfo.cli import main
try:
    code = main(sys.argv[2:])
finally:
    main_profile.disable()
    pstats.Stats(main_profile, *[p for thread, p in profiles if not thread.is_alive()]).dump_stats(sys.argv[1])
sys.exit(code)
"""


# -- the sites' documents ------------------------------------------------------------------------

def make_templates(workdir: str, count: int) -> list[tuple[str, str]]:
    """(GLUE 2.1 JSON, LDIF) of ``count`` small sites, as `glueinfo glue2-json` and `glueinfo ldif` print them."""
    templates = []
    # One clock for both commands (as the integration test runs them), so the two documents of a
    # template carry the same CreationTimes.
    env = {**os.environ, "GLUEINFO_CLOCK": str(int(time.time()))}
    for host in HOSTS[:count]:
        directory = os.path.join(workdir, "template-" + host)
        os.makedirs(directory)
        config = os.path.join(directory, "glueinfo.conf")
        with open(config, "w") as handle:
            handle.write(f"""
[glueinfo]
host_root = {os.path.join(ROOT, "tests", "fixtures", "hosts", host)}
[site]
id = {TEMPLATE_ID}
name = {TEMPLATE_ID} of the federation benchmark
[ce:atlas]
lrms = fork
queue = atlas
host = ce.{TEMPLATE_ID.lower()}.example.org
port = 9619
implementation_name = HTCondorCE
access = VO:atlas
[run]
state_dir = {os.path.join(directory, "state")}
ldif_file = {os.path.join(directory, "glue.ldif")}
node_xml_file = {os.path.join(directory, "nodes.xml")}
""")
        texts = []
        for command in ("glue2-json", "ldif"):
            done = subprocess.run([sys.executable, "-m", "glueinfo.cli", command, "--config", config], cwd=ROOT,
                                  env=env, capture_output=True, timeout=120)
            if done.returncode != 0:
                raise SystemExit(f"glueinfo {command} for {host}: {done.returncode}: {done.stderr.decode()[-2000:]}")
            texts.append(done.stdout.decode("utf-8"))
        templates.append((texts[0], texts[1]))
    return templates


class SiteDocuments:
    """One site's documents made from a template (module docstring): ``render`` gives one publish's."""

    def __init__(self, site_id: str, template: tuple[str, str]) -> None:
        from glueinfo.core.ldif import parse_ldif

        self.site_id = site_id
        json_text = self._renamed(template[0])
        ldif_text = self._renamed(template[1].replace("\n ", ""))  # unfolded first: a fold may split the id
        start = json_text.index('"WaitingJobs": ')
        end = json_text.index(",", start)
        stamp = json_text.index('"CreationTime": "', end)  # the ComputingService's own, after its WaitingJobs
        stamp_end = json_text.index('"', stamp + len('"CreationTime": "'))
        self.json_parts = (json_text[:start], json_text[end:stamp], json_text[stamp_end + 1:])
        if re.search(r"(?m)^[A-Za-z0-9;.-]+:: ", ldif_text):
            raise SystemExit("a template's LDIF has base64 values: the site id could hide in them")
        grid_text, glue_text = ldif_text.split("\n\n\n")  # `glueinfo ldif`: o=grid, a blank line, o=glue
        self.grid, self.glue = parse_ldif(grid_text + "\n"), parse_ldif(glue_text)

        def holding(entries: list[Any], attribute: str) -> Any:
            found = [entry for entry in entries if attribute in entry]
            if len(found) != 1:
                raise SystemExit(f"{site_id}: {len(found)} entries hold {attribute}, one expected")
            return found[0]

        self.ce = holding(self.grid, "GlueCEStateWaitingJobs")
        self.host = holding(self.grid, "GlueHostProcessorLoadLast1Min")
        self.service = holding(self.glue, "GLUE2ComputingServiceWaitingJobs")
        self.original = (str(self.ce.first("GlueCEStateWaitingJobs")), str(self.host.first("GlueHostProcessorLoadLast1Min")),
                         str(self.service.first("GLUE2EntityCreationTime")))
        self.cycle = 0

    def _renamed(self, text: str) -> str:
        return text.replace(TEMPLATE_ID, self.site_id).replace(TEMPLATE_ID.lower(), self.site_id.lower())

    def render(self, waiting: str, load: str, created: str) -> tuple[bytes, bytes]:
        """(GLUE 2.1 JSON, LDIF) with these waiting jobs, 1-minute load and service CreationTime."""
        from glueinfo.core.ldif import format_ldif

        body = f'{self.json_parts[0]}"WaitingJobs": {waiting}{self.json_parts[1]}"CreationTime": "{created}"' \
               f"{self.json_parts[2]}"
        for entry, attribute, value in ((self.ce, "GlueCEStateWaitingJobs", waiting),
                                        (self.service, "GLUE2ComputingServiceWaitingJobs", waiting),
                                        (self.service, "GLUE2EntityCreationTime", created),
                                        (self.host, "GlueHostProcessorLoadLast1Min", load),
                                        (self.host, "GlueHostSMPLoadLast1Min", load)):
            entry.get(attribute)[:] = [value]  # in place: the attribute keeps its line in the entry
        ldif = format_ldif(self.grid, sort=False) + "\n" + format_ldif(self.glue, sort=False)
        return body.encode("utf-8"), ldif.encode("utf-8")

    def next_publish(self, now: float) -> tuple[int, bytes, bytes]:
        """The next cycle's documents: (waiting jobs, JSON, LDIF)."""
        self.cycle += 1
        load = 1000 + (self.cycle * 389) % 3000
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        body, ldif = self.render(str(self.cycle), str(load), created)
        return self.cycle, body, ldif


def check_derivation(templates: list[tuple[str, str]]) -> None:
    """The derivation gives back the commands' bytes when nothing is changed (so the 200 sites'
    documents are what glueinfo writes, names and the changed values apart)."""
    for json_text, ldif_text in templates:
        site = SiteDocuments(TEMPLATE_ID, (json_text, ldif_text))
        waiting, load, created = site.original
        body, ldif = site.render(waiting, load, created)
        if body != json_text.encode() or ldif != ldif_text.encode():
            raise SystemExit("the documents derived from a template are not the command's own bytes: "
                             "the benchmark's derivation is wrong")


# -- the servers and the view --------------------------------------------------------------------

def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stream:
        fields = stream.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def proc_memory_mb(pid: int) -> tuple[float, float]:
    """(VmHWM, VmRSS) in MB."""
    found = {}
    with open(f"/proc/{pid}/status") as stream:
        for line in stream:
            if line.startswith(("VmHWM:", "VmRSS:")):
                name, value = line.split(":", 1)
                found[name] = int(value.split()[0]) / 1024
    return found["VmHWM"], found["VmRSS"]


class View:
    """`glueinfo federate` as a process, its log in a file, an HTTP keep-alive connection to it."""

    def __init__(self, config: str, log: str, port: int, profile: Optional[str] = None) -> None:
        self.config, self.log, self.port, self.profile = config, log, port, profile
        self.process: Optional[subprocess.Popen[bytes]] = None
        self._connection: Optional[http.client.HTTPConnection] = None
        self.started_at = 0.0

    def start(self) -> None:
        with open(self.log, "ab") as handle:
            command = ["-c", PROFILED, self.profile] if self.profile else ["-m", "glueinfo.cli"]
            self.process = subprocess.Popen([sys.executable, *command, "federate", "--config", self.config],
                                            stdout=handle, stderr=handle, cwd=ROOT)
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def text(self) -> str:
        with open(self.log, errors="replace") as stream:
            return stream.read()

    def get(self, path: str) -> tuple[int, bytes]:
        """GET on a kept connection (made again when the view closed it)."""
        for attempt in (0, 1):
            try:
                if self._connection is None:
                    self._connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                self._connection.request("GET", path)
                answer = self._connection.getresponse()
                return answer.status, answer.read()
            except (OSError, http.client.HTTPException):
                if self._connection is not None:
                    self._connection.close()
                self._connection = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            raise SystemExit(f"glueinfo federate exited ({self.process.returncode if self.process else None}):\n"
                             f"{self.text()[-4000:]}")

    def wait_for(self, condition: Any, what: str, timeout: float) -> float:
        """Seconds until ``condition()`` held; SystemExit after ``timeout``."""
        start = time.monotonic()
        while True:
            try:
                if condition():
                    return time.monotonic() - start
            except (OSError, ValueError, http.client.HTTPException):
                pass
            self.alive()
            if time.monotonic() - start > timeout:
                raise SystemExit(f"never happened within {timeout:g} s: {what}\n{self.text()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> int:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


class LdapReader:
    """The view's slapd read as a consumer reads it (ldap3, anonymous): a site's waiting jobs."""

    def __init__(self, url: str) -> None:
        import ldap3

        self._ldap3 = ldap3
        self.connection = ldap3.Connection(ldap3.Server(url, get_info=ldap3.NONE), auto_bind=True, receive_timeout=30)

    def waiting(self, site_id: str) -> tuple[Optional[str], Optional[str]]:
        """(GlueCEStateWaitingJobs, GLUE2ComputingServiceWaitingJobs) of the site as the view holds them."""
        found: list[Optional[str]] = []
        for base, object_class, attribute in (
                (f"Mds-Vo-name={site_id},mds-vo-name=local,o=grid", "GlueCE", "GlueCEStateWaitingJobs"),
                (f"GLUE2DomainID={site_id},GLUE2GroupID=grid,o=glue", "GLUE2ComputingService",
                 "GLUE2ComputingServiceWaitingJobs")):
            self.connection.search(base, f"(objectClass={object_class})", attributes=[attribute])
            values = [str(v) for item in self.connection.response if item.get("type") == "searchResEntry"
                      for v in item["attributes"].get(attribute, [])]
            found.append(values[0] if len(values) == 1 else None)
        return found[0], found[1]

    def close(self) -> None:
        self.connection.unbind()


def json_waiting(body: bytes) -> Optional[int]:
    match = re.search(rb'"WaitingJobs": (\d+)', body)
    return int(match.group(1)) if match else None


def as_int(value: Optional[str]) -> int:
    return int(value) if value is not None and value.isdigit() else -1


# -- item 1: many sites, each change followed ----------------------------------------------------

@dataclass
class Change:
    site: str
    waiting: int
    json_confirmed: float  # monotonic, when basic_publish returned (the broker's confirm)
    ldif_confirmed: float
    json_seen: Optional[float] = None  # seconds after json_confirmed; math.inf: not seen in time
    ldap_seen: Optional[float] = None


@dataclass
class Board:
    """The changes being followed, shared by the publisher and the probes."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    pending: dict[str, Change] = field(default_factory=dict)
    done: list[Change] = field(default_factory=list)
    limit_s: float = 60.0

    def add(self, change: Change) -> None:
        with self.lock:
            old = self.pending.pop(change.site, None)
            if old is not None:  # a newer document came before the old one was seen: never in time
                old.json_seen = math.inf if old.json_seen is None else old.json_seen
                old.ldap_seen = math.inf if old.ldap_seen is None else old.ldap_seen
                self.done.append(old)
            self.pending[change.site] = change

    def waiting_for(self, which: str) -> list[Change]:
        with self.lock:
            return [c for c in self.pending.values() if getattr(c, which) is None]

    def settle(self) -> None:
        with self.lock:
            for site, change in list(self.pending.items()):
                if change.json_seen is not None and change.ldap_seen is not None:
                    self.done.append(self.pending.pop(site))

    def empty(self) -> bool:
        with self.lock:
            return not self.pending


def probe_json(view: View, board: Board, stop: threading.Event) -> None:
    while not stop.is_set():
        for change in board.waiting_for("json_seen"):
            status, body = view.get(f"/sites/{change.site}/glue21.json")
            now = time.monotonic()
            if status == 200 and json_waiting(body) == change.waiting:
                change.json_seen = now - change.json_confirmed
            elif now - change.json_confirmed > board.limit_s:
                change.json_seen = math.inf
        board.settle()
        time.sleep(POLL_S)


def probe_ldap(url: str, board: Board, stop: threading.Event) -> None:
    reader = LdapReader(url)
    try:
        while not stop.is_set():
            for change in board.waiting_for("ldap_seen"):
                grid, glue = reader.waiting(change.site)
                now = time.monotonic()
                if grid == glue == str(change.waiting):
                    change.ldap_seen = now - change.ldif_confirmed
                elif now - change.ldif_confirmed > board.limit_s:
                    change.ldap_seen = math.inf
            board.settle()
            time.sleep(POLL_S)
    finally:
        reader.close()


class Publisher:
    """Every site publishing every ``period`` seconds, spread evenly, through the senders' links
    (glueinfo's PikaLink: the amqp output's own sending code)."""

    def __init__(self, sites: list[SiteDocuments], links: list[Any], period: float) -> None:
        self.sites, self.links, self.period = sites, links, period
        self.board: Optional[Board] = None  # changes are followed while set
        self.stop = threading.Event()
        self.published = 0
        self.late_s: list[float] = []
        self.thread = threading.Thread(target=self._run, name="publisher", daemon=True)
        self.error: Optional[BaseException] = None

    def start(self) -> None:
        self.thread.start()

    def _send(self, link: Any, document: str, site: str, body: bytes, created: float) -> float:
        from glueinfo.publish.outbox import Message, new_header
        from glueinfo.publish.outputs.amqp import DOCUMENTS, routing_key

        kind, content_type = DOCUMENTS[document]
        header = new_header(routing_key(document, site), content_type, kind, site, [body], created)
        link.publish(Message(header, body))  # returns once the broker confirmed it
        return time.monotonic()

    def _run(self) -> None:
        from glueinfo.publish.outputs.amqp import GZIP_LEVEL

        try:
            start = time.monotonic() + 0.5
            due = [(start + index * self.period / len(self.sites), index) for index in range(len(self.sites))]
            heapq.heapify(due)
            while not self.stop.is_set():
                when, index = heapq.heappop(due)
                if self.stop.wait(max(0.0, when - time.monotonic())):
                    return
                self.late_s.append(time.monotonic() - when)
                site = self.sites[index]
                link = self.links[index % len(self.links)]
                created = time.time()
                waiting, body, ldif = site.next_publish(created)
                json_at = self._send(link, "glue21-json", site.site_id, body, created)
                ldif_at = self._send(link, "glue-ldif", site.site_id, gzip.compress(ldif, GZIP_LEVEL, mtime=0), created)
                self.published += 1
                board = self.board
                if board is not None:
                    board.add(Change(site.site_id, waiting, json_at, ldif_at))
                heapq.heappush(due, (when + self.period, index))
        except BaseException as exc:  # shown by the main thread
            self.error = exc

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(30)
        if self.error is not None:
            raise SystemExit(f"the publisher failed: {self.error!r}")


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` 0.5 median, 0.99 the 99th)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def delays_line(name: str, values: list[float]) -> str:
    seen = [v for v in values if math.isfinite(v)]
    missed = len(values) - len(seen)
    if not seen:
        return f"  {name:26s} nothing seen ({missed} changes)"
    every = values if not missed else seen + [math.inf] * missed
    p99 = percentile(every, 0.99)
    return (f"  {name:26s} median {percentile(seen, 0.5) * 1e3:7.0f} ms   p99 "
            f"{'never' if not math.isfinite(p99) else f'{p99 * 1e3:6.0f} ms'}   max "
            f"{max(seen) * 1e3:6.0f} ms   n={len(values)}{f', {missed} not seen within the limit' if missed else ''}"
            f"   target <= {TARGET_DELAY_S:g} s: {'met' if math.isfinite(p99) and p99 <= TARGET_DELAY_S else 'NOT met'}")


# -- item 2: the broker away -----------------------------------------------------------------------

class OutputSites:
    """Sites publishing through real AmqpOutput objects (module docstring, item 2)."""

    def __init__(self, sites: list[SiteDocuments], outputs: list[Any], period: float) -> None:
        self.sites, self.outputs, self.period = sites, outputs, period
        self.lock = threading.Lock()
        self.last: dict[str, tuple[int, bytes, bytes]] = {}
        self.published: dict[str, int] = {site.site_id: 0 for site in sites}
        self.errors = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="output-sites", daemon=True)
        self.error: Optional[BaseException] = None

    def _run(self) -> None:
        from glueinfo.publish.outputs import Publication

        try:
            start = time.monotonic()
            due = [(start + index * self.period / len(self.sites), index) for index in range(len(self.sites))]
            heapq.heapify(due)
            while not self.stop.is_set():
                when, index = heapq.heappop(due)
                if self.stop.wait(max(0.0, when - time.monotonic())):
                    return
                site, output = self.sites[index], self.outputs[index]
                created = time.time()
                waiting, body, ldif = site.next_publish(created)
                # What the output reads of the publish layer's Documents: the bytes and the assembly's time
                # (the LDIF as a one-shot publish's LdifPieces: no render cache's texts, its bytes whole).
                pieces = SimpleNamespace(build=None, tail=b"", to_bytes=lambda ldif=ldif: ldif)
                documents = SimpleNamespace(glue2_json=body, ldif=ldif, crr_json=None,
                                            ldif_pieces=lambda pieces=pieces: pieces,
                                            site=SimpleNamespace(assembled_at=created))
                result = output.publish(Publication(documents=documents))
                with self.lock:
                    self.last[site.site_id] = (waiting, body, ldif)
                    self.published[site.site_id] += 1
                    self.errors += result.error is not None
                heapq.heappush(due, (when + self.period, index))
        except BaseException as exc:  # shown by the main thread
            self.error = exc

    def newest(self) -> dict[str, tuple[int, bytes, bytes]]:
        with self.lock:
            return dict(self.last)

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(30)
        if self.error is not None:
            raise SystemExit(f"the output sites failed: {self.error!r}")


def outage(args: argparse.Namespace, broker: Any, view: View, ldap_url: str, sites: list[SiteDocuments],
           workdir: str, passwords: dict[str, str], sender_of: dict[str, str]) -> dict[str, Any]:
    from glueinfo.publish.outputs.amqp import OUTBOX_DIR, AmqpOutput, amqp_settings

    outputs = []
    for site in sites:
        user = sender_of[site.site_id]
        section = {"url": f"amqp://{user}@127.0.0.1:{broker.port}/", "password_file": passwords[user],
                   "exchange": EXCHANGE, "documents": ["glue21-json", "glue-ldif"]}
        if args.retry_max is not None:
            section["retry_max"] = args.retry_max
        outputs.append(AmqpOutput(amqp_settings(section), site.site_id,
                                  os.path.join(workdir, "outage", site.site_id, "state", OUTBOX_DIR)))
    publishing = OutputSites(sites, outputs, args.period)
    publishing.thread.start()
    reader = LdapReader(ldap_url)
    try:
        def all_in_view() -> bool:
            if publishing.error is not None:  # said now, not after the wait for documents never sent
                raise SystemExit(f"the outage sites' publishing failed: {publishing.error!r}")
            newest = publishing.newest()
            return len(newest) == len(sites) and all(
                json_waiting(view.get(f"/sites/{site}/glue21.json")[1]) == waiting for site, (waiting, _b, _l)
                in newest.items())

        view.wait_for(all_in_view, "every outage site's first document in the view", args.period + 60)
        stopped_at = time.monotonic()
        load_at_stop = os.getloadavg()[0]
        broker.stop()
        stop_took = time.monotonic() - stopped_at
        time.sleep(max(0.0, args.outage - (time.monotonic() - stopped_at)))
        down_for = time.monotonic() - stopped_at
        start_began = time.monotonic()
        broker.start()
        back = time.monotonic()
        newest = {site: waiting for site, (waiting, _b, _l) in publishing.newest().items()}
        during = {site: count for site, count in publishing.published.items()}
        json_at: dict[str, float] = {}
        ldap_at: dict[str, float] = {}
        outbox_at: dict[str, float] = {}
        consumer_at: Optional[float] = None
        while time.monotonic() - back < args.catch_up_limit and (
                len(json_at) < len(sites) or len(ldap_at) < len(sites) or len(outbox_at) < len(sites)):
            view.alive()
            now = time.monotonic()
            if consumer_at is None:
                try:
                    status, body = view.get("/health")
                    if json.loads(body).get("broker", {}).get("up"):
                        consumer_at = now - back
                except (OSError, ValueError, http.client.HTTPException, AttributeError):
                    pass
            for site, output in zip(sites, outputs, strict=True):
                name = site.site_id
                if name not in outbox_at and output.outbox.depth() == 0:
                    outbox_at[name] = now - back
                if name not in json_at:
                    status, body = view.get(f"/sites/{name}/glue21.json")
                    if status == 200 and (json_waiting(body) or -1) >= newest[name]:
                        json_at[name] = time.monotonic() - back
                if name not in ldap_at:
                    grid, glue = reader.waiting(name)
                    if min(as_int(grid), as_int(glue)) >= newest[name]:
                        ldap_at[name] = time.monotonic() - back
            time.sleep(0.25)
        publishing.halt()
        sent_in_all = dict(publishing.published)
        for output in outputs:
            output.close()  # drains what waits (drain_timeout)
        final = publishing.newest()
        left = sum(output.outbox.depth() for output in outputs)

        def final_in_view() -> bool:
            return all(reader.waiting(site)[1] == str(waiting) and json_waiting(view.get(f"/sites/{site}/glue21.json")[1])
                       == waiting for site, (waiting, _b, _l) in final.items())

        try:
            view.wait_for(final_in_view, "every site's last document", 120)
        except SystemExit as exc:
            print(f"  (outage) {str(exc).splitlines()[0]}")
        lost = []
        for site, (waiting, body, ldif) in final.items():
            json_ok = view.get(f"/sites/{site}/glue21.json") == (200, body)
            ldif_ok = view.get(f"/sites/{site}/glue.ldif") == (200, ldif)
            grid, glue = reader.waiting(site)
            if not (json_ok and ldif_ok and grid == glue == str(waiting)):
                lost.append(f"{site} (json {'ok' if json_ok else 'differs'}, ldif {'ok' if ldif_ok else 'differs'}, "
                            f"LDAP {grid}/{glue} for {waiting})")
        return {"stop_took": stop_took, "down_for": down_for, "start_took": back - start_began, "json_at": json_at,
                "ldap_at": ldap_at, "outbox_at": outbox_at, "consumer_at": consumer_at, "sites": len(sites),
                "published_before_back": during, "published": sent_in_all, "lost": lost, "left_in_outboxes": left,
                "publish_errors": publishing.errors, "load": load_at_stop}
    finally:
        reader.close()
        publishing.stop.set()


def catch_up_line(name: str, times: dict[str, float], count: int, limit: float) -> str:
    if len(times) < count:
        return f"  {name:34s} {len(times)} of {count} sites within {limit:g} s: target <= {TARGET_CATCH_UP_S:g} s: NOT met"
    values = sorted(times.values())
    return (f"  {name:34s} median {percentile(values, 0.5):5.1f} s   max {values[-1]:5.1f} s   "
            f"target <= {TARGET_CATCH_UP_S:g} s: {'met' if values[-1] <= TARGET_CATCH_UP_S else 'NOT met'}")


def show_profile(path: str) -> None:
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    print(f"the view's profile over item 1 ({path}):")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))


# -- the run ---------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--sites", type=int, default=200, help="sites pushing (default 200)")
    parser.add_argument("--period", type=float, help="seconds between a site's publishes (default 60; --quick 15)")
    parser.add_argument("--duration", type=float, help="seconds of changes followed to the view (default 600; --quick 120)")
    parser.add_argument("--quiet", type=float, help="seconds of publishing without probes, for the CPU (default 180; "
                        "--quick 60)")
    parser.add_argument("--idle", type=float, help="seconds of no publishing, for the idle CPU (default 60; --quick 20)")
    parser.add_argument("--senders", type=int, default=4, help="broker users the sites are bound to (default 4)")
    parser.add_argument("--templates", type=int, default=len(HOSTS), choices=range(1, len(HOSTS) + 1),
                        help=f"real site documents made by the commands (default {len(HOSTS)})")
    parser.add_argument("--outage-sites", type=int, default=20, help="sites publishing through AmqpOutput (default 20; "
                        "0: no outage)")
    parser.add_argument("--outage", type=float, help="seconds the broker is stopped (default 120; --quick 30)")
    parser.add_argument("--catch-up-limit", type=float, default=400.0, help="seconds after the broker's return to "
                        "wait for every site (default 400: past any retry_max up to 300 s)")
    parser.add_argument("--retry-max", type=float, help="[amqp] retry_max of the sites and the view (default: glueinfo's, "
                        "300 s)")
    parser.add_argument("--quick", action="store_true", help="a smoke run (the defaults in parentheses above)")
    parser.add_argument("--profile", metavar="FILE", help="run the view under cProfile (all threads; its CPU figures "
                        "are then inflated), dump the statistics of item 1 to FILE and print the top functions")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs, state) and say where")
    args = parser.parse_args()
    quick = {"period": 15.0, "duration": 120.0, "quiet": 60.0, "idle": 20.0, "outage": 30.0}
    full = {"period": 60.0, "duration": 600.0, "quiet": 180.0, "idle": 60.0, "outage": 120.0}
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.outage_sites > args.sites:
        parser.error("--outage-sites is more than --sites")

    from rabbitmq import RabbitMQ, missing_rabbitmq
    from servers import Slapd, free_port, missing_slapd_tools

    missing = missing_rabbitmq() + missing_slapd_tools()
    if missing:
        print("needs " + ", ".join(missing), file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix="glueinfo-federation-bench-")
    logging.basicConfig(level=logging.INFO, filename=os.path.join(workdir, "bench.log"),
                        format="%(asctime)s %(threadName)s %(levelname)s %(name)s: %(message)s")
    load_start = os.getloadavg()
    print(f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} ({os.cpu_count()} CPUs)",
          flush=True)
    try:
        templates = make_templates(workdir, args.templates)
        check_derivation(templates)
    except SystemExit:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    sites = [SiteDocuments(f"FEDSITE-{index:03d}", templates[index % len(templates)]) for index in range(1, args.sites + 1)]
    sizes = [site.render(*site.original) for site in sites[:len(templates)]]
    print(f"{args.sites} sites from {len(templates)} real documents (`glueinfo glue2-json`, `glueinfo ldif` of the test's "
          f"small site on {', '.join(HOSTS[:len(templates)])}), site id and CE host replaced: JSON "
          f"{min(len(j) for j, _ in sizes)}-{max(len(j) for j, _ in sizes)} B, LDIF {min(len(x) for _, x in sizes)}-"
          f"{max(len(x) for _, x in sizes)} B ({min(len(gzip.compress(x, 1, mtime=0)) for _, x in sizes)}-"
          f"{max(len(gzip.compress(x, 1, mtime=0)) for _, x in sizes)} B gzipped)", flush=True)

    broker = RabbitMQ(tempfile.mkdtemp(prefix="glueinfo-federation-bench-broker-"))
    slapd = Slapd(os.path.join(workdir, "slapd"), layout="bdii")
    view: Optional[View] = None
    links: list[Any] = []
    try:
        broker.start()
        slapd.start()
        passwords = {}
        senders = [f"fed-sender-{n}" for n in range(args.senders)]
        for user in senders:
            broker.ctl("add_user", user, f"{user}-secret")
            broker.ctl("set_permissions", "-p", "/", user, f"^{EXCHANGE}", f"^{EXCHANGE}", "^$")
            passwords[user] = os.path.join(workdir, f"{user}.password")
            with open(passwords[user], "w") as handle:
                handle.write(f"{user}-secret\n")
        sender_of = {site.site_id: senders[index % len(senders)] for index, site in enumerate(sites)}
        senders_file = os.path.join(workdir, "federate-senders")
        with open(senders_file, "w") as handle:
            handle.write("# SITE-ID SENDER\n" + "".join(f"{s} {u}\n" for s, u in sender_of.items()))
        for name, secret in (("guest", broker.password), ("ldap", slapd.password)):
            with open(os.path.join(workdir, f"{name}.password"), "w") as handle:
                handle.write(secret + "\n")
        port = free_port()
        config = os.path.join(workdir, "federate.conf")
        retry = f"retry_max = {args.retry_max:g}\n" if args.retry_max is not None else ""
        with open(config, "w") as handle:
            handle.write(f"""
[federate]
queue = {QUEUE}
state_dir = {os.path.join(workdir, "federate-state")}
senders_file = {senders_file}
listen = 127.0.0.1:{port}
[amqp]
url = amqp://guest@127.0.0.1:{broker.port}/
password_file = {os.path.join(workdir, "guest.password")}
exchange = {EXCHANGE}
{retry}[ldap]
url = {slapd.url}
bind_dn = o=grid; o=glue; o=infosys
password_file = {os.path.join(workdir, "ldap.password")}
""")
        view = View(config, os.path.join(workdir, "federate.log"), port, args.profile)
        view.start()
        view.wait_for(lambda: view.get("/health")[0] == 200, "the view consumes", 60)
        print(f"broker, slapd (BDII's layout) and glueinfo federate up; {args.senders} sender users, each bound to "
              f"{args.sites // args.senders} sites in the senders file", flush=True)

        from glueinfo.publish.outputs.amqp import PikaLink, amqp_settings

        for user in senders:
            links.append(PikaLink(amqp_settings({"url": f"amqp://{user}@127.0.0.1:{broker.port}/",
                                                 "password_file": passwords[user], "exchange": EXCHANGE,
                                                 "documents": ["glue21-json", "glue-ldif"]})))
        publisher = Publisher(sites, links, args.period)
        board = Board(limit_s=min(60.0, args.period))
        probes_stop = threading.Event()
        probes = [threading.Thread(target=probe_json, args=(view, board, probes_stop), daemon=True),
                  threading.Thread(target=probe_ldap, args=(slapd.url, board, probes_stop), daemon=True)]
        warm_cpu = proc_cpu_s(view.pid)
        publisher.start()
        # Warm-up: every site's first documents (the view adds their entries), then one site followed.
        time.sleep(args.period + 1)
        view.wait_for(lambda: len(json.loads(view.get("/sites")[1])["sites"]) == args.sites,
                              f"{args.sites} sites in /sites", 120)
        warm_cpu = proc_cpu_s(view.pid) - warm_cpu
        for probe in probes:
            probe.start()
        print(f"warm-up done ({args.period:g} s, every site's first documents: {warm_cpu:.1f} CPU-s in the view); "
              f"following every change for {args.duration:g} s", flush=True)
        window_cpu = proc_cpu_s(view.pid)
        window_start = time.monotonic()
        publisher.board = board
        time.sleep(args.duration)
        publisher.board = None
        deadline = time.monotonic() + board.limit_s + 5
        while not board.empty() and time.monotonic() < deadline:
            time.sleep(0.1)
        probes_stop.set()
        for probe in probes:
            probe.join(30)
        window_cpu = proc_cpu_s(view.pid) - window_cpu
        window_s = time.monotonic() - window_start
        load_window = os.getloadavg()
        changes = list(board.done)
        # CPU: publishing without probes, then no publishing at all.
        busy_cpu = proc_cpu_s(view.pid)
        busy_start = time.monotonic()
        time.sleep(args.quiet)
        busy_cpu = proc_cpu_s(view.pid) - busy_cpu
        busy_s = time.monotonic() - busy_start
        load_busy = os.getloadavg()
        publisher.halt()
        time.sleep(5)  # the last documents taken
        idle_cpu = proc_cpu_s(view.pid)
        idle_start = time.monotonic()
        while time.monotonic() - idle_start < args.idle:
            time.sleep(min(5.0, args.idle))
            for link in links:
                link.idle()
        idle_cpu = proc_cpu_s(view.pid) - idle_cpu
        idle_s = time.monotonic() - idle_start
        for link in links:
            link.close()
        links = []
        # The whole view at once: what a consumer of /glue2.json and /sites waits for.
        started = time.monotonic()
        union_size = len(view.get("/glue2.json")[1])
        union_s = time.monotonic() - started
        started = time.monotonic()
        sites_size = len(view.get("/sites")[1])
        sites_s = time.monotonic() - started
        hwm_1, rss_1 = proc_memory_mb(view.pid)
        first_log = view.text()
        # A restart: the state directory loaded and the whole tree reconciled (as every full_sync).
        code = view.stop()
        if args.profile:
            show_profile(args.profile)
            view.profile = None
        view.start()
        marker = f"reconciled {args.sites} sites"
        restart_s = view.wait_for(lambda: marker in view.text()[len(first_log):], f"'{marker}' in the log", 300)
        restart_cpu = proc_cpu_s(view.pid)
        reconcile_line = next((line for line in view.text()[len(first_log):].splitlines() if marker in line), "")

        rate = 60.0 / args.period  # the message rate of this run against the 60 s target's
        idle_rate = idle_cpu / idle_s
        busy_rate = busy_cpu / busy_s
        per_hour = idle_rate * 3600 + max(0.0, busy_rate - idle_rate) * 3600 / rate + restart_cpu
        measured = [c for c in changes if c.json_seen is not None]
        print()
        print(f"item 1: {args.sites} sites each publishing every {args.period:g} s "
              f"({args.sites * 2 / args.period:.1f} messages/s), {len(measured)} changes followed over {window_s:.0f} s "
              f"(load {load_window[0]:.2f}); publishes late by median {percentile(publisher.late_s, 0.5) * 1e3:.0f} ms, "
              f"max {max(publisher.late_s) * 1e3:.0f} ms")
        print(delays_line("JSON (GET glue21.json)", [c.json_seen for c in measured if c.json_seen is not None]))
        print(delays_line("LDAP (GLUE 1.3 and 2)", [c.ldap_seen for c in measured if c.ldap_seen is not None]))
        print(f"  {'peak RSS (VmHWM)':26s} {hwm_1:7.0f} MB (RSS now {rss_1:.0f} MB; restarted view {proc_memory_mb(view.pid)[0]:.0f} MB)"
              f"   target < {TARGET_RSS_MB:g} MB: {'met' if hwm_1 < TARGET_RSS_MB else 'NOT met'}")
        print(f"  {'CPU per hour at 60 s':26s} {per_hour:7.1f} CPU-s   target < {TARGET_CPU_PER_HOUR:g}: "
              f"{'met' if per_hour < TARGET_CPU_PER_HOUR else 'NOT met'}")
        print(f"      publishing, no probes:   {busy_cpu:.1f} CPU-s in {busy_s:.0f} s = {busy_rate * 3600:.1f} CPU-s/h at "
              f"this period (load {load_busy[0]:.2f})")
        print(f"      no publishing (idle):    {idle_cpu:.2f} CPU-s in {idle_s:.0f} s = {idle_rate * 3600:.1f} CPU-s/h")
        print(f"      scaled: idle + (busy - idle) x {args.period:g}/60, + one full reconciliation per hour "
              f"(full_sync 3600 s): a restarted view took {restart_cpu:.1f} CPU-s and {restart_s:.1f} s to load "
              f"{args.sites} sites and reconcile them")
        print(f"      with the probes polling: {window_cpu:.1f} CPU-s in {window_s:.0f} s = "
              f"{window_cpu / window_s * 3600:.1f} CPU-s/h at this period")
        print(f"      warm-up (first documents of every site, all added): {warm_cpu:.1f} CPU-s")
        print(f"  GET /glue2.json {union_size / 1e6:.1f} MB in {union_s * 1e3:.0f} ms, /sites {sites_size / 1e3:.0f} kB in "
              f"{sites_s * 1e3:.0f} ms (after the last change)")
        print(f"  the view's exit after SIGTERM: {code}; {reconcile_line.strip()}", flush=True)

        if args.outage_sites:
            found = outage(args, broker, view, slapd.url, sites[:args.outage_sites], workdir, passwords, sender_of)
            count = found["sites"]
            print()
            print(f"item 2: broker stopped {found['down_for']:.0f} s (its stop took {found['stop_took']:.1f} s, its start "
                  f"{found['start_took']:.1f} s) while {count} sites (real AmqpOutput objects, one outbox each) published "
                  f"every {args.period:g} s; [amqp] retry_max "
                  f"{f'{args.retry_max:g} s' if args.retry_max is not None else 'glueinfo default (20 s)'}; "
                  f"load {found['load']:.2f}")
            before = found["published_before_back"]
            print(f"  publishes per site before the broker's return: {min(before.values())}-{max(before.values())}; "
                  f"in all {min(found['published'].values())}-{max(found['published'].values())}; "
                  f"publishes whose output reported an error: {found['publish_errors']}")
            consumer = found["consumer_at"]
            print(f"  view's consumer back (/health): {'never' if consumer is None else f'{consumer:.1f} s'} after the "
                  f"broker's return")
            print(catch_up_line("sites' outboxes empty", found["outbox_at"], count, args.catch_up_limit))
            print(catch_up_line("newest document in JSON", found["json_at"], count, args.catch_up_limit))
            print(catch_up_line("newest document in LDAP", found["ldap_at"], count, args.catch_up_limit))
            lost = found["lost"]
            print(f"  documents lost (newest published != what the view serves): {len(lost)} of {count} sites; "
                  f"{found['left_in_outboxes']} left in outboxes after close   target 0: {'met' if not lost else 'NOT met'}")
            for line in lost:
                print(f"    {line}")
        text = view.text()
        refusals = [line for line in text.splitlines() if "refused '" in line]
        warnings = [line for line in text.splitlines() if " WARNING" in line or "ERROR" in line]
        print()
        print(f"the view's log: {len(refusals)} refusals, {len(warnings)} warning/error lines"
              + ("".join(f"\n  {line[:300]}" for line in warnings[-8:]) if warnings else ""))
        load_end = os.getloadavg()
        print(f"load average at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
        return 0
    finally:
        for link in links:
            link.close()
        if view is not None:
            view.stop()
        slapd.stop()
        broker.remove()
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
