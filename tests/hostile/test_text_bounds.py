"""Texts without a bound and names a worker chose (issue 26, findings 5 and 7).

Finding 5: a CpuVendor, CpuModel or Opsys of 10,000 characters from a spool
file, an agent's Node or a JSON snapshot reached the LDIF as it was
(``GlueSubClusterName`` of 10,104 characters) and the site's Node XML.  Every
text fact now has a maximum (docs/admin-guide.md, "Text lengths"): a longer
one is cut or left out at the model boundary, with one warning per input
naming host, fields and lengths, so no document carries it.

Finding 7: an agent whose Node Id is ``wn29`` and whose ``<Name>`` is
``wn01.example.org`` was accepted and the site's Node XML republished that
Name; an agent listed as ``wn33.example.org`` that reports Id ``wn33`` was
published as ``GlueHostUniqueID: wn33``.  The Node's Name is now the listed
name, and a host listed by FQDN keeps its FQDN.

Every check reads what a user reads: exit code, stdout and stderr of real
`glueinfo` processes, fake agents answering HTTP on loopback.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import subprocess
import sys
import threading

import pytest
from glueinfo_processes import run_glueinfo, start_glueinfo, stop_glueinfo
from lxml import etree
from paths import REPO

XEON = REPO / "tests" / "fixtures" / "hosts" / "xeon-gold-2s-ht"
SITE50 = REPO / "tests" / "fixtures" / "nodes" / "site50.json"
LONG = 10_000
# docs/admin-guide.md, "Text lengths": descriptive texts (a CPU model, an OS name) at most 256 characters;
# a CPU vendor, an instruction set, a platform: 64.  No text a host reports may make a longer value.
DESCRIPTIVE_MAX = 256


def long_text(word: str) -> str:
    """``LONG`` characters that start like a real value, so a cut one is recognisable."""
    return (word + " ") + "x" * (LONG - len(word) - 1)


def ldif_values(ldif: str) -> list[tuple[str, str]]:
    """(attribute, value) of every line of an LDIF document, folded lines joined (RFC 2849: a line
    starting with one space continues the one before) and base64 values (``name:: ...``) decoded."""
    values = []
    for line in ldif.replace("\n ", "").splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(":"):
            value = base64.b64decode(value[1:].strip()).decode("utf-8")
        values.append((name, value[1:] if value.startswith(" ") else value))
    return values


def attribute(ldif: str, name: str) -> list[str]:
    return [value for attr, value in ldif_values(ldif) if attr == name]


def warnings_about(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


def worker_node(tmp, hostname: str) -> str:
    """The xeon fixture machine's Node under ``hostname``, as its own `glueinfo node-xml` writes it."""
    config = tmp / f"{hostname}.conf"
    config.write_text(f"[glueinfo]\nhostname = {hostname}\n[run]\nstate_dir = {tmp / 'worker-state'}\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "node-xml", "--host-root", str(XEON),
                           "--config", str(config)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def with_element(node: str, pattern: str, text: str) -> str:
    """``node`` with the text of the element ``pattern`` matches (a regex of its start tag) replaced."""
    changed, count = re.subn(f"({pattern})[^<]*(<)", lambda m: m.group(1) + text + m.group(2), node, count=1)
    assert count == 1, pattern
    return changed


def hostile_texts(node: str) -> str:
    node = with_element(node, r'<Extension name="CpuVendor" type="Cpu">', long_text("GenuineIntel"))
    node = with_element(node, r'<Extension name="CpuModel" type="Cpu">', long_text("Intel(R) Xeon(R) Gold 6126"))
    return with_element(node, r"<Opsys>", long_text("Rocky Linux"))


def test_a_spool_file_with_10000_character_texts_publishes_none_of_them(tmp_path):
    """Finding 5, the spool: the texts reached GlueHostProcessorModel, GlueSubClusterName and the Node XML."""
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "wn07.example.org.xml").write_text(hostile_texts(worker_node(tmp_path, "wn07.example.org")))
    (spool / "wn08.example.org.xml").write_text(worker_node(tmp_path, "wn08.example.org"))  # an honest one beside it
    config = tmp_path / "head.conf"
    config.write_text(f"[sources]\nenabled = spool\nspool_dir = {spool}\n[run]\nstate_dir = {tmp_path / 'state'}\n")

    proc = run_glueinfo("ldif", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert sorted(attribute(proc.stdout, "GlueHostUniqueID")) == ["wn07.example.org", "wn08.example.org"]
    too_long = [(name, len(value)) for name, value in ldif_values(proc.stdout) if len(value) > DESCRIPTIVE_MAX]
    assert too_long == []
    honest = "Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz"  # wn08's, as its /proc/cpuinfo says
    [cut] = set(attribute(proc.stdout, "GlueHostProcessorModel")) - {honest}  # wn07's, on its host and SubCluster
    assert len(cut) == DESCRIPTIVE_MAX and cut.startswith("Intel(R) Xeon(R) Gold 6126 xxx") and cut.endswith("...")
    assert set(attribute(proc.stdout, "GlueHostProcessorVendor")) == {"GenuineIntel"}  # wn07's left out, not cut
    [warning] = warnings_about(proc.stderr, f"{LONG} characters")
    assert "wn07.example.org" in warning and "spool" in warning
    for field in ("cpu.vendor", "cpu.model_name", "os.name"):
        assert field in warning
    assert "wn08" not in proc.stderr

    nodes = run_glueinfo("gather", "--format", "node-xml", "--config", str(config))
    assert nodes.returncode == 0, nodes.stderr
    elements = list(etree.fromstring(nodes.stdout.encode()).iter())
    assert max(len(e.text or "") for e in elements if e.tag != "Description") <= DESCRIPTIVE_MAX
    # glueinfo's Description is made of the OS pretty name and the CPU model (docs/sss.md): two bounded texts
    assert max(len(e.text or "") for e in elements if e.tag == "Description") <= 2 * DESCRIPTIVE_MAX + 100
    assert len(warnings_about(nodes.stderr, f"{LONG} characters")) == 1


def test_a_json_snapshot_with_10000_character_texts_publishes_none_of_them(tmp_path):
    """Finding 5, JSON snapshots (`--snapshots`, `[node] site_snapshots`, state files)."""
    hosts = json.loads(SITE50.read_text())[:3]
    hosts[1]["cpu"]["vendor"] = long_text("AuthenticAMD")
    hosts[1]["cpu"]["model_name"] = long_text("AMD EPYC 7763")
    hosts[1]["os"]["name"] = long_text("Debian")
    hosts[1]["os"]["pretty_name"] = long_text("Debian GNU/Linux 12")
    site = tmp_path / "site.json"
    site.write_text(json.dumps(hosts))
    config = tmp_path / "isolated.conf"
    config.write_text(f"[run]\nstate_dir = {tmp_path / 'no-state'}\n")

    proc = run_glueinfo("ldif", "--snapshots", str(site), "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert sorted(attribute(proc.stdout, "GlueHostUniqueID")) == sorted(h["hostname"] for h in hosts)
    assert [(n, len(v)) for n, v in ldif_values(proc.stdout) if len(v) > DESCRIPTIVE_MAX] == []
    [warning] = warnings_about(proc.stderr, f"{LONG} characters")
    assert hosts[1]["hostname"] in warning
    for field in ("cpu.vendor", "cpu.model_name", "os.name", "os.pretty_name"):
        assert field in warning


# -- fake agents -----------------------------------------------------------------------------------


class FakeAgent:
    """An HTTP server on a loopback address that answers every request with one Node document."""

    def __init__(self, address: str, body: str):
        self.listener = socket.create_server((address, 0))
        self.address, self.port = address, self.listener.getsockname()[1]
        self.body = body.encode()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                try:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        chunk = connection.recv(4096)
                        if not chunk:
                            break
                        request += chunk
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: "
                                       + str(len(self.body)).encode() + b"\r\nConnection: close\r\n\r\n" + self.body)
                except OSError:
                    pass

    def close(self):
        self.listener.close()


@pytest.fixture
def fake_agents():
    started = []

    def start(address: str, body: str) -> FakeAgent:
        agent = FakeAgent(address, body)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()


def head_config(tmp, agents: str):
    config = tmp / "head.conf"
    config.write_text(f"[sources]\nenabled = agents\nagents = {agents}\n[run]\nstate_dir = {tmp / 'head-state'}\n")
    return config


def other_softwares_node(node_id: str, name: str, opsys: str = "Linux", description: str = "a worker") -> str:
    """A Node as a batch system or a hand-written file gives it (not glueinfo's form: kept as published)."""
    return (f"<Node><Id>{node_id}</Id><Name>{name}</Name><State>Idle</State><Opsys>{opsys}</Opsys>"
            f"<Arch>x86_64</Arch><Description>{description}</Description>"
            f"<Configured><Processors>16</Processors><Memory units=\"MB\">64000</Memory></Configured></Node>")


def test_an_agents_node_of_another_software_with_10000_character_texts_is_republished_bounded(tmp_path, fake_agents):
    """Finding 5, an agent's Node kept as published: its Opsys and Description were written back as given."""
    node = other_softwares_node("wn40.example.org", "wn40", long_text("Linux"), long_text("Dell R640 in rack B4"))
    agent = fake_agents("127.0.0.41", node)
    config = head_config(tmp_path, f"127.0.0.41:{agent.port}=wn40.example.org")
    proc = run_glueinfo("gather", "--format", "node-xml", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    [element] = etree.fromstring(proc.stdout.encode()).iter("Node")
    assert element.findtext("Id") == "wn40.example.org"
    assert max(len(child.text or "") for child in element.iter()) <= DESCRIPTIVE_MAX
    assert element.findtext("Description").startswith("Dell R640 in rack B4 xxx")
    [warning] = warnings_about(proc.stderr, f"{LONG} characters")
    assert "wn40.example.org" in warning and "agents" in warning


@pytest.mark.parametrize("listed_as", ["address and name", "address only"])
def test_an_agents_node_name_naming_another_host_is_not_republished(tmp_path, fake_agents, listed_as):
    """Finding 7: Id wn29 with Name wn01.example.org was accepted and the site's Node XML said wn01."""
    agent = fake_agents("127.0.0.29", other_softwares_node("wn29", "wn01.example.org"))
    listed = f"127.0.0.29:{agent.port}" + ("=wn29.example.org" if listed_as == "address and name" else "")
    config = head_config(tmp_path, listed)
    proc = run_glueinfo("gather", "--format", "node-xml", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert "wn01" not in proc.stdout
    [element] = etree.fromstring(proc.stdout.encode()).iter("Node")
    expected = "wn29.example.org" if listed_as == "address and name" else "wn29"
    assert element.findtext("Id") == expected
    assert element.findtext("Name") in (expected, None)  # the listed name, or none at all


def test_an_agent_listed_by_fqdn_that_reports_its_short_name_keeps_the_fqdn(tmp_path):
    """Finding 7: an agent listed as wn33.example.org reporting Id wn33 became GlueHostUniqueID: wn33."""
    config = tmp_path / "wn33.conf"
    config.write_text(f"[glueinfo]\nhost_root = {XEON}\nhostname = wn33\n"
                      f"[serve]\nlisten = 127.0.0.33:0\nrefresh_interval = 3600\n"
                      f"[run]\nstate_dir = {tmp_path / 'wn33-state'}\n")
    served = start_glueinfo(config, tmp_path / "wn33.log")
    try:
        head = head_config(tmp_path, f"127.0.0.33:{served.port}=wn33.example.org")
        proc = run_glueinfo("ldif", "--config", str(head))
    finally:
        stop_glueinfo(served)
    assert proc.returncode == 0, proc.stderr
    assert attribute(proc.stdout, "GlueHostUniqueID") == ["wn33.example.org"]
    assert set(attribute(proc.stdout, "GlueHostProcessorModel")) == {"Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz"}
