"""Source ``node_exporter``: pull ``/metrics`` straight from node_exporter on every worker.

For sites without a Prometheus server.  Targets are listed in ``[sources]
node_exporters`` and/or ``node_exporters_file`` exactly as agents are (names,
ranges, ``ADDRESS=NAME``); a target written without a port uses
``node_exporter_port`` (9100).  The pulls are the agents' (glueinfo.gather.pull):
at most ``pool_size`` in flight, ``timeout`` seconds each, retries included,
``retries`` and ``retry_backoff``, a body capped at ``max_body``, the whole
source stopping at the gather deadline.

Each pull asks node_exporter only for the collectors the mapping reads
(``collect[]=cpu&collect[]=meminfo&...``, glueinfo.gather.sources._node_metrics.COLLECTORS):
a full page of a many-core worker is thousands of lines.  The page is parsed
with prometheus_client's parser after the lines of families the mapping does
not read (Go runtime, process, scrape statistics) are cut out, and mapped by
glueinfo.gather.sources._node_metrics, the same mapping the ``prometheus`` source uses.
Of the per-CPU families (one line per CPU), the parser reads each family's first
line; the plain lines after it are read beside it (:func:`split_page`: the same
samples the parser would give, hostile pages included), which is 2/3 of the
parser's time on a 64-thread worker.
A page that is not the exposition format, or has none of the families read,
is a failure of that target; its host keeps its last good snapshot.

Identity (``node_exporter_identity``):

- ``target`` (default): the host is the target's listed name, the name written
  beside its address, else the address's reverse DNS name; node_exporter's
  ``nodename`` is not read (containers and test rigs report the machine's).
  An address nothing names takes the nodename it first reports, pinned to that
  address as the agents source pins Node Ids (refused if that name is another
  target's or a host other sources know).
- ``nodename``: the host is ``node_uname_info``'s nodename, which must be the
  target's listed name (short or full form, or a ``[sources] aliases`` alias)
  when the target has one; a nodename naming another target's host is refused.

The snapshot's time is when the page was received (node_exporter reads the
kernel at that moment).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Optional, Union

from glueinfo.core.errors import InputError
from glueinfo.core.model import HostSnapshot
from glueinfo.core.text import one_line
from glueinfo.gather.identity import Claims, claim_problem
from glueinfo.gather.pull import Answer, Refused, listed_hosts, pull_and_pin
from glueinfo.gather.registry import Source, SourceContext, SourceReport
from glueinfo.gather.sources._node_metrics import COLLECTORS, FAMILIES, NodeFacts

SOURCE_NAME = "node_exporter"
TARGET_KEYS: tuple[str, str, str] = ("node_exporters", "node_exporters_file", "node_exporter_port")
METRICS_PATH = "/metrics?" + "&".join(f"collect%5B%5D={name}" for name in COLLECTORS)


class ExpositionError(InputError, ValueError):
    """A /metrics page that is not the Prometheus text exposition format (one line)."""


def _wanted_lines(text: str) -> Iterable[str]:
    """The page's lines of the families read: comments naming them, and their samples."""
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("TYPE", "HELP") and parts[2] in FAMILIES:
                yield line
            continue
        if not line.startswith(_FAMILY_PREFIXES):  # most lines of a page: one C-level test each
            continue
        name = line.partition(" ")[0].partition("{")[0]  # up to the first "{" or " "
        # Only idle CPU series are counted: the other modes (7 of 8 lines of a big page) go unparsed.
        if name in FAMILIES and (name != "node_cpu_seconds_total" or 'mode="idle"' in line):
            yield line


_FAMILY_PREFIXES = tuple(sorted(FAMILIES))

# The families with one line per CPU (64 lines each on a 64-thread worker; node_cpu_info's are
# long and were 2/3 of the parser's time), with the exact TYPE line node_exporter writes before
# them: under it the parser names every sample of the family by the family (a counter not named
# ``_total`` would get the suffix).
_PER_CPU = {"# TYPE node_cpu_info gauge": "node_cpu_info",
            "# TYPE node_cpu_seconds_total counter": "node_cpu_seconds_total"}
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
# A per-CPU line in the plainest form the exposition format has: labels of legal names with
# values holding no quote or backslash (so no escapes), one space, a plain decimal value, no
# timestamp.  On such a line prometheus_client's parser can only find these labels and value.
_PLAIN_SAMPLE = re.compile(rf"(node_cpu_info|node_cpu_seconds_total)\{{({_LABEL}(?:,{_LABEL})*)\}} "
                           r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)")
_PLAIN_LABELS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')
# A comment that starts another family for the parser (its name token is plain).
_PLAIN_COMMENT = re.compile(r"# (?:HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*)(?: |$)")

Sample = tuple[str, dict[str, str], float]


def _plain_sample(line: str, family: str) -> Optional[Sample]:
    """``line`` as prometheus_client would read it when it is a plain line of ``family``, else None."""
    found = _PLAIN_SAMPLE.fullmatch(line)
    if found is None or found.group(1) != family:
        return None
    pairs = _PLAIN_LABELS.findall(found.group(2))
    labels = dict(pairs)
    if len(labels) != len(pairs) or any(name.startswith("__") for name in labels):
        return None  # the parser refuses a repeated or reserved label name: let it say so
    raw = found.group(3)
    return family, labels, int(raw) if raw.isdigit() else float(raw)  # the parser's int-else-float


