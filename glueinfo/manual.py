"""The whole command line, for the build-time tools that write the manual page
and the shell completion from it (argparse-manpage, shtab; debian/rules and
glueinfo.spec call them):

    argparse-manpage --module glueinfo.manual --function parser --project-name glueinfo
    shtab --shell=bash glueinfo.manual.parser

Those tools call the function with no argument, and glueinfo.cli.build_parser
would then read *their* command line to choose which command's options to
build; ``parser()`` always builds every command's.  Importing it imports every
command's module, so it needs glueinfo's dependencies installed.
"""

from __future__ import annotations

import argparse

from glueinfo.cli import build_parser


def parser() -> argparse.ArgumentParser:
    """``glueinfo``'s parser with every command and all of their options."""
    return build_parser([])
