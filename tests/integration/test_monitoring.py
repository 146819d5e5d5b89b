"""Monitoring a running glueinfo as a site would: a real `glueinfo run` (serve = yes) on a
recorded machine, plus a snapshot file of a second host that has gone stale and whose CPU
model and the site's name are hostile text.

- /metrics parsed with prometheus_client's own parser, and scraped by a real Prometheus
  (Debian's /usr/bin/prometheus, 1 s interval) whose query API then answers the series;
- the status page (/) loaded in a real headless Chromium: the site's figures as its own
  LDIF and Node XML files say, hostile text escaped, a screenshot written;
- `glueinfo check` against the running process and a real slapd: every exit code.

Expected values come from the files `run` wrote (read here directly), the fixture tree and
the servers' own APIs, never from glueinfo's modules.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from lxml import etree
from paths import HOSTS, REPO
from waiting import wait_until

PROMETHEUS = "/usr/bin/prometheus"
CHROMIUM = "/usr/bin/chromium"
HEAD = HOSTS / "xeon-gold-2s-ht"
OTHER = HOSTS / "wn-nfs-lustre"
HOSTILE_MODEL = '<script>alert("cpu")</script> & <b>bold</b>'
HOSTILE_SITE = 'Test <i>site</i> & "co"'

pytestmark = pytest.mark.integration


def free_port() -> int:
    from servers import free_port as harness_free_port

    return harness_free_port()


def get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read()


def glueinfo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, timeout=120, cwd=REPO)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """`glueinfo run` with serve = yes; yields its URL, work directory and output paths."""
    work = tmp_path_factory.mktemp("monitoring")
    (work / "snapshots").mkdir()
    probed = glueinfo("probe", "--host-root", str(OTHER))
    assert probed.returncode == 0, probed.stderr
    other = json.loads(probed.stdout)
    other["cpu"]["model_name"] = HOSTILE_MODEL
    other["collected_at"] = time.time() - 600  # stale (stale_after 60 s), not yet dropped
    (work / "snapshots" / "other.json").write_text(json.dumps(other))
    port = free_port()
    config = work / "glueinfo.conf"
    config.write_text("\n".join([
        "[glueinfo]", f"host_root = {HEAD}",
        "[run]", "fast_interval = 1", "lrms_interval = 1", "slow_interval = 60", "serve = yes",
        f"ldif_file = {work / 'glue.ldif'}", f"node_xml_file = {work / 'nodes.xml'}", f"state_dir = {work / 'state'}",
        "shutdown_grace = 3",
        "[serve]", f"listen = 127.0.0.1:{port}", "refresh_interval = 5",
        "[site]", f"name = {HOSTILE_SITE}", "id = test-site",
        "[node]", "stale_after = 60", f"site_snapshots = {work / 'snapshots'}",
        "[sources]", "drop_after = 86400", ""]))
    log = open(work / "run.log", "wb")
    process = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "run", "--config", str(config)],
                               stdout=log, stderr=log, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        def published_once() -> bool:
            publish = json.loads(get(f"{url}/health"))["monitor"]["publish"]
            return bool(publish and publish["entries"] and (work / "nodes.xml").exists())

        wait_until(published_once, "a first publication", 60, step=0.2, detail=(work / "run.log").read_text,
                   still_running=lambda: process.poll() is None, ignore=(OSError,))
        yield {"url": url, "work": work, "config": config, "other": other["hostname"]}
    finally:
        stop(process)
        log.close()


def ldif_entries(path: Path) -> list[dict[str, list[str]]]:
    """The LDIF file's entries, read without glueinfo (folded lines joined; base64 values skipped)."""
    entries: list[dict[str, list[str]]] = []
    text = re.sub(r"\n ", "", path.read_text(encoding="utf-8"))
    for block in text.strip().split("\n\n"):
        entry: dict[str, list[str]] = {}
        for line in block.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            if not value.startswith(":"):
                entry.setdefault(name, []).append(value.strip())
        if entry.get("dn"):
            entries.append(entry)
    return entries


def published(site: dict[str, Any]) -> dict[str, Any]:
    entries = ldif_entries(site["work"] / "glue.ldif")
    ce = next(e for e in entries if "GlueCEUniqueID" in e and "GlueCEStateFreeCPUs" in e)
    nodes = etree.parse(str(site["work"] / "nodes.xml")).getroot().findall("Node")
    return {"entries": len(entries), "ce": ce["GlueCEUniqueID"][0], "free": int(ce["GlueCEStateFreeCPUs"][0]),
            "total": int(ce["GlueCEInfoTotalCPUs"][0]), "nodes": {n.findtext("Id"): n.findtext("State") for n in nodes}}


# -- /metrics --------------------------------------------------------------------------------------


