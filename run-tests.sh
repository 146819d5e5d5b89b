#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs the Debian
# packages the integration tests run for real (when root and missing), makes
# a virtualenv with glueinfo and its test extras (and one with DIRAC's GLUE 2 reader), runs ruff and pytest.
# Extra arguments go to pytest (e.g. ./run-tests.sh -k ldif -x).
set -euo pipefail
cd "$(dirname "$0")"

DEBS=(slapd ldap-utils glue-schema bdii slurm-wlm slurm-client munge ganglia-monitor prometheus-node-exporter
      gridengine-master gridengine-exec gridengine-client prometheus chromium
      # tests/integration/test_packages.py builds the .deb (debian/control's Build-Depends), installs it
      # (its Depends), lints it and the EL9 spec
      build-essential fakeroot debhelper dh-python devscripts lintian rpmlint rpm man-db systemd
      python3.11 python3.11-venv python3-pip python3-setuptools python3-wheel
      python3-psutil python3-lxml python3-ldap3 python3-apscheduler python3-h11
      # tests/integration/test_amqp_push.py: a private broker the amqp output pushes to, its TLS certificates
      rabbitmq-server openssl)
missing=()
for pkg in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "run-tests: installing ${missing[*]}"
    # Keep package scripts from starting the daemons: the tests start their own.
    policy=/usr/sbin/policy-rc.d
    had_policy=0; [ -e "$policy" ] && had_policy=1
    [ $had_policy = 1 ] || { printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; }
    apt-get update -qq
    # gridengine-common asks for its cell and master host: answer before installing (the tests
    # make a private cell of their own; this only lets the package install without questions).
    printf '%s\n' "gridengine-common shared/gridengineconfig boolean true" \
      "gridengine-common shared/gridenginecell string default" \
      "gridengine-common shared/gridenginemaster string $(hostname)" | debconf-set-selections
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [ $had_policy = 1 ] || rm -f "$policy"
  else
    echo "run-tests: missing Debian packages ${missing[*]} (run as root to install them); their tests will be skipped" >&2
  fi
fi

VENV=${GLUEINFO_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'

# DIRAC's GLUE 2 reader (DIRAC.Core.Utilities.Glue2.getGlue2CEInfo, from the dirac wheel) for
# tests/integration/test_minimal_site.py and test_federation.py (tests/harness/dirac_reader.py), in an interpreter of its own: that module imports only these few
# packages, not the wheel's whole requirements (gfal2-python and M2Crypto build against C libraries).
DIRAC_VENV=${GLUEINFO_DIRAC_VENV:-.venv-dirac}
if ! "$DIRAC_VENV/bin/python" -c 'import DIRAC.Core.Utilities.Glue2' 2>/dev/null; then
  python3 -m venv "$DIRAC_VENV" &&
    "$DIRAC_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps 'dirac==9.1.22' \
      'DIRACCommon==9.1.22' diraccfg typing_extensions importlib_metadata lazy-importer zipp importlib_resources \
      cachetools psutil ||
    echo "run-tests: DIRAC's GLUE 2 reader not installed; its test will be skipped" >&2
fi
case "$DIRAC_VENV" in /*) dirac_python=$DIRAC_VENV/bin/python ;; *) dirac_python=$PWD/$DIRAC_VENV/bin/python ;; esac
if "$dirac_python" -c 'import DIRAC.Core.Utilities.Glue2' 2>/dev/null; then
  export GLUEINFO_DIRAC_PYTHON=$dirac_python
fi

"$VENV/bin/ruff" check .
exec "$VENV/bin/python" -m pytest -ra "$@"
