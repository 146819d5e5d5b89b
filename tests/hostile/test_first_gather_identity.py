"""A worker cannot take over the head node or a spool host on the first gather (issue 26, finding 1).

The attack: an agent listed only by its address (nothing names it, and a
loopback address has no reverse name) answers with a Node whose Id is the
head node's own name, or a spool host's, with a CollectedAt an hour in the
future so that its facts would win the merge.  On a fresh state directory
the sources all run at once, so before the fix the claims check saw no host
known to other sources yet and let it in: the head node was published as
the attacker's aarch64 host with 128 GB, the spoofed snapshot was saved to
the state directory and kept as a contributor afterwards.

Only the CLI is driven (tests/harness/glueinfo_processes.py); the attacker
is a plain HTTP server on 127.0.0.16 serving a Node document that
`glueinfo node-xml` made from a recorded machine.
"""

from __future__ import annotations

import datetime
import http.server
import json
import re
import threading

import pytest
from glueinfo_processes import run_glueinfo
from paths import REPO

HOSTS = REPO / "tests" / "fixtures" / "hosts"
HEAD_TREE, ATTACKER_TREE = HOSTS / "xeon-gold-2s-ht", HOSTS / "arm-altra-q32"
HEAD = "head.example.org"
ATTACKER_ADDRESS = "127.0.0.16"


def meminfo_mb(tree) -> int:
    """MemTotal of a recorded tree, in MB, read straight from its /proc/meminfo."""
    for line in (tree / "proc" / "meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal")


def node_xml(tmp, tree, hostname: str, collected_at: datetime.datetime | None = None) -> bytes:
    """`glueinfo node-xml` of a recorded machine under ``hostname``, its CollectedAt moved to ``collected_at``."""
    config = tmp / f"node-{hostname}.conf"
    config.write_text(f"[glueinfo]\nhost_root = {tree}\nhostname = {hostname}\n")
    proc = run_glueinfo("node-xml", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    if collected_at is not None:
        stamp = collected_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        text, count = re.subn(r'(<Extension name="CollectedAt" type="Glueinfo">)[^<]*', rf"\g<1>{stamp}", text)
        assert count == 1
    return text.encode()


@pytest.fixture
def attacker(tmp_path):
    """An HTTP server on 127.0.0.16 answering every GET with the document ``serve(document)`` set."""
    served: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = served.get("document", b"")
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((ATTACKER_ADDRESS, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def serve(document: bytes) -> int:
        served["document"] = document
        return server.server_address[1]

    yield serve
    server.shutdown()
    server.server_close()


def future() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)


def head_config(tmp, sources: str, port: int, extra: str = "") -> str:
    (tmp / "state").mkdir(exist_ok=True)  # one-shot commands write a state directory that exists
    config = tmp / "head.conf"
    config.write_text(f"[glueinfo]\nhost_root = {HEAD_TREE}\nhostname = {HEAD}\n"
                      f"[sources]\nenabled = {sources}\nagents = {ATTACKER_ADDRESS}:{port}\n{extra}"
                      f"[run]\nstate_dir = {tmp / 'state'}\n")
    return str(config)


def saved_sources(tmp, host: str) -> list[str]:
    """Which sources the state directory keeps a snapshot of ``host`` from (the file glueinfo writes)."""
    path = tmp / "state" / "hosts" / f"{host}.json"
    return sorted(json.loads(path.read_text())["sources"]) if path.exists() else []


def test_an_unnamed_agent_claiming_the_head_node_on_a_fresh_state_is_refused(tmp_path, attacker):
    port = attacker(node_xml(tmp_path, ATTACKER_TREE, HEAD, future()))
    config = head_config(tmp_path, "local, agents", port)

    gathered = run_glueinfo("gather", "--config", config)
    assert gathered.returncode == 0, gathered.stderr
    result = json.loads(gathered.stdout)
    [head] = [h for h in result["hosts"] if h["hostname"] == HEAD]
    assert head["snapshot"]["cpu"]["instruction_set"] == "x86_64"
    assert head["snapshot"]["memory"]["ram_mb"] == meminfo_mb(HEAD_TREE)
    assert list(head["sources"]) == ["local"]
    [refusal] = [f for f in result["failures"] if f["target"] == f"{ATTACKER_ADDRESS}:{port}"]
    assert HEAD in refusal["error"] and "this head node" in refusal["error"] and "refused" in refusal["error"]
    assert "refused" in gathered.stderr  # one WARNING

    # The one-shot publication on the same fresh state: the head node is itself, and nothing spoofed is saved.
    ldif = run_glueinfo("ldif", "--config", config)
    assert f"GlueHostUniqueID: {HEAD}" in ldif.stdout
    assert f"GlueHostMainMemoryRAMSize: {meminfo_mb(HEAD_TREE)}" in ldif.stdout
    assert "aarch64" not in ldif.stdout
    assert saved_sources(tmp_path, HEAD) == ["local"]

    # The address is not left pinned to the head node: the next gather refuses it again.
    again = json.loads(run_glueinfo("gather", "--config", config).stdout)
    assert [f for f in again["failures"] if f["target"] == f"{ATTACKER_ADDRESS}:{port}"]
    assert [list(h["sources"]) for h in again["hosts"] if h["hostname"] == HEAD] == [["local"]]


def test_an_unnamed_agent_claiming_a_spool_host_is_refused(tmp_path, attacker):
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "wn01.example.org.xml").write_bytes(node_xml(tmp_path, HEAD_TREE, "wn01.example.org"))
    port = attacker(node_xml(tmp_path, ATTACKER_TREE, "wn01.example.org", future()))
    config = head_config(tmp_path, "spool, agents", port, extra=f"spool_dir = {spool}\n")

    result = json.loads(run_glueinfo("gather", "--config", config).stdout)
    [host] = result["hosts"]
    assert host["hostname"] == "wn01.example.org" and list(host["sources"]) == ["spool"]
    assert host["snapshot"]["memory"]["ram_mb"] == meminfo_mb(HEAD_TREE)
    [refusal] = [f for f in result["failures"] if f["target"] == f"{ATTACKER_ADDRESS}:{port}"]
    assert "spool" in refusal["error"] and "refused" in refusal["error"]


def test_a_spoofed_snapshot_saved_earlier_is_not_restored(tmp_path, attacker):
    """A state directory an older version wrote while the head node was not one of its own hosts
    (``local`` off, so nothing reserved its name): once ``local`` is on, the agent's saved snapshot
    of the head node is checked when loaded and left out, with one warning."""
    port = attacker(node_xml(tmp_path, ATTACKER_TREE, HEAD, future()))
    before = run_glueinfo("ldif", "--config", head_config(tmp_path, "agents", port))
    assert before.returncode in (0, 1), before.stderr
    assert saved_sources(tmp_path, HEAD) == ["agents"]  # an unnamed address may pin a host nobody else has

    attacker(b"not a Node document")  # the agent now answers nothing usable: only the saved state speaks for it
    after = run_glueinfo("gather", "--config", head_config(tmp_path, "local, agents", port))
    result = json.loads(after.stdout)
    [head] = [h for h in result["hosts"] if h["hostname"] == HEAD]
    assert list(head["sources"]) == ["local"]
    assert head["snapshot"]["cpu"]["instruction_set"] == "x86_64"
    assert f"state of {HEAD} from agents ignored" in after.stderr
