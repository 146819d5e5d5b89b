"""SSSRMAP messages and the query engine (message format 3.0.3 + NOTES.md).

Object-agnostic: the engine queries lxml elements of any object class.  A
:class:`QueryService` maps object names (``Node``, ``Job``) to callables
returning the current :class:`ObjectSet`; ``<Object>Job</Object>`` works as
soon as something registers a Job source.

A request goes through the modules of this package in this order:

- service.py -- :class:`QueryService`: bytes in, envelopes out; never raises;
- envelope.py -- the signature check, then Response bytes, chunks and the
  (signed) Envelope around them;
- request.py -- a ``<Request>`` element into a checked :class:`QueryRequest`
  (the grammar of Get/Where names and ops is described there);
- fields.py -- each object class's vocabulary: which names a Get or Where
  may use and how each field's values compare;
- engine.py -- :class:`ObjectSet` and :func:`run_query`: Where selection,
  Sort/Tros, projection and aggregation (the semantics are described there),
  within a per-request :class:`Budget`;
- status.py -- the status codes and :class:`SSSRMAPError`.

This module re-exports the public names, so ``from glueinfo.sss.sssrmap
import ObjectSet, QueryService`` keeps working.
"""

from glueinfo.sss.sssrmap.engine import Budget, ObjectSet, aggregate, order, project, run_query, select
from glueinfo.sss.sssrmap.envelope import (
    digest,
    envelope,
    failure_bytes,
    request_envelope,
    response_bytes,
    signature,
    verify_signature,
)
from glueinfo.sss.sssrmap.request import (
    AGGREGATES,
    CONJUNCTIONS,
    DEFAULT_CHUNK_SIZE,
    GET_OPS,
    MAX_CONDITIONS,
    MAX_PATTERN,
    WHERE_OPS,
    GetField,
    Path,
    QueryRequest,
    WhereCondition,
    parse_request,
)
from glueinfo.sss.sssrmap.service import QueryService
from glueinfo.sss.sssrmap.status import (
    BAD_ATTRIBUTE,
    BAD_GET,
    BAD_SIGNATURE,
    BAD_WHERE,
    IGNORED_PARTS,
    MALFORMED_XML,
    NO_ACTION_OR_ACTOR,
    NO_OBJECT,
    NO_REQUEST,
    QUERY_BUDGET,
    SERVER_ERROR,
    SIGNATURE_REQUIRED,
    SUCCESS,
    UNKNOWN_ERROR,
    UNKNOWN_OBJECT,
    UNSUPPORTED_ACTION,
    UNSUPPORTED_FEATURE,
    UNSUPPORTED_TOKEN,
    WIRE_BAD_FRAMING,
    WIRE_BODY_TOO_LARGE,
    SSSRMAPError,
)

__all__ = [
    "AGGREGATES", "BAD_ATTRIBUTE", "BAD_GET", "BAD_SIGNATURE", "BAD_WHERE", "CONJUNCTIONS", "DEFAULT_CHUNK_SIZE", "GET_OPS",
    "IGNORED_PARTS", "MALFORMED_XML", "MAX_CONDITIONS", "MAX_PATTERN", "NO_ACTION_OR_ACTOR", "NO_OBJECT", "NO_REQUEST",
    "QUERY_BUDGET", "SERVER_ERROR",
    "SIGNATURE_REQUIRED", "SUCCESS", "UNKNOWN_ERROR", "UNKNOWN_OBJECT", "UNSUPPORTED_ACTION", "UNSUPPORTED_FEATURE",
    "UNSUPPORTED_TOKEN", "WHERE_OPS", "WIRE_BAD_FRAMING", "WIRE_BODY_TOO_LARGE",
    "Budget", "GetField", "ObjectSet", "Path", "QueryRequest", "QueryService", "SSSRMAPError", "WhereCondition",
    "aggregate", "digest", "envelope", "failure_bytes", "order", "parse_request", "project", "request_envelope",
    "response_bytes", "run_query", "select", "signature", "verify_signature",
]
