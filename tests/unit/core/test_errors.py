"""The exception tree drawn in glueinfo/core/errors.py is the code's, and main() reports an error once.

Every exception class defined anywhere in the glueinfo package is found by
importing every module; each public one must derive from GlueinfoError and
appear in the tree with its parent and its built-in bases as they are, so the
drawing cannot drift from the code.  Module-private signals (a leading ``_``)
are listed in their own block.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass

import pytest

import glueinfo
import glueinfo.core.errors as errors
from glueinfo import cli
from glueinfo.core.errors import (
    ConfigurationError,
    GlueinfoError,
    InputError,
    PublicationError,
    UpstreamError,
    UsageError,
)

LINE = re.compile(r"^(?P<indent> *)(?P<name>_?[A-Za-z]\w*) +(?P<module>glueinfo(?:\.\w+)+)(?: +also (?P<also>[\w, ]+))?$")


@dataclass(frozen=True)
class Drawn:
    name: str
    module: str
    parent: str | None  # the class drawn above it one level up, None at the root
    also: frozenset[str]


def drawn(block: str) -> dict[tuple[str, str], Drawn]:
    """The classes of one literal block of the docstring, each with the one drawn as its parent."""
    lines = [line for line in block.splitlines() if line.strip()]
    base = min(len(line) - len(line.lstrip()) for line in lines)
    stack: list[tuple[int, str]] = []
    found: dict[tuple[str, str], Drawn] = {}
    for line in lines:
        match = LINE.match(line[base:])
        assert match, f"not 'Name  module  [also Builtin]': {line!r}"
        depth = len(match["indent"])
        assert depth % 4 == 0, f"indent by 4 spaces: {line!r}"
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert not stack or stack[-1][0] == depth - 4, f"indented more than one level: {line!r}"
        key = (match["module"], match["name"])
        assert key not in found, f"drawn twice: {line!r}"
        also = frozenset(word.strip() for word in (match["also"] or "").split(",") if word.strip())
        found[key] = Drawn(match["name"], match["module"], stack[-1][1] if stack else None, also)
        stack.append((depth, match["name"]))
    return found


def blocks() -> tuple[dict[tuple[str, str], Drawn], dict[tuple[str, str], Drawn]]:
    """(the tree, the module-private signals) as errors.py's docstring draws them."""
    doc = errors.__doc__ or ""
    literal = re.findall(r"::\n\n((?:(?: {4}.*)?\n)+)", doc + "\n")
    assert len(literal) == 2, "errors.py's docstring draws two blocks: the tree, then the private signals"
    return drawn(literal[0]), drawn(literal[1])


def exception_classes() -> list[type[BaseException]]:
    """Every exception class defined in a glueinfo module (every module imported)."""
    for info in pkgutil.walk_packages(glueinfo.__path__, "glueinfo."):
        if info.name.rsplit(".", 1)[-1] != "__main__":
            importlib.import_module(info.name)
    found: dict[tuple[str, str], type[BaseException]] = {}
    for name, module in list(__import__("sys").modules.items()):
        if module is None or not (name == "glueinfo" or name.startswith("glueinfo.")):
            continue
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == name:
                found[(value.__module__, value.__qualname__)] = value
    return sorted(found.values(), key=lambda c: (c.__module__, c.__qualname__))


def parent_of(cls: type[BaseException]) -> str | None:
    """The name of the one base that is a GlueinfoError (None for GlueinfoError itself)."""
    ours = [base for base in cls.__bases__ if issubclass(base, GlueinfoError)]
    assert len(ours) <= 1, f"{cls.__qualname__} has more than one GlueinfoError base: {ours}"
    return ours[0].__name__ if ours else None


def builtins_of(cls: type[BaseException]) -> frozenset[str]:
    """The bases that are not glueinfo's (ValueError, OSError), as drawn after ``also``."""
    if cls is GlueinfoError:
        return frozenset()
    return frozenset(base.__name__ for base in cls.__bases__
                     if not base.__module__.startswith("glueinfo") and base is not Exception)


