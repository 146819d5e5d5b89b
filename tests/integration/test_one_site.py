"""One site, assembled once: every command and the daemon publish the same truth (black box).

A site of five recorded hosts: this host is a recorded tree (--host-root,
the `local` source) and four workers drop Node XML into a spool; two fork
CEs with VO access rules; one state directory; the clock stopped with
$GLUEINFO_CLOCK.  Then the same GLUE LDIF must come byte for byte from
`glueinfo ldif`, `glueinfo gather --format ldif`, `serve`'s /ldif and
`run --once`'s LDIF file, and (read back with the real ldapsearch) from the
slapd that `glueinfo publish` wrote; the same Node XML from `node-xml
--site`, `gather --format node-xml`, `serve`'s /nodes.xml and `run`'s file.
Also checked from outside: `glueinfo ldif` publishes the spool's hosts (it
used to print only this machine), and a spool-only site's LRMS state
follows a worker's load within one `lrms_interval` of `glueinfo run`.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from paths import HOSTS, REPO
from waiting import wait_until

from glueinfo.core.ldif import Entry, format_ldif, normalise_dn, parse_ldif, value_text

CLOCK = "1790000000"  # 2026-09-21: every command's "now"
WORKERS = ("arm-altra-q32", "epyc-container", "vm-nonascii-cpu", "wn-nfs-lustre")
HEAD = "xeon-gold-2s-ht"
BASE = "mds-vo-name=resource,o=grid"


def glueinfo(*args: str, config: Path, env: dict[str, str] | None = None, check: bool = True,
             timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", *args, "--config", str(config)], capture_output=True,
                          env={**os.environ, "GLUEINFO_CLOCK": CLOCK, **(env or {})}, cwd=REPO, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"glueinfo {' '.join(args)}: {proc.returncode}: {proc.stderr.decode()}"
    return proc


@functools.cache
def hostname_of(tree: str) -> str:
    """The name `glueinfo probe` gives a recorded tree (recorded.json, else its kernel hostname)."""
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "probe", "--host-root", str(HOSTS / tree)],
                          capture_output=True, cwd=REPO, check=True, timeout=60)
    return json.loads(proc.stdout)["hostname"]


def make_site(tmp: Path, extra_run: str = "", sources: str = "local, spool") -> Path:
    """The spool filled by each worker's own `glueinfo node-xml` (as its cron job would), and the config."""
    spool = tmp / "spool"
    spool.mkdir()
    bare = tmp / "bare.conf"
    bare.write_text("")
    for tree in WORKERS:
        node = glueinfo("node-xml", "--host-root", str(HOSTS / tree), config=bare).stdout
        (spool / f"{hostname_of(tree)}.xml").write_bytes(node)
    (tmp / "out").mkdir()
    config = tmp / "glueinfo.conf"
    config.write_text(f"""
[glueinfo]
host_root = {HOSTS / HEAD}
[sources]
enabled = {sources}
spool_dir = {spool}
[ce:atlas]
lrms = fork
queue = atlas
access = VO:atlas
[ce:dteam]
lrms = fork
queue = dteam
access = VO:dteam, VO:ops
[run]
state_dir = {tmp / "state"}
ldif_file = {tmp / "out" / "glue.ldif"}
node_xml_file = {tmp / "out" / "nodes.xml"}
{extra_run}
[serve]
listen = 127.0.0.1:0
refresh_interval = 3600
""")
    return config


def served(config: Path, tmp: Path, paths: tuple[str, ...]) -> dict[str, bytes]:
    log = tmp / "serve.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "serve", "--config", str(config)], stdout=handle,
                                   stderr=handle, cwd=REPO, env={**os.environ, "GLUEINFO_CLOCK": CLOCK})
    try:
        match = wait_until(lambda: re.search(r"serving http://127\.0\.0\.1:(\d+)/", log.read_text(errors="replace")),
                           "serve logged the address it serves on", 60, detail=lambda: log.read_text(errors="replace"),
                           still_running=lambda: process.poll() is None)
        port = int(match.group(1))
        answers = {}
        for path in paths:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
                answers[path] = answer.read()
        return answers
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def tree_of(entries) -> dict[str, dict[str, list[str]]]:
    """DN -> attribute -> sorted values, below the base: what a client reading the server sees."""
    base = normalise_dn(BASE)
    return {normalise_dn(e.dn): {n.lower(): sorted(value_text(v) for v in vs) for n, vs in e.attributes.items()}
            for e in entries if normalise_dn(e.dn).endswith("," + base)}


