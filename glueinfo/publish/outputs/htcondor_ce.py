"""The ``htcondor-ce`` output: the site's OSG_ResourceCatalog as an HTCondor-CE config file.

``[run] outputs = htcondor-ce`` writes ``Documents.osg_resource_catalog``
(glueinfo.catalogs.resource_catalog) to ``[htcondor-ce] resource_catalog_file``
(default ``/etc/condor-ce/config.d/99-glueinfo-resource-catalog.conf``), atomically
(glueinfo.core.atomicwrite: the CE never reads half a file) and only when its bytes change:
the catalog holds no volatile figure, so an unchanged site never rewrites it.  When the file
changed, ``reconfig_command`` (e.g. ``condor_ce_reconfig``; empty: none) is run within
``reconfig_timeout`` seconds (glueinfo.core.bounded_run: its whole process group killed at the
deadline), so the CE's schedd advertises the new catalog.

Failure behaviour: a file that cannot be written keeps the previous one and is this output's
error; a reconfig command that cannot be started, exits non-zero or runs past its time is this
output's error, one line naming the command, and is run again at the next publish until it
works.  Either fails this output alone (glueinfo.publish.outputs.publish_all).
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from glueinfo.core.atomicwrite import WriteError, remove_temporaries, write_atomic
from glueinfo.core.bounded_run import KIB, CommandError, run_bounded
from glueinfo.core.text import one_line
from glueinfo.publish.outputs import OutputContext, OutputPlugin, OutputResult, Publication

SECTION = "htcondor-ce"
DEFAULT_FILE = "/etc/condor-ce/config.d/99-glueinfo-resource-catalog.conf"
MAX_OUTPUT = 64 * KIB  # what a reconfig command may print: it says a line or two


@dataclass(frozen=True)
class HtcondorCeSettings:
    """``[htcondor-ce]``, typed: the file, and the command run after it changed (empty: none)."""

    resource_catalog_file: str = DEFAULT_FILE
    reconfig_command: tuple[str, ...] = ()
    reconfig_timeout_s: float = 30.0


def htcondor_ce_settings(section: Mapping[str, Any]) -> HtcondorCeSettings:
    """The section's values as settings; ValueError (one line, naming the key) for an empty file
    path or a command shlex cannot split."""
    path = str(section.get("resource_catalog_file", DEFAULT_FILE) or "")
    if not path:
        raise ValueError(f"[{SECTION}] resource_catalog_file is empty: the output has nowhere to write")
    try:
        command = tuple(shlex.split(str(section.get("reconfig_command", "") or "")))
    except ValueError as exc:
        raise ValueError(f"[{SECTION}] reconfig_command: {exc}") from None
    return HtcondorCeSettings(path, command, float(section.get("reconfig_timeout", 30.0)))


class HtcondorCeOutput:
    """Keeps the catalog file current and the CE told (module docstring)."""

    name = SECTION

    def __init__(self, settings: HtcondorCeSettings) -> None:
        self.settings = settings
        self._digest: Optional[bytes] = None  # of the bytes the file holds, as last written or read
        self._reconfig_due = False  # the file changed and the CE has not yet been told
        remove_temporaries(settings.resource_catalog_file)  # a killed writer's, beside the file

    def _holds(self, digest: bytes) -> bool:
        if self._digest is None:  # first publish of this process: the file may hold these bytes already
            try:
                with open(self.settings.resource_catalog_file, "rb") as handle:
                    self._digest = hashlib.sha256(handle.read()).digest()
            except OSError:
                return False
        return self._digest == digest

    def _reconfig(self) -> Optional[str]:
        """Run the reconfig command; its failure as one line, None when it worked (or there is none)."""
        argv = self.settings.reconfig_command
        if not argv:
            self._reconfig_due = False
            return None
        try:
            finished = run_bounded(argv, self.settings.reconfig_timeout_s, MAX_OUTPUT)
        except CommandError as exc:
            return f"reconfig_command {one_line(exc)}"
        except OSError as exc:
            return f"reconfig_command {argv[0]}: cannot be run: {one_line(exc.strerror or exc)}"
        if finished.returncode != 0:
            said = one_line(finished.stderr.decode("utf-8", "replace") or finished.stdout.decode("utf-8", "replace"))
            return f"reconfig_command {argv[0]}: exit status {finished.returncode}" + (f": {said}" if said else "")
        self._reconfig_due = False
        return None

    def publish(self, publication: Publication) -> OutputResult:
        documents = publication.documents
        written = False
        if documents is not None:
            data = documents.osg_resource_catalog
            digest = hashlib.sha256(data).digest()
            if not self._holds(digest):
                try:
                    write_atomic(self.settings.resource_catalog_file, data)
                except WriteError as exc:
                    self._digest = None
                    return OutputResult(error=one_line(exc))
                self._digest = digest
                self._reconfig_due = written = True
        error = self._reconfig() if self._reconfig_due else None
        note = f"{self.settings.resource_catalog_file} {'written' if written else 'unchanged'}"
        return OutputResult(note=note, error=error, written=written)


def _make(context: OutputContext) -> HtcondorCeOutput:
    return HtcondorCeOutput(htcondor_ce_settings(context.sections.get(SECTION, {})))


OUTPUT = OutputPlugin(SECTION, _make, description="the site's OSG_ResourceCatalog as an HTCondor-CE config file "
                      "([htcondor-ce] resource_catalog_file), atomic, only when changed, then reconfig_command")