def split_page(text: str) -> tuple[str, list[Sample]]:
    """The page cut for parsing: (the text prometheus_client's parser is to read, the samples
    read here instead), together exactly what the parser would give for the page's lines of the
    families read (:func:`_wanted_lines`).

    Why: the per-CPU families are 128 of a 64-thread worker's 218 lines read and ~80 % of the
    parser's time (~12 ms a page).  After node_exporter's ``# TYPE`` line of such a family, the
    parser is given the family's first line; the following lines that are plain
    (:data:`_PLAIN_SAMPLE`) are read here with two regular expressions, when the family then
    ends the way node_exporter ends it (the page, or a comment starting another family; a later
    ``# TYPE`` of the same family would rename what came before).  Anything else (a line with
    escapes, a timestamp, another TYPE, a run that does not end so) goes to the parser as it
    is, so every page, hostile ones included, gives the same samples and the same errors as
    parsing all its lines (tests/unit/gather/test_node_metrics.py holds the two to that)."""
    parsed: list[str] = []
    read: list[Sample] = []
    family: Optional[str] = None  # the per-CPU family whose lines are being read here
    head = False  # its first line has gone to the parser
    pending: list[tuple[str, Sample]] = []
    for line in _wanted_lines(text):
        if family is not None:
            sample = _plain_sample(line, family)
            if sample is not None and not head:
                head = True
                parsed.append(line)
                continue
            if sample is not None:
                pending.append((line, sample))
                continue
            other = _PLAIN_COMMENT.match(line)
            if other is not None and other.group(1) != family:
                read.extend(sample for _, sample in pending)
            else:
                parsed.extend(kept for kept, _ in pending)  # in their place: before this line
            family, pending = None, []
        if line in _PER_CPU:
            family, head = _PER_CPU[line], False
        parsed.append(line)
    read.extend(sample for _, sample in pending)  # the page ends the family
    parsed.append("")
    return "\n".join(parsed), read


def parse_page(body: bytes) -> NodeFacts:
    """A node_exporter /metrics page -> NodeFacts; ExpositionError (one line) when it is not
    UTF-8 text in the exposition format or has none of the families the mapping reads."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(f"not UTF-8 text (byte {exc.start})") from None
    facts = NodeFacts()
    to_parse, read = split_page(text)
    try:
        for family in text_string_to_metric_families(to_parse):
            for sample in family.samples:
                facts.add(sample.name, sample.labels, sample.value)
    except (ValueError, TypeError, IndexError) as exc:  # the parser's ways of saying "not the format"
        raise ExpositionError(f"not the Prometheus exposition format: {one_line(exc, 80)}") from None
    for name, labels, value in read:
        facts.add(name, labels, value)
    if facts.empty:
        raise ExpositionError("no node_exporter metrics on the page (is this node_exporter?)")
    return facts


def parse_page_whole(body: bytes) -> NodeFacts:
    """:func:`parse_page` with every line read given to prometheus_client's parser (no line
    read by :func:`split_page`): slower, and the reference it is held to."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(f"not UTF-8 text (byte {exc.start})") from None
    facts = NodeFacts()
    try:
        for family in text_string_to_metric_families("\n".join(_wanted_lines(text)) + "\n"):
            for sample in family.samples:
                facts.add(sample.name, sample.labels, sample.value)
    except (ValueError, TypeError, IndexError) as exc:
        raise ExpositionError(f"not the Prometheus exposition format: {one_line(exc, 80)}") from None
    if facts.empty:
        raise ExpositionError("no node_exporter metrics on the page (is this node_exporter?)")
    return facts


def gather(ctx: SourceContext) -> SourceReport:
    by_nodename = ctx.config.section("sources")["node_exporter_identity"] == "nodename"
    return pull_and_pin(ctx, TARGET_KEYS, lambda answer: read_answer(answer, by_nodename), path=METRICS_PATH)


def read_answer(answer: Answer, by_nodename: bool) -> Union[HostSnapshot, Refused]:
    """One target's /metrics page: the snapshot of the host it stands for (see the module
    docstring, Identity), or why it is refused (not a node_exporter page, or a nodename that is
    not this target's host)."""
    try:
        facts = parse_page(answer.body)
    except ExpositionError as exc:
        return Refused(str(exc))
    hostname, error, claim = _hostname(answer.target, answer.identity, answer.expected, answer.pinned, facts.nodename,
                                by_nodename, answer.claims, answer.aliases)
    if error is not None or hostname is None:
        return Refused(error or "no host name", answer.expected or (facts.nodename or "")[:80] or None, claim=claim)
    return facts.snapshot(hostname, answer.received_at)


def _hostname(target: str, identity: Optional[str], expected: Optional[str], pinned: bool, nodename: Optional[str],
              by_nodename: bool, claims: Claims,
              aliases: dict[str, frozenset[str]]) -> tuple[Optional[str], Optional[str], bool]:
    """(host name, None, False) or (None, why refused, whether it was a claim on another host) for
    one target's page."""
    if identity is not None and not by_nodename:
        return identity, None, False
    if nodename is None:
        if expected is not None and not by_nodename:
            return expected, None, False
        return None, "no node_uname_info nodename on the page, and nothing names the target (write it as ADDRESS=NAME)", False
    shown = repr(nodename[:80])
    problem = claim_problem(nodename, target, identity, expected, pinned, claims, aliases)
    if problem is not None:
        kind, whom = problem
        if kind == "owner":
            return None, f"nodename {shown} is {whom}'s host: refused", True
        if kind == "expected":
            if not by_nodename and pinned:
                return expected, None, False  # pinned by an earlier answer: the pin names the host
            return None, f"nodename {shown} is not {whom!r}: refused", True
        return None, (f"nodename {shown} is a host {whom!r} other sources report, and nothing says "
                      f"{target} is that host (write it as {target}={nodename[:80]} in [sources] node_exporters): refused"), True
    return (expected if expected is not None and not by_nodename else nodename), None, False


SOURCE = Source(SOURCE_NAME, gather, "node_exporter /metrics pulled from workers ([sources] node_exporters)",
                listed_hosts=listed_hosts(TARGET_KEYS))
