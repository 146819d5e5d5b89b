"""Config files: a bad one is refused whole, in one line naming file, line and key."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from paths import REPO

from glueinfo.core.config import SCHEMA, ConfigError, load, parse_text

EXAMPLE = str(REPO / "etc" / "glueinfo.conf.example")


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if k != "GLUEINFO_CONFIG"}
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True, timeout=60, env=env)


BAD = [
    # (file content, expected stderr after "glueinfo: FILE")
    ("[glueinfo]\nhostname = wn1.example.org\n\n[colectors]\ndisable = network\n",
     r":4: unknown section \[colectors\] \(did you mean \[collectors\]\?\)"),
    ("[collectors]\ndisable = network\ntimout = 3\n",
     r":3: \[collectors\] timout: unknown key \(did you mean timeout\?\)"),
    ("[collectors]\ndisable = network\nwhen = 3\n",
     r":3: \[collectors\] when: unknown key \(known: disable, enable, timeout, utilisation_interval\)"),
    ("[static]\nsi00 = 2150\nsf00 = fast\n",
     r":3: \[static\] sf00: expected a whole number, got 'fast'"),
    ("[collectors]\ntimeout = -1\n",
     r":2: \[collectors\] timeout: must be at least 0.01, got '-1'"),
    ("[static]\ninbound_ip = maybe\n",
     r":2: \[static\] inbound_ip: expected yes/no \(true/false, on/off, 1/0\), got 'maybe'"),
    ("[static]\nsi00 = 1\nsi00 = 2\n",
     r":3: \[static\] si00: key appears twice"),
    ("hostname = x\n[glueinfo]\n",
     r":1: a key before any \[section\] header"),
]


@pytest.mark.parametrize("text, expected", BAD)
def test_bad_config_exits_2_with_one_line_and_no_output(tmp_path, text, expected):
    conf = tmp_path / "site.conf"
    conf.write_text(text, encoding="utf-8")
    done = run_cli("probe", "--config", str(conf))
    assert done.returncode == 2
    assert done.stdout == ""  # nothing probed, nothing printed: the file is refused as a whole
    assert done.stderr.count("\n") == 1
    assert re.fullmatch(f"glueinfo: {re.escape(str(conf))}{expected}\n", done.stderr), done.stderr


@pytest.mark.parametrize("text, expected", BAD)
def test_parse_refuses_the_whole_file(text, expected):
    with pytest.raises(ConfigError, match=f"^site.conf{expected}$"):
        parse_text(text, "site.conf")


def test_config_named_in_the_environment_is_used(tmp_path):
    conf = tmp_path / "env.conf"
    conf.write_text("[collectors]\nenable = bogus\n", encoding="utf-8")
    done = run_cli("collectors")  # without the variable: defaults
    assert done.returncode == 0
    done = subprocess.run([sys.executable, "-m", "glueinfo.cli", "collectors"], capture_output=True, text=True,
                          env={**os.environ, "GLUEINFO_CONFIG": str(conf)}, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("glueinfo: unknown collector(s): bogus")


def test_missing_explicit_config_is_an_error(tmp_path):
    done = run_cli("probe", "--config", str(tmp_path / "nope.conf"))
    assert done.returncode == 2
    assert done.stderr == f"glueinfo: {tmp_path / 'nope.conf'}: no such config file\n"


def test_values_are_typed_and_defaults_fill_the_rest():
    config = parse_text("[collectors]\ndisable = network filesystems\ntimeout = 2.5\n[static]\nsi00 = 2150\noutbound_ip = yes\n")
    assert config.section("collectors") == {"enable": [], "disable": ["network", "filesystems"], "timeout": 2.5,
                                            "utilisation_interval": 0.0}
    static = config.section("static")
    assert static["si00"] == 2150 and static["outbound_ip"] is True and static["inbound_ip"] is None


def test_example_config_parses_and_documents_every_key_of_the_host_sections():
    config = load(EXAMPLE)  # the whole example, every section in it, is a valid config
    text = open(EXAMPLE, encoding="utf-8").read()
    for section in ("glueinfo", "collectors", "static"):
        header = re.search(rf"^\[{section}\][ \t]*$", text, re.M)
        assert header, f"[{section}] is not in {EXAMPLE}"
        following = re.search(r"^\[", text[header.end():], re.M)
        body = text[header.end():header.end() + following.start()] if following else text[header.end():]
        for key in SCHEMA[section]:
            assert re.search(rf"^#?{key} =", body, re.M), f"[{section}] {key} is not in {EXAMPLE}"
        assert config.section(section) == {k: o.default for k, o in SCHEMA[section].items()}
    assert re.search(r"^\[extensions\][ \t]*$", text, re.M)
