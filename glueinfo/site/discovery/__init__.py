"""CEs found on this host, not declared: HTCondor-CE's routes and ARC-CE's queues.

:func:`ce_sections` is what the site model reads instead of the config's
``[ce:NAME]`` sections alone (glueinfo.site.from_config): the declared
sections, with every CE the ``[discovery]`` finders find on this host merged
in.  Each found CE is the ``[ce:NAME]`` section an admin would have written
for it (host, port, LRMS, queue, implementation name and version, endpoint);
a declared ``[ce:NAME]`` for the same CE overrides it key by key: the keys the
admin wrote win, the others keep what was found.  A declared section is the
same CE when its NAME is the found CE's name (the route or ARC queue name,
case ignored), else when it writes the ``queue`` that one found CE, and only
that one, has.  Declared sections that match nothing stay as they are;
found CEs that match nothing are added after them.

Discovery costs nothing where there is nothing to find: HTCondor-CE is asked
only when ``condor_ce_config_val`` is in ``[discovery] condor_ce_bin_dir``
(else on PATH), ARC-CE only when ``[discovery] arc_conf`` exists.  It is
bounded by ``[discovery] timeout`` for all its commands together, runs when
the site model is built (a command's start, a daemon's start and SIGHUP),
and never fails the site: what cannot be found or read is one WARNING line
naming the key that would set it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from glueinfo.core.config import Config
from glueinfo.site.discovery.found import ARC, HTCONDOR_CE, DiscoverySettings, FoundCE, Look, Runner, worth_a_look

log = logging.getLogger(__name__)


def finder(name: str) -> Optional[Callable[[Look], list[FoundCE]]]:
    """The ``discover`` function of the finder called ``name`` (None: no such finder).  Its module
    is imported here, when asked for: a host with no CE to find never loads the finders."""
    if name == HTCONDOR_CE:
        from glueinfo.site.discovery import htcondor_ce

        return htcondor_ce.discover
    if name == ARC:
        from glueinfo.site.discovery import arc

        return arc.discover
    return None


def discover(settings: DiscoverySettings, local_fqdn: str, warn: Callable[[str], None] = log.warning,
             run: Optional[Runner] = None) -> tuple[list[FoundCE], Look]:
    """Every CE the enabled finders find, in finder order, and the discovery's context."""
    look = Look.start(settings, local_fqdn, warn, run)
    found: list[FoundCE] = []
    for name in settings.enabled:
        discover_with = finder(name) if worth_a_look(name, settings) else None
        if discover_with is not None:
            found.extend(discover_with(look))
    return found, look


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 1
    while candidate.lower() in taken:
        number += 1
        candidate = f"{name}-{number}"
    taken.add(candidate.lower())
    return candidate


def _cluster_for_found(config: Config, written: Mapping[str, Any]) -> tuple[Optional[str], str]:
    """(the [cluster:NAME] a found CE belongs to, or None for the site model's own rule; "" or why
    it cannot be told).  With several clusters, a found CE belongs to the one that covers every host
    no other names (it runs on this head node's batch system), unless [ce:NAME] cluster says."""
    if written.get("cluster"):
        return None, ""
    clusters = config.sections("cluster")
    if len(clusters) <= 1:
        return None, ""
    catch_all = [name for name, raw in clusters.items() if not raw["hosts"]]
    if len(catch_all) == 1:
        return catch_all[0], ""
    return None, "there are several [cluster:NAME] sections and none covers every host"


