"""The HTTP/1.1 transport of `glueinfo serve`: an asyncio loop in one thread,
h11 for the request heads, a small reader for request bodies, and two small
thread pools for the work.

It knows nothing of Node XML or SSSRMAP: a :class:`Handler` answers each
:class:`Request`.  What it guarantees, whatever the clients do:

- **No starvation.**  A waiting connection costs a socket and a few objects,
  no thread.  A request must arrive in full (request line, headers, body)
  within ``request_deadline`` seconds of its first byte, however busy the
  client keeps the connection (408, then closed); a connection silent for
  ``timeout`` seconds (between requests, or within one) is closed.  At most
  ``max_connections`` connections are held, at most ``max_per_address`` per
  client address; more are answered 503 at once and closed.
- **Work off the loop.**  :meth:`Handler.quick` answers on the loop what
  costs nothing (documents already rendered); everything else runs in a
  thread pool, POST requests in one and the rest in another, so a slow query
  never delays a GET.
- **Strict parsing.**  h11 parses the head (a header line without a colon,
  conflicting Content-Length headers, a Transfer-Encoding other than
  chunked: 400/501).  Content-Length together with Transfer-Encoding is
  refused (400) and the connection closed.  ``Expect: 100-continue`` gets
  ``100 Continue`` only when the body is acceptable, else the refusal at once.
  Chunked bodies are read here, not by h11, because the Gold/Maui peers frame
  them as ``<hexlen>\\r\\n<payload>0\\r\\n`` (no CRLF after the data, no final
  CRLF), which h11 refuses; both that and correct chunked encoding are read.
  One leniency: an HTTP/1.1 request without a Host header is accepted, as
  those peers send none.
- **Allow list.**  A connection from outside ``allow`` is closed at accept,
  unanswered, and counted.
- **Stopping.**  :meth:`HttpServer.stop` closes every connection and returns
  within its timeout; pool threads are daemon threads, so a query still
  running never holds up the process's exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import ipaddress
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Optional, Protocol, Union

import h11

from glueinfo.core.text import one_line

log = logging.getLogger(__name__)

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

MAX_HEAD = 32768  # request line and headers together
CHUNK_LINE_MAX = 1026  # a chunk-size line: hex digits, extensions, CRLF
MAX_TRAILERS = 100
LINGER_S = 1.0  # after a refusal, unread input is drained this long so the answer is not lost to a reset
LINGER_BYTES = 1 << 20
WRITE_TIMEOUT_S = 10.0  # a client that stops reading its answer
LOG_EVERY_S = 60.0
QUERY_THREADS = 2
DOCUMENT_THREADS = 2
_MISSING_HOST = "Missing mandatory Host: header"  # h11's message for an HTTP/1.1 head without Host


# -- what the transport hands to the handler, and back ----------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request: ``path`` without the query string, header names in lower case (repeated
    headers joined with ", "), the body read in full, ``chunked`` when it came chunked."""

    method: str
    path: str
    headers: dict[str, str]
    peer: str
    body: bytes = b""
    chunked: bool = False


