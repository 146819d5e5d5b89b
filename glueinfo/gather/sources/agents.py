"""Source ``agents``: pull ``/node.xml`` from `glueinfo serve` on every worker.

Agents are listed in ``[sources] agents`` (names and ranges such as
``wn[001-250].example.org:7170``) and/or ``agents_file``; a host written
without a port uses ``agent_port``.

The pulls and the identity rules are those every pulling source shares
(glueinfo.gather.pull).  Pulls run concurrently on one asyncio loop, at most
``pool_size`` in flight.
Each agent gets ``timeout`` seconds from the moment its pull starts,
connecting, retrying and reading included: a refused or reset connection or a
5xx answer is retried after ``retry_backoff`` seconds (doubling), up to
``retries`` times, while that budget lasts; a hung agent simply uses it up.
The body may not exceed ``max_body`` bytes (a bigger Content-Length is
refused before reading).  The whole source stops at the gather deadline;
agents still pending then are reported as failures.  So one dead, slow or
hostile worker costs at most its own ``timeout`` and never holds up the rest.

Identity: the Node an agent returns must be the host it was asked about.
When the agent is listed by name, the Node's Id must be that name (or its
short form); when listed by address, the first Id it reports is pinned to
that address.  A Node claiming another host's Id (one that a different agent
reports) is refused, so one broken or malicious worker cannot overwrite
another host.  Pins are forgotten after ``drop_after`` without an answer.

Names: an accepted Node is published under the name the agent is listed by
(glueinfo.gather.naming): a host listed by FQDN keeps it whatever short Id
it reports, and a ``<Name>`` naming another host is replaced by the listed name.
"""

from __future__ import annotations

from typing import Union

from glueinfo.core.model import HostSnapshot
from glueinfo.gather.identity import claim_problem
from glueinfo.gather.naming import as_listed
from glueinfo.gather.pull import AGENT_KEYS, Answer, Refused, listed_hosts, pull_and_pin
from glueinfo.gather.registry import Source, SourceContext, SourceReport

SOURCE_NAME = "agents"


def gather(ctx: SourceContext) -> SourceReport:
    max_body = int(ctx.config.section("sources")["max_body"])
    return pull_and_pin(ctx, AGENT_KEYS, lambda answer: read_answer(answer, max_body))


def read_answer(answer: Answer, max_body: int) -> Union[HostSnapshot, Refused]:
    """One agent's Node XML: the snapshot of the host it names, or why it is refused (not Node
    XML, or a Node claiming a host that is not this target's)."""
    from glueinfo.sss.node_reader import NodeXMLError, read_node

    name = answer.target
    try:
        snapshot = read_node(answer.body, what=f"Node XML from {name}", source=SOURCE_NAME, max_bytes=max_body)
    except NodeXMLError as exc:
        return Refused(str(exc))
    reported = snapshot.hostname
    shown = repr(reported[:80])
    problem = claim_problem(reported, name, answer.identity, answer.expected, answer.pinned, answer.claims,
                            answer.aliases)
    if problem is not None:
        kind, whom = problem
        if kind == "owner":
            error = f"Node claims to be {shown}, which is {whom}'s host ({answer.host_of(whom)!r}): refused"
        elif kind == "expected":
            error = f"Node claims to be {shown}, not {whom!r}: refused"
        else:
            error = (f"Node claims to be {shown}, a host {whom!r} other sources report, and nothing "
                     f"says {name} is that host (write it as {name}={reported[:80]} in [sources] agents): refused")
        return Refused(error, answer.expected or reported[:80], claim=True)
    if snapshot.collected_at <= 0:  # a Node without CollectedAt: as old as the answer
        snapshot.collected_at = answer.received_at
    return as_listed(snapshot, answer.identity, answer.aliases)


SOURCE = Source(SOURCE_NAME, gather, "Node XML pulled from `glueinfo serve` on workers ([sources] agents)",
                listed_hosts=listed_hosts(AGENT_KEYS))
