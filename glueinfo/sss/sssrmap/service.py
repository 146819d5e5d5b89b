"""The SSSRMAP service: raw request bytes in, envelopes out.

:class:`QueryService` ties the pieces together: parse and check the XML
(glueinfo.core.xmlsafe), verify the signature (envelope.py), parse the
Request (request.py), run it against the ObjectSet registered for its
Object (engine.py), chunk the records into Responses and wrap each in a
(signed) Envelope.  ``handle`` never raises: refusals become Failure
responses with their status code, bugs a 720, a query past its budget a 740.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Optional

from lxml import etree

from glueinfo.core.xmlsafe import XMLInputError, parse_xml, strip_namespaces
from glueinfo.sss.sssrmap.engine import Budget, ObjectSet, run_query
from glueinfo.sss.sssrmap.envelope import envelope, failure_bytes, response_bytes, verify_signature
from glueinfo.sss.sssrmap.request import SSSRMAP_NAMESPACE, QueryRequest, parse_request
from glueinfo.sss.sssrmap.status import (
    IGNORED_PARTS,
    MALFORMED_XML,
    NO_REQUEST,
    SERVER_ERROR,
    SIGNATURE_REQUIRED,
    SUCCESS,
    UNKNOWN_OBJECT,
    UNSUPPORTED_ACTION,
    SSSRMAPError,
)


def _foreign_children(root: etree._Element) -> dict[int, str]:
    """Before namespaces are stripped: the Request's child elements in a namespace other than SSSRMAP's.

    Position among the Request's element children -> ``{uri}Name``.  The
    schema's ``<any namespace="##other">`` lets such extensions stand in a
    Request; they are ignored (and named), never taken for SSSRMAP elements.
    """
    request = root if etree.QName(root).localname == "Request" else None
    if request is None:
        body = next((c for c in root if isinstance(c.tag, str) and etree.QName(c).localname == "Body"), None)
        request = next((c for c in body if isinstance(c.tag, str) and etree.QName(c).localname == "Request"), None) \
            if body is not None else None
    if request is None:
        return {}
    found = {}
    for index, child in enumerate(c for c in request if isinstance(c.tag, str)):
        uri = etree.QName(child).namespace
        if uri not in (None, SSSRMAP_NAMESPACE):
            found[index] = str(child.tag)
    return found


class QueryService:
    """Answers SSSRMAP envelopes from registered object sources.

    ``register("Node", lambda: current_node_set)``; the callable is asked for
    the current ObjectSet on every request, so the owner can swap in a new
    set whenever its data changes.

    ``budget_s``: seconds of work one request may take, counted on ``clock``
    from the moment ``handle`` gets its bytes; a query still running then is
    answered with a Failure 740 naming the budget (the engine checks between
    slices of objects, so it stops within one slice).  None: no budget.
    """

    def __init__(self, key: Optional[bytes] = None, max_bytes: int = 1048576, log: Optional[Callable[[str], None]] = None,
                 budget_s: Optional[float] = None, clock: Callable[[], float] = time.monotonic):
        if budget_s is not None and not budget_s > 0:  # also refuses NaN
            raise ValueError(f"query budget must be a positive number of seconds, not {budget_s!r}")
        self.key = key
        self.max_bytes = max_bytes
        self.budget_s = budget_s
        self._clock = clock
        self._sources: dict[str, Callable[[], ObjectSet]] = {}
        self._log = log or (lambda message: None)

    def register(self, object_name: str, source: Callable[[], ObjectSet]) -> None:
        self._sources[object_name] = source

    @property
    def object_names(self) -> list[str]:
        return sorted(self._sources)

    def answer(self, request: QueryRequest, budget: Optional[Budget] = None) -> list[bytes]:
        """Serialized Response(s) for a parsed request: one, or one per chunk.

        ``budget`` defaults to a new one of ``budget_s`` starting now.
        SSSRMAPError 313 for an object not served, 740 (Gold's answer) for an
        action other than Query, naming the action and the object.

        Chunks (``chunking="True"``): ``chunk_size`` records each, ``chunkNum``
        from 1, ``chunkMax="-1"`` on every chunk but the last, which carries
        ``chunkMax`` = its own ``chunkNum``: Gold's convention, so a Gold or
        Maui peer's "last chunk" tests (chunkMax 0 or equal to chunkNum; more
        while -1) all hold.  A chunked answer that fits in one chunk is
        ``chunkNum="1" chunkMax="1"``.  Ignored parts of the request make every
        chunk a Warning (IGNORED_PARTS) naming them; the data is unchanged.
        """
        source = self._sources.get(request.object_name)
        if source is None:
            known = ", ".join(self.object_names) or "none"
            raise SSSRMAPError(UNKNOWN_OBJECT, f"object {request.object_name[:40]!r} is not served here (served: {known})")
        if request.action != "Query":
            raise SSSRMAPError(UNSUPPORTED_ACTION, f"{request.action} is not a valid action for a {request.object_name[:40]} "
                                                   f"object: glueinfo answers Query only (on {', '.join(self.object_names)})")
        records = run_query(source(), request, budget or Budget(self.budget_s, self._clock))
        noun = request.object_name
        value, code, note = "Success", SUCCESS, ""
        if request.ignored:
            value, code = "Warning", IGNORED_PARTS
            note = "; ignored: " + "; ".join(request.ignored)
        if not request.chunking or len(records) <= request.chunk_size:
            chunk = (1, 1) if request.chunking else None
            return [response_bytes(value, code, f"{len(records)} {noun} object(s){note}", records, request.request_id, chunk)]
        size = request.chunk_size
        total = (len(records) + size - 1) // size
        return [response_bytes(value, code, f"{len(records)} {noun} object(s), chunk {n + 1} of {total}{note}",
                               records[n * size:(n + 1) * size], request.request_id, (n + 1, n + 1 if n + 1 == total else -1))
                for n in range(total)]

    def handle(self, raw: bytes) -> list[bytes]:
        """Raw request bytes -> the Envelope(s) to send back (several when chunked). Never raises."""
        request_id: Optional[str] = None
        actor = "glueinfo"
        budget = Budget(self.budget_s, self._clock)  # parsing counts too: the request's whole work
        try:
            try:
                root = parse_xml(raw, max_bytes=self.max_bytes, what="SSSRMAP request")
            except XMLInputError as exc:
                raise SSSRMAPError(MALFORMED_XML, str(exc)) from None
            foreign = _foreign_children(root)
            strip_namespaces(root)
            if root.tag == "Envelope":
                body = root.find("Body")
                request_el = body.find("Request") if body is not None else None
                if request_el is not None:
                    request_id = request_el.get("id")
                    actor = request_el.get("actor") or actor
                verify_signature(root, raw, self.key)
            elif root.tag == "Request":  # a bare Request: accepted unsigned when no key is set
                if self.key is not None:
                    raise SSSRMAPError(SIGNATURE_REQUIRED, "this service requires signed requests: send an Envelope with a Signature")
                request_el = root
            else:
                raise SSSRMAPError(NO_REQUEST, f"expected an Envelope, got <{str(root.tag)[:40]}>")
            if request_el is None:
                raise SSSRMAPError(NO_REQUEST, "the Envelope has no Body/Request")
            request = parse_request(request_el, foreign)
            responses = self.answer(request, budget)
        except SSSRMAPError as exc:
            responses = [failure_bytes(exc.code, exc.message, request_id)]
        except Exception as exc:  # a bug must not take the server down; the peer gets a 7xx
            self._log(f"SSSRMAP request failed: {type(exc).__name__}: {exc}")
            responses = [failure_bytes(SERVER_ERROR, f"internal error: {type(exc).__name__}", request_id)]
        return [envelope(response, self.key, actor) for response in responses]
