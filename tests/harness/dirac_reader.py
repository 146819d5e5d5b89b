"""DIRAC's own GLUE 2 reader, ``DIRAC.Core.Utilities.Glue2.getGlue2CEInfo(vo, host)``, run against an LDAP server.

It runs in the test-only interpreter run-tests.sh installs (the ``dirac`` wheel with --no-deps in ``.venv-dirac``,
or GLUEINFO_DIRAC_PYTHON), never in glueinfo's own: the wheel's full requirements build against C libraries.  The
answer comes back as JSON: ``{"OK": bool, "Value": {SITE: {"CEs": {CE: {... "Queues": {QUEUE: {...}}}}}}, "Message"}``,
or ``{"OK": false, "raised": "TYPE: MESSAGE"}`` when DIRAC raised; with ``"log"``, what DIRAC logged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from paths import REPO

# An exception DIRAC raises is an answer too ("raised": its type and message), not a failure of the harness.
READER = """
import json, sys
from DIRAC.Core.Utilities.Glue2 import getGlue2CEInfo
try:
    result = getGlue2CEInfo(sys.argv[1], host=sys.argv[2])
    answer = {"OK": result["OK"], "Value": result.get("Value"), "Message": result.get("Message")}
except Exception as exc:
    answer = {"OK": False, "raised": f"{type(exc).__name__}: {exc}"}
with open(sys.argv[3], "w") as out:
    json.dump(answer, out, default=str)
"""

# DIRAC's ldapsearchBDII runs `ldapsearch ... FILTER ""` when it wants every attribute; Debian 12's ldapsearch and
# slapd 2.5.13 answer that empty attribute name with DNs alone (seen here), and getGlue2CEInfo then fails on the
# first policy (KeyError GLUE2PolicyID).  A shim first in DIRAC's PATH drops empty arguments; nothing else changes.
LDAPSEARCH_SHIM = """#!/bin/sh
for arg; do shift; [ -n "$arg" ] && set -- "$@" "$arg"; done
exec {real} "$@"
"""


def dirac_python() -> str:
    """The interpreter with DIRAC's reader; skips the test (a failure under GLUEINFO_FORBID_SKIPS=1) without one."""
    # abspath, not resolve: a virtual environment's python is a symbolic link that must stay one
    python = os.path.abspath(os.environ.get("GLUEINFO_DIRAC_PYTHON") or REPO / ".venv-dirac" / "bin" / "python")
    if not os.access(python, os.X_OK):
        pytest.skip("DIRAC's GLUE 2 reader needed (run-tests.sh installs the dirac wheel in .venv-dirac)")
    return python


def dirac_read(python: str, vo: str, server, out: Path) -> dict:
    """getGlue2CEInfo(vo, host) against ``server`` (anything with an ``ldap://HOST:PORT`` ``url``); its answer
    (also left in ``out``), with DIRAC's log lines added as ``"log"``."""
    host = server.url.removeprefix("ldap://")
    shim = out.parent / "dirac-bin"
    shim.mkdir(exist_ok=True)
    (shim / "ldapsearch").write_text(LDAPSEARCH_SHIM.format(real=shutil.which("ldapsearch")))
    (shim / "ldapsearch").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    proc = subprocess.run([python, "-c", READER, vo, host, str(out)], capture_output=True, timeout=120, cwd=out.parent,
                          env=env)
    log = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode == 0, log
    return {**json.loads(out.read_text()), "log": log}
