"""Command line: ``glueinfo SUBCOMMAND``.

Subcommand modules live in glueinfo.commands; each has ``add_arguments`` and
``run(args, config) -> int`` and keeps heavy imports (lxml, ldap3, apscheduler)
inside ``run`` so that ``glueinfo probe`` starts fast.  Errors are one line on
stderr; exit codes: 0 ok, 1 the job failed, 2 bad usage or config (a command's
``USAGE_EXIT`` instead when it has one: ``check`` answers Nagios's 3, UNKNOWN).
Commands raise glueinfo's errors (``glueinfo.core.errors``, where the tree is
drawn) and :func:`main` reports them once: one line, the class's exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Optional

from glueinfo import __version__
from glueinfo.core.errors import EXIT_FAILED as EXIT_FAILED  # exit codes: glueinfo.cli's names for them
from glueinfo.core.errors import EXIT_USAGE as EXIT_USAGE
from glueinfo.core.errors import ConfigurationError, GlueinfoError
from glueinfo.core.errors import UsageError as UsageError  # where code written before found it

# name -> (module in glueinfo.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "probe": ("probe", "print this host's snapshot as JSON"),
    "collectors": ("collectors", "list collectors, where they come from and whether they are enabled"),
    "ldif": ("ldif", "print the site's GLUE trees ([glue] versions: 1.3 o=grid, 2.0 o=glue) as LDIF (a BDII provider); "
                       "--check FILE checks any LDIF"),
    "publish": ("publish", "synchronise the GLUE trees into an LDAP server, each suffix bound as its own DN (adds, changed "
                            "attributes, deletes)"),
    "node-xml": ("node_xml", "print this host as an SSS Node (XML), or with --site a <Data> of every host's Node"),
    "serve": ("serve", "serve the status page, /node.xml, /nodes.xml, /ldif, /glue2.json, /crr.json, /haizea/site.xml, /health, "
                        "/metrics and SSSRMAP queries (POST /SSSRMAP3) over HTTP"),
    "gather": ("gather", "gather the site's hosts from every enabled source (local, agents, spool, ganglia, prometheus, "
                          "node_exporter) once and print them"),
    "jobs-xml": ("jobs_xml", "print the CEs' batch jobs as SSS Job objects (XML <Data> of <Job>)"),
    "haizea": ("haizea", "print the site as a Haizea <site>, or with --lwf its batch jobs as a lease workload (LWF)"),
    "run": ("run", "the periodic provider: refresh, then publish to every output (files, LDAP, HTTP), until SIGTERM"),
    "check": ("check", "a Nagios-compatible probe of a running glueinfo (exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN)"),
    "glue2-json": ("glue2_json", "print the GLUE 2 objects (the o=glue tree) in the OGF GLUE 2 JSON rendering"),
    "crr-json": ("crr_json", "print the site's WLCG Computing Resource Reporting (CRR) document: its CEs, capacity and "
                             "access points (JSON)"),
    "federate": ("federate", "the federation view: consume the documents sites push to a broker, keep each site's newest, "
                             "write them into an LDAP server as a top-level BDII and serve them as JSON, until SIGTERM"),
}

EXIT_OK = 0


def long_lived_objects() -> contextlib.AbstractContextManager[None]:
    """For a command's making of what it keeps until the process ends (the
    modules it imports, host snapshots): Python's cyclic garbage collector is
    paused meanwhile and then kept off it for good (gc.freeze, through
    glueinfo.core.gc_pause), instead of walking it again and again to find no
    garbage; reference counting still frees everything else.  About 10 ms of a
    fresh `glueinfo probe` or `glueinfo ldif`, much more with thousands of
    snapshots."""
    from glueinfo.core.gc_pause import collector_paused

    return collector_paused(freeze=True)


def terminal_width() -> int:
    """Columns for help text, as shutil.get_terminal_size reckons them:
    $COLUMNS, else the width of the terminal on stdout, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    if stdout is None:  # no stdout at all (a daemon started without one)
        return 80
    try:
        return os.get_terminal_size(stdout.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, sized without importing shutil: argparse makes
    one for every argument added, and shutil (with the compression modules it
    loads) was about 4 ms of a fresh `glueinfo probe`."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: Optional[int] = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, terminal_width() - 2 if width is None else width)


def common_options() -> OneLineErrorParser:
    """The options every command takes (a parent parser: only its arguments are used)."""
    common = OneLineErrorParser(add_help=False, formatter_class=HelpFormatter)
    common.add_argument("--config", metavar="FILE",
                        help="config file (default $GLUEINFO_CONFIG or /etc/glueinfo/glueinfo.conf; all keys optional)")
    common.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    common.add_argument("--host-root", metavar="DIR",
                        help="read /proc, /sys and /etc of a recorded host below DIR (config: host_root)")
    common.add_argument("--collector", action="append", default=[], metavar="NAME",
                        help="enable collector NAME (repeatable)")
    common.add_argument("--no-collector", action="append", default=[], metavar="NAME",
                        help="disable collector NAME (repeatable)")
    return common


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other error.
    ``usage_exit`` and ``report`` are the command's (its ``USAGE_EXIT`` and
    ``report_usage_error``: ``check`` answers with its UNKNOWN status line on stdout, exit 3);
    the top-level parser takes them from the command the line names, since argparse reports an
    unknown option of a command (``glueinfo check --bogus``) there."""

    usage_exit = EXIT_USAGE
    report: Optional[Callable[[str], None]] = None
    help_prog = ""  # whose --help the message points to (default: this parser's prog)

    def error(self, message: str) -> NoReturn:
        line = f"{self.prog}: {message} (see {self.help_prog or self.prog} --help)"
        if self.report is not None:
            self.report(line)
            self.exit(self.usage_exit)
        self.exit(self.usage_exit, line + "\n")


def _command_word(words: Sequence[str]) -> tuple[Optional[str], bool]:
    """The first word that names the command, and whether only ``--config FILE`` (or
    ``--config=FILE``) comes before it: of the top-level options only --config takes a value."""
    for index, word in enumerate(words):
        if not word.startswith("-") and not (index and words[index - 1] == "--config"):
            before = words[:index]
            return word, all(w == "--config" or w.startswith("--config=") or (i and before[i - 1] == "--config")
                             for i, w in enumerate(before))
    return None, False


def build_parser(argv: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """The parser for ``argv``.  A command line that starts with a command gets
    only that command's sub-parser and module: building all nine sub-parsers
    and importing every command's module was a visible share of a fresh
    `glueinfo probe`.  Anything else (no command, an unknown one, or top-level
    options such as --help first) gets every sub-parser, so help and errors
    list all the commands."""
    words = list(sys.argv[1:] if argv is None else argv)
    chosen, config_only_before = _command_word(words)
    only = chosen if config_only_before and chosen in COMMANDS else None
    # No abbreviations of the top-level options: `--conf FILE` would hide the command word above.
    parser = OneLineErrorParser(prog="glueinfo", description="GLUE / SSS grid information provider",
                                formatter_class=HelpFormatter, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"glueinfo {__version__}")
    # `glueinfo --config FILE COMMAND` as well as `glueinfo COMMAND --config FILE` (main() takes either).
    parser.add_argument("--config", metavar="FILE", dest="top_config",
                        help="config file, as the command's own --config (given before the command)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    common = common_options()
    for name, (module, help_text) in COMMANDS.items():
        if only is not None and name != only:
            continue
        sp = sub.add_parser(name, help=help_text, description=help_text, parents=[common], formatter_class=HelpFormatter)
        if chosen is None or chosen == name:
            command = importlib.import_module(f"glueinfo.commands.{module}")
            command.add_arguments(sp)
            sp.set_defaults(_module=command)
            if isinstance(sp, OneLineErrorParser):
                sp.usage_exit = getattr(command, "USAGE_EXIT", EXIT_USAGE)
                sp.report = getattr(command, "report_usage_error", None)
            if chosen == name:  # an option the command does not know is reported by the top-level parser
                parser.usage_exit = getattr(command, "USAGE_EXIT", EXIT_USAGE)
                parser.report = getattr(command, "report_usage_error", None)
                parser.help_prog = f"glueinfo {name}"
    return parser


def setup_logging(verbosity: int) -> None:
    """Warnings (-v: info, -vv: debug) on stderr as ``glueinfo: LEVEL: message``;
    does nothing when logging is set up already."""
    import logging

    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="glueinfo: %(levelname)s: %(message)s", stream=sys.stderr)


def exit_code(error: GlueinfoError, command: object) -> int:
    """What ``glueinfo`` exits with for ``error``: its class's ``exit_code``, and for a
    configuration or usage error the command's ``USAGE_EXIT`` when it has one."""
    if isinstance(error, ConfigurationError):
        return int(getattr(command, "USAGE_EXIT", error.exit_code))
    return error.exit_code


