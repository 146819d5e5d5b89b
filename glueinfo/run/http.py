"""Publish stage: `glueinfo serve`, an HTTP server answering from memory.

Endpoints (GET and HEAD unless said):

- ``/node.xml``   this host as an SSS Node
- ``/nodes.xml``  every host known here as a ``<Data>`` of Nodes
- ``/ldif``       the current GLUE 1.3 LDIF (503 until one has been built)
- ``/health``     JSON: refresh and collector outcomes, snapshot age, host states
- ``POST /SSSRMAP3`` an SSSRMAP Envelope; the answer is one Envelope, or one
  per chunk.  Bodies may be framed with Content-Length, correct chunked
  encoding, or the chunked framing Gold/Maui peers really send
  (``<hexlen>\\r\\n<payload>0\\r\\n``: no CRLF after the data, no final CRLF);
  the answer mirrors the request's framing.

A background thread refreshes the snapshots every ``refresh_interval``
seconds (:class:`NodeStore`); requests only read the last finished refresh,
so a slow collector never delays one.  The rendered documents are kept as
bytes and rendered again only when a host's State changes with the clock
(its snapshot going stale).

Limits: request bodies over ``max_body`` bytes are refused (413) without
being read; a connection silent for ``timeout`` seconds is closed; at most
``max_connections`` connections are served at once, others get 503 at once.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, cast

from glueinfo import __version__
from glueinfo.core.model import CollectorResult, HostSnapshot
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_xml import NodeMarkupCache, NodeRenderError, NodeSettings, data_element, node_element, node_state, to_bytes
from glueinfo.sss.sssrmap import (
    WIRE_BAD_FRAMING,
    WIRE_BODY_TOO_LARGE,
    ObjectSet,
    QueryService,
    envelope,
    failure_bytes,
)

log = logging.getLogger("glueinfo.serve")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7170
XML_TYPE = "application/xml; charset=utf-8"
SSSRMAP_TYPE = 'text/xml; charset="utf-8"'

# Query paths whose values are cached right after each refresh (in the refresh
# thread), so that the first query on a large site does not pay for them.
WARM_PATHS = ("Id", "State", "Configured/Processors", "Configured/Memory", "Available/Processors", "Available/Memory")


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT', '[v6]:PORT', 'HOST' or ':PORT' -> (host, port); ValueError names the problem."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError(f"listen address {text!r}: expected [IPv6]:PORT")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:
        raise ValueError(f"listen address {text!r}: write an IPv6 address as [ADDRESS]:PORT")
    else:
        host, port_text = text, ""
    host = host or DEFAULT_HOST
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"listen address {text!r}: port {port_text!r} is not a number from 0 to 65535")
    return host, int(port_text)


def read_key_file(path: str) -> bytes:
    """The shared HMAC key: the file's content without surrounding whitespace; ValueError if unusable."""
    try:
        with open(path, "rb") as handle:
            key = handle.read(65537).strip()
            mode = os.fstat(handle.fileno()).st_mode
    except OSError as exc:
        raise ValueError(f"key_file {path}: cannot read: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("key_file %s can be read by other users (mode %o): anyone who reads it can sign requests",
                    path, stat.S_IMODE(mode))
    if not key:
        raise ValueError(f"key_file {path}: empty")
    if len(key) > 65536:
        raise ValueError(f"key_file {path}: longer than 64 KB")
    return key


@dataclass(frozen=True)
class ServeSettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    refresh_interval_s: float = 60.0
    max_body: int = 1048576
    timeout_s: float = 10.0
    max_connections: int = 128
    key: Optional[bytes] = None

    @classmethod
    def from_config(cls, config: Any, listen: Optional[str] = None) -> ServeSettings:
        """From the [serve] section; ``listen`` (the command line's) overrides it.  ValueError on bad values."""
        section = config.section("serve")
        host, port = parse_listen(listen or section["listen"])
        key = read_key_file(section["key_file"]) if section["key_file"] else None
        return cls(host=host, port=port, refresh_interval_s=float(section["refresh_interval"]),
                   max_body=int(section["max_body"]), timeout_s=float(section["timeout"]),
                   max_connections=int(section["max_connections"]), key=key)


