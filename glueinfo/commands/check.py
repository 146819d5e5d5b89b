"""`glueinfo check`: a Nagios-compatible probe of a running glueinfo (Icinga, Nagios, ARGO).

Exit codes as every Nagios plugin: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN
(glueinfo cannot be asked, bad options or config).  One status line on
stdout whatever happens, the worst problems first, then ``|`` and
performance data ``label=value[UOM];warn;crit;min;max``: an unknown option,
a bad threshold or a config file that cannot be read is
``GLUEINFO UNKNOWN - why`` on stdout, exit 3 (glueinfo.cli hands those to
:func:`report_usage_error`), never an empty output Nagios would show as
"(No output)".

What is checked, each against thresholds from options:

- the age of the LDIF and Node XML files ``glueinfo run`` writes (their
  modification time: rewritten, or marked fresh, at every publication),
  against the shortest interval of run's jobs: WARNING past 3 intervals,
  CRITICAL past 10 by default;
- the last publication's result (CRITICAL when it failed) and the entries
  the LDAP server rejected;
- hosts stale or Unknown, as a count or a percentage of the hosts;
- CEs whose batch system did not answer, and sources' targets that could
  not be read; a CE whose queue its batch system does not have (a mistyped
  ``queue``: published Closed, without counts) is CRITICAL whatever the
  thresholds;
- with ``--bdii URL``: what a BDII (or any LDAP server) serves against the
  LDIF glueinfo last published, in every tree that LDIF has (o=grid and
  o=glue, each searched from the entry its top entries hang from, so no
  config is needed: a monitoring host gives ``--url`` and ``--bdii``):
  entries missing there (which BDII drops with only a line in its own log),
  and a sample of entries whose static values differ.  The attributes that
  change on their own between publications (loads, free memory and space,
  job and slot counts, states, creation times: glueinfo.glue.volatile) are
  never compared, so a BDII one cycle behind is not a WARNING.

Where: ``--url`` names a ``glueinfo serve`` (or ``run`` with ``[run] serve``),
whose /health and /ldif are read; without it the config is read: the files
of ``[run] ldif_file`` and ``node_xml_file`` directly, and /health on
``[serve] listen`` when ``[run] serve`` is on.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.config import Config
from glueinfo.core.errors import UpstreamError

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
WORDS = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
USAGE_EXIT = UNKNOWN  # bad options or config: Nagios's UNKNOWN, not CRITICAL (glueinfo.cli reads it)



def status_line(state: int, text: str) -> str:
    """``GLUEINFO STATE - text``, the text on one line."""
    return f"GLUEINFO {WORDS[state]} - {' '.join(text.split())}"


def report_usage_error(message: str) -> None:
    """A usage or configuration error (an unknown option, a bad threshold, a config file that
    cannot be read), answered as a probe must: the UNKNOWN status line on stdout (glueinfo.cli
    calls this, then exits USAGE_EXIT)."""
    print(status_line(UNKNOWN, message), flush=True)


class CheckError(UpstreamError):
    """What is checked cannot be asked or read (an error status, not glueinfo's JSON, an unreadable
    published LDIF, nothing to check): the probe's answer is UNKNOWN; the message is the status line."""


class Unreachable(CheckError):
    """glueinfo (or the BDII) does not answer at all: CRITICAL, as for any service down."""


@dataclass(frozen=True)
class Threshold:
    """``N`` (a count) or ``N%`` (of a total); reached when the value is at least it."""

    value: float
    percent: bool = False

    @classmethod
    def parse(cls, text: str) -> Threshold:
        raw = text.strip()
        percent = raw.endswith("%")
        try:
            value = float(raw[:-1] if percent else raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number, or a percentage such as 10%") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text!r}: must not be negative")
        return cls(value, percent)

    def limit(self, total: Optional[float]) -> Optional[float]:
        if not self.percent:
            return self.value
        return None if not total else self.value * total / 100.0

    def reached(self, value: float, total: Optional[float] = None) -> bool:
        limit = self.limit(total)
        return limit is not None and value >= limit and (value > 0 or limit > 0)