def test_every_exception_class_is_drawn_in_the_tree_as_it_is():
    tree, private = blocks()
    classes = exception_classes()
    assert len(classes) > 40  # every module was imported
    seen = set()
    for cls in classes:
        key = (cls.__module__, cls.__qualname__)
        seen.add(key)
        if cls.__qualname__.startswith("_"):
            assert key in private, f"{cls.__module__}.{cls.__qualname__}: list it among the private signals in core/errors.py"
            assert not issubclass(cls, GlueinfoError), f"{cls.__qualname__}: a GlueinfoError is public; drop the '_'"
            assert private[key].also == builtins_of(cls) - {"Exception"}, key
            continue
        assert issubclass(cls, GlueinfoError), (
            f"{cls.__module__}.{cls.__qualname__} does not derive from GlueinfoError: put it under "
            "ConfigurationError, InputError, PublicationError or UpstreamError")
        assert key in tree, f"{cls.__module__}.{cls.__qualname__}: draw it in core/errors.py's tree"
        assert tree[key].parent == parent_of(cls), (
            f"{cls.__qualname__}: drawn under {tree[key].parent}, derives from {parent_of(cls)}")
        assert tree[key].also == builtins_of(cls), (
            f"{cls.__qualname__}: drawn 'also {sorted(tree[key].also)}', is also {sorted(builtins_of(cls))}")
    assert set(tree) | set(private) <= seen, f"drawn but not in the code: {sorted(set(tree) | set(private) - seen)}"


def test_the_intermediate_classes_sit_under_the_root_and_carry_the_exit_code():
    for cls in (ConfigurationError, InputError, PublicationError, UpstreamError):
        assert cls.__bases__ == (GlueinfoError,)
        assert cls.__doc__ and "caller" in cls.__doc__  # says what the caller does
    assert GlueinfoError.exit_code == cli.EXIT_FAILED == 1
    assert ConfigurationError.exit_code == cli.EXIT_USAGE == 2
    assert UsageError.exit_code == 2 and issubclass(UsageError, ConfigurationError)
    for cls in (InputError, PublicationError, UpstreamError):
        assert cls.exit_code == 1


def test_existing_except_clauses_still_catch():
    from glueinfo.core.atomicwrite import WriteError
    from glueinfo.core.config import ConfigError
    from glueinfo.core.model import ModelError

    assert issubclass(ConfigError, ValueError) and issubclass(ConfigError, ConfigurationError)
    assert issubclass(ModelError, ValueError) and issubclass(ModelError, InputError)
    assert issubclass(WriteError, OSError) and issubclass(WriteError, PublicationError)


@pytest.fixture
def quiet_config(tmp_path, monkeypatch):
    conf = tmp_path / "glueinfo.conf"
    conf.write_text("", encoding="utf-8")
    monkeypatch.delenv("GLUEINFO_CONFIG", raising=False)
    return str(conf)


@pytest.mark.parametrize(("raised", "command", "code"), [
    (InputError("spool/n1.xml: not Node XML"), "probe", 1),
    (PublicationError("/var/lib/x.ldif: cannot replace: disk full"), "probe", 1),
    (UpstreamError("slurm: squeue timed out after 30 s"), "probe", 1),
    (ConfigurationError("[ce:x] lrms: unknown LRMS 'nope'"), "probe", 2),
    (UsageError("--ce x: no such CE"), "probe", 2),
    (ConfigurationError("[ce:x] lrms: unknown LRMS 'nope'"), "check", 3),  # check's USAGE_EXIT: Nagios UNKNOWN
])
def test_main_prints_one_line_and_exits_with_the_class_code(raised, command, code, quiet_config, monkeypatch, capsys):
    module = importlib.import_module(f"glueinfo.commands.{command}")

    def fail(args, config):
        raise raised

    monkeypatch.setattr(module, "run", fail)
    assert cli.main([command, "--config", quiet_config]) == code
    captured = capsys.readouterr()
    if command == "check":  # a probe answers on stdout, its one status line, or Nagios shows "(No output)"
        assert (captured.out, captured.err) == (f"GLUEINFO UNKNOWN - {raised}\n", "")
        return
    assert captured.out == ""
    assert captured.err == f"glueinfo: {raised}\n"


def test_main_puts_a_message_with_newlines_on_one_line(quiet_config, monkeypatch, capsys):
    from glueinfo.commands import probe

    def fail(args, config):
        raise InputError("first\nsecond\tthird")

    monkeypatch.setattr(probe, "run", fail)
    assert cli.main(["probe", "--config", quiet_config]) == 1
    assert capsys.readouterr().err == "glueinfo: first second third\n"


def test_a_configuration_error_from_a_command_exits_2_without_a_conversion(quiet_config, capsys):
    # CollectorError reaches main as it was raised (no UsageError wrapping it)
    assert cli.main(["collectors", "--config", quiet_config, "--collector", "no-such-collector"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("glueinfo: unknown collector(s): no-such-collector") and err.count("\n") == 1
