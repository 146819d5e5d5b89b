"""HTCondor-CE on this host: its name, port, version and Job Router routes, each route a CE.

HTCondor-CE's own GLUE provider (``htcondor-ce-provider``, removed from
HTCondor-CE in October 2025) read the CE's configuration through HTCondor;
this asks the same configuration with the CE's own tool, once::

    condor_ce_config_val -dump -expanded '^(FULL_HOSTNAME|...|JOB_ROUTER_ROUTE_.+)$'

which prints ``NAME = value`` lines, and multi-line values between
``NAME @=end`` and ``@end`` with each line indented by three spaces
(:func:`parse_dump`).  From it:

- **host**: ``NETWORK_HOSTNAME`` when set, else ``FULL_HOSTNAME`` (the dump's
  ``# Configuration from machine:`` line, else this host's name);
- **port**: the port of ``COLLECTOR_HOST``, else ``COLLECTOR_PORT``, else
  ``SHARED_PORT_PORT``, else 9619 (HTCondor-CE's ``PORT``); the endpoint is
  ``condor://HOST:PORT`` as the provider published it;
- **version**: ``HTCondorCEVersion`` (what ``condor_ce_version`` prints);
- **VOs**: ``HTCONDORCE_VONames`` (the provider's own setting), as ``VO:<vo>``
  access rules of every route;
- **routes**: the names in ``JOB_ROUTER_ROUTE_NAMES``, each read from
  ``JOB_ROUTER_ROUTE_<name>`` (ClassAd transform syntax, HTCondor-CE 5 and
  later, the only one from 24) or, when
  ``JOB_ROUTER_USE_DEPRECATED_ROUTER_ENTRIES`` is true (HTCondor-CE 23's
  default), from the ``name`` of a ClassAd in ``JOB_ROUTER_ENTRIES`` (a
  ``JOB_ROUTER_ROUTE_<name>`` of the same name wins, as in the Job Router);
  without ``JOB_ROUTER_ROUTE_NAMES`` every entry, in order.

Each route feeds one batch system: ``TargetUniverse = 5`` (``UNIVERSE
VANILLA``) the local HTCondor pool, whose schedd is
``JOB_ROUTER_SCHEDD2_NAME`` (else every schedd: queue ``all``); a grid
universe route its ``GridResource = "batch <lrms> ..."`` through BLAH (slurm,
pbs, sge, lsf, condor).  Its queue is the route's ``default_queue`` (old
syntax ``set_default_queue``, or a ``SET BatchQueue``); without one, jobs go to
the batch system's default queue, which is looked up later.  Routes written
inside ``if`` blocks, other universes and other grid types are not guessed at:
each such route is one warning naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Optional

from glueinfo.core.records import dataclass
from glueinfo.core.text import one_line
from glueinfo.lrms.registry import LrmsQueryError
from glueinfo.site.discovery.found import CONDOR_CE_CONFIG_VAL as CONFIG_VAL
from glueinfo.site.discovery.found import FoundCE, Look, condor_ce_installed

IMPLEMENTATION = "HTCondorCE"  # GlueCEImplementationName; its GLUE 2 kind (glueinfo.glue.glue2.ids) gives the rest
JOBMANAGER = "htcondorce"  # GlueCEUniqueID HOST:PORT/htcondorce-LRMS-QUEUE, as EGI's HTCondor-CE ids were written
DEFAULT_PORT = 9619

NAMES = ("FULL_HOSTNAME", "NETWORK_HOSTNAME", "COLLECTOR_HOST", "COLLECTOR_PORT", "SHARED_PORT_PORT",
         "HTCondorCEVersion", "HTCONDORCE_VONames", "JOB_ROUTER_SCHEDD2_NAME",
         "JOB_ROUTER_USE_DEPRECATED_ROUTER_ENTRIES", "JOB_ROUTER_ENTRIES", "JOB_ROUTER_ROUTE_NAMES")
PATTERN = "^(" + "|".join(NAMES) + "|JOB_ROUTER_ROUTE_.+)$"

# GridResource "batch <type>" (BLAH) -> glueinfo's LRMS plugin
BLAH_LRMS = {"slurm": "slurm", "pbs": "pbs", "sge": "sge", "lsf": "lsf", "condor": "htcondor"}
ALL_SCHEDDS = "all"  # the htcondor plugin's queue for every schedd of the pool


# -- the dump ------------------------------------------------------------------------

def parse_dump(text: str) -> tuple[str, dict[str, str]]:
    """(machine, NAME in capitals -> value) of ``condor_config_val -dump`` output.  Comment lines
    (``#``) and blank lines outside a multi-line value are skipped; a line that is neither a
    comment nor ``NAME = value`` nor ``NAME @=TAG`` raises ValueError naming it."""
    machine = ""
    params: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            found = re.match(r"#\s*Configuration from machine:\s*(\S+)", stripped)
            if found:
                machine = found.group(1)
            continue
        here = re.match(r"([A-Za-z0-9_.]+)\s*@=(\S+)\s*$", stripped)
        if here:
            end = "@" + here.group(2)
            body: list[str] = []
            while index < len(lines) and lines[index].strip() != end:
                body.append(lines[index][3:] if lines[index].startswith("   ") else lines[index])
                index += 1
            if index >= len(lines):
                raise ValueError(f"{here.group(1)}: multi-line value without its closing {end}")
            index += 1
            params[here.group(1).upper()] = "\n".join(body)
            continue
        plain = re.match(r"([A-Za-z0-9_.]+)\s*=\s?(.*)$", stripped)
        if not plain:
            raise ValueError(f"not a configuration line: {one_line(stripped, 80)!r}")
        params[plain.group(1).upper()] = plain.group(2).strip()
    return machine, params


# -- route syntaxes ------------------------------------------------------------------

@dataclass(frozen=True)
class Route:
    """What glueinfo reads of one Job Router route."""

    name: str
    universe: str = ""  # "vanilla", "grid", another word HTCondor uses, or "" (not said)
    grid_resource: str = ""
    queue: str = ""
    conditional: bool = False  # the universe or GridResource is set inside an if block


def _literal(expr: str) -> Optional[str]:
    """The value of a ClassAd string or number literal (``"batch slurm"``, ``9``); None for an
    expression glueinfo does not evaluate."""
    expr = expr.strip()
    if len(expr) >= 2 and expr[0] == expr[-1] == '"':
        inner = expr[1:-1]
        if re.search(r'(?<!\\)"', inner):
            return None  # two strings joined by an operator
        return re.sub(r"\\(.)", r"\1", inner)
    if re.fullmatch(r"-?\d+", expr):
        return expr
    return None


def _universe(value: str) -> str:
    word = value.strip().strip('"').lower()
    return {"5": "vanilla", "vanilla": "vanilla", "9": "grid", "grid": "grid"}.get(word, word)


def _split_ads(text: str) -> list[str]:
    """The top-level ``[ ... ]`` ClassAds of an old-syntax JOB_ROUTER_ENTRIES value, each without
    its brackets; strings and ``/* */`` or ``//`` comments are respected.  ValueError for text
    that is not a list of ads."""
    ads: list[str] = []
    depth = 0
    start = 0
    index = 0
    in_string = False
    while index < len(text):
        char = text[index]
        if in_string:
            if char == "\\":
                index += 1
            elif char == '"':
                in_string = False
        elif text.startswith("/*", index):
            close = text.find("*/", index + 2)
            if close < 0:
                raise ValueError("a /* comment is not closed")
            index = close + 1
        elif text.startswith("//", index):
            close = text.find("\n", index)
            index = len(text) if close < 0 else close
        elif depth == 0:
            if char == "[":
                depth, start = 1, index + 1
            elif not (char.isspace() or char in ",{}"):
                raise ValueError(f"text between route ads: {one_line(text[index:index + 30], 30)!r}")
        elif char == '"':
            in_string = True
        elif char in "[({":
            depth += 1
        elif char in "])}":
            depth -= 1
            if depth == 0:
                ads.append(text[start:index])
        index += 1
    if in_string or depth:
        raise ValueError("a route ad is not closed")
    return ads


def _ad_attributes(body: str) -> dict[str, str]:
    """``attr = expr`` statements of one ClassAd body, attribute names in lower case."""
    attrs: dict[str, str] = {}
    depth = 0
    in_string = False
    statement: list[str] = []
    index = 0

    def close() -> None:
        text = "".join(statement).strip()
        statement.clear()
        name, sep, expr = text.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name.strip()):
            attrs[name.strip().lower()] = expr.strip()

    while index < len(body):
        char = body[index]
        if in_string:
            if char == "\\" and index + 1 < len(body):
                statement.append(char)
                index += 1
                char = body[index]
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif body.startswith("/*", index):
            end = body.find("*/", index + 2)
            index = len(body) if end < 0 else end + 2
            continue
        elif body.startswith("//", index):
            end = body.find("\n", index)
            index = len(body) if end < 0 else end
            continue
        elif char in "[({":
            depth += 1
        elif char in "])}":
            depth -= 1
        elif char == ";" and depth == 0:
            close()
            index += 1
            continue
        statement.append(char)
        index += 1
    close()
    return attrs


# Old-syntax attributes that name the batch queue, the first one set wins: the route sets the job's
# remote_queue (BLAH's queue) directly, or one of the job attributes HTCondor-CE's defaults copy into it
# (OSG's documented routes write ``queue = "osg"``).
_CLASSAD_QUEUE_ATTRS = ("set_remote_queue", "set_batch_queue", "set_default_queue", "default_queue", "queue")


def classad_routes(entries: str) -> list[Route]:
    """The routes of an old-syntax ``JOB_ROUTER_ENTRIES`` value, in order; an ad without a
    ``name`` is named ``route<N>`` as HTCondor's tools show it.  ValueError for text that is not
    a list of ClassAds."""
    routes = []
    for number, body in enumerate(_split_ads(entries), 1):
        attrs = _ad_attributes(body)
        name = _literal(attrs.get("name", "")) or f"route{number}"
        queue = next((q for q in (_literal(attrs[a]) for a in _CLASSAD_QUEUE_ATTRS if a in attrs) if q), "")
        routes.append(Route(name=name, universe=_universe(attrs.get("targetuniverse", "")),
                            grid_resource=_literal(attrs.get("gridresource", "")) or "", queue=queue))
    return routes


def _logical_lines(text: str) -> list[str]:
    """Lines of a transform with ``\\``-continued lines joined."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def transform_route(name: str, body: str) -> Route:
    """What a ``JOB_ROUTER_ROUTE_<name>`` in ClassAd transform syntax says: ``UNIVERSE``,
    ``TargetUniverse =``, ``GridResource =`` (or ``SET GridResource``), the ``default_queue``
    variable or a ``SET BatchQueue``.  Only statements outside ``if`` blocks count."""
    universe = grid = macro_queue = set_queue = ""
    depth = 0
    conditional = False
    for line in _logical_lines(body):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        word, _, rest = text.partition(" ")
        keyword = word.lower()
        if keyword == "if":
            depth += 1
            continue
        if keyword == "endif":
            depth = max(0, depth - 1)
            continue
        if keyword in ("elif", "else"):
            continue
        inner = depth > 0
        rest = rest.strip()
        if keyword == "universe":
            conditional |= inner
            universe = universe if inner else _universe(rest)
            continue
        if keyword in ("set", "default", "evalset"):
            attr, _, value = rest.partition(" ")
            value = value.strip()
            value = value[1:].strip() if value.startswith("=") else value
            if attr.lower() == "gridresource":
                conditional |= inner
                grid = grid if inner else (_literal(value) or grid)
            elif attr.lower() in ("batchqueue", "remote_queue") and not inner:
                set_queue = _literal(value) or set_queue
            continue
        macro = re.match(r"([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*)$", text)
        if macro:
            key, value = macro.group(1).lower(), macro.group(2).strip()
            if key == "targetuniverse":
                conditional |= inner
                universe = universe if inner else _universe(value)
            elif key == "gridresource":
                conditional |= inner
                grid = grid if inner else (_literal(value) or value.strip('"'))
            elif key == "default_queue" and not inner:
                macro_queue = value.strip('"')
    return Route(name=name, universe=universe, grid_resource=grid, queue=set_queue or macro_queue,
                 conditional=conditional)


def _is_true(value: str) -> bool:
    return value.strip().strip('"').lower() in ("true", "yes", "1", "on")


def routes_of(params: Mapping[str, str]) -> list[Route]:
    """The enabled routes, in the Job Router's order (module docstring).  ValueError for an
    old-syntax JOB_ROUTER_ENTRIES that cannot be read."""
    use_entries = _is_true(params.get("JOB_ROUTER_USE_DEPRECATED_ROUTER_ENTRIES", ""))
    entries = classad_routes(params["JOB_ROUTER_ENTRIES"]) if use_entries and params.get("JOB_ROUTER_ENTRIES") else []
    by_name = {route.name.lower(): route for route in entries}
    names = [n for n in re.split(r"[\s,]+", params.get("JOB_ROUTER_ROUTE_NAMES", "")) if n and n.upper() != "NAMES"]
    if not names:
        return entries
    routes = []
    for name in names:
        body = params.get(f"JOB_ROUTER_ROUTE_{name.upper()}")
        if body is not None and body.strip():
            routes.append(transform_route(name, body))
        elif name.lower() in by_name:
            routes.append(by_name[name.lower()])
    return routes


# -- routes to CEs -------------------------------------------------------------------

def _port(params: Mapping[str, str]) -> int:
    collector = params.get("COLLECTOR_HOST", "").split(",")[0].strip()
    candidates = [collector.rpartition(":")[2] if ":" in collector else "",
                  params.get("COLLECTOR_PORT", ""), params.get("SHARED_PORT_PORT", "")]
    for candidate in candidates:
        if candidate.strip().isdigit() and 0 < int(candidate) < 65536:
            return int(candidate)
    return DEFAULT_PORT


def found_ces(machine: str, params: Mapping[str, str], local_fqdn: str, warn: Any) -> list[FoundCE]:
    """One FoundCE per route that feeds a batch system glueinfo can ask; a warning for each other."""
    host = params.get("NETWORK_HOSTNAME") or params.get("FULL_HOSTNAME") or machine or local_fqdn
    port = _port(params)
    version = params.get("HTCONDORCEVERSION", "").strip().strip('"')
    vos = [vo for vo in re.split(r"[\s,]+", params.get("HTCONDORCE_VONAMES", "")) if vo]
    schedd = params.get("JOB_ROUTER_SCHEDD2_NAME", "").strip().strip('"')
    common: dict[str, Any] = {"host": host, "port": port, "jobmanager": JOBMANAGER, "implementation_name": IMPLEMENTATION}
    if version:
        common["implementation_version"] = version
    if vos:
        common["access"] = [f"VO:{vo}" for vo in vos]
    found = []
    for route in routes_of(params):
        origin = f"HTCondor-CE route {route.name}"
        if route.conditional:
            warn(f"{origin}: its universe or GridResource is set inside an if block; not published "
                 f"(declare it as [ce:{route.name}] with its lrms and queue)")
            continue
        universe = route.universe or ("grid" if route.grid_resource else "")
        values = dict(common)
        default_of = ""
        if universe == "vanilla":
            values.update(lrms="htcondor", queue=route.queue or schedd or ALL_SCHEDDS)
        elif universe == "grid":
            words = route.grid_resource.split()
            lrms = BLAH_LRMS.get(words[1].lower()) if len(words) > 1 and words[0].lower() == "batch" else None
            if lrms is None:
                warn(f"{origin}: GridResource {route.grid_resource or '(none)'!r} is not a local batch system "
                     f"(batch slurm, pbs, sge, lsf or condor); not published")
                continue
            values["lrms"] = lrms
            if route.queue:
                values["queue"] = route.queue
            elif lrms == "htcondor":
                values["queue"] = ALL_SCHEDDS
            else:
                default_of = lrms
        else:
            warn(f"{origin}: universe {route.universe or '(not set)'!r} feeds no batch system glueinfo reads; "
                 f"not published")
            continue
        found.append(FoundCE(name=route.name, origin=origin, values=values, default_queue_of=default_of))
    return found


def discover(look: Look) -> list[FoundCE]:
    """The CEs of the HTCondor-CE on this host, or [] (with one warning when it could not be
    asked or read).  Never raises."""
    settings = look.settings
    if not condor_ce_installed(settings.condor_ce_bin_dir):
        return []
    from glueinfo.lrms.commands import Tools, environment, subprocess_runner  # the bounded runner: only when there is a CE to ask

    run = look.run or subprocess_runner  # bounded in time, bytes and processes (glueinfo.lrms.commands)
    # The CE's own configuration, not this process's: HTCondor reads _CONDOR_* variables as config settings
    # (a daemon set up for the local pool would change COLLECTOR_HOST), and the tool sets CONDOR_CONFIG itself.
    env = environment(("_CONDOR_", "_condor_"), ("CONDOR_CONFIG",))
    tools = Tools(bin_dir=settings.condor_ce_bin_dir, env=env, deadline=look.deadline, run=run)
    try:
        out = tools(CONFIG_VAL, "-dump", "-expanded", PATTERN)
    except LrmsQueryError as exc:
        look.warn(f"HTCondor-CE discovery: {exc}; no HTCondor-CE CE published ([discovery] timeout, condor_ce_bin_dir)")
        return []
    try:
        machine, params = parse_dump(out)
        found = found_ces(machine, params, look.local_fqdn, look.warn)
    except ValueError as exc:
        look.warn(f"HTCondor-CE discovery: {CONFIG_VAL} -dump: {one_line(exc, 200)}; no HTCondor-CE CE published")
        return []
    if not found and not routes_of(params):
        look.warn("HTCondor-CE discovery: the CE has no job route (JOB_ROUTER_ROUTE_NAMES, JOB_ROUTER_ENTRIES); "
                  "no HTCondor-CE CE published")
    return found