@dataclass
class Result:
    """The problems found (state, text) and the performance data."""

    problems: list[tuple[int, str]] = field(default_factory=list)
    perf: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def measure(self, label: str, value: float, unit: str = "", warn: Optional[float] = None,
                crit: Optional[float] = None, minimum: Optional[float] = 0, maximum: Optional[float] = None) -> None:
        def fmt(v: Optional[float]) -> str:
            return "" if v is None else (f"{v:.0f}" if float(v).is_integer() else f"{v:.3f}")

        self.perf.append(f"{label}={fmt(value)}{unit};{fmt(warn)};{fmt(crit)};{fmt(minimum)};{fmt(maximum)}")

    def judge(self, value: float, warn: Optional[Threshold], crit: Optional[Threshold], text: str,
              total: Optional[float] = None) -> None:
        if crit is not None and crit.reached(value, total):
            self.problems.append((CRITICAL, text))
        elif warn is not None and warn.reached(value, total):
            self.problems.append((WARNING, text))

    def line(self) -> tuple[int, str]:
        state = max((s for s, _ in self.problems), default=OK)
        shown = [t for s, t in sorted(self.problems, key=lambda p: -p[0])] or self.notes
        text = "; ".join(shown) or "nothing to report"
        return state, f"GLUEINFO {WORDS[state]} - {text}" + (f" | {' '.join(self.perf)}" if self.perf else "")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", metavar="URL", help="a running glueinfo serve (or run with [run] serve), e.g. "
                                                       "http://head.example.org:7170/ (default: this host's config)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="per request (default 10)")
    parser.add_argument("--age-warning", type=float, metavar="SECONDS",
                        help="LDIF and Node XML files older than this: WARNING (default 3 times run's shortest interval)")
    parser.add_argument("--age-critical", type=float, metavar="SECONDS",
                        help="older than this: CRITICAL (default 10 times run's shortest interval)")
    for name, what, warn, crit in (
            ("stale", "hosts stale or Unknown", "1", "50%"),
            ("rejected", "entries the LDAP server rejected at the last synchronisation", "1", "100"),
            ("lrms", "CEs whose batch system did not answer", "1", "100%"),
            ("source", "sources' targets that could not be read", "1", "50%"),
            ("missing", "with --bdii: entries glueinfo published that the BDII does not serve", "1", "5%"),
            ("differing", "with --bdii: sampled entries whose values differ", "1", "50%")):
        parser.add_argument(f"--{name}-warning", type=Threshold.parse, default=Threshold.parse(warn), metavar="N[%]",
                            help=f"{what}: WARNING from N (or N%% of them) on (default {warn.replace('%', '%%')})")
        parser.add_argument(f"--{name}-critical", type=Threshold.parse, default=Threshold.parse(crit), metavar="N[%]",
                            help=f"CRITICAL from (default {crit.replace('%', '%%')})")
    parser.add_argument("--bdii", metavar="URL", help="compare what this BDII / LDAP server serves (ldap://host:2170) "
                                                       "with the LDIF glueinfo last published")
    parser.add_argument("--bdii-base", metavar="DN", help="where to search on the BDII (default: where the published "
                                                          "trees hang from, e.g. mds-vo-name=resource,o=grid and "
                                                          "GLUE2GroupID=resource,o=glue)")
    parser.add_argument("--sample", type=int, default=20, metavar="N", help="entries whose values are compared (default 20)")


def run(args: argparse.Namespace, config: Config) -> int:
    try:
        state, line = probe(args, config)
    except CheckError as exc:
        state, line = UNKNOWN, status_line(UNKNOWN, str(exc))
    except Exception as exc:  # a probe must always answer with a status line
        state, line = UNKNOWN, status_line(UNKNOWN, f"{type(exc).__name__}: {config.located(str(exc))}")
    print(line, flush=True)
    return state