@dataclass(frozen=True)
class Response:
    """An answer: ``chunks`` (one HTTP chunk each) instead of ``body`` for a chunked answer;
    ``parts`` instead of ``body`` for a body held in pieces (sent one after the other under one
    Content-Length, never joined first); ``close`` ends the connection after it."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    chunks: Optional[tuple[bytes, ...]] = None
    close: bool = False
    parts: Optional[Sequence[bytes]] = None


def text_response(status: int, message: str, *, close: bool = False, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, (message.rstrip("\n") + "\n").encode(), close=close, headers=headers)


class Handler(Protocol):
    """The application behind the transport."""

    def needs_body(self, request: Request) -> bool:
        """Whether the body of this request (method, path, headers known) is to be read."""

    def quick(self, request: Request) -> Optional[Response]:
        """The answer when it costs nothing (called on the event loop; must not block), else None."""

    def answer(self, request: Request) -> Response:
        """The answer (called in a worker thread; may take time)."""

    def refuse_body(self, request: Request, status: int, too_large: bool, message: str) -> Response:
        """The answer to a body that cannot be read: over the size limit, or badly framed."""


# -- limits and addresses --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    max_body: int = 1048576
    timeout_s: float = 10.0
    request_deadline_s: float = 30.0
    max_connections: int = 4096
    max_per_address: int = 32
    allow: Optional[tuple[IPNetwork, ...]] = None  # None: every address


def parse_allow(values: Sequence[str]) -> Optional[tuple[IPNetwork, ...]]:
    """``[serve] allow`` -> networks; None for ``any`` or an empty list (no address filter).
    ValueError names the entry that is neither a network, an address, nor ``any`` alone."""
    words = [w.strip() for value in values for w in str(value).replace(",", " ").split() if w.strip()]
    if any(w.lower() == "any" for w in words):
        if len(words) > 1:
            raise ValueError("[serve] allow: 'any' opens the server to every address; write it alone")
        return None
    networks: list[IPNetwork] = []
    for word in words:
        try:
            networks.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            raise ValueError(f"[serve] allow: {word!r} is not an address or network (e.g. 10.1.0.0/16, 192.0.2.7, "
                             f"2001:db8::/32, or any)") from None
    return tuple(networks) if networks else None


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches only this machine (a name counts if every address it
    resolves to is loopback; one that does not resolve counts as not loopback)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    addresses = {str(info[4][0]).split("%", 1)[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def _client_address(peer: Any) -> str:
    """The client's address as text, IPv4-mapped IPv6 as plain IPv4."""
    host = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _allowed(address: str, allow: Optional[tuple[IPNetwork, ...]]) -> bool:
    if allow is None:
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == network.version and ip in network for network in allow)


@dataclass
class Counters:
    """What the transport did, for /health; changed only on the loop's thread."""

    open: int = 0
    accepted: int = 0
    requests: int = 0
    refused_not_allowed: int = 0
    refused_busy: int = 0
    refused_per_address: int = 0
    deadline_expired: int = 0
    bad_requests: int = 0
    last_logged: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        return {name: value for name, value in vars(self).items() if isinstance(value, int)}


# -- the worker pools -------------------------------------------------------------------------------------------


