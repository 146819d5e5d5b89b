"""ARC-CE on this host: arc.conf's queues, batch system and REST endpoint, each queue a CE.

arc.conf (``[discovery] arc_conf``, default /etc/arc.conf) is read as ARC's
own parser reads it (ARC 6 and 7, ``arc/utils/config.py``): a line whose first
character is ``#`` and a blank line are skipped; ``[keyword]`` or
``[keyword:identifier]`` opens a block (spaces around the identifier are
dropped; a block written twice keeps its last body); ``option=value`` with
the spaces around ``=`` dropped, the value being the whole rest of the line
(arc.conf has no trailing comments: ``lrms=slurm # x`` is the value
``slurm # x``); an option alone is an empty value; options before the first
block are ignored.  Block and option names are case-sensitive.

A host is an ARC-CE when arc.conf has ``[arex]``.  From it:

- **host**: ``[common] hostname``, else this host's name (ARC's default is
  ``hostname -f``);
- **batch system**: the first word of ``[lrms] lrms`` (fork, slurm, slurmpy,
  pbs, pbspro, sge, condor, lsf; ll and boinc have no glueinfo plugin), with
  ARC's own paths to its tools (``slurm_bin_path``, ``pbs_bin_path``,
  ``sge_bin_path``, ``sge_root``, ``sge_cell``, ``lsf_bin_path``,
  ``condor_bin_path``, ``condor_config``);
- **endpoint**: the REST interface, published by A-REX when ``[arex/ws/jobs]``
  is enabled, at ``[arex/ws] wsurl`` (default ``https://HOST:443/arex``); a
  host without ``[arex/ws/jobs]`` has no REST endpoint and nothing is
  published (one warning);
- **queues**: every ``[queue:NAME]``, with ``advertisedvo`` (the queue's, else
  ``[infosys/cluster]``'s) as ``VO:<vo>`` access rules; an HTCondor-backed
  ARC-CE's queues are the whole pool (queue ``all``);
- **version**: what ``arched --version`` prints (``[discovery] arc_bin_dir``,
  else PATH); unknown when it cannot be run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Optional
from urllib.parse import urlsplit

from glueinfo.core.files import read_capped
from glueinfo.core.text import one_line
from glueinfo.lrms.registry import LrmsQueryError
from glueinfo.site.discovery.found import FoundCE, Look

IMPLEMENTATION = "ARC-CE"  # GlueCEImplementationName as ARC's own GLUE 1 generator wrote it
JOBMANAGER = "nordugrid"  # ARC's GlueCEUniqueID form HOST:PORT/nordugrid-LRMS-QUEUE
MAX_CONF_BYTES = 4 * 1024 * 1024
ARCHED = "arched"

# [lrms] lrms type -> (glueinfo's plugin, options that choose its dialect)
LRMS = {"fork": ("fork", {}), "slurm": ("slurm", {}), "slurmpy": ("slurm", {}), "pbs": ("pbs", {}),
        "pbspro": ("pbs", {"pbs_flavour": "openpbs"}), "sge": ("sge", {}), "condor": ("htcondor", {}),
        "lsf": ("lsf", {})}
# arc.conf [lrms] option -> the [ce:NAME] key glueinfo's plugin reads
TOOL_PATHS = {"slurm_bin_path": "slurm_bin_dir", "pbs_bin_path": "pbs_bin_dir", "sge_bin_path": "sge_bin_dir",
              "sge_root": "sge_root", "sge_cell": "sge_cell", "lsf_bin_path": "lsf_bin_dir",
              "condor_bin_path": "condor_bin_dir", "condor_config": "condor_config"}

Block = list[tuple[str, str]]

_BLOCK = re.compile(r"^\s*\[(?P<keyword>[^:\[\]]+)(?::(?P<name>[^\[\]]+))?\]\s*$")
_OPTION = re.compile(r"^\s*(?P<option>[^=\[\]\s]+)\s*(?:=|(?=\s*$))\s*(?P<value>.*?)\s*$")


def parse_arc_conf(text: str) -> dict[str, Block]:
    """Block id (``arex/ws``, ``queue:long``) -> its (option, value) lines in order (module
    docstring).  A line that is none of a comment, a block header or an option is skipped, as
    ARC's parser does (it only logs it)."""
    blocks: dict[str, Block] = {}
    current: Optional[Block] = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        header = _BLOCK.match(line)
        if header:
            name = header.group("name")
            block_id = header.group("keyword") + (f":{name.strip()}" if name is not None else "")
            current = blocks[block_id] = []  # a block written again starts afresh
            continue
        option = _OPTION.match(line)
        if option and current is not None:
            current.append((option.group("option"), option.group("value")))
    return blocks