def test_metrics_parse_and_agree_with_the_published_files(site):
    from prometheus_client.parser import text_string_to_metric_families

    text = get(f"{site['url']}/metrics").decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    expected = published(site)
    assert samples[("glueinfo_hosts_known", ())] == len(expected["nodes"])
    assert samples[("glueinfo_hosts_stale", ())] == 1  # the snapshot file's host, 600 s old
    unknown = sum(state == "Unknown" for state in expected["nodes"].values())
    assert samples[("glueinfo_hosts", (("state", "Unknown"),))] == unknown
    assert samples[("glueinfo_publish_entries", ())] == expected["entries"]
    assert samples[("glueinfo_ce_free_cpus", (("ce", expected["ce"]),))] == expected["free"]
    assert samples[("glueinfo_ce_total_cpus", (("ce", expected["ce"]),))] == expected["total"]
    assert samples[("glueinfo_publish_last_success", ())] == 1
    lrms = [k for k in samples if k[0] == "glueinfo_lrms_query_success"]
    assert lrms and all(samples[k] == 1 for k in lrms)
    collectors = {dict(k[1])["collector"] for k in samples if k[0] == "glueinfo_collector_last_success"}
    assert {"cpu", "memory", "load"} <= collectors
    for name in ("glueinfo_publish_last_duration_seconds", "glueinfo_job_runs_total", "glueinfo_output_age_seconds"):
        assert any(k[0] == name for k in samples), name


@pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK), reason=f"{PROMETHEUS} (Debian package prometheus) needed")
def test_a_real_prometheus_scrapes_metrics(site, tmp_path):
    port = free_port()
    target = urllib.parse.urlsplit(site["url"]).netloc
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: glueinfo\n"
        f"    static_configs:\n      - targets: ['{target}']\n")
    log = open(tmp_path / "prometheus.log", "wb")
    process = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path)
    api = f"http://127.0.0.1:{port}/api/v1/query?query="

    def query(expression: str) -> list[dict[str, Any]]:
        return json.loads(get(api + urllib.parse.quote(expression)))["data"]["result"]

    try:
        found = wait_until(lambda: query("glueinfo_hosts_known"), "Prometheus scraped glueinfo_hosts_known", 60,
                           step=0.3, detail=lambda: (tmp_path / "prometheus.log").read_text()[-3000:],
                           still_running=lambda: process.poll() is None, ignore=(OSError,))
        expected = published(site)
        assert float(found[0]["value"][1]) == len(expected["nodes"])
        assert found[0]["metric"]["job"] == "glueinfo"
        assert float(query('up{job="glueinfo"}')[0]["value"][1]) == 1
        free = query("glueinfo_ce_free_cpus")
        assert {r["metric"]["ce"]: float(r["value"][1]) for r in free} == {expected["ce"]: expected["free"]}
        info = query("glueinfo_info")
        assert info[0]["metric"]["site"] == HOSTILE_SITE  # label values carried as they are
    finally:
        stop(process)
        log.close()


# -- the status page --------------------------------------------------------------------------------


def chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="glueinfo-chromium-")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", *args]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=90)
    finally:
        subprocess.run(["rm", "-rf", profile], check=False)


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} (Debian package chromium) needed")
def test_status_page_in_a_real_browser(site, tmp_path):
    page = chromium("--dump-dom", f"{site['url']}/")
    assert page.returncode == 0, page.stderr[-2000:]
    dom = page.stdout
    expected = published(site)
    tree = etree.fromstring(dom.encode(), etree.HTMLParser())
    text = " ".join(tree.itertext())
    assert tree.find(".//meta[@http-equiv='refresh']") is not None
    # the site's figures, as the LDIF file says
    assert HOSTILE_SITE in tree.findtext(".//h1")
    assert expected["ce"] in text
    assert f"{expected['free']} / {expected['total']}" in text
    for hostname in expected["nodes"]:
        assert hostname in text
    assert re.search(r"\b2\b\s*hosts", text) and re.search(r"\b1\b\s*stale", text)
    # hostile text shown as text: no element came from it
    assert HOSTILE_MODEL in text
    assert not tree.findall(".//script") and not tree.findall(".//h1/i")
    assert not [b for b in tree.iter("b") if b.text == "bold"]
    # the stale host is listed with the time its facts are from
    stale_rows = [row for row in tree.iter("tr") if site["other"] in " ".join(row.itertext()) and "Unknown" in " ".join(row.itertext())]
    assert stale_rows and "min ago" in " ".join(stale_rows[0].itertext())
    # a 24-hour chart per CE, drawn inline
    assert tree.findall(".//svg")
    assert not [e for e in tree.iter() if e.get("src") or (e.tag == "link" and e.get("href"))]  # nothing external

    shot = Path(os.environ.get("GLUEINFO_SCREENSHOT_DIR", tmp_path)) / "status.png"
    result = chromium("--window-size=1280,1400", f"--screenshot={shot}", f"{site['url']}/")
    assert result.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", result.stderr[-2000:]
    print(f"status page screenshot: {shot}")