def _plugin_keys() -> Any:
    """The keys installed plugins declare, loaded only when a config file needs them (the parser
    asks): a command whose file glueinfo reads alone never imports the plugin registries."""
    from glueinfo.commands.plugin_keys import plugin_keys

    return plugin_keys()


def main(argv: Optional[Sequence[str]] = None) -> int:
    with long_lived_objects():  # the config's and the command's modules, and the parser
        from glueinfo.core.config import Config, load
        from glueinfo.core.text import one_line

        parser = build_parser(argv)
        args = parser.parse_args(argv)
    if args.top_config is not None:  # `glueinfo --config FILE COMMAND`
        if args.config is not None and args.config != args.top_config:
            parser.error(f"--config given twice, {args.top_config} before the command and {args.config} after it")
        args.config = args.top_config
    if args.verbose or not getattr(args._module, "LOGGING_ON_FIRST_WARNING", False):
        setup_logging(args.verbose)
    config: Optional[Config] = None
    try:
        config = load(args.config, _plugin_keys)
        return int(args._module.run(args, config) or 0)
    except GlueinfoError as exc:  # the one place a command's error is reported
        message = one_line(exc, limit=2000)
        if isinstance(exc, ConfigurationError):
            message = config.located(message) if config is not None else message  # FILE:LINE: [section] key: why
            report = getattr(args._module, "report_usage_error", None)
            if report is not None:  # check: its UNKNOWN status line on stdout, as monitoring reads it
                report(message)
                return exit_code(exc, args._module)
        print(f"glueinfo: {message}", file=sys.stderr)
        return exit_code(exc, args._module)
    except BrokenPipeError:  # `glueinfo ldif | head` is fine
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Run the glueinfo.cli module, not this __main__ copy, so that there is one
    # set of command modules and parsers (as the console script has).
    from glueinfo.cli import main as _main

    sys.exit(_main())
