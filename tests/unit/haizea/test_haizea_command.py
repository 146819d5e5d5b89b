"""`glueinfo haizea` as a user runs it: the site assembled from [node] site_snapshots (site50.json)
at a fixed clock, its node sets counted here from the file; --lwf on a site without batch CEs; a
site with nothing to describe is one line on stderr and nothing on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

from lxml import etree
from paths import FIXTURES, REPO

NOW = "1700000100"  # site50.json's clock
SITE50 = FIXTURES / "nodes" / "site50.json"
SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "glueinfo" / "haizea" / "xsd" / "haizea.xsd")))


def glueinfo(*args: str, config: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    env["GLUEINFO_CLOCK"] = NOW
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", "haizea", "--config", config, *args],
                          capture_output=True, env=env, timeout=60)


def write_config(tmp_path, extra: str = "") -> str:
    path = tmp_path / "glueinfo.conf"
    path.write_text(f"[sources]\nenabled =\n[run]\nstate_dir =\n[node]\nsite_snapshots = {SITE50}\n{extra}",
                    encoding="utf-8")
    return str(path)


def test_the_site_counts_every_fresh_host_by_its_threads_and_ram(tmp_path):
    done = glueinfo(config=write_config(tmp_path, "offline_hosts = wn00[1-3]*\n"))
    assert done.returncode == 0, done.stderr.decode()
    root = etree.fromstring(done.stdout)
    SCHEMA.assertValid(root)
    hosts = json.loads(SITE50.read_text(encoding="utf-8"))
    now = float(NOW)
    fresh = [h for h in hosts if h["collected_at"] > 0 and abs(now - h["collected_at"]) <= 300
             and h["hostname"] not in ("wn001.example.org", "wn002.example.org", "wn003.example.org")]
    # site50's RAM sizes fall one per 1024 MB bucket: each distinct (threads, RAM, GPUs) is a set of its own
    expected = Counter((100 * h["cpu"]["logical_cpus"], h["memory"]["ram_mb"],
                        int(h["extra"]["node_resources"]["resources"][0]["configured"]) if h["extra"] else 0) for h in fresh)
    found = Counter()
    for node_set in root.iter("node-set"):
        res = {r.get("type"): int(r.get("amount")) for r in node_set}
        found[(res["CPU"], res["Memory"], res.get("GPU:A100", 0))] += int(node_set.get("numnodes"))
    assert found == expected
    assert sum(found.values()) == 50 - 5  # three Offline, two stale
    comment = root[0].text
    assert "Offline: 3 (wn001.example.org, wn002.example.org, wn003.example.org)" in comment
    assert "Unknown: 2 (wn017.example.org, wn031.example.org)" in comment


def test_lwf_without_batch_ces_is_a_workload_of_no_requests(tmp_path):
    done = glueinfo("--lwf", "--name", "empty <week>", "--preemptible", "no",
                    config=write_config(tmp_path, "[site]\nname = EXAMPLE-SITE\n"))
    assert done.returncode == 0, done.stderr.decode()
    root = etree.fromstring(done.stdout)
    SCHEMA.assertValid(root)
    assert root.get("name") == "empty <week>"
    assert root.find("lease-requests") is not None and len(root.find("lease-requests")) == 0
    assert sum(int(s.get("numnodes")) for s in root.iter("node-set")) == 48  # the two stale hosts left out


def test_a_site_with_nothing_to_describe_is_a_one_line_error(tmp_path):
    done = glueinfo(config=write_config(tmp_path, "offline_hosts = *\n"))
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode().splitlines()[-1] == (
        "glueinfo: no host of the site can be described for Haizea (Offline: 50)")


def test_a_bad_preemptible_word_is_a_usage_error(tmp_path):
    done = glueinfo("--lwf", "--preemptible", "maybe", config=write_config(tmp_path))
    assert done.returncode == 2 and done.stdout == b""
    assert "--preemptible: invalid choice: 'maybe'" in done.stderr.decode()