@pytest.mark.integration
def test_every_command_and_the_daemon_publish_the_same_bytes(tmp_path, slapd):
    config = make_site(tmp_path)

    ldif = glueinfo("ldif", config=config).stdout
    gathered = glueinfo("gather", "--format", "ldif", config=config).stdout
    site_xml = glueinfo("node-xml", "--site", config=config).stdout
    gathered_xml = glueinfo("gather", "--format", "node-xml", "--pretty", config=config).stdout
    answers = served(config, tmp_path, ("/ldif", "/nodes.xml"))
    glueinfo("run", "--once", config=config)
    ldif_file = (tmp_path / "out" / "glue.ldif").read_bytes()
    xml_file = (tmp_path / "out" / "nodes.xml").read_bytes()
    # After `run` wrote the state directory (hosts, SubCluster ids), a one-shot command reads it: still the same.
    ldif_after_run = glueinfo("ldif", config=config).stdout

    # The site is the spool's four workers and this host, in every output.
    entries = parse_ldif(ldif.decode())
    hosts = sorted(e.first("GlueHostName") for e in entries if "GlueHost" in e.get("objectClass"))
    assert hosts == sorted([hostname_of(HEAD), *(hostname_of(t) for t in WORKERS)])
    ces = sorted(e.first("GlueCEUniqueID") for e in entries if "GlueCE" in e.get("objectClass"))
    assert len(ces) == 2 and all(re.search(r"/jobmanager-fork-(atlas|dteam)$", ce) for ce in ces)

    assert gathered == ldif
    assert answers["/ldif"] == ldif
    assert ldif_file == ldif
    assert ldif_after_run == ldif
    assert gathered_xml == site_xml
    assert answers["/nodes.xml"] == site_xml
    assert xml_file == site_xml
    assert site_xml.count(b"<Node>") == 5

    # publish, read back with the real ldapsearch: the server holds exactly that tree.
    password = tmp_path / "password"
    password.write_text(slapd.password + "\n")
    glueinfo("publish", "--ldap", slapd.url, "--bind-dn", slapd.bind_dn, "--password-file", str(password),
             "--no-state", config=config)
    assert tree_of(slapd.ldapsearch(BASE, "(objectClass=*)")) == tree_of(entries)


@pytest.mark.integration
def test_ldif_honours_the_sources_and_says_what_failed(tmp_path):
    config = make_site(tmp_path, sources="spool")
    proc = glueinfo("ldif", config=config)
    names = sorted(e.first("GlueHostName") for e in parse_ldif(proc.stdout.decode()) if "GlueHost" in e.get("objectClass"))
    assert names == sorted(hostname_of(t) for t in WORKERS)  # only the spool: this host is not a source
    # A spool that cannot be read is one line naming it, and the command still prints the site it has.
    shutil.rmtree(tmp_path / "spool")
    broken = glueinfo("ldif", config=config, check=False)
    assert re.search(rb"spool: .*spool: cannot list the spool", broken.stderr), broken.stderr


@pytest.mark.integration
def test_a_spool_only_site_follows_a_workers_load_in_its_ces_within_one_lrms_interval(tmp_path):
    # A real clock here: the daemon runs for a few cycles.
    config = make_site(tmp_path, sources="spool",
                       extra_run="gather_interval = 1\nlrms_interval = 1\nslow_interval = 3600\nfast_interval = 3600")
    spool = tmp_path / "spool"
    worker = hostname_of("wn-nfs-lustre")
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CLOCK"}

    def rewrite_spool(load: str) -> None:
        for tree in WORKERS:
            node = subprocess.run([sys.executable, "-m", "glueinfo.cli", "node-xml", "--host-root", str(HOSTS / tree)],
                                  capture_output=True, env=env, cwd=REPO, check=True).stdout
            if tree == "wn-nfs-lustre":
                node = re.sub(rb'(<Extension name="LoadAverage1" type="Load">)[^<]*', rb"\g<1>" + load.encode(), node)
            target = spool / f"{hostname_of(tree)}.xml"
            (spool / f".{target.name}.tmp").write_bytes(node)
            os.replace(spool / f".{target.name}.tmp", target)

    def free_cpus() -> dict[str, str]:
        text = (tmp_path / "out" / "glue.ldif").read_text()
        return {e.first("GlueCEUniqueID"): value_text(e.first("GlueCEStateFreeCPUs")) for e in parse_ldif(text)
                if "GlueCE" in e.get("objectClass")}

    def host_load() -> str:
        for e in parse_ldif((tmp_path / "out" / "glue.ldif").read_text()):
            if e.first("GlueHostName") == worker:
                return value_text(e.first("GlueHostProcessorLoadLast1Min"))
        return ""

    rewrite_spool("15.92")
    log = tmp_path / "run.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "run", "--config", str(config)], stdout=handle,
                                   stderr=handle, cwd=REPO, env=env)
    try:
        def running() -> bool:
            return process.poll() is None

        def log_tail() -> str:
            return log.read_text(errors="replace")[-3000:]

        busy_load = wait_until(lambda: (tmp_path / "out" / "glue.ldif").exists() and host_load(),
                               f"run published {worker}'s load in its LDIF file", 60, step=0.2, detail=log_tail,
                               still_running=running)
        busy_free = free_cpus()
        rewrite_spool("4.10")

        def moved() -> tuple[str, dict[str, str]] | None:
            load, free = host_load(), free_cpus()
            return (load, free) if load != busy_load and free != busy_free else None

        idle_load, idle_free = wait_until(moved, f"run published {worker}'s new load and the CEs' new free CPUs", 30,
                                          step=0.2, detail=log_tail, still_running=running)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    # The worker's own entry and both CEs' free CPUs moved, within a few 1 s cycles.
    assert idle_load != busy_load, log.read_text()[-3000:]
    assert all(int(idle_free[ce]) > int(busy_free[ce]) for ce in busy_free), (busy_free, idle_free)
    assert len(busy_free) == 2


