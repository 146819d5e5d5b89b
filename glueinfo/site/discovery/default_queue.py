"""The default queue of a batch system: where a CE's jobs go when its route names no queue.

HTCondor-CE's packaged routes (``GridResource = "batch slurm"`` and no
``default_queue``) hand jobs to BLAH without a queue, and the batch system
puts them in its default one.  That queue is what such a CE publishes, so it
is asked for once, with the tools and settings of the CE's ``[ce:NAME]``
keys (``slurm_bin_dir``, ``slurm_conf``, ``pbs_bin_dir``,
``lrms_command_prefix``), bounded like every LRMS command:

- Slurm: ``scontrol show partition -o``, the partition with ``Default=YES``
  (the only partition when there is one);
- PBS (OpenPBS, PBS Pro, Torque): ``qstat -Bf``, the server's ``default_queue``.

Other batch systems have no default queue glueinfo can ask for (Grid Engine
has none; LSF's is a list): the admin names it with ``[ce:NAME] queue``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Optional

from glueinfo.lrms.registry import LrmsQueryError
from glueinfo.site.discovery.found import Runner


def slurm_default(text: str) -> Optional[str]:
    """The default partition in ``scontrol show partition -o`` output, or None."""
    partitions = []
    for line in text.splitlines():
        name = re.search(r"(?:^|\s)PartitionName=(\S+)", line)
        if not name:
            continue
        partitions.append(name.group(1))
        if re.search(r"(?:^|\s)Default=YES(?:\s|$)", line):
            return name.group(1)
    return partitions[0] if len(partitions) == 1 else None


def pbs_default(text: str) -> Optional[str]:
    """The server's ``default_queue`` in ``qstat -Bf`` output, or None."""
    found = re.search(r"^\s*default_queue\s*=\s*(\S+)\s*$", text, re.MULTILINE)
    return found.group(1) if found else None


def ask_default_queue(lrms: str, options: Mapping[str, Any], deadline: float, run: Optional[Runner] = None) -> tuple[str, str]:
    """(queue, "") or ("", why not) for the batch system ``lrms`` reached as ``options`` say.
    Never raises."""
    # the bounded runner: only when there is a batch system to ask
    from glueinfo.lrms.commands import Tools, command_prefix, environment, subprocess_runner

    runner = run or subprocess_runner  # bounded in time, bytes and processes (glueinfo.lrms.commands)
    command: tuple[str, ...]
    parse: Callable[[str], Optional[str]]
    if lrms == "slurm":
        env = environment(SLURM_CONF=str(options.get("slurm_conf") or ""))
        tools = Tools(bin_dir=str(options.get("slurm_bin_dir") or ""), prefix=command_prefix(options), env=env,
                      settings=env.settings, deadline=deadline, run=runner)
        command, parse = ("scontrol", "show", "partition", "-o"), slurm_default
    elif lrms == "pbs":
        env = environment()
        tools = Tools(bin_dir=str(options.get("pbs_bin_dir") or ""), prefix=command_prefix(options), env=env,
                      settings=env.settings, deadline=deadline, run=runner)
        command, parse = ("qstat", "-Bf"), pbs_default
    else:
        return "", f"{lrms} has no default queue glueinfo can ask for"
    try:
        out = tools(*command)
    except LrmsQueryError as exc:
        return "", str(exc)
    queue = parse(out)
    return (queue, "") if queue else ("", f"{' '.join(command)} names no default queue")