# -- the store: snapshots refreshed in the background, documents kept as bytes ------------------


@dataclass
class Refreshed:
    """What one refresh produced: this host, every host (this one included) and notes."""

    local: Optional[HostSnapshot]
    snapshots: list[HostSnapshot]
    problems: list[str] = field(default_factory=list)  # one line each: sources that failed, files unreadable
    ldif: Optional[str] = None  # set when the refresher builds LDIF too
    ldif_error: Optional[str] = None


@dataclass(frozen=True)
class View:
    """The documents served between two State changes; never mutated."""

    rendered_at: float
    valid_until: float  # a host's State may change with the clock from then on
    node_xml: Optional[bytes]
    nodes_xml: bytes
    objects: ObjectSet
    states: dict[str, int]


def _state_change_time(snapshots: Sequence[HostSnapshot], now: float, stale_after: float) -> float:
    """When the next host goes stale (or stops being 'from the future'): the view is re-rendered then."""
    moments = []
    for snapshot in snapshots:
        if snapshot.collected_at > 0:
            for moment in (snapshot.collected_at + stale_after, snapshot.collected_at - stale_after):
                if moment > now:
                    moments.append(moment)
    return min(moments, default=float("inf"))


class NodeStore:
    """Holds the latest refresh and the documents rendered from it.

    ``refresh`` is called in the background thread only; ``view()`` never
    waits for it.  Before the first refresh has finished there is no view
    and the server answers 503.
    """

    def __init__(self, refresh: Callable[[], Refreshed], settings: NodeSettings = NodeSettings(),
                 clock: Callable[[], float] = time.time):
        self._refresh = refresh
        self.settings = settings
        self.clock = clock
        self._data: Optional[Refreshed] = None
        self._view: Optional[View] = None
        self._ldif: Optional[str] = None
        self._ldif_error: Optional[str] = "no LDIF built yet"
        self._render_lock = threading.Lock()
        self._markup = NodeMarkupCache()
        self._markup_lock = threading.Lock()  # refreshes and clock-driven re-renders may overlap
        self._refresh_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.refreshes = 0
        self.skipped = 0
        self.last_refresh: dict[str, Any] = {}

    # -- refreshing --------------------------------------------------------------------------
    def refresh_once(self, raise_errors: bool = False) -> bool:
        """Run one refresh; on failure keep what is served.  Returns success.

        ``raise_errors``: let the refresher's exception through (the first
        refresh at start-up, where a bad config should stop the command).
        """
        if not self._refresh_lock.acquire(blocking=False):
            self.skipped += 1  # one still running (a hung source): never two at once
            return False
        started = self.clock()
        began = time.perf_counter()
        try:
            data = self._refresh()
            view = self._render(data, self.clock(), warm=True)
        except Exception as exc:  # the last good documents stay served
            if raise_errors:
                raise
            log.warning("refresh failed: %s: %s", type(exc).__name__, exc)
            self.last_refresh = {"started_at": started, "duration_s": time.perf_counter() - began, "success": False,
                                 "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
            return False
        finally:
            self._refresh_lock.release()
        self._data, self._view = data, view
        if data.ldif is not None:
            self._ldif, self._ldif_error = data.ldif, None
        elif data.ldif_error is not None:
            self._ldif_error = data.ldif_error  # the last good LDIF stays served
        self.refreshes += 1
        self.last_refresh = {"started_at": started, "duration_s": time.perf_counter() - began, "success": True, "error": None}
        for problem in data.problems:
            log.warning("%s", problem)
        return True

    def start(self, interval_s: float) -> None:
        """Refresh every ``interval_s`` seconds in a daemon thread, until :meth:`stop`."""
        def loop() -> None:
            while not self._stop.wait(interval_s):
                # Each refresh in its own thread, so one that hangs only makes the next ones skip.
                threading.Thread(target=self.refresh_once, name="glueinfo-refresh-run", daemon=True).start()

        self._thread = threading.Thread(target=loop, name="glueinfo-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    # -- rendering ---------------------------------------------------------------------------
    def _render(self, data: Refreshed, now: float, warm: bool = False) -> View:
        settings = self.settings
        snapshots = []
        for snapshot in data.snapshots:
            if snapshot.hostname:
                snapshots.append(snapshot)
        with self._markup_lock:
            data_root = data_element(snapshots, now, settings, self._markup)
        node_xml = None
        if data.local is not None:
            try:
                node_xml = to_bytes(node_element(data.local, now, settings))
            except NodeRenderError as exc:
                log.warning("this host: %s", exc)
        states: dict[str, int] = {}
        for node in data_root:
            state = node.findtext("State") or "Unknown"
            states[state] = states.get(state, 0) + 1
        objects = ObjectSet("Node", list(data_root), sss_node.DEFAULT_UNITS)
        if warm:
            objects.warm(WARM_PATHS)
        return View(rendered_at=now, valid_until=_state_change_time(snapshots, now, settings.stale_after_s),
                    node_xml=node_xml, nodes_xml=to_bytes(data_root), states=states, objects=objects)

    def update_local(self, local: Optional[HostSnapshot]) -> bool:
        """This host's own Node (/node.xml) again, the site's documents kept as they are: for a
        publish in which no host changed (the daemon's self-metrics on its own Node did).
        Returns False when there is nothing rendered yet to keep (refresh instead)."""
        with self._refresh_lock:
            data, view = self._data, self._view
            if data is None or view is None:
                return False
            node_xml = None
            if local is not None:
                try:
                    node_xml = to_bytes(node_element(local, view.rendered_at, self.settings))
                except NodeRenderError as exc:
                    log.warning("this host: %s", exc)
            self._data = dataclasses.replace(data, local=local)
            self._view = dataclasses.replace(view, node_xml=node_xml)
        return True

    def view(self) -> Optional[View]:
        """The current documents, re-rendered first if a host's State has changed with the clock."""
        view = self._view
        if view is None or self.clock() < view.valid_until:
            return view
        if not self._render_lock.acquire(blocking=False):
            return view  # another request is re-rendering: answer with the current documents meanwhile
        try:
            view = self._view
            data = self._data
            if view is not None and data is not None and self.clock() >= view.valid_until:
                view = self._render(data, self.clock())
                self._view = view
        finally:
            self._render_lock.release()
        return view

    def ldif(self) -> tuple[Optional[str], Optional[str]]:
        """(LDIF text or None, why not / the last build's error)."""
        return self._ldif, self._ldif_error

    def health(self) -> dict[str, Any]:
        now = self.clock()
        data, view = self._data, self.view()
        local = data.local if data is not None else None
        collectors: list[CollectorResult] = list(local.collectors) if local is not None else []
        age = now - local.collected_at if local is not None and local.collected_at > 0 else None
        state = node_state(local, now, self.settings) if local is not None else None
        ok = (view is not None and self.last_refresh.get("success", False) and all(c.success for c in collectors)
              and age is not None and age <= self.settings.stale_after_s)
        return {
            "status": "starting" if view is None else "ok" if ok else "degraded",
            "version": __version__,
            "now": datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z"),
            "hostname": local.hostname if local is not None else None,
            "state": state,
            "snapshot_age_s": round(age, 3) if age is not None else None,
            "stale_after_s": self.settings.stale_after_s,
            "refresh": {"count": self.refreshes, "skipped_while_busy": self.skipped, **{k: (round(v, 4) if isinstance(v, float) else v)
                                                     for k, v in self.last_refresh.items()}},
            "collectors": [{"name": c.name, "success": c.success, "duration_s": round(c.duration_s, 4),
                            "error": c.error, "source": c.source} for c in collectors],
            "hosts": {"total": sum(view.states.values()) if view else 0, "states": view.states if view else {}},
            "problems": list(data.problems) if data is not None else [],
            "ldif": {"available": self._ldif is not None, "error": self._ldif_error},
        }


# -- HTTP ----------------------------------------------------------------------------------------


class _Refused(Exception):
    """An HTTP-level problem with a request: answered with ``status`` and an SSSRMAP Failure."""

    def __init__(self, status: int, code: str, message: str, close: bool = True):
        super().__init__(message)
        self.status, self.code, self.message, self.close = status, code, message, close


class GlueinfoHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, settings: ServeSettings, handler: type[BaseHTTPRequestHandler]):
        self.address_family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        self.settings = settings
        self._slots = threading.BoundedSemaphore(settings.max_connections)
        super().__init__((settings.host, settings.port), handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                body = b"too many connections; try again\n"
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                                b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def make_handler(store: NodeStore, service: QueryService, settings: ServeSettings) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to this store and service (no globals)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = f"glueinfo/{__version__}"
        sys_version = ""
        timeout = settings.timeout_s

        def version_string(self) -> str:
            return self.server_version

        def setup(self) -> None:
            super().setup()
            try:  # headers and body go out as two writes: without this, Nagle + delayed ACK add 40 ms
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            log.debug("%s %s", self.address_string(), format % args)

        # -- answers -----------------------------------------------------------------------
        def send(self, status: int, body: bytes, content_type: str, *, close: bool = False, chunks: Optional[list[bytes]] = None,
                 headers: Optional[dict[str, str]] = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if chunks is not None:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(body)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command == "HEAD":
                return
            if chunks is not None:
                self.wfile.write(b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks if c) + b"0\r\n\r\n")
            else:
                self.wfile.write(body)

        def send_text(self, status: int, message: str, **options: Any) -> None:
            self.send(status, (message.rstrip("\n") + "\n").encode(), "text/plain; charset=utf-8", **options)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?", 1)[0]
            if path == "/health":
                self.send(200, json.dumps(store.health(), indent=1).encode() + b"\n", "application/json")
                return
            if path == "/ldif":
                text, why = store.ldif()
                if text is None:
                    self.send_text(503, f"no GLUE LDIF to serve: {why}")
                else:
                    self.send(200, text.encode("utf-8"), "text/plain; charset=utf-8")
                return
            if path not in ("/node.xml", "/nodes.xml"):
                self.send_text(404, f"no such document {path[:100]!r}: try /node.xml, /nodes.xml, /ldif, /health, POST /SSSRMAP3")
                return
            view = store.view()
            if view is None:
                self.send_text(503, "starting: no snapshot collected yet", headers={"Retry-After": "1"})
                return
            body = view.node_xml if path == "/node.xml" else view.nodes_xml
            if body is None:
                self.send_text(503, "this host has no snapshot (see /health)")
                return
            self.send(200, body, XML_TYPE)

        do_HEAD = do_GET  # noqa: N815

        def do_POST(self) -> None:  # noqa: N802
            if self.path.split("?", 1)[0] not in ("/SSSRMAP3", "/SSSRMAP"):
                self.send_text(404, "POST goes to /SSSRMAP3", close=True)
                return
            chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
            try:
                body = self.read_chunked() if chunked else self.read_sized()
            except _Refused as refused:
                self.send(refused.status, envelope(failure_bytes(refused.code, refused.message), settings.key), SSSRMAP_TYPE,
                          close=refused.close)
                return
            except (TimeoutError, OSError):
                self.close_connection = True  # the peer went silent or away mid-body: nothing to answer
                return
            answers = service.handle(body)
            if chunked:
                self.send(200, b"", SSSRMAP_TYPE, chunks=answers)
            else:
                self.send(200, b"".join(answers), SSSRMAP_TYPE)

        # -- request bodies -------------------------------------------------------------------
        def read_sized(self) -> bytes:
            length = self.headers.get("Content-Length")
            if length is None:
                raise _Refused(411, WIRE_BAD_FRAMING, "POST needs a Content-Length or chunked Transfer-Encoding")
            if not length.strip().isdigit():
                raise _Refused(400, WIRE_BAD_FRAMING, f"Content-Length {length[:20]!r} is not a number")
            size = int(length)
            if size > settings.max_body:
                raise _Refused(413, WIRE_BODY_TOO_LARGE, f"request body of {size} bytes is over the limit of {settings.max_body} bytes")
            data = self.rfile.read(size)
            if len(data) < size:
                raise _Refused(400, WIRE_BAD_FRAMING, f"truncated request body: {len(data)} of {size} bytes arrived")
            return data

        def read_chunked(self) -> bytes:
            """Correct chunked encoding, and the peers' variant without CRLF after the data."""
            parts: list[bytes] = []
            total = 0
            broken = False
            while True:
                line = self.rfile.readline(1026)
                if not line:
                    raise _Refused(400, WIRE_BAD_FRAMING, "truncated chunked body: the connection ended before the last chunk")
                if not line.endswith(b"\n"):
                    raise _Refused(400, WIRE_BAD_FRAMING, "chunk size line too long")
                size_text = line.split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise _Refused(400, WIRE_BAD_FRAMING, f"bad chunk size {size_text[:20]!r}") from None
                if size < 0:
                    raise _Refused(400, WIRE_BAD_FRAMING, "negative chunk size")
                if size == 0:
                    break
                total += size
                if total > settings.max_body:
                    raise _Refused(413, WIRE_BODY_TOO_LARGE, f"chunked request body over the limit of {settings.max_body} bytes")
                data = self.rfile.read(size)
                if len(data) < size:
                    raise _Refused(400, WIRE_BAD_FRAMING, f"truncated chunk: {len(data)} of {size} bytes arrived")
                parts.append(data)
                after = cast(io.BufferedReader, self.rfile).peek(2)[:2]  # the server's rfile is buffered
                if after.startswith(b"\r"):
                    self.rfile.read(1)
                    if self.rfile.read(1) != b"\n":
                        raise _Refused(400, WIRE_BAD_FRAMING, "chunk data not followed by CRLF")
                elif after.startswith(b"\n"):
                    self.rfile.read(1)
                elif not after:
                    raise _Refused(400, WIRE_BAD_FRAMING, "truncated chunked body: the connection ended after a chunk")
                else:
                    broken = True  # the next size line follows the data directly: the peers' framing
            if broken:
                self.close_connection = True  # such peers send nothing after "0\r\n": do not wait for trailers
                return b"".join(parts)
            for _ in range(100):  # trailers, up to the empty line that ends the body
                line = self.rfile.readline(8192)
                if line in (b"\r\n", b"\n", b""):
                    break
            return b"".join(parts)

    return Handler


class Server:
    """The store, the query service and the HTTP server together; ``start`` / ``stop`` for tests and the command."""

    def __init__(self, settings: ServeSettings, store: NodeStore, service: Optional[QueryService] = None):
        self.settings = settings
        self.store = store
        self.service = service or QueryService(key=settings.key, max_bytes=settings.max_body,
                                               log=lambda message: log.error("%s", message))
        self.service.register("Node", self._objects)
        self.httpd = GlueinfoHTTPServer(settings, make_handler(store, self.service, settings))
        self._thread: Optional[threading.Thread] = None

    def _objects(self) -> ObjectSet:
        view = self.store.view()
        return view.objects if view is not None else ObjectSet("Node", [], sss_node.DEFAULT_UNITS)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        """Serve in a background thread (refreshing too); returns at once."""
        self.store.start(self.settings.refresh_interval_s)
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="glueinfo-http", daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        self.store.start(self.settings.refresh_interval_s)
        self.httpd.serve_forever(poll_interval=0.5)

    def stop(self) -> None:
        self.store.stop()
        self.httpd.shutdown()
        self.httpd.server_close()