def first(block: Optional[Block], option: str) -> Optional[str]:
    for name, value in block or ():
        if name == option:
            return value
    return None


def every(block: Optional[Block], option: str) -> list[str]:
    return [value for name, value in block or () if name == option]


def version(look: Look) -> str:
    """ARC's version from ``arched --version`` ("arched version 6.21.1"), or "" (not run, or not
    understood: the version stays unknown)."""
    from glueinfo.lrms.commands import Tools, environment, subprocess_runner  # the bounded runner: only when there is a CE to ask

    run = look.run or subprocess_runner
    tools = Tools(bin_dir=look.settings.arc_bin_dir, env=environment(), deadline=look.deadline, run=run)
    try:
        out = tools(ARCHED, "--version")
    except LrmsQueryError:
        return ""
    found = re.search(r"\bversion\s+(\d[\w.+~-]*)", out)
    return found.group(1) if found else ""


def found_ces(blocks: Mapping[str, Block], path: str, local_fqdn: str, arc_version: str, warn: Any) -> list[FoundCE]:
    """One FoundCE per ``[queue:NAME]`` of an arc.conf with ``[arex]``; warnings for what stops it."""
    if "arex" not in blocks:
        return []
    host = first(blocks.get("common"), "hostname") or local_fqdn
    lrms_line = (first(blocks.get("lrms"), "lrms") or "").split()
    if not lrms_line:
        warn(f"ARC-CE discovery: {path} has [arex] but no [lrms] lrms; no ARC-CE CE published")
        return []
    lrms_type = lrms_line[0]
    if lrms_type not in LRMS:
        warn(f"ARC-CE discovery: {path}: [lrms] lrms {lrms_type!r} has no glueinfo LRMS plugin; no ARC-CE CE published "
             f"(declare its queues as [ce:NAME] with an installed plugin's lrms)")
        return []
    if "arex/ws/jobs" not in blocks:
        warn(f"ARC-CE discovery: {path} has no [arex/ws/jobs]: A-REX offers no REST job interface; no ARC-CE CE published")
        return []
    wsurl = first(blocks.get("arex/ws"), "wsurl") or f"https://{host}:443/arex"
    try:
        parts = urlsplit(wsurl)
        port = parts.port or 443
    except ValueError:
        parts, port = None, 0
    if parts is None or not parts.hostname or not port:
        warn(f"ARC-CE discovery: {path}: [arex/ws] wsurl {wsurl!r} is not a URL with a host; no ARC-CE CE published")
        return []
    plugin, dialect = LRMS[lrms_type]
    common: dict[str, Any] = {"host": parts.hostname, "port": port, "jobmanager": JOBMANAGER, "lrms": plugin,
                              "implementation_name": IMPLEMENTATION, **dialect}
    if wsurl != f"https://{parts.hostname}:{port}/arex":
        common["endpoint_url"] = wsurl
    if arc_version:
        common["implementation_version"] = arc_version
    for arc_key, key in TOOL_PATHS.items():
        value = first(blocks.get("lrms"), arc_key)
        if value:
            common[key] = value
    cluster_vos = every(blocks.get("infosys/cluster"), "advertisedvo")
    found = []
    for block_id, block in blocks.items():
        if not block_id.startswith("queue:"):
            continue
        name = block_id.split(":", 1)[1]
        values = dict(common)
        values["queue"] = "all" if plugin == "htcondor" else name
        vos = every(block, "advertisedvo") or cluster_vos
        if vos:
            values["access"] = [f"VO:{vo}" for vo in vos]
        found.append(FoundCE(name=name, origin=f"ARC-CE [queue:{name}] of {path}", values=values))
    if not found:
        warn(f"ARC-CE discovery: {path} has no [queue:NAME] block; no ARC-CE CE published")
    return found


def discover(look: Look) -> list[FoundCE]:
    """The CEs of the ARC-CE whose arc.conf is ``[discovery] arc_conf``, or [] (nothing when the
    file does not exist; one warning when it cannot be read or says too little).  Never raises."""
    path = look.settings.arc_conf
    if not path or not os.path.exists(path):
        return []
    try:
        text = read_capped(path, MAX_CONF_BYTES, follow_symlinks=True).decode("utf-8", "replace")
    except ValueError as exc:
        look.warn(f"ARC-CE discovery: {path}: {one_line(exc, 200)}; no ARC-CE CE published")
        return []
    blocks = parse_arc_conf(text)
    if "arex" not in blocks:
        return []
    return found_ces(blocks, path, look.local_fqdn, version(look), look.warn)