def merge(config: Config, declared: Mapping[str, dict[str, Any]], found: Sequence[FoundCE], look: Look) -> dict[str, dict[str, Any]]:
    """Declared ``[ce:NAME]`` sections and found CEs as one NAME -> section mapping (module docstring)."""
    defaults = config.section("ce:*")
    written = {name: dict(config.values.get(f"ce:{name}", {})) for name in declared}
    by_name = {name.lower(): name for name in declared}
    bases = [{**defaults, **ce.values} for ce in found]
    match: dict[int, str] = {}
    for index, ce in enumerate(found):
        name = by_name.get(ce.name.lower())
        if name is not None and name not in match.values():
            match[index] = name

    def resolve_queue(index: int, options: Mapping[str, Any]) -> None:
        ce = found[index]
        if not ce.default_queue_of or (index in match and written[match[index]].get("queue")):
            return
        from glueinfo.site.discovery.default_queue import ask_default_queue  # only for a CE that names no queue

        queue, why = ask_default_queue(ce.default_queue_of, options, look.deadline, look.run)
        if queue:
            bases[index]["queue"] = queue
        else:
            name = match.get(index, ce.name)
            look.warn(f"{ce.origin} sends jobs to {ce.default_queue_of}'s default queue, which could not be read ({why}); "
                      f"published as queue {name}: set [ce:{name}] queue")

    for index in range(len(found)):
        if index not in match:
            resolve_queue(index, bases[index])
    # A declared section writing the queue one found CE (and only one) has is that CE.
    for index in range(len(found)):
        queue = bases[index].get("queue")
        if index in match or not queue or sum(1 for base in bases if base.get("queue") == queue) != 1:
            continue
        same = [n for n in declared if written[n].get("queue") == queue and n not in match.values()]
        if len(same) == 1:
            match[index] = same[0]
    for index, name in match.items():
        resolve_queue(index, {**bases[index], **written[name]})

    result: dict[str, dict[str, Any]] = {}
    by_declared = {name: index for index, name in match.items()}
    taken = {name.lower() for name in declared}
    # Routes that feed the same queue of the same batch system are one CE (GLUE publishes queues).
    published: dict[tuple[str, int, str, str], str] = {}

    def key(section: Mapping[str, Any], name: str) -> tuple[str, int, str, str]:
        return (str(section.get("host") or look.local_fqdn).lower(), int(section.get("port") or 0),
                str(section.get("lrms") or ""), str(section.get("queue") or name))

    for name, raw in declared.items():
        if name in by_declared:
            index = by_declared[name]
            cluster, _ = _cluster_for_found(config, written[name])
            section = {**bases[index], **written[name]}
            if cluster:
                section["cluster"] = cluster
            published.setdefault(key(section, name), name)
            result[name] = section
        else:
            result[name] = raw
    for index, ce in enumerate(found):
        if index in match:
            continue
        twin = published.get(key(bases[index], ce.name))
        if twin is not None:
            log.info("%s feeds the same queue as [ce:%s]: published once, as [ce:%s]", ce.origin, twin, twin)
            continue
        cluster, why = _cluster_for_found(config, {})
        if why:
            look.warn(f"{ce.origin}: {why}; not published: declare [ce:{ce.name}] cluster = NAME")
            continue
        section = dict(bases[index])
        if cluster:
            section["cluster"] = cluster
        name = _unique(ce.name, taken)
        published[key(section, name)] = name
        result[name] = section
    return result


def ce_sections(config: Config, local_fqdn: str, *, run: Optional[Runner] = None,
                warn: Callable[[str], None] = log.warning) -> dict[str, dict[str, Any]]:
    """The ``[ce:NAME]`` sections the site model builds its CEs from: the declared ones, with the
    CEs found on this host merged in (module docstring).  ``run`` replaces the bounded subprocess
    runner (tests); ``warn`` receives each one-line warning.  Never raises for what it finds."""
    declared = config.sections("ce")
    settings = DiscoverySettings.from_section(config.section("discovery"))
    if not settings.enabled:
        return declared
    started = time.monotonic()
    found, look = discover(settings, local_fqdn, warn, run)
    if not found:
        return declared
    sections = merge(config, declared, found, look)
    log.debug("discovery: %d CE(s) found in %.3f s", len(found), time.monotonic() - started)
    return sections
