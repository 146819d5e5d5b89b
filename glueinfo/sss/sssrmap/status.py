"""SSSRMAP status codes and the error that carries one.

Every refusal anywhere in the SSSRMAP code is an :class:`SSSRMAPError` with
the status code the peer gets back in a Failure response: 000 success; 1xx
warning (the answer is given, something in the request was not acted on);
2xx wire protocol; 3xx message format; 4xx security; 7xx server (720 a bug,
740 an application-level refusal as Gold uses it: the query's time budget
ran out, or an action the object does not offer).
"""

from __future__ import annotations

from glueinfo.core.errors import InputError

SUCCESS = "000"
# Parts of a request glueinfo did not act on (ignored Options, Count, Data, File, other namespaces' elements):
# the answer is complete without them.  1 = warning, 1 = the request, 8 as in 318 (unsupported), here ignored.
IGNORED_PARTS = "118"
WIRE_BODY_TOO_LARGE = "211"  # request body over the server's limit
WIRE_BAD_FRAMING = "212"  # truncated body, bad chunked encoding
MALFORMED_XML = "301"  # not well-formed, or refused (DTD, entities, size)
NO_REQUEST = "302"  # no Envelope/Body/Request where one must be
NO_OBJECT = "311"
NO_ACTION_OR_ACTOR = "312"
UNKNOWN_OBJECT = "313"  # no source registered for that object class
# An action other than Query: Gold answers an action an object does not offer with 740 "<action> is not a
# valid action for a <object> object" (Gold::Proxy); the message tells it from the budget's 740.
UNSUPPORTED_ACTION = "740"
BAD_GET = "315"
BAD_WHERE = "316"
BAD_ATTRIBUTE = "317"  # chunking/chunkSize and the like
UNSUPPORTED_FEATURE = "318"  # multi-object joins, Set in a query, ...
SIGNATURE_REQUIRED = "421"
BAD_SIGNATURE = "422"
UNSUPPORTED_TOKEN = "423"
SERVER_ERROR = "720"  # a bug: the server failed (logged)
# The query is well-formed but the server stopped working on it at its per-request budget ([serve]
# query_budget): a server-side (7xx) refusal, not a fault in the message (3xx), and not a bug (720);
# it tells "narrow the query or retry later" from an internal error (740 is Gold's code for an
# application-level refusal; the message names the budget).
QUERY_BUDGET = "740"
UNKNOWN_ERROR = "999"


class SSSRMAPError(InputError):
    """A request we answer with a Failure: ``code`` is the SSSRMAP status code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = " ".join(message.split())
