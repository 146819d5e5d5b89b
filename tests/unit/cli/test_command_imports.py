"""A command imports only what it runs (issue 24's start-up target).

A fresh `glueinfo probe` and a fresh one-host `glueinfo ldif` are run as a site admin or BDII
runs them, and the modules they end with are listed: what serves other commands, other outputs or
only a site that has them (a batch system's commands, a CE middleware, a missing queue) must not be
among them.  How long they take is measured by benchmarks/probe.py, never here.
"""

import json
import os
import subprocess
import sys

import pytest

from glueinfo.core.config import DEFAULT_PATH

# Runs the command line as the console script does, then prints the modules it imported.
SCRIPT = """
import json, sys
from glueinfo.cli import main
try:
    code = main(sys.argv[1:])
finally:
    sys.stdout.flush()
    sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
sys.exit(code)
"""

# What no one-shot command that prints a document needs: the daemon, the other outputs and their
# libraries, the catalogs and the Node XML renderer.
NEVER = ("glueinfo.run", "glueinfo.federate", "glueinfo.catalogs", "glueinfo.haizea", "glueinfo.sss.node_xml",
         "glueinfo.glue.ldapsync", "glueinfo.glue.ldap_connection", "glueinfo.glue.ldap_wire", "glueinfo.glue.ldap_diff",
         "glueinfo.glue.ldap_state", "glueinfo.glue.glue2.json", "glueinfo.publish.outputs.amqp",
         "glueinfo.publish.outputs.htcondor_ce", "glueinfo.publish.outputs.ldap", "glueinfo.publish.outputs.file",
         "glueinfo.publish.outbox", "ldap3", "lxml", "pika", "prometheus_client", "msgspec", "re2", "apscheduler",
         "h11", "asyncio", "http.client", "email", "importlib.metadata")

# A probe: the snapshot model and the collectors, nothing of the site or of GLUE; logging only with
# a warning, configparser only with a config file, the batch-system side of the model not at all.
PROBE_NEVER = (*NEVER, "glueinfo.site", "glueinfo.gather", "glueinfo.lrms", "glueinfo.glue", "glueinfo.publish",
               "glueinfo.core.job", "glueinfo.core.queue_state", "logging", "configparser")

# A one-host ldif (this host, the implicit fork CE, no state directory yet): what only a write, a
# batch system's commands or jobs, a found CE (or a CE to look for) or a missing queue's suggestion uses.
LDIF_NEVER = (*NEVER, "glueinfo.lrms.commands", "glueinfo.core.bounded_run", "glueinfo.core.runstats",
              "glueinfo.lrms.plugins.slurm", "glueinfo.lrms.plugins.htcondor", "glueinfo.gather.sources.agents",
              "glueinfo.core.job", "glueinfo.site.discovery.arc", "glueinfo.site.discovery.htcondor_ce",
              "glueinfo.site.discovery.default_queue", "glueinfo.sss.vocabulary", "hashlib", "tempfile", "difflib",
              "shutil", "pkgutil", "pickle", "zlib", "glueinfo.core.atomicwrite", "glueinfo.core.files", "glueinfo.core.lastrun")


def imported(tmp_path, *argv):
    env = {k: v for k, v in os.environ.items() if k != "GLUEINFO_CONFIG"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", SCRIPT, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    line = [line for line in done.stderr.splitlines() if line.startswith("MODULES ")][-1]
    return done.stdout, set(json.loads(line[len("MODULES "):]))


def offenders(modules, never):
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in never))


def test_a_fresh_probe_imports_only_the_snapshot_model_and_the_collectors(tmp_path):
    stdout, modules = imported(tmp_path, "probe")  # the default config file, every default when there is none
    assert json.loads(stdout)["hostname"]  # it did probe this host
    assert "glueinfo.host.collect" in modules and "glueinfo.core.model" in modules
    never = PROBE_NEVER if not os.path.exists(DEFAULT_PATH) else tuple(m for m in PROBE_NEVER if m != "configparser")
    assert offenders(modules, never) == []


@pytest.mark.skipif(not os.path.isfile("/etc/ldap/schema/Glue-CE.schema"), reason="Debian package glue-schema not installed")
def test_a_fresh_one_host_ldif_imports_only_what_it_runs(tmp_path):
    config = tmp_path / "glueinfo.conf"
    # Discovery looks, and finds nothing, even on a machine that has HTCondor-CE or ARC installed.
    config.write_text(f"[site]\nid = BENCH\n[run]\nstate_dir = {tmp_path / 'state'}\n"
                      f"[discovery]\narc_conf = {tmp_path / 'no-arc.conf'}\ncondor_ce_bin_dir = {tmp_path}\n")
    imported(tmp_path, "ldif", "--config", str(config))  # the first run after an install fills the schema cache
    stdout, modules = imported(tmp_path, "ldif", "--config", str(config))
    assert "dn: GlueSiteUniqueID=BENCH,mds-vo-name=resource,o=grid" in stdout  # both trees were made
    assert "o=glue" in stdout
    assert "glueinfo.glue.render13" in modules and "glueinfo.lrms.plugins.fork" in modules
    assert offenders(modules, LDIF_NEVER) == []
