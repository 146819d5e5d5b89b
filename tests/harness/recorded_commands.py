"""A stand-in for the batch system's commands in unit tests: each command line answered with a
recorded output file (the LRMS plugins take such a runner as glueinfo.lrms.commands.Tools do)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

Runner = Callable[[Sequence[str], float, Mapping[str, str]], tuple[int, str, str]]


def recorded_files(directory: Path, answers: Mapping[str, str]) -> Runner:
    """A runner answering ``tool args`` with the fixture file of the first key that starts the
    command line (the tool by its base name); any other command fails the test, naming it."""

    def run(argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> tuple[int, str, str]:
        line = " ".join([os.path.basename(argv[0]), *argv[1:]])
        for start, name in answers.items():
            if line.startswith(start):
                return 0, (directory / name).read_text(), ""
        raise AssertionError(f"unexpected command {line}")

    return run
