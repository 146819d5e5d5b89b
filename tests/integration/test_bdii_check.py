"""`glueinfo check --url ... --bdii ...` against Debian's real BDII over ten update cycles, as
a monitoring host runs it: without the CE's config (an empty one), so both trees the server
has (o=grid and o=glue) are found from the published LDIF alone.

The site is three workers in a spool whose loads and free memory change before every check:
the BDII serves the values of its last cycle while `glueinfo serve` already publishes the
next ones, which is how a healthy BDII always looks.  Every one of the ten checks must be
OK: entries all present, no static value differing, loads and free memory never compared.

Debian's bdii waits BDII_BREATHE_TIME=120 s between cycles; the harness's BDII breathes
2 s (tests/harness/servers.py) so ten cycles fit in about a minute of CI time.  What the
test is about is the comparison, not the wait: with any breathe time the BDII is one
cycle behind glueinfo, and here it is made so on purpose at each check.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from glue_sites import CLASSES, make_host
from glueinfo_processes import start_glueinfo, stop_glueinfo
from paths import REPO
from waiting import wait_until

from glueinfo.core.model import LoadInfo
from glueinfo.sss.node_xml import render_node

pytestmark = pytest.mark.integration

CYCLES = 10
BASE = "mds-vo-name=resource,o=grid"
XEON = CLASSES[0][0]  # 48 logical CPUs a host


@pytest.fixture
def bdii(bdii):
    bdii.clear()
    yield bdii
    bdii.clear(wait=False)


def write_spool(spool: Path, cycle: int) -> None:
    """Three workers whose 1-minute load is 1 + cycle (and free memory moves with it)."""
    now = time.time()
    load = 1.0 + cycle
    for index in range(3):
        host = make_host(XEON, index, collected_at=now)
        host = dataclasses.replace(host, load=LoadInfo(load1=load, load5=load / 2, load15=load / 3, runnable_tasks=1,
                                                       total_tasks=300),
                                   memory=dataclasses.replace(host.memory, ram_available_mb=90_000 - 1000 * cycle))
        (spool / f".{host.hostname}.tmp").write_bytes(render_node(host, now))
        os.replace(spool / f".{host.hostname}.tmp", spool / f"{host.hostname}.xml")


def smp_loads(ldif: str) -> frozenset[str]:
    return frozenset(re.findall(r"^GlueHostSMPLoadLast1Min: (\S+)$", ldif, re.M))


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode("utf-8")


def moved_on(url: str, behind: set[str]) -> str | None:
    """The LDIF at ``url`` once its loads are no longer ``behind``'s."""
    published = fetch(url)
    return published if smp_loads(published) != behind else None


def test_check_stays_ok_over_ten_bdii_cycles_while_loads_change(bdii, tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    write_spool(spool, 0)
    conf = tmp_path / "glueinfo.conf"
    conf.write_text(f"[site]\nid = EXAMPLE-SITE\nemail = grid-admin@example.org\nlocation = Geneva, Switzerland\n"
                    f"[glue]\nversions = 1.3, 2.0\n"
                    f"[sources]\nenabled = spool\nspool_dir = {spool}\n"
                    "[ce:default]\naccess = VO:dteam\nimplementation_name = HTCondorCE\n"
                    f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 1\n"
                    f"[run]\nstate_dir = {tmp_path / 'state'}\nldif_file =\nnode_xml_file =\n")
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "glueinfo.cli", "ldif", "--config", str(conf)))
    bdii.add_provider("glueinfo", f"#!/bin/sh\ncd {shlex.quote(str(REPO))}\nexec {command} 2>/dev/null\n")
    served = start_glueinfo(conf, tmp_path / "serve.log")
    monitoring = tmp_path / "monitoring.conf"  # the monitoring host has no CE config
    monitoring.write_text("")
    url = f"http://127.0.0.1:{served.port}"
    try:
        for cycle in range(1, CYCLES + 1):
            bdii.wait_for_update()  # the BDII has the spool as it was
            behind = {e.first("GlueHostSMPLoadLast1Min") for e in bdii.ldapsearch(BASE, "(objectClass=GlueHost)",
                                                                                  ["GlueHostSMPLoadLast1Min"])}
            assert len(behind) == 1, behind
            write_spool(spool, cycle)  # and glueinfo moves on: serve publishes the next loads
            published = wait_until(functools.partial(moved_on, f"{url}/ldif", behind),
                                   f"serve published cycle {cycle}'s loads", 30, step=0.2)
            assert smp_loads(published) != behind, "serve did not publish the new loads"
            done = subprocess.run([sys.executable, "-m", "glueinfo.cli", "check", "--config", str(monitoring),
                                   "--url", url, "--bdii", bdii.url], capture_output=True, text=True, cwd=REPO,
                                  timeout=120)
            assert done.stdout.count("\n") == 1, done.stdout + done.stderr
            assert (done.returncode, done.stdout.split(" - ")[0]) == (0, "GLUEINFO OK"), (cycle, done.stdout)
            perf = done.stdout.partition(" | ")[2]
            assert "bdii_missing=0;" in perf and "bdii_differing=0;" in perf, done.stdout
            entries = int(re.search(r"\bentries=(\d+);", perf).group(1))
            # both trees searched: every published entry, and the two entries they hang from
            assert f"bdii_entries={entries + 2};" in perf, done.stdout
    finally:
        stop_glueinfo(served)
    grid = bdii.ldapsearch(BASE, "(objectClass=GlueHost)", ["1.1"])
    glue2 = bdii.ldapsearch("GLUE2GroupID=resource,o=glue", "(objectClass=GLUE2ComputingService)", ["1.1"])
    assert (len(grid), len(glue2)) == (3, 1)