def test_worker_agent_page_shows_its_one_host(tmp_path):
    from glueinfo_processes import start_glueinfo, stop_glueinfo

    config = tmp_path / "agent.conf"
    config.write_text(f"[glueinfo]\nhost_root = {OTHER}\n[serve]\nlisten = 127.0.0.1:0\n[run]\nstate_dir = {tmp_path / 'state'}\n")
    served = start_glueinfo(config, tmp_path / "agent.log", ("serve", "--no-ldif"))
    try:
        page = get(f"http://{served.host}:{served.port}/").decode()
    finally:
        stop_glueinfo(served)
    recorded = json.loads((OTHER / ".glueinfo/recorded.json").read_text())
    cpus = sum(1 for line in (OTHER / "proc/cpuinfo").read_text().splitlines() if line.startswith("processor"))
    assert f"{recorded['hostname']} (worker agent)" in page
    assert f"<th>CPUs</th><td>{cpus}</td>" in page
    assert "SubClusters" not in page and "Last publication" not in page


# -- glueinfo check --------------------------------------------------------------------------------


def check(*args: str) -> tuple[int, str]:
    result = glueinfo("check", *args)
    assert result.stdout.count("\n") == 1 and result.stdout.startswith("GLUEINFO "), result.stdout + result.stderr
    return result.returncode, result.stdout.strip()


def test_check_exit_codes_against_the_running_site(site):
    url = site["url"]
    code, line = check("--url", url, "--stale-warning", "2", "--stale-critical", "3")
    assert code == 0 and line.startswith("GLUEINFO OK - "), line
    status, _, perf = line.partition(" | ")
    assert "hosts=2;" in perf and "hosts_stale=1;2;3;0;2" in perf
    assert re.search(r"entries=(\d+);", perf).group(1) == str(published(site)["entries"])
    assert re.search(r"\bldif_age=[0-9.]+s;3;10;0;", perf)  # 3 and 10 times run's 1 s interval

    code, line = check("--url", url, "--stale-critical", "3")  # one stale host reaches the default warning (1)
    assert code == 1 and "1 of 2 hosts stale or Unknown" in line, line

    code, line = check("--url", url)  # 1 of 2 is the default critical 50%
    assert code == 2 and line.startswith("GLUEINFO CRITICAL - "), line

    code, line = check("--config", str(site["config"]), "--stale-warning", "2", "--stale-critical", "3")  # files + /health
    assert code == 0 and "LDIF" in line, line

    bad = glueinfo("check", "--url", url, "--stale-warning", "ten")  # a usage error: UNKNOWN, said on stdout
    assert bad.returncode == 3 and bad.stdout.startswith("GLUEINFO UNKNOWN - ") and "--stale-warning" in bad.stdout
    code, line = check("--url", url + "/ldif")  # not a glueinfo: its /health is not there
    assert code == 3 and line.startswith("GLUEINFO UNKNOWN - "), line
    code, line = check("--url", "http://127.0.0.1:1")
    assert code == 2 and "not answering" in line, line


def test_check_bdii_catches_entries_the_server_dropped(site, slapd):
    text = (site["work"] / "glue.ldif").read_text(encoding="utf-8")
    blocks = text.strip().split("\n\n")
    # a leaf (an entry without children), as BDII drops one it cannot add
    host_block = next(b for b in blocks if re.search(r"^dn: GlueHostLocalFileSystemName=", b, re.M))
    loaded = slapd.ldapadd("\n\n".join(b for b in blocks if b is not host_block) + "\n")
    assert loaded.ok, str(loaded)
    options = ("--config", str(site["config"]), "--stale-warning", "2", "--stale-critical", "3", "--bdii", slapd.url)
    code, line = check(*options)
    dn = re.search(r"^dn: (.*)$", host_block, re.M).group(1)
    total = len(blocks)
    assert code == 1 and f"BDII lacks 1 of {total} published entries" in line and dn.split(",")[0] in line, line
    assert f"bdii_missing=1;1;{total * 5 / 100:.3f};0;{total}" in line  # under the default critical 5 %
    code, line = check(*options, "--missing-critical", "1")
    assert code == 2 and line.startswith("GLUEINFO CRITICAL - BDII lacks 1 of"), line

    loaded = slapd.ldapadd(host_block + "\n")
    assert loaded.ok, str(loaded)
    code, line = check(*options)
    # and the two bases the trees hang from (mds-vo-name=resource,o=grid; GLUE2GroupID=resource,o=glue)
    assert code == 0 and "bdii_missing=0;" in line and f"BDII serves {total + 2} entries" in line, line
