"""What CE discovery finds and how it is told to look: the types the finders share.

A finder (``htcondor_ce``, ``arc``) turns what a CE's own tools and files say
into :class:`FoundCE` values: the ``[ce:NAME]`` keys an admin would have
written for that queue, nothing more.  It never raises for what it reads:
what it cannot use is one warning line, and the rest of the site goes on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any, Optional

from glueinfo.core.records import dataclass

# (argv, timeout_s, env) -> (exit code, stdout, stderr): glueinfo.lrms.commands' runner signature.
Runner = Callable[[Sequence[str], float, Mapping[str, str]], tuple[int, str, str]]

HTCONDOR_CE = "htcondor-ce"
ARC = "arc"
FINDERS = (HTCONDOR_CE, ARC)

CONDOR_CE_CONFIG_VAL = "condor_ce_config_val"  # what HTCondor-CE discovery asks


@dataclass(frozen=True)
class FoundCE:
    """One queue of a CE found on this host: a route of HTCondor-CE's Job Router or a
    ``[queue:NAME]`` of ARC's arc.conf.

    ``name`` is the ``[ce:NAME]`` it is published as (and that overrides it); ``origin`` says
    where it was found, for messages; ``values`` are ``[ce:NAME]`` keys (host, port, lrms,
    queue, implementation_name...).  ``default_queue_of`` is set when the CE sends jobs to its
    batch system's default queue without naming it: the batch system is asked which that is
    (glueinfo.site.discovery.default_queue), unless ``[ce:NAME] queue`` says it.
    """

    name: str
    origin: str
    values: Mapping[str, Any] = field(default_factory=dict)
    default_queue_of: str = ""


@dataclass(frozen=True)
class DiscoverySettings:
    """The ``[discovery]`` section, typed."""

    enabled: tuple[str, ...] = FINDERS
    condor_ce_bin_dir: str = ""
    arc_conf: str = "/etc/arc.conf"
    arc_bin_dir: str = ""
    timeout_s: float = 10.0

    @classmethod
    def from_section(cls, raw: Mapping[str, Any]) -> DiscoverySettings:
        return cls(enabled=tuple(str(v) for v in raw.get("enabled") or ()),
                   condor_ce_bin_dir=str(raw.get("condor_ce_bin_dir") or ""),
                   arc_conf=str(raw.get("arc_conf") or ""), arc_bin_dir=str(raw.get("arc_bin_dir") or ""),
                   timeout_s=float(raw.get("timeout") or 10.0))


@dataclass
class Look:
    """One discovery's shared context: its deadline (time.monotonic), the runner (None: the
    bounded subprocess runner), this host's name, and where warnings go."""

    settings: DiscoverySettings
    local_fqdn: str
    warn: Callable[[str], None]
    run: Optional[Runner] = None
    deadline: float = 0.0

    @classmethod
    def start(cls, settings: DiscoverySettings, local_fqdn: str, warn: Callable[[str], None],
              run: Optional[Runner] = None) -> Look:
        return cls(settings, local_fqdn, warn, run, time.monotonic() + settings.timeout_s)


def condor_ce_installed(bin_dir: str) -> bool:
    """Whether ``condor_ce_config_val`` is there to ask (an executable file in ``bin_dir``, else in a
    directory of $PATH)."""
    # $PATH searched here rather than with shutil.which: shutil, with the compression modules it
    # loads, was 2 ms of the start-up of every command that builds the site model.
    for directory in [bin_dir] if bin_dir else os.get_exec_path():
        path = os.path.join(directory, CONDOR_CE_CONFIG_VAL)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return True
    return False


def worth_a_look(finder: str, settings: DiscoverySettings) -> bool:
    """Whether ``finder`` has anything to look at on this host: HTCondor-CE's
    ``condor_ce_config_val`` (:func:`condor_ce_installed`), ARC-CE's ``[discovery] arc_conf``
    file.  Cheap: a finder's module is imported only when this says yes."""
    if finder == HTCONDOR_CE:
        return condor_ce_installed(settings.condor_ce_bin_dir)
    if finder == ARC:
        return bool(settings.arc_conf) and os.path.exists(settings.arc_conf)
    return False
