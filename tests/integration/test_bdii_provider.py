"""providers/glueinfo-provider, the executable BDII runs: prints the LDIF file
`glueinfo run` keeps fresh, and prints nothing (exit 1) when it is stale, so
BDII never republishes dead data as live.  Checked alone and inside Debian's
real BDII (tests/servers.py), queried with ldapsearch."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import REPO

from glueinfo.core.ldif import normalise_dn, parse_ldif

ROOT = REPO
WRAPPER = ROOT / "providers" / "glueinfo-provider"
LDIF = "dn: o=grid\nobjectClass: organization\no: grid\n\ndn: GlueClusterUniqueID=c1,mds-vo-name=resource,o=grid\n"


def run_wrapper(env_extra: dict[str, str], config: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLUEINFO_")}
    env["PYTHONPATH"] = str(ROOT)
    env["GLUEINFO_CONFIG"] = str(config) if config else "/nonexistent/glueinfo.conf"
    env.update(env_extra)
    return subprocess.run([str(WRAPPER)], capture_output=True, env=env, timeout=30)


def write_config(path: Path, ldif_file: Path, max_age: float) -> Path:
    path.write_text(f"[run]\nldif_file = {ldif_file}\nprovider_max_age = {max_age:g}\n")
    return path


def test_is_an_executable_bdii_can_run():
    assert os.access(WRAPPER, os.X_OK)
    assert WRAPPER.read_text().startswith("#!/usr/bin/env python3\n")


def test_a_fresh_file_is_printed_byte_for_byte(tmp_path):
    ldif = tmp_path / "glue.ldif"
    ldif.write_bytes(LDIF.encode() + b"description:: w6k=\n")
    proc = run_wrapper({}, write_config(tmp_path / "g.conf", ldif, 60))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ldif.read_bytes()
    assert proc.stderr == b""


def test_a_stale_file_is_refused_with_nothing_printed(tmp_path):
    ldif = tmp_path / "glue.ldif"
    ldif.write_text(LDIF)
    old = time.time() - 700
    os.utime(ldif, (old, old))
    proc = run_wrapper({}, write_config(tmp_path / "g.conf", ldif, 600))
    assert proc.returncode == 1
    assert proc.stdout == b""
    message = proc.stderr.decode()
    assert message.count("\n") == 1 and str(ldif) in message and "70" in message and "600 s allowed" in message
    # The same file is fine with a longer allowance.
    assert run_wrapper({}, write_config(tmp_path / "g.conf", ldif, 800)).stdout == LDIF.encode()


def test_a_missing_file_is_refused_with_nothing_printed(tmp_path):
    proc = run_wrapper({}, write_config(tmp_path / "g.conf", tmp_path / "absent.ldif", 600))
    assert proc.returncode == 1 and proc.stdout == b""
    assert f"{tmp_path / 'absent.ldif'}: cannot read: No such file or directory" in proc.stderr.decode()


def test_environment_overrides_the_config(tmp_path):
    ldif = tmp_path / "other.ldif"
    ldif.write_text(LDIF)
    old = time.time() - 100
    os.utime(ldif, (old, old))
    proc = run_wrapper({"GLUEINFO_LDIF_FILE": str(ldif), "GLUEINFO_MAX_AGE": "50"})
    assert proc.returncode == 1 and proc.stdout == b""
    proc = run_wrapper({"GLUEINFO_LDIF_FILE": str(ldif), "GLUEINFO_MAX_AGE": "500"})
    assert proc.returncode == 0 and proc.stdout == LDIF.encode()


def test_a_broken_config_still_serves_the_default_or_environment_file(tmp_path):
    # The daemon keeps running on its old config when the file is broken: the wrapper keeps publishing.
    ldif = tmp_path / "glue.ldif"
    ldif.write_text(LDIF)
    broken = tmp_path / "g.conf"
    broken.write_text("[run]\nno_such_key = 1\n")
    proc = run_wrapper({"GLUEINFO_LDIF_FILE": str(ldif)}, broken)
    assert proc.returncode == 0 and proc.stdout == LDIF.encode()
    assert "no_such_key" in proc.stderr.decode()


def dns_under(entries, base: str = "mds-vo-name=resource,o=grid") -> set[str]:
    base_key = normalise_dn(base)
    return {normalise_dn(e.dn) for e in entries if normalise_dn(e.dn).endswith("," + base_key)}


@pytest.mark.integration
def test_inside_real_bdii_fresh_data_is_served_and_stale_data_withdrawn(bdii, tmp_path):
    ldif_file = tmp_path / "out" / "glue.ldif"
    ldif_file.parent.mkdir()
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[run]\nldif_file = {ldif_file}\nnode_xml_file =\nstate_dir =\nprovider_max_age = 120\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "run", "--once", "--config", str(config)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    published = dns_under(parse_ldif(ldif_file.read_text()))
    assert any(dn.startswith("glueceuniqueid=") for dn in published) and any(dn.startswith("glueclusteruniqueid=") for dn in published)

    shim = bdii.add_provider("glueinfo-provider", f"#!/bin/sh\nGLUEINFO_CONFIG={config} PYTHONPATH={ROOT} exec {WRAPPER}\n")
    try:
        bdii.wait_for_update()
        served = dns_under(bdii.ldapsearch())
        assert published <= served, f"missing from BDII: {sorted(published - served)}"
        ces = bdii.ldapsearch(filter="(objectClass=GlueCE)", attrs=["GlueCEUniqueID"])
        assert ces, "a broker's GlueCE query finds nothing"

        old = time.time() - 3600
        os.utime(ldif_file, (old, old))  # glueinfo run has stopped: the file ages
        # BDII deletes a parent only once its children are gone, one tree level per update cycle.
        for _cycle in range(6):
            bdii.wait_for_update()
            served = dns_under(bdii.ldapsearch())
            if not published & served:
                break
        assert not (published & served), f"stale entries still served: {sorted(published & served)}"
        assert bdii.ldapsearch(filter="(objectClass=GlueCE)") == []
    finally:
        bdii.remove(shim)


@pytest.mark.integration
def test_the_openldap_hp_shim_lets_bdii_600_style_calls_reach_slapd(slapd, tmp_path):
    # What Debian 12's bdii 6.0.0 runs, against the real tools: refused by OpenLDAP 2.5 ...
    call = ["-x", "-LLL", "-h", "127.0.0.1", "-p", str(slapd.port), "-b", "o=grid", "-s", "base", "(objectClass=*)", "o"]
    plain = subprocess.run(["ldapsearch", *call], capture_output=True, text=True, timeout=30)
    assert plain.returncode != 0 and "dn: o=grid" not in plain.stdout
    # ... and through etc/bdii/openldap-hp-shim installed under the tool's name: answered.
    shim = tmp_path / "bin" / "ldapsearch"
    shim.parent.mkdir()
    shim.write_bytes((ROOT / "etc" / "bdii" / "openldap-hp-shim").read_bytes())
    shim.chmod(0o755)
    proc = subprocess.run([str(shim), *call], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert parse_ldif(proc.stdout)[0].dn == "o=grid"
