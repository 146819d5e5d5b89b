"""Hostile facts (issue 12, cases 3, 7 and 8): one bad snapshot, a recorded tree
whose /proc lies, or a host name no DNS would hold must never take the site's
publication down.  The bad field is left out (unknown) with one warning naming
host and field; the rest of the site is published and loads into a real slapd.

Every check reads what a user reads: the command's exit code, stdout and
stderr, `ldapsearch` on slapd after loading, the JSON `glueinfo probe` prints
(parsed strictly: NaN is not JSON), the files `glueinfo run` writes.
"""

from __future__ import annotations

import http.client
import json
import shutil
from pathlib import Path

import pytest
from glueinfo_processes import run_glueinfo, start_glueinfo, stop_glueinfo
from paths import REPO

FIXTURE = REPO / "tests" / "fixtures" / "nodes" / "site50.json"
XEON = REPO / "tests" / "fixtures" / "hosts" / "xeon-gold-2s-ht"
SITE = json.loads(FIXTURE.read_text(encoding="utf-8"))[:5]  # wn001 ... wn005
NAMES = [h["hostname"] for h in SITE]


def glueinfo(tmp: Path, *args: str):
    """`glueinfo ARGS --config C` with a config of its own: no state directory of this machine's leaks in."""
    config = tmp / "isolated.conf"
    if not config.exists():
        config.write_text(f"[run]\nstate_dir = {tmp / 'no-state'}\n")
    return run_glueinfo(*args, "--config", str(config))


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, as every other JSON parser does."""
    def refuse(word: str):
        raise ValueError(f"{word} is not JSON")
    return json.loads(text, parse_constant=refuse)


def write_site(tmp: Path, change) -> Path:
    hosts = json.loads(json.dumps(SITE))
    change(hosts)
    path = tmp / "site.json"
    path.write_text(json.dumps(hosts))  # Python writes NaN / 1e308 as given: what a broken agent would send
    return path


def entries(ldif: str) -> dict[str, dict[str, list[str]]]:
    """DN -> attribute -> values, from LDIF text (no folding: glueinfo does not fold)."""
    result: dict[str, dict[str, list[str]]] = {}
    for block in ldif.strip().split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith("#")]
        if not lines or not lines[0].startswith("dn: "):
            continue
        attrs: dict[str, list[str]] = {}
        for line in lines[1:]:
            name, _, value = line.partition(": ")
            attrs.setdefault(name, []).append(value)
        result[lines[0][4:]] = attrs
    return result


def host_entry(ldif: str, hostname: str) -> dict[str, list[str]]:
    found = [attrs for dn, attrs in entries(ldif).items() if attrs.get("GlueHostUniqueID") == [hostname]]
    assert len(found) == 1, f"{hostname}: {len(found)} GlueHost entries"
    return found[0]


@pytest.mark.parametrize("field, value, shown", [
    ("load1", 1e308, "load.load1 = 1e+308 is beyond belief"),
    ("load1", float("nan"), "load.load1 is nan"),
])
def test_a_snapshot_with_an_absurd_load_leaves_only_that_figure_out(tmp_path, field, value, shown):
    """Case 3: `glueinfo ldif --snapshots` exited 1 with an OverflowError and printed nothing."""
    site = write_site(tmp_path, lambda hosts: hosts[0]["load"].__setitem__(field, value))
    proc = glueinfo(tmp_path, "ldif", "--snapshots", str(site))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"host wn001.example.org: {shown}: dropped" in proc.stderr
    wn001 = host_entry(proc.stdout, "wn001.example.org")
    assert "GlueHostProcessorLoadLast1Min" not in wn001  # unknown, not invented
    assert wn001["GlueHostMainMemoryRAMSize"] == [str(SITE[0]["memory"]["ram_mb"])]  # the rest of the host is kept
    for other in SITE[1:]:  # docs/glue-mapping.md: Last1Min = (logical CPUs - load1) x 100
        entry = host_entry(proc.stdout, other["hostname"])
        expected = round((other["cpu"]["logical_cpus"] - other["load"]["load1"]) * 100)
        assert entry["GlueHostProcessorLoadLast1Min"] == [str(expected)]


def test_a_billion_cpus_are_not_published(tmp_path):
    """Case 3: JSON snapshots were not range-checked: 1e9 CPUs reached GlueSubClusterLogicalCPUs."""
    site = write_site(tmp_path, lambda hosts: hosts[2]["cpu"].__setitem__("logical_cpus", 10**9))
    proc = glueinfo(tmp_path, "ldif", "--snapshots", str(site))
    assert proc.returncode == 0, proc.stderr
    assert "host wn003.example.org: cpu.logical_cpus = 1e+09 is beyond belief: dropped" in proc.stderr
    assert "1000000000" not in proc.stdout
    assert len([a for a in entries(proc.stdout).values() if "GlueHostUniqueID" in a]) == 5


def test_run_and_serve_publish_the_site_despite_a_nan_snapshot(tmp_path):
    """Case 3: `serve` answered 503 on /ldif (with /health ok) and `run` wrote neither output, on
    every cycle, for one snapshot file with a NaN load."""
    site = write_site(tmp_path, lambda hosts: hosts[1]["load"].__setitem__("load1", float("nan")))
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[sources]\nenabled =\n[node]\nsite_snapshots = {site}\n"
                      f"[run]\nstate_dir = {tmp_path / 'state'}\nldif_file = {tmp_path / 'glue.ldif'}\n"
                      f"node_xml_file = {tmp_path / 'nodes.xml'}\n")
    proc = run_glueinfo("run", "--once", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert "host wn002.example.org: load.load1 is nan: dropped" in proc.stderr
    ldif = (tmp_path / "glue.ldif").read_text()
    assert sorted(a["GlueHostUniqueID"][0] for a in entries(ldif).values() if "GlueHostUniqueID" in a) == NAMES
    nodes = (tmp_path / "nodes.xml").read_text()
    assert all(f"<Id>{name}</Id>" in nodes for name in NAMES) and "nan" not in nodes.lower()

    with open(config, "a") as handle:
        handle.write("[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n")
    served = start_glueinfo(config, tmp_path / "serve.log")
    try:
        connection = http.client.HTTPConnection(served.host, served.port, timeout=30)
        connection.request("GET", "/ldif")
        answer = connection.getresponse()
        body = answer.read().decode()
        assert answer.status == 200, body
        assert sorted(a["GlueHostUniqueID"][0] for a in entries(body).values() if "GlueHostUniqueID" in a) == NAMES
    finally:
        stop_glueinfo(served)


def recorded_tree(tmp: Path, **changes: str) -> Path:
    """The xeon fixture machine with some of its /proc files replaced."""
    tree = tmp / "tree"
    shutil.copytree(XEON, tree)
    (tree / ".glueinfo" / "recorded.json").unlink()  # recorded facts would override the files we change
    for relative, text in changes.items():
        (tree / relative.replace("__", "/")).write_text(text)
    return tree


def test_a_recorded_tree_with_a_lying_proc_publishes_and_probe_prints_json(tmp_path, slapd):
    """Cases 3 and 8: /proc/loadavg saying 1e308 and nan crashed `ldif`; MemTotal of 1e23 kB,
    MemAvailable above it, a negative load, 99999999999 runnable tasks and NUL/ESC bytes in
    the CPU model were published; `probe` printed NaN."""
    cpuinfo = (XEON / "proc" / "cpuinfo").read_text().replace("Intel(R) Xeon(R) Gold 6126", "Intel\x00\x1b[2J Gold")
    meminfo = (XEON / "proc" / "meminfo").read_text()
    meminfo = meminfo.replace("196446948 kB", "100000000000000000000000 kB", 1)
    tree = recorded_tree(tmp_path, proc__loadavg="1e308 nan -5 99999999999/1324 98231\n", proc__cpuinfo=cpuinfo,
                         proc__meminfo=meminfo)
    probe = glueinfo(tmp_path, "probe", "--host-root", str(tree))
    assert probe.returncode == 0, probe.stderr
    facts = strict_json(probe.stdout)
    assert facts["load"]["load1"] is None and facts["load"]["load5"] is None and facts["load"]["load15"] is None
    assert facts["load"]["runnable_tasks"] is None
    assert facts["memory"]["ram_mb"] is None
    assert facts["cpu"]["model_name"] is None
    for field in ("load.load1", "load.load5", "load.load15", "load.runnable_tasks", "memory.ram_mb", "cpu.model_name"):
        assert f"host hpc-node17: {field} " in probe.stderr, field
    assert facts["cpu"]["logical_cpus"] == 48  # the rest of the host is kept

    ldif = glueinfo(tmp_path, "ldif", "--host-root", str(tree))
    assert ldif.returncode == 0, ldif.stderr
    assert "\x00" not in ldif.stdout and "\x1b" not in ldif.stdout
    loaded = slapd.ldapadd(ldif.stdout)
    assert loaded.ok, str(loaded)
    [host] = slapd.ldapsearch("o=grid", "(GlueHostUniqueID=hpc-node17)")
    assert host.get("GlueHostArchitectureSMPSize") == ["48"]
    assert "GlueHostProcessorLoadLast1Min" not in host and "GlueHostMainMemoryRAMSize" not in host
    assert "\x00" not in host.first("GlueHostProcessorModel", "")


def test_a_host_name_with_a_newline_is_a_one_line_error_not_bad_xml(tmp_path):
    """Case 8: a host name with a newline gave Node XML that failed the SSS XSD."""
    tree = recorded_tree(tmp_path, proc__sys__kernel__hostname="hpc-node17\n<Id>evil</Id>\n")
    proc = glueinfo(tmp_path, "node-xml", "--host-root", str(tree))
    assert proc.returncode != 0 and proc.stdout == ""
    assert "Traceback" not in proc.stderr
    error = proc.stderr.strip().splitlines()
    assert len(error) == 1 and "host name 'hpc-node17\\n<Id>evil</Id>' holds control characters" in error[0]


def test_a_300_character_host_name_leaves_the_site_published(tmp_path, slapd):
    """Case 7: a 300-character local host name broke the whole LDIF with a misleading
    `[ce:] unique_id ... too long` config error."""
    long_name = "n" * 300
    tree = recorded_tree(tmp_path, proc__sys__kernel__hostname=long_name + "\n")
    proc = glueinfo(tmp_path, "ldif", "--host-root", str(tree))
    assert proc.returncode == 0, proc.stderr
    assert "unique_id" not in proc.stderr
    assert "is 300 characters long (a DNS name has at most 253)" in proc.stderr
    loaded = slapd.ldapadd(proc.stdout)
    assert loaded.ok, str(loaded)  # every entry accepted (AddResult lists each rejection with slapd's reason)
    [ce] = slapd.ldapsearch("o=grid", "(objectClass=GlueCE)")
    assert ce.first("GlueCEUniqueID")
    assert slapd.ldapsearch("o=grid", "(objectClass=GlueCluster)")


def test_a_long_valid_host_name_is_published_by_prefix_and_hash(tmp_path, slapd):
    """Case 7: long names that DNS allows are published, named by the documented prefix-plus-hash rule."""
    long_name = ".".join(["a" * 61 + str(i) for i in range(4)])  # 251 characters, labels of 62
    tree = recorded_tree(tmp_path, proc__sys__kernel__hostname=long_name + "\n")
    proc = glueinfo(tmp_path, "ldif", "--host-root", str(tree))
    assert proc.returncode == 0, proc.stderr
    loaded = slapd.ldapadd(proc.stdout)
    assert loaded.ok, str(loaded)
    [host] = slapd.ldapsearch("o=grid", f"(GlueHostName={long_name})")  # the full name, in a non-naming attribute
    assert long_name not in host.dn and "~" in host.dn  # named by its start and a hash