class WorkerPool:
    """A fixed number of daemon threads taking calls from a queue.

    Not a ThreadPoolExecutor: its threads are joined when the interpreter
    exits, so a query still running would hold up a stop past its grace."""

    def __init__(self, name: str, threads: int):
        self._queue: queue.SimpleQueue[Optional[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, call = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the waiting request, which answers 500
                future.set_exception(exc)

    def submit(self, call: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._queue.put((future, call))
        return future

    def stop(self) -> None:
        """No new work; the threads end after their current call (not waited for)."""
        for _ in self._threads:
            self._queue.put(None)


# -- one connection ---------------------------------------------------------------------------------------------


class _Refused(Exception):
    """A request that gets an error answer from the transport, after which the connection closes."""

    def __init__(self, status: int, message: str, *, too_large: bool = False, body_problem: bool = False):
        super().__init__(message)
        self.status, self.message, self.too_large, self.body_problem = status, message, too_large, body_problem


class _Expired(Exception):
    """The request deadline passed (``in_request``) or the connection was idle too long."""

    def __init__(self, in_request: bool):
        super().__init__("deadline" if in_request else "idle")
        self.in_request = in_request


class _Connection:
    """One client connection: requests one after another until it closes or fails."""

    def __init__(self, server: HttpServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str):
        self.server, self.reader, self.writer, self.peer = server, reader, writer, peer
        self.limits = server.limits
        self.buffer = bytearray()
        self.eof = False
        self.deadline: Optional[float] = None  # of the request being read; None between requests
        self.parser: Optional[h11.Connection] = None  # the request being read or answered
        self.method = "GET"
        self.keep_alive = False  # the request being answered allows another after it
        self.peers_framing = False  # the request came in the Gold/Maui chunk framing: answer in it too
        self._timer: Optional[asyncio.TimerHandle] = None
        self._expires = 0.0
        self._task: Optional[asyncio.Task[Any]] = None  # reading, while it reads
        self._timed_out = False

    # -- reading with the idle timeout and the request deadline ------------------------------------------------
    async def _fill(self) -> bool:
        """Read more into the buffer; False at end of input.  Raises _Expired when the idle
        timeout or the request deadline passes first."""
        if self.eof:
            return False
        loop = asyncio.get_running_loop()
        now = loop.time()
        until = now + self.limits.timeout_s
        if self.deadline is not None:
            until = min(until, self.deadline)
        if until <= now:
            raise _Expired(self.deadline is not None)
        # One timer per connection, moved lazily (a float per read, not a timer per read).
        self._expires = until
        if self._timer is None or self._timer.when() > until:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(until, self._on_timer)
        self._task = asyncio.current_task()
        try:
            data = await self.reader.read(65536)
        except asyncio.CancelledError:
            if not self._timed_out or self._task is None:
                raise
            self._task.uncancel()
            self._timed_out = False
            raise _Expired(self.deadline is not None) from None
        finally:
            self._task = None
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    def _on_timer(self) -> None:
        self._timer = None
        if self._task is None:  # not reading: the next read sets its own timer
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self._expires:
            self._timed_out = True
            self._task.cancel()
        else:
            self._timer = loop.call_at(self._expires, self._on_timer)

    def close_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _take(self, size: int) -> bytes:
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    async def _read_exactly(self, size: int, what: str) -> bytes:
        while len(self.buffer) < size:
            if not await self._fill():
                raise _Refused(400, f"truncated {what}: {len(self.buffer)} of {size} bytes arrived", body_problem=True)
        return self._take(size)

    async def _read_line(self, limit: int, what: str) -> bytes:
        while True:
            end = self.buffer.find(b"\n", 0, limit)
            if end >= 0:
                return self._take(end + 1)
            if len(self.buffer) >= limit:
                raise _Refused(400, f"{what} too long", body_problem=True)
            if not await self._fill():
                raise _Refused(400, f"truncated chunked body: the connection ended in a {what}", body_problem=True)

    # -- the request head, by h11 ------------------------------------------------------------------------------
    async def _read_head(self) -> Optional[h11.Request]:
        """The next request's head (its parser in ``self.parser``); None when the client closed
        between requests."""
        self.parser, self.method, self.deadline = None, "GET", None
        while not self.buffer:
            if not await self._fill():
                return None
        self.deadline = time.monotonic() + self.limits.request_deadline_s
        parser = self.parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        fed = 0
        while True:
            parser.receive_data(bytes(self.buffer[fed:]))
            fed = len(self.buffer)
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as exc:
                if str(exc) == _MISSING_HOST:
                    return self._head_without_host()
                raise _Refused(exc.error_status_hint, f"bad request: {one_line(exc, 200)}") from None
            if isinstance(event, h11.Request):
                rest = parser.trailing_data[0]
                del self.buffer[:len(self.buffer) - len(rest)]
                self.method = event.method.decode("ascii", "replace")
                return event
            if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                raise _Refused(400, "bad request")
            if not await self._fill():
                if self.buffer:
                    raise _Refused(400, "truncated request head")
                return None

    def _head_without_host(self) -> h11.Request:
        """Parse the head again with an empty Host header after the request line (peers that send none)."""
        line_end = self.buffer.find(b"\n")
        patched = bytes(self.buffer[:line_end + 1]) + b"Host: \r\n" + bytes(self.buffer[line_end + 1:])
        parser = self.parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        parser.receive_data(patched)
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError as exc:
            raise _Refused(exc.error_status_hint, f"bad request: {one_line(exc, 200)}") from None
        if not isinstance(event, h11.Request):
            raise _Refused(400, "bad request")
        rest = parser.trailing_data[0]
        del self.buffer[:max(0, len(self.buffer) - len(rest))]
        self.method = event.method.decode("ascii", "replace")
        self.peers_framing = False
        return event

    # -- request bodies ----------------------------------------------------------------------------------------
    async def _read_sized(self, size: int) -> bytes:
        return await self._read_exactly(size, "request body")

    async def _read_chunked(self) -> tuple[bytes, bool]:
        """(body, framed as the peers do): correct chunked encoding, and the peers' variant
        without CRLF after the data (then no trailers are waited for)."""
        parts: list[bytes] = []
        total = 0
        peers_framing = False
        while True:
            line = await self._read_line(CHUNK_LINE_MAX, "chunk size line")
            size_text = line.split(b";", 1)[0].strip()
            if not size_text or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
                raise _Refused(400, f"bad chunk size {size_text[:20]!r}", body_problem=True)
            size = int(size_text, 16)
            if size == 0:
                break
            total += size
            if total > self.limits.max_body:
                raise _Refused(413, f"chunked request body over the limit of {self.limits.max_body} bytes",
                               too_large=True, body_problem=True)
            parts.append(await self._read_exactly(size, "chunk"))
            while not self.buffer:
                if not await self._fill():
                    raise _Refused(400, "truncated chunked body: the connection ended after a chunk", body_problem=True)
            if self.buffer.startswith(b"\n"):
                del self.buffer[:1]
            elif self.buffer.startswith(b"\r"):
                while len(self.buffer) < 2:
                    if not await self._fill():
                        raise _Refused(400, "truncated chunked body: the connection ended after a chunk", body_problem=True)
                if self.buffer[1:2] != b"\n":
                    raise _Refused(400, "chunk data not followed by CRLF", body_problem=True)
                del self.buffer[:2]
            else:
                peers_framing = True  # the next size line follows the data directly
        if not peers_framing:
            for _ in range(MAX_TRAILERS):  # trailers, up to the empty line that ends the body
                if await self._read_line(8192, "trailer line") in (b"\r\n", b"\n"):
                    break
            else:
                raise _Refused(400, "too many trailer lines", body_problem=True)
        return b"".join(parts), peers_framing

    # -- answering -------------------------------------------------------------------------------------------
    async def _send(self, response: Response) -> bool:
        """Write ``response`` to the current request; True when the connection may carry another.

        Written here rather than by h11: the answers are glueinfo's own (no untrusted header),
        and this is the hot path.  HTTP/1.0 clients get the connection closed after the answer
        and a chunked answer as one body."""
        close = response.close or not self.keep_alive
        chunks = response.chunks if self.keep_alive or self.parser is None or self.parser.their_http_version != b"1.0" else None
        body = response.body if response.chunks is None or chunks is not None else b"".join(response.chunks)
        head = [b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nServer: %s\r\n" % (
            response.status, _reason(response.status), response.content_type.encode("latin-1"), self.server.server_name_bytes)]
        head.extend(b"%s: %s\r\n" % (name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers)
        if chunks is not None and self.peers_framing:
            # Gold/Maui peers read each size line straight after the previous chunk's data and stop
            # at "0": the answer mirrors the framing they sent (no CRLF after the data, no final one)
            head.append(b"Transfer-Encoding: chunked\r\n")
            payload = b"".join(b"%X\r\n%s" % (len(c), c) for c in chunks if c) + b"0\r\n"
        elif chunks is not None:
            head.append(b"Transfer-Encoding: chunked\r\n")
            payload = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks if c) + b"0\r\n\r\n"
        elif response.parts is not None:
            head.append(b"Content-Length: %d\r\n" % sum(len(part) for part in response.parts))
            payload = b""
        else:
            head.append(b"Content-Length: %d\r\n" % len(body))
            payload = body
        if close:
            head.append(b"Connection: close\r\n")
        head.append(b"\r\n")
        if self.method != "HEAD":
            head.append(payload)
        self.writer.write(b"".join(head))
        if response.parts is not None and self.method != "HEAD":
            self.writer.writelines(response.parts)  # the transport's buffer takes them as they are
        if self.writer.transport.get_write_buffer_size():
            try:
                async with asyncio.timeout(WRITE_TIMEOUT_S):
                    await self.writer.drain()
            except (TimeoutError, ConnectionError):
                return False
        return not close

    async def _refuse(self, response: Response) -> None:
        """Answer and end the connection, draining what the client still sends for a moment:
        closing with unread input resets the connection, and the answer with it."""
        await self._send(_closing(response))
        try:
            if self.writer.can_write_eof():
                self.writer.write_eof()
            drained = 0
            async with asyncio.timeout(LINGER_S):
                while drained < LINGER_BYTES:
                    data = await self.reader.read(65536)
                    if not data:
                        break
                    drained += len(data)
        except (TimeoutError, OSError):
            pass

    # -- the requests, one after another -----------------------------------------------------------------------
    async def serve(self) -> None:
        try:
            while True:
                event = await self._read_head()
                if event is None or not await self._one(event):
                    return
        except _Expired as expired:
            if expired.in_request:
                self.server.count("deadline_expired")
                await self._send(text_response(408, f"request not complete within {self.limits.request_deadline_s:g} s "
                                                    "([serve] request_deadline)", close=True))
        except _Refused as refused:
            self.server.count("bad_requests")
            await self._refuse(text_response(refused.status, refused.message, close=True))
        except (ConnectionError, OSError):
            pass  # the client went away

    async def _one(self, event: h11.Request) -> bool:
        """Read the rest of one request and answer it; True to go on with the next."""
        assert self.parser is not None
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key = name.decode("ascii", "replace")
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        target = event.target.decode("ascii", "replace")
        self.keep_alive = event.http_version == b"1.1" and "close" not in headers.get("connection", "").lower()
        request = Request(method=self.method, path=target.split("?", 1)[0], headers=headers, peer=self.peer)
        chunked = "transfer-encoding" in headers  # h11 let only "chunked" through
        length = int(headers["content-length"]) if "content-length" in headers else None  # h11 checked it
        if chunked and length is not None:  # request smuggling's favourite: never guess which one is meant
            raise _Refused(400, "bad request: both Content-Length and Transfer-Encoding")
        self.server.count("requests")
        handler = self.server.handler
        if (chunked or length) and handler.needs_body(request):
            if not chunked and length is not None and length > self.limits.max_body:
                await self._refuse(handler.refuse_body(
                    request, 413, True, f"request body of {length} bytes is over the limit of {self.limits.max_body} bytes"))
                return False
            if self.parser.client_is_waiting_for_100_continue:  # only now: the body is wanted and may come
                self.writer.write(self.parser.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
            try:
                body, peers_framing = await self._read_chunked() if chunked else (await self._read_sized(length or 0), False)
            except _Refused as refused:
                if not refused.body_problem:
                    raise
                await self._refuse(handler.refuse_body(request, refused.status, refused.too_large, refused.message))
                return False
            except _Expired as expired:
                if not expired.in_request:
                    raise
                self.server.count("deadline_expired")
                await self._refuse(handler.refuse_body(
                    request, 408, False, f"request body not complete within {self.limits.request_deadline_s:g} s "
                                         "([serve] request_deadline)"))
                return False
            request = Request(request.method, request.path, headers, self.peer, body, chunked)
            self.peers_framing = peers_framing
            close_after = peers_framing  # such peers send nothing after "0\r\n": do not wait for more
        else:
            close_after = bool(chunked or length)  # a body nobody reads: answer, then close rather than skip it
        self.deadline = None  # arrived in full: the time to answer is not the client's
        response = handler.quick(request) or await self.server.run(request)
        if close_after:
            await self._refuse(response)
            return False
        return await self._send(response)


def _closing(response: Response) -> Response:
    return response if response.close else dataclasses.replace(response, close=True)


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Status"


# -- the server ---------------------------------------------------------------------------------------------------


class HttpServer:
    """Listens at construction (OSError if it cannot), serves from :meth:`start` in its own
    thread until :meth:`stop`."""

    def __init__(self, host: str, port: int, limits: Limits, handler: Handler, server_name: str = "glueinfo"):
        self.limits, self.handler, self.server_name = limits, handler, server_name
        self.server_name_bytes = server_name.encode("ascii", "replace")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if family == socket.AF_INET and not _is_ip(host):
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            family = infos[0][0] if infos else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=socket.SOMAXCONN)
        self.socket.setblocking(False)
        self.counters = Counters()
        self._per_address: dict[str, int] = {}
        self._connections: set[asyncio.StreamWriter] = set()
        self._last_log = 0.0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stopping: Optional[asyncio.Event] = None
        self._thread: Optional[threading.Thread] = None
        self._started = threading.Event()
        self._queries = WorkerPool("glueinfo-query", QUERY_THREADS)
        self._documents = WorkerPool("glueinfo-document", DOCUMENT_THREADS)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.socket.getsockname()[:2]
        return str(host), int(port)

    # -- life cycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Serve in a daemon thread; returns once connections are being accepted."""
        self._thread = threading.Thread(target=self._run, name="glueinfo-http", daemon=True)
        self._thread.start()
        self._started.wait(10)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._accept, sock=self.socket, backlog=socket.SOMAXCONN)
        self._started.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for writer in list(self._connections):
                writer.transport.abort()
            await asyncio.sleep(0)  # let the aborted connections' tasks see it

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the server to end; True if it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop accepting, close every connection, and return within ``timeout`` s (a request's
        work still running in a pool thread is abandoned, never waited for)."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
            self.wait(timeout)
        self._queries.stop()
        self._documents.stop()
        if not self.running():  # else the loop still owns the socket and closes it on its way out
            try:
                self.socket.close()
            except OSError:
                pass

    # -- connections -----------------------------------------------------------------------------------------
    def count(self, name: str) -> None:
        setattr(self.counters, name, getattr(self.counters, name) + 1)

    def stats(self) -> dict[str, int]:
        return self.counters.as_dict()

    async def run(self, request: Request) -> Response:
        """``handler.answer`` in a pool thread: POSTs (queries) in one pool, the rest in another."""
        pool = self._queries if request.method == "POST" else self._documents
        try:
            return await asyncio.wrap_future(pool.submit(lambda: self.handler.answer(request)))
        except Exception as exc:  # a bug in the handler: a 500 for this request, the server goes on
            log.error("%s %s from %s failed: %s: %s", request.method, request.path[:100], request.peer,
                      type(exc).__name__, exc)
            return text_response(500, f"internal error: {type(exc).__name__}", close=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _client_address(writer.get_extra_info("peername"))
        counters, limits = self.counters, self.limits
        counters.accepted += 1
        if not _allowed(peer, limits.allow):
            counters.refused_not_allowed += 1
            self._log_refusals(peer)
            writer.transport.abort()
            return
        if counters.open >= limits.max_connections or self._per_address.get(peer, 0) >= limits.max_per_address:
            if counters.open >= limits.max_connections:
                counters.refused_busy += 1
            else:
                counters.refused_per_address += 1
            self._log_refusals(peer)
            writer.write(_BUSY)
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:  # small answers go out at once, not after the client's delayed ACK
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        counters.open += 1
        self._per_address[peer] = self._per_address.get(peer, 0) + 1
        self._connections.add(writer)
        connection = _Connection(self, reader, writer, peer)
        try:
            await connection.serve()
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # a bug: this connection ends, the server goes on
            log.error("connection from %s failed: %s: %s", peer, type(exc).__name__, exc)
        finally:
            connection.close_timer()
            self._connections.discard(writer)
            counters.open -= 1
            left = self._per_address.get(peer, 1) - 1
            if left > 0:
                self._per_address[peer] = left
            else:
                self._per_address.pop(peer, None)
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()  # a client that does not read its answer: do not wait for it
            else:
                writer.close()

    def _log_refusals(self, peer: str) -> None:
        """One line a minute at most, with the counts since the last one (a flood never floods the log)."""
        now = time.monotonic()
        if now - self._last_log < LOG_EVERY_S and self._last_log:
            return
        self._last_log = now
        counters = self.counters
        current = {"not in [serve] allow": counters.refused_not_allowed, "at max_connections": counters.refused_busy,
                   "at max_per_address": counters.refused_per_address}
        news = {what: n - counters.last_logged.get(what, 0) for what, n in current.items()}
        counters.last_logged = current
        log.warning("refused connections (the latest from %s): %s", peer,
                    ", ".join(f"{n} {what}" for what, n in news.items() if n) or "none")


_BUSY_TEXT = b"too many connections; try again\n"
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\nRetry-After: 1\r\n"
         b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