@pytest.mark.integration
def test_the_first_run_after_an_upgrade_keeps_the_subcluster_ids_already_published(tmp_path):
    """An earlier glueinfo published other SubCluster ids (the old readable form, say).  With no
    ids in the state yet, `run` adopts them by membership from the LDIF file it published last,
    so the upgrade renames nothing."""
    config = make_site(tmp_path, sources="spool")
    fresh = glueinfo("ldif", config=config).stdout.decode()
    ids = sorted({e.first("GlueSubClusterUniqueID") for e in parse_ldif(fresh) if "GlueSubCluster" in e.get("objectClass")})
    assert len(ids) == 4
    legacy = []
    for entry in parse_ldif(fresh):  # what the old version called them
        dn = entry.dn
        for unique_id in ids:
            dn = dn.replace(f"GlueSubClusterUniqueID={unique_id},", f"GlueSubClusterUniqueID={unique_id}-old-style,")
        legacy.append(Entry.from_lists(dn, entry.attributes))
    published = tmp_path / "out" / "glue.ldif"
    published.write_text(format_ldif(legacy))
    glueinfo("run", "--once", config=config)
    after = parse_ldif(published.read_text())
    kept = sorted({e.first("GlueSubClusterUniqueID") for e in after if "GlueSubCluster" in e.get("objectClass")})
    assert kept == sorted(f"{unique_id}-old-style" for unique_id in ids)
    assert all(",GlueSubClusterUniqueID=" in e.dn and "-old-style," in e.dn for e in after if "GlueHost" in e.get("objectClass"))
    # Remembered from now on, in the state directory: the next run keeps them without the file.
    published.unlink()
    glueinfo("run", "--once", config=config)
    again = sorted({e.first("GlueSubClusterUniqueID") for e in parse_ldif(published.read_text())
                    if "GlueSubCluster" in e.get("objectClass")})
    assert again == kept


@pytest.mark.integration
def test_publish_after_an_upgrade_keeps_the_subcluster_ids_the_ldap_server_holds(tmp_path, slapd):
    """The server holds a tree an earlier glueinfo published, with its own SubCluster ids.  With
    no ids remembered yet, `publish` adopts them from the server by membership: nothing is
    deleted or re-added, and the ids are remembered in the state directory from then on."""
    config = make_site(tmp_path, sources="spool")
    (tmp_path / "state").mkdir()
    fresh = parse_ldif(glueinfo("ldif", config=config).stdout.decode())
    (tmp_path / "state" / "subclusters.json").unlink()  # as before the upgrade: nothing remembered
    ids = sorted({e.first("GlueSubClusterUniqueID") for e in fresh if "GlueSubCluster" in e.get("objectClass")})
    legacy = []
    for entry in fresh:
        dn = entry.dn
        for unique_id in ids:
            dn = dn.replace(f"GlueSubClusterUniqueID={unique_id},", f"GlueSubClusterUniqueID={unique_id}-v1,")
        attributes = dict(entry.attributes)
        if "GlueSubClusterUniqueID" in attributes:
            attributes["GlueSubClusterUniqueID"] = [f"{v}-v1" for v in attributes["GlueSubClusterUniqueID"]]
        if "GlueChunkKey" in attributes:  # a host's key names its SubCluster
            attributes["GlueChunkKey"] = [f"{v}-v1" if str(v).startswith("GlueSubClusterUniqueID=") else v
                                          for v in attributes["GlueChunkKey"]]
        legacy.append(Entry.from_lists(dn, attributes))
    assert slapd.ldapadd(format_ldif(legacy)).ok
    before = {e.dn.lower(): e.first("entryUUID") for e in slapd.ldapsearch(BASE, "(objectClass=*)", ["entryUUID"])}
    password = tmp_path / "password"
    password.write_text(slapd.password + "\n")
    proc = glueinfo("publish", "--ldap", slapd.url, "--bind-dn", slapd.bind_dn, "--password-file", str(password),
                    "--no-state", "--stats", config=config)
    stats = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert (stats["added"], stats["deleted"]) == (0, 0), stats
    after = {e.dn.lower(): e.first("entryUUID") for e in slapd.ldapsearch(BASE, "(objectClass=*)", ["entryUUID"])}
    assert after == before  # the same entries: nothing renamed, deleted or re-added
    remembered = json.loads((tmp_path / "state" / "subclusters.json").read_text())
    assert sorted(sc for c in remembered["clusters"].values() for sc in c["subclusters"]) == [f"{i}-v1" for i in ids]
