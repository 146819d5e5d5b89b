"""The architecture rules are checked, not only written down (ARCHITECTURE.md, "Rules").

- the import-linter contracts in setup.cfg ([importlinter]: the layers, renderers
  that never read the config nor call the SSSRMAP engine, typed settings below
  site/, the plugin API paths used by nobody inside the package) hold on the
  real tree;
- the same check fails on a copy of the package with one planted upward
  import, or one planted import of the config parser below site/, naming the
  contract: a check that cannot fail proves nothing;
- ``mypy`` with setup.cfg's [mypy] (strict, the whole package) finds nothing.

The tools come with the test extras (``pip install -e '.[test]'``, as
run-tests.sh does).  Each runs in a subprocess: mypy's cache goes to a
temporary directory, import-linter's is switched off, so the work tree is
left as it was.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

LAYERS_CONTRACT = "Layers: a package imports only from the layers below it"
TYPED_CONTRACT = ("Typed settings below site: only cli, commands, run and site read the config; the layers below get "
                  "typed settings")


def _tool(name: str) -> str:
    """The console script ``name`` of the interpreter running the tests (its virtualenv), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (it comes with the test extras: pip install -e '.[test]')")
    return found


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the package below ``root``, with ``root``'s setup.cfg."""
    env = dict(os.environ, PYTHONPATH=str(root))  # the glueinfo under root, not the installed one
    return subprocess.run([_tool("lint-imports"), "--config", str(root / "setup.cfg"), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_import_contracts_hold():
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and " KEPT" in result.stdout


def test_a_planted_upward_import_breaks_the_layers_contract(tmp_path):
    shutil.copytree(REPO / "glueinfo", tmp_path / "glueinfo", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "setup.cfg", tmp_path / "setup.cfg")
    units = tmp_path / "glueinfo" / "core" / "units.py"
    units.write_text(units.read_text(encoding="utf-8") + "\nimport glueinfo.run.provider  # planted by the test\n",
                     encoding="utf-8")
    result = _lint_imports(tmp_path)
    output = " ".join((result.stdout + result.stderr).split())  # the report wraps long contract names
    assert result.returncode != 0, output
    assert f"{LAYERS_CONTRACT} BROKEN" in output
    assert "glueinfo.core.units -> glueinfo.run.provider" in output


@pytest.mark.parametrize("module", ["glueinfo/lrms/vo_map.py", "glueinfo/publish/outputs/file.py"])
def test_a_renderer_or_plugin_reading_the_config_breaks_the_typed_settings_contract(tmp_path, module):
    """Below site/, settings come typed: a module of the LRMS or publish layer that imports the config
    parser (a planted ``import glueinfo.core.config``) is named by the contract (issue 24)."""
    shutil.copytree(REPO / "glueinfo", tmp_path / "glueinfo", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "setup.cfg", tmp_path / "setup.cfg")
    planted = tmp_path / module
    planted.write_text(planted.read_text(encoding="utf-8") + "\nimport glueinfo.core.config  # planted by the test\n",
                       encoding="utf-8")
    result = _lint_imports(tmp_path)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, output
    assert f"{TYPED_CONTRACT} BROKEN" in output
    name = module.removesuffix(".py").replace("/", ".")
    assert f"{name} -> glueinfo.core.config" in output


def test_mypy_strict_passes(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it comes with the test extras: pip install -e '.[test]')")
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