def _get(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 - the admin's own URL
            return bytes(answer.read())
    except urllib.error.HTTPError as exc:
        raise CheckError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise Unreachable(f"{url}: cannot connect: {reason}") from None


def _base(url: str) -> str:
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/")


def local_url(config: Config) -> Optional[str]:
    """This host's serve when ``[run] serve`` is on (None otherwise)."""
    if not config.get("run", "serve"):
        return None
    from glueinfo.run.http import parse_listen

    try:
        host, port = parse_listen(config.get("serve", "listen"))
    except ValueError as exc:
        raise CheckError(config.located(f"[serve] listen: {exc}")) from None
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def run_interval(config: Config) -> float:
    """The shortest interval of the jobs ``glueinfo run`` runs with this config (each publishes)."""
    section = config.section("run")
    enabled = [str(name) for name in config.get("sources", "enabled")]
    intervals = [float(section["lrms_interval"])]
    if "local" in enabled:
        intervals.append(float(section["fast_interval"]))
    if any(name != "local" for name in enabled):
        intervals.append(float(section["gather_interval"]))
    return min(intervals)


def probe(args: argparse.Namespace, config: Config) -> tuple[int, str]:
    result = Result()
    now = time.time()
    url = _base(args.url) if args.url else local_url(config)
    health: Optional[dict[str, Any]] = None
    if url is not None:
        try:
            health = json.loads(_get(f"{url}/health", args.timeout))
        except Unreachable as exc:
            result.problems.append((CRITICAL, f"glueinfo not answering: {exc}"))
            health = None
        except ValueError:
            raise CheckError(f"{url}/health: not JSON: is this glueinfo serve?") from None
        if health is not None and (not isinstance(health, dict) or not isinstance(health.get("monitor"), dict)):
            raise CheckError(f"{url}/health: no monitoring figures: is this a glueinfo serve of version 0.1 or later?")
    monitor: dict[str, Any] = health["monitor"] if health is not None else {}

    # -- the output files -----------------------------------------------------------------
    outputs = monitor.get("outputs") or []
    if not args.url:  # the files themselves, as this host's config names them
        interval = run_interval(config)
        outputs = []
        for kind in ("ldif", "node_xml"):
            path = config.get("run", f"{kind}_file")
            if path:
                try:
                    age: Optional[float] = max(0.0, now - os.stat(path).st_mtime)
                except OSError:
                    age = None
                outputs.append({"kind": kind, "path": path, "age_s": age, "interval_s": interval, "error": None})
    for output in outputs:
        name = "LDIF" if output["kind"] == "ldif" else "Node XML"
        interval = output.get("interval_s") or 60.0
        warn = args.age_warning if args.age_warning is not None else 3 * interval
        crit = args.age_critical if args.age_critical is not None else 10 * interval
        age = output.get("age_s")
        if age is None:
            result.problems.append((CRITICAL, f"{name} {output['path']} missing"))
            continue
        result.measure(f"{output['kind']}_age", age, "s", warn, crit)
        if age > crit:
            result.problems.append((CRITICAL, f"{name} {age:.0f} s old (critical {crit:g} s)"))
        elif age > warn:
            result.problems.append((WARNING, f"{name} {age:.0f} s old (warning {warn:g} s)"))
        if output.get("error"):
            result.problems.append((CRITICAL, f"{name} not written: {output['error']}"))
        result.notes.append(f"{name} {age:.0f} s old")
    if health is None and not outputs and not result.problems:
        raise CheckError("nothing to check: no --url, [run] serve is off and [run] ldif_file/node_xml_file are not set")

    # -- what the running glueinfo says ------------------------------------------------------
    if health is not None:
        hosts = monitor.get("hosts") or {}
        total = int(hosts.get("total") or 0)
        stale, unknown = int(hosts.get("stale") or 0), int(hosts.get("unknown") or 0)
        bad = max(stale, unknown)
        result.measure("hosts", total)
        result.measure("hosts_stale", stale, "", args.stale_warning.limit(total), args.stale_critical.limit(total), 0, total)
        result.measure("hosts_unknown", unknown, "", None, None, 0, total)
        result.judge(bad, args.stale_warning, args.stale_critical, f"{bad} of {total} hosts stale or Unknown", total)
        result.notes.append(f"{total} hosts, {bad} stale or Unknown")

        publish = monitor.get("publish")
        if isinstance(publish, dict):
            if publish.get("ok") is False:
                result.problems.append((CRITICAL, f"last publication failed: {publish.get('error')}"))
            if publish.get("entries") is not None:
                result.measure("entries", int(publish["entries"]))
                result.notes.append(f"{publish['entries']} entries")
            if publish.get("ldap_state") is not None:
                rejected = int(publish.get("rejected") or 0)
                result.measure("ldap_rejected", rejected, "", args.rejected_warning.limit(None), args.rejected_critical.limit(None))
                dns = publish.get("rejected_dns") or []
                result.judge(rejected, args.rejected_warning, args.rejected_critical,
                             f"LDAP rejected {rejected} entries" + (f" (first: {dns[0]})" if dns else ""))
                if publish.get("ldap_state") == "waiting":
                    result.problems.append((CRITICAL, "LDAP server not answering (retrying)"))

        ces = monitor.get("ces") or []
        missing = [ce for ce in ces if ce.get("queue_missing")]
        if missing:  # not a batch system down but a CE that cannot serve: no threshold makes it fine
            result.problems.append((CRITICAL, f"{len(missing)} CE{'s' if len(missing) > 1 else ''} on a queue the batch "
                                              f"system does not have ({missing[0].get('id')}: {missing[0].get('error')})"))
        failing = [ce for ce in ces if ce.get("error") and not ce.get("queue_missing")]
        result.measure("lrms_failed", len(failing), "", args.lrms_warning.limit(len(ces)), args.lrms_critical.limit(len(ces)),
                       0, len(ces))
        if failing:
            result.judge(len(failing), args.lrms_warning, args.lrms_critical,
                         f"{len(failing)} of {len(ces)} CEs without LRMS answer ({failing[0].get('id')}: {failing[0].get('error')})",
                         len(ces))

        sources = monitor.get("sources") or []
        targets = sum(int(s.get("failed_targets") or 0) for s in sources)
        read = sum(int(s.get("snapshots") or 0) for s in sources) + targets
        result.measure("source_failed_targets", targets, "", args.source_warning.limit(read), args.source_critical.limit(read))
        broken = [s for s in sources if s.get("ok") is False]
        if broken:
            first = broken[0]
            result.judge(max(targets, 1), args.source_warning, args.source_critical,
                         f"source {first.get('name')}: {first.get('error')}", read or None)
        failed_collectors = [c for c in monitor.get("collectors") or [] if c.get("ok") is False]
        if failed_collectors:
            first = failed_collectors[0]
            result.problems.append((WARNING, f"collector {first.get('name')} failed: {first.get('error')}"))

    if args.bdii:
        try:
            compare_bdii(args, config, url, result)
        except Unreachable as exc:
            result.problems.append((CRITICAL, str(exc)))
    return result.line()


# -- BDII ----------------------------------------------------------------------------------------


def published_ldif(args: argparse.Namespace, config: Config, url: Optional[str]) -> str:
    """The LDIF glueinfo last published: the file [run] ldif_file, else /ldif of the server."""
    path = None if args.url else config.get("run", "ldif_file")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CheckError(f"{path}: cannot read the published LDIF: {getattr(exc, 'strerror', None) or exc}") from None
    if url is None:
        raise CheckError("--bdii needs the published LDIF: give --url, or set [run] ldif_file")
    return _get(f"{url}/ldif", args.timeout).decode("utf-8", "replace")


def tree_bases(dns: Iterable[str]) -> list[str]:
    """Where the trees of these (normalised) DNs hang from: the parent of each top entry (one whose
    parent is not among them), or the entry itself when it has no parent; none below another."""
    from glueinfo.core.ldif import parent_dn

    ours = set(dns)
    bases = set()
    for dn in ours:
        parent = parent_dn(dn)
        if parent not in ours:
            bases.add(parent or dn)
    return sorted(base for base in bases if not any(base.endswith("," + other) for other in bases))


def bdii_entries(url: str, base: str, timeout: float) -> dict[str, dict[str, set[str]]]:
    """Every entry under ``base`` on the LDAP server: normalised DN -> attribute (lower case) -> values.
    A base the server does not have gives none."""
    import ldap3
    from ldap3.core.exceptions import LDAPException

    from glueinfo.core.ldif import normalise_dn

    seconds = max(1, int(timeout))  # ldap3 takes whole seconds
    try:
        server = ldap3.Server(url, connect_timeout=seconds)
        with ldap3.Connection(server, auto_bind=True, receive_timeout=seconds, read_only=True) as connection:
            found = connection.extend.standard.paged_search(base, "(objectClass=*)", ldap3.SUBTREE, attributes=["*"],
                                                            paged_size=1000, generator=False)
    except LDAPException as exc:
        raise Unreachable(f"BDII {url}: {type(exc).__name__}: {exc}") from None
    entries: dict[str, dict[str, set[str]]] = {}
    for item in found or []:
        if item.get("type") != "searchResEntry":
            continue
        raw = item.get("raw_attributes") or {}
        entries[normalise_dn(item["dn"])] = {
            name.lower(): {v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values}
            for name, values in raw.items()}
    return entries


def compare_bdii(args: argparse.Namespace, config: Config, url: Optional[str], result: Result) -> None:
    """Entries of the published LDIF the BDII lacks, and sampled entries whose static values differ
    (module docstring), into ``result``; Unreachable when the BDII does not answer."""
    from glueinfo.core.ldif import LDIFError, normalise_dn, parse_ldif
    from glueinfo.glue.volatile import is_volatile

    try:
        ours = {normalise_dn(e.dn): e for e in parse_ldif(published_ldif(args, config, url))}
    except LDIFError as exc:
        raise CheckError(f"the published LDIF cannot be read: {exc}") from None
    if not ours:
        raise CheckError("the published LDIF has no entries to compare with the BDII")
    bases = [args.bdii_base] if args.bdii_base else tree_bases(ours)
    served: dict[str, dict[str, set[str]]] = {}
    for base in bases:
        served.update(bdii_entries(args.bdii, base, args.timeout))
    missing = sorted(dn for dn in ours if dn not in served)
    total = len(ours)
    result.measure("bdii_entries", len(served))
    result.measure("bdii_missing", len(missing), "", args.missing_warning.limit(total), args.missing_critical.limit(total),
                   0, total)
    if missing:
        result.judge(len(missing), args.missing_warning, args.missing_critical,
                     f"BDII lacks {len(missing)} of {total} published entries (first: {ours[missing[0]].dn})", total)
    present = sorted(dn for dn in ours if dn in served)
    step = max(1, len(present) // max(1, args.sample))
    sample = present[::step][: max(0, args.sample)]
    differing: list[str] = []
    for dn in sample:
        theirs = served[dn]
        for name, values in ours[dn].attributes.items():
            if is_volatile(name):
                continue
            if {str(v) for v in values} != theirs.get(name.lower(), set()):
                differing.append(f"{ours[dn].dn} {name}")
                break
    result.measure("bdii_differing", len(differing), "", args.differing_warning.limit(len(sample)),
                   args.differing_critical.limit(len(sample)), 0, len(sample))
    if differing:
        result.judge(len(differing), args.differing_warning, args.differing_critical,
                     f"BDII values differ in {len(differing)} of {len(sample)} sampled entries (first: {differing[0]})",
                     len(sample))
    result.notes.append(f"BDII serves {len(served)} entries, {len(missing)} of {total} missing")
