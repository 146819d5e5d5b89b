"""A 3,000-host site through Debian's real BDII, fed by providers/glueinfo-provider
as a site installs it, with and without etc/bdii/bdii-slapd-maxsize.

bdii 6.0.0's slapd config has no `maxsize` on its mdb databases: slapd's 10 MB
default map holds about 1,600 hosts, and every update cycle then loses the
same adds.  Both BDIIs here get the same LDIF; entries are counted with
ldapsearch against what the provider printed."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from glue_sites import synthetic_site
from paths import REPO
from servers import Bdii, missing_bdii_tools

from glueinfo.core.ldif import normalise_dn, parse_ldif

pytestmark = pytest.mark.integration

BASE = "mds-vo-name=resource,o=grid"
HOSTS = 3000


def test_a_site_larger_than_slapds_default_map_is_served_whole_only_with_the_maxsize_wrapper(tmp_path):
    missing = missing_bdii_tools()
    if missing:
        pytest.skip("real BDII needed, missing: " + ", ".join(missing))
    # What `glueinfo run` keeps in [run] ldif_file, and the config the provider reads it from.
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in synthetic_site(HOSTS)]))
    ldif_file = tmp_path / "glue.ldif"
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("[cluster:main]\nunique_id = cluster.example.org\n[ce:long]\nhost = ce01.example.org\nlrms = fork\n"
                    f"access = VO:atlas\n[run]\nldif_file = {ldif_file}\nprovider_max_age = 86400\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "ldif", "--config", str(conf), "--snapshots", str(snapshots)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ldif_file.write_text(proc.stdout)
    fed = {normalise_dn(e.dn) for e in parse_ldif(proc.stdout)}
    assert len(fed) > 4 * HOSTS  # each host is four entries: well past what 10 MB holds
    provider = (REPO / "providers" / "glueinfo-provider").read_text()
    # The provider re-runs itself under the interpreter glueinfo is installed for (docs/install.md).
    env = {"GLUEINFO_CONFIG": str(conf), "GLUEINFO_PYTHON": sys.executable}

    fixed = Bdii(tmp_path / "fixed", slapd_wrapper=str(REPO / "etc" / "bdii" / "bdii-slapd-maxsize"), update_env=env)
    plain = Bdii(tmp_path / "plain", update_env=env)
    try:
        for bdii in (fixed, plain):
            bdii.start()
            bdii.add_provider("glueinfo-provider", provider)
        with ThreadPoolExecutor(2) as pool:  # both update cycles at once
            for waited in [pool.submit(b.wait_for_update, 120) for b in (fixed, plain)]:
                waited.result()

        def published(bdii: Bdii) -> set[str]:
            return {normalise_dn(e.dn) for e in bdii.ldapsearch(BASE, "(objectClass=*)", ["1.1"])} - {normalise_dn(BASE)}

        on_fixed, on_plain = published(fixed), published(plain)
        assert on_fixed == fed, (f"{len(fed - on_fixed)} of {len(fed)} entries missing through the wrapper:\n"
                                 f"{fixed.log_text()[-2000:]}")
        assert fixed.stats().get("FailedAdds") == "0"
        # Without it the same feed loses entries, and slapd says why.
        lost = fed - on_plain
        assert lost and on_plain < fed, "the default map held the whole site: this test no longer shows the fix"
        assert "txn_commit failed" in plain.log_text() + plain.slapd_log.read_text(errors="replace")
        copy = (fixed.workdir / "bdii-slapd.conf.maxsize").read_text()
        assert copy.count("\nmaxsize 1073741824\n") == 3  # o=grid, o=glue, o=infosys
    finally:
        fixed.stop()
        plain.stop()
