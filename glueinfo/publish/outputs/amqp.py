"""The ``amqp`` output: the site's documents pushed to an AMQP 0-9-1 broker (RabbitMQ), nothing lost.

Switched on by ``[run] outputs = amqp`` and set in ``[amqp]``: ``url``
(``amqp://USER@HOST:PORT/VHOST``, or ``amqps://`` with ``ca_file`` and,
for a client certificate, ``cert_file`` and ``key_file``),
``password_file`` (its first line), ``exchange`` (declared as a durable
topic exchange), ``documents`` (``glue21-json``: the GLUE 2.1 JSON of the
whole site, the publish layer's ``Documents.glue2_json``, what ``glueinfo
glue2-json`` prints; ``node-xml``: the site's SSS Node XML, what
``node-xml --site`` prints; ``glue-ldif``: both LDAP trees as ``glueinfo
ldif`` prints them, gzip-compressed (``content_encoding`` gzip), what a
federation view (``glueinfo federate``) loads into its LDAP server;
``crr-json``: WLCG's CRR document), ``user_id`` (stamped on every message;
default the URL's user; for a certificate login, the name the broker
derives from the certificate).

Routing keys carry the document kind and the site id:
``glue21.json.<site>``, ``node.xml.<site>``, ``glue.ldif.<site>`` and
``crr.json.<site>``, the site word being
``[site] id`` with every character but letters, digits, ``-`` and ``_``
written ``%XX`` (a dot would split the word a topic binding matches).
Messages are persistent (delivery mode 2), with ``content_type``, a fresh
``message_id`` per document, ``timestamp`` (the publish's time),
``app_id`` glueinfo, ``user_id`` (RabbitMQ refuses a message whose
user_id is not the login's, so a federation view may trust it) and headers
``document`` and ``site_id`` (the id as written).

At a publish the output only hands its writer thread a snapshot of each
document (:class:`Snapshot`: references to the publish's own pieces, the
JSON's bytes, the Node XML's pieces, the GLUE 1.3 entries' texts; nothing
copied) and returns: a publish waits for no compression, no disk and no
broker.  The writer thread gzips the LDIF, compares each document with its
key's last one: one whose bytes are those last sent is not sent again until
``resend`` seconds after that send (so a consumer sees an idle site alive);
it writes the others to the outbox (glueinfo.publish.outbox, in ``[run]
state_dir``/amqp-outbox, durable before the sender sees it) and wakes the
sender thread.  A newer snapshot of a key replaces one not yet written
(:class:`Handoff`).  The sender publishes what waits in the outbox with
publisher confirms and drops a document only once the broker confirmed it;
when the broker is away or refuses, it retries after ``retry_min`` seconds,
doubled to ``retry_max``, while newer documents replace older ones in the
outbox (the newest per routing key is what goes out on reconnect).  The
writer never talks to the broker and the sender never writes a document,
so a slow or dead broker delays neither the other outputs nor the outbox's
copy of the newest document, and a restart, even after kill -9, sends what
was left.

A kill -9 between a publish and the writer's outbox write (the time to
compress and write: tens of milliseconds for a 2,000-host LDIF, longer only
while the disk refuses) loses that publish's snapshot, nothing else: the
outbox still holds the key's previous document (waiting, or sent), and the
restarted daemon's first publish makes the documents again from the site as
it then is and hands them over, so the newest document is what goes out.
A write that fails (a full disk) is logged and said in one line by the
output's next result (counted in ``glueinfo_output_failures_total``) and
its outbox's error on the status page; the writer thread goes on, the
snapshot stays in hand, counted as waiting, and is written at the next
publish unless that one hands a newer one.

The output's result is an error while the broker does not confirm (so
``/metrics`` ``glueinfo_output_failures_total`` and ``/health`` show it),
and ``/metrics`` has ``glueinfo_outbox_documents`` and
``glueinfo_outbox_last_confirm_timestamp_seconds``; a snapshot handed but
not yet written counts among the documents waiting.  At stop (and at the
end of ``run --once``) the writer writes what it holds, then the sender has
what is left of ``drain_timeout`` seconds to send what waits; what is left
is sent after the next start (and ``run --once`` exits 1).

pika (the ``amqp`` extra) is imported only when this output is made.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol
from urllib.parse import unquote, urlsplit

from glueinfo.core.backoff import next_wait
from glueinfo.core.files import read_password_file
from glueinfo.core.text import one_line
from glueinfo.publish.outbox import Message, Outbox, OutboxState, new_header
from glueinfo.publish.outputs import OutputContext, OutputPlugin, OutputResult, Publication

log = logging.getLogger(__name__)

OUTBOX_DIR = "amqp-outbox"
# Document (as [amqp] documents names it) -> (routing key's first words, content type).
DOCUMENTS = {"glue21-json": ("glue21.json", "application/json"), "node-xml": ("node.xml", "application/xml"),
             "glue-ldif": ("glue.ldif", "text/plain"), "crr-json": ("crr.json", "application/json")}
# Documents sent compressed (content_encoding gzip): the LDIF of a large site is tens of MB of
# repetitive text, a tenth of that compressed, well below a federation view's message limit.
GZIPPED = {"glue.ldif"}
GZIP_LEVEL = 1  # fastest: the writer thread's CPU is the site's, at every publish that changed the LDIF
# The LDIF's entry texts are encoded and compressed in blocks of about this many characters: one
# zlib call per block (it lets the publishing thread run meanwhile), not one per 200-byte entry.
BLOCK_CHARS = 256 * 1024
MAX_ROUTING_KEY = 200  # AMQP allows 255 bytes; the key also names the outbox's files
IDLE_POLL_S = 5.0  # how often an idle connection answers the broker's heartbeats


@dataclass(frozen=True)
class AmqpSettings:
    """``[amqp]``, typed and checked (:func:`amqp_settings`)."""

    url: str
    host: str
    port: int
    virtual_host: str
    user: str
    tls: bool
    password_file: str = ""
    exchange: str = "glueinfo"
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    user_id: str = ""  # stamped on every message: RabbitMQ checks it against the login, federation views trust it
    documents: tuple[str, ...] = ("glue21-json",)
    timeout_s: float = 10.0
    retry_min_s: float = 1.0
    retry_max_s: float = 20.0
    resend_s: float = 600.0
    drain_s: float = 5.0

    @property
    def where(self) -> str:
        """The broker as logs name it (no password: the URL holds none)."""
        return f"{'amqps' if self.tls else 'amqp'}://{self.host}:{self.port}"


def gzip_chunks(chunks: Iterable[bytes]) -> bytes:
    """The chunks gzip-compressed as one stream, never joined first (a 10,000-host LDIF is 40 MB);
    the header's time is 0, so the same LDIF gives the same bytes (and is not sent again)."""
    deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # 16+: a gzip header, mtime 0
    parts = [deflate.compress(chunk) for chunk in chunks]
    parts.append(deflate.flush())
    return b"".join(parts)


def site_word(site_id: str) -> str:
    """``[site] id`` as one word of a topic routing key: letters, digits, ``-`` and ``_`` kept,
    every other character's UTF-8 bytes written ``%XX``."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "".join(f"%{b:02X}" for b in c.encode())
                   for c in site_id)


def routing_key(document: str, site_id: str) -> str:
    return f"{DOCUMENTS[document][0]}.{site_word(site_id)}"


def read_password(path: str) -> str:
    """The first line of ``path`` ('' for no path); ValueError (one line) when unreadable."""
    return read_password_file(path, "[amqp] password_file")


def amqp_settings(section: Mapping[str, Any]) -> AmqpSettings:
    """``[amqp]`` checked: ValueError (one line naming the key) for a URL that is not
    amqp(s)://USER@HOST[:PORT][/VHOST], a password in the URL, TLS files on a plain URL or files
    that cannot be read, an empty exchange, an unknown document."""
    url = str(section.get("url") or "")
    if not url:
        raise ValueError("[amqp] url is not set (e.g. amqps://USER@broker.example.org/)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"[amqp] url {url!r}: {exc}") from None
    if parts.scheme not in ("amqp", "amqps"):
        raise ValueError(f"[amqp] url {url!r}: the scheme must be amqp or amqps")
    if not parts.hostname:
        raise ValueError(f"[amqp] url {url!r}: no broker host")
    if parts.password is not None:
        raise ValueError("[amqp] url: holds a password; put it in [amqp] password_file (config files are often readable)")
    if parts.query or parts.fragment:
        raise ValueError(f"[amqp] url {url!r}: no query or fragment (TLS files are [amqp] ca_file, cert_file, key_file)")
    tls = parts.scheme == "amqps"
    cert_file = str(section.get("cert_file") or "")
    user = unquote(parts.username or "")
    if not user and not cert_file:
        raise ValueError(f"[amqp] url {url!r}: no user (amqp://USER@HOST/), and no client certificate ([amqp] cert_file) "
                         "to authenticate with")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    files = {name: str(section.get(name) or "") for name in ("ca_file", "cert_file", "key_file")}
    if not tls and any(files.values()):
        raise ValueError(f"[amqp] {', '.join(k for k, v in files.items() if v)}: TLS files need an amqps:// url")
    for name, file in files.items():
        if file and not os.access(file, os.R_OK):
            raise ValueError(f"[amqp] {name} {file}: cannot be read")
    if files["key_file"] and not files["cert_file"]:
        raise ValueError("[amqp] key_file: no cert_file to go with it")
    documents = tuple(str(d) for d in section.get("documents") or ())
    unknown = [d for d in documents if d not in DOCUMENTS]
    if unknown or not documents:
        raise ValueError(f"[amqp] documents: {', '.join(unknown) or 'none'}: choose from {', '.join(DOCUMENTS)}")
    exchange = str(section.get("exchange") or "")
    if not exchange:
        raise ValueError("[amqp] exchange is empty")
    password_file = str(section.get("password_file") or "")
    read_password(password_file)  # refused now, not at the first connection
    retry_min = float(section.get("retry_min", 1.0))
    return AmqpSettings(
        url=url, host=parts.hostname, port=port or (5671 if tls else 5672), virtual_host=unquote(path) or "/",
        user=user, tls=tls, password_file=password_file, exchange=exchange, documents=documents,
        user_id=str(section.get("user_id") or "") or user,
        timeout_s=float(section.get("timeout", 10.0)), retry_min_s=retry_min,
        retry_max_s=max(retry_min, float(section.get("retry_max", 20.0))), resend_s=float(section.get("resend", 600.0)),
        drain_s=float(section.get("drain_timeout", 5.0)), **files)


# -- the broker side -------------------------------------------------------------------------------

class Link(Protocol):
    """A connection to the broker with a channel in confirm mode on the declared exchange."""

    def publish(self, message: Message) -> None:
        """Send ``message`` and return once the broker confirmed it; raises when it refused it
        or the connection failed."""

    def idle(self) -> None:
        """Answer the broker (heartbeats) while nothing is to be sent; raises when the connection is gone."""

    def close(self) -> None: ...


def connection_parameters(settings: AmqpSettings, name: str) -> Any:
    """pika's ConnectionParameters for the broker (password read now, so a changed one applies
    at the next connection; TLS context with the CA and client certificate); ``name`` is what
    the broker's management shows for the connection."""
    import pika

    password = read_password(settings.password_file)
    if settings.user:
        credentials = pika.PlainCredentials(settings.user, password, erase_on_connect=True)
    else:  # the client certificate's subject is the identity (RabbitMQ's rabbitmq_auth_mechanism_ssl)
        credentials = pika.credentials.ExternalCredentials()
    ssl_options = None
    if settings.tls:
        context = ssl.create_default_context(cafile=settings.ca_file or None)
        if settings.cert_file:
            context.load_cert_chain(settings.cert_file, settings.key_file or None)
        ssl_options = pika.SSLOptions(context, server_hostname=settings.host)
    return pika.ConnectionParameters(
        host=settings.host, port=settings.port, virtual_host=settings.virtual_host, credentials=credentials,
        ssl_options=ssl_options, connection_attempts=1, socket_timeout=settings.timeout_s,
        stack_timeout=settings.timeout_s, blocked_connection_timeout=settings.timeout_s,
        client_properties={"connection_name": name})


class PikaLink:
    """A :class:`Link` over pika's BlockingConnection (one thread: the sender's)."""

    def __init__(self, settings: AmqpSettings) -> None:
        import pika

        self.settings = settings
        self._pika = pika
        self.connection = pika.BlockingConnection(connection_parameters(settings, "glueinfo amqp output"))
        try:
            self.channel = self.connection.channel()
            self.channel.exchange_declare(exchange=settings.exchange, exchange_type="topic", durable=True)
            self.channel.confirm_delivery()
        except BaseException:
            self.close()
            raise

    def publish(self, message: Message) -> None:
        header = message.header
        properties = self._pika.BasicProperties(
            content_type=header.content_type, delivery_mode=2, message_id=header.id, timestamp=int(header.created),
            content_encoding="gzip" if header.document in GZIPPED else None, user_id=self.settings.user_id or None,
            app_id="glueinfo", headers={"document": header.document, "site_id": header.site_id})
        # With confirms on, this returns once the broker acked it, and raises NackError when it nacked it.
        self.channel.basic_publish(self.settings.exchange, header.routing_key, message.body, properties)

    def idle(self) -> None:
        self.connection.process_data_events(time_limit=0)

    def close(self) -> None:
        try:
            if self.connection.is_open:
                self.connection.close()
        except Exception as exc:  # the connection is being dropped anyway
            log.debug("AMQP close: %s", one_line(exc))


def describe(exc: BaseException) -> str:
    """One line for a failure to reach or use the broker: the innermost cause pika wraps
    (AMQPConnectionError holding a connector error holding the socket's or TLS's), by type."""
    cause = exc
    for _ in range(5):
        inner: object = None
        if type(cause).__name__ == "AMQPConnectionError" and cause.args:
            inner = cause.args[0]
        elif tried := getattr(cause, "exceptions", None):  # a connection workflow that tried several addresses
            inner = list(tried)[-1]
        else:
            inner = getattr(cause, "exception", None)
        if not isinstance(inner, BaseException):
            break
        cause = inner
    text = one_line(cause) or ""
    name = type(cause).__name__
    if name in ("ProbableAuthenticationError", "AuthenticationError", "ProbableAccessDeniedError"):
        return f"refused the login: {text or name}"
    return f"{name}: {text}" if text else name


# -- the sender thread -----------------------------------------------------------------------------

class Sender:
    """Sends what waits in the outbox, on its own thread (see the module docstring).

    ``connect`` makes a :class:`Link` (raises when the broker cannot be used); ``clock`` stamps
    confirms.  Waits between attempts use the monotonic clock."""

    def __init__(self, outbox: Outbox, connect: Callable[[], Link], where: str, retry_min_s: float, retry_max_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.outbox, self.connect, self.where = outbox, connect, where
        self.retry_min_s, self.retry_max_s = retry_min_s, retry_max_s
        self.clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._drain_until = 0.0
        self._thread: Optional[threading.Thread] = None
        self._state = threading.Lock()
        self.link: Optional[Link] = None
        self.up: Optional[bool] = None
        self.last_error: Optional[str] = None
        self.failing_since: Optional[float] = None
        self.last_confirm_at: Optional[float] = None
        self.confirmed_total = 0
        self.backoff_s = 0.0
        self._next_attempt = 0.0  # monotonic

    # -- control, from the publishing thread -----------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="glueinfo-amqp-sender", daemon=True)
            self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, drain_s: float = 0.0) -> bool:
        """Stop the thread after at most ``drain_s`` seconds spent sending what waits (not while
        waiting to retry a broker that failed); returns whether it ended in time (a thread stuck
        in a connection is left, as a daemon thread, to the process's end)."""
        self._drain_until = time.monotonic() + drain_s
        self._stop.set()
        self._wake.set()
        if self._thread is None:
            return True
        self._thread.join(drain_s + 2.0)
        return not self._thread.is_alive()

    def state(self) -> tuple[Optional[bool], Optional[str], Optional[float], Optional[float], int]:
        with self._state:
            return self.up, self.last_error, self.failing_since, self.last_confirm_at, self.confirmed_total

    # -- the thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                waiting = self.outbox.waiting()
                if self._stop.is_set():
                    if not waiting or time.monotonic() >= self._drain_until or time.monotonic() < self._next_attempt:
                        return
                if not waiting:
                    self._idle()
                    continue
                delay = self._next_attempt - time.monotonic()
                if delay > 0:  # backing off: newer documents replace older ones meanwhile
                    self._stop.wait(delay)
                    continue
                self._send(waiting)
        except Exception as exc:  # a bug must be seen, not end the pushing silently
            log.error("AMQP %s: the sender stopped: %s", self.where, describe(exc), exc_info=True)
            with self._state:
                self.up, self.last_error = False, f"the sender stopped: {describe(exc)}"
        finally:
            self._drop_link()

    def _idle(self) -> None:
        self._wake.wait(IDLE_POLL_S)
        self._wake.clear()
        if self.link is not None and not self._wake.is_set():
            try:
                self.link.idle()
            except Exception as exc:  # the broker went away while idle: reconnect when there is something to send
                log.info("AMQP %s: connection lost while idle: %s", self.where, describe(exc))
                self._drop_link()

    def _send(self, keys: Sequence[str]) -> None:
        self._wake.clear()
        try:
            if self.link is None:
                self.link = self.connect()
            sent = 0
            for key in keys:
                message = self.outbox.read(key)
                if message is None:
                    continue
                self.link.publish(message)
                at = self.clock()
                self.outbox.confirmed(key, message.header.id, at)
                sent += 1
                with self._state:
                    self.last_confirm_at, self.confirmed_total = at, self.confirmed_total + 1
        except Exception as exc:  # whatever the broker or the network did: retried later, never raised
            self._failed(exc)
            return
        with self._state:
            if self.failing_since is not None:
                log.info("AMQP %s: confirmed again after %.0f s (%d documents sent)", self.where,
                         self.clock() - self.failing_since, sent)
            self.up, self.last_error, self.failing_since = True, None, None
        self.backoff_s, self._next_attempt = 0.0, 0.0

    def _failed(self, exc: BaseException) -> None:
        self._drop_link()
        error = describe(exc)
        self.backoff_s = next_wait(self.backoff_s, self.retry_min_s, self.retry_max_s)
        self._next_attempt = time.monotonic() + self.backoff_s
        with self._state:
            first = self.failing_since is None
            changed = error != self.last_error
            self.up, self.last_error = False, error
            if first:
                self.failing_since = self.clock()
        depth = self.outbox.depth()
        level = logging.WARNING if first or changed else logging.INFO
        log.log(level, "AMQP %s: %s; %d documents wait in %s; next attempt in %.3g s", self.where, error, depth,
                self.outbox.directory, self.backoff_s)

    def _drop_link(self) -> None:
        if self.link is not None:
            self.link.close()
            self.link = None


# -- the hand-over from the publish to the outbox ---------------------------------------------------

@dataclass(frozen=True)
class Snapshot:
    """One document of one publish as the publish hands it over: references to the publish's own
    pieces, nothing copied.  ``texts`` (the GLUE 1.3 entries' LDIF texts, the render cache's
    strings in the build's own list, which no later publish changes) come first, then ``pieces``
    (bytes: the JSON, the Node XML's pieces, the o=glue tree).  ``resend``: no document, a request
    to send the key's last confirmed one again if ``resend`` seconds have passed (nothing changed)."""

    document: str  # as [amqp] documents names it
    key: str
    created: float = 0.0
    texts: Sequence[str] = ()
    pieces: Sequence[bytes] = ()
    resend: bool = False

    def chunks(self) -> Iterator[bytes]:
        """The document's bytes, the texts encoded in blocks of about :data:`BLOCK_CHARS`."""
        block: list[str] = []
        size = 0
        for text in self.texts:
            block.append(text)
            size += len(text)
            if size >= BLOCK_CHARS:
                yield "".join(block).encode()
                block, size = [], 0
        if block:
            yield "".join(block).encode()
        yield from self.pieces


class Handoff:
    """The snapshots handed over and not yet in the outbox, the newest per key; thread-safe, its
    lock held only to look at or change its dicts (never while compressing or writing), so a
    publish that hands over never waits for the writer.

    A snapshot is *handed* (waiting for the writer), then *writing* (taken), then gone (in the
    outbox) or *held* (its write failed: written again at the next hand-over, unless that one
    brings a newer snapshot of its key).  A newer snapshot replaces one not yet taken; a resend
    request never replaces a document."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handed: dict[str, Snapshot] = {}
        self._writing: dict[str, Snapshot] = {}
        self._held: dict[str, Snapshot] = {}

    def hand(self, snapshots: Iterable[Snapshot]) -> None:
        with self._lock:
            for key, held in self._held.items():  # the write that failed is tried again now
                self._handed.setdefault(key, held)
            self._held.clear()
            for snapshot in snapshots:
                known = self._handed.get(snapshot.key)
                if snapshot.resend and known is not None and not known.resend:
                    continue
                self._handed[snapshot.key] = snapshot

    def take(self) -> list[Snapshot]:
        """What was handed, now the writer's (oldest hand-over first)."""
        with self._lock:
            taken = list(self._handed.values())
            self._handed.clear()
            self._writing.update((s.key, s) for s in taken if not s.resend)
            return taken

    def done(self, snapshot: Snapshot, written: bool) -> None:
        """The writer is done with ``snapshot``: in the outbox (or not needed), or, ``written``
        False, held for the next hand-over unless a newer one of its key was handed meanwhile."""
        with self._lock:
            if self._writing.get(snapshot.key) is snapshot:
                del self._writing[snapshot.key]
            if not written and snapshot.key not in self._handed:
                self._held[snapshot.key] = snapshot

    def handed(self) -> bool:
        """Whether something waits for the writer (held snapshots wait for the next hand-over)."""
        with self._lock:
            return bool(self._handed)

    def unwritten(self) -> set[str]:
        """The keys with a document handed over and not yet in the outbox (resend requests aside)."""
        with self._lock:
            return {key for table in (self._handed, self._writing, self._held)
                    for key, snapshot in table.items() if not snapshot.resend}


class Writer:
    """Writes what the publish hands over to the outbox, on its own thread (not the sender's: a
    sender stuck on a hung broker for its ``timeout`` must not keep the newest document out of the
    outbox, where it survives a kill -9).

    ``store(snapshot)`` writes one snapshot (or decides it need not be) and says whether the outbox
    got something to send; it may raise on a write that fails (WriteError, a full disk): that is
    logged, kept as :attr:`error` (one line) and the snapshot held for the next hand-over; the
    thread goes on.  ``written()`` is called when the outbox got something (the sender's wake)."""

    def __init__(self, handoff: Handoff, store: Callable[[Snapshot], bool], written: Callable[[], None],
                 directory: str) -> None:
        self.handoff, self.store, self.written, self.directory = handoff, store, written, directory
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()  # one writer at a time: the thread, or a test's write_handed
        self.error: Optional[str] = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="glueinfo-amqp-outbox", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        self._ready.set()

    def stop(self, timeout_s: float) -> bool:
        """Stop the thread once it wrote what was handed; returns whether it ended within
        ``timeout_s`` (a thread stuck on the disk is left, as a daemon thread, to the process's
        end; what it holds still counts as waiting)."""
        self._stop.set()
        self._ready.set()
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            self._ready.wait()
            self._ready.clear()
            self.write_handed()
            if self._stop.is_set() and not self.handoff.handed():
                return

    def write_handed(self) -> bool:
        """Write every snapshot handed over (on the calling thread: the writer's, or a caller's
        that must know the hand-over is done: once this returns, everything handed before it is in
        the outbox, decided unneeded, or held after a failed write); True, and ``written()``
        called, when the outbox got something to send."""
        with self._lock:
            taken = self.handoff.take()
            if not taken:
                return False
            stored, errors = False, []
            for snapshot in taken:
                try:
                    stored = self.store(snapshot) or stored
                except Exception as exc:  # a full disk, or a bug: said, and tried again; never the thread's end
                    error = one_line(exc) or type(exc).__name__
                    errors.append(error)
                    self.handoff.done(snapshot, written=False)
                    log.warning("AMQP outbox %s: %s %s not written: %s; tried again at the next publish", self.directory,
                                snapshot.document, snapshot.key, error, exc_info=not isinstance(exc, OSError))
                    continue
                self.handoff.done(snapshot, written=True)
            self.error = f"outbox: {errors[0]}; tried again at the next publish" if errors else None
        if stored:
            self.written()
        return stored


# -- the output ------------------------------------------------------------------------------------

class AmqpOutput:
    """The ``amqp`` output (module docstring).  Its writer and sender start at the first publish,
    so an output made only to check a config (or a reload's, until it takes over) sends nothing."""

    name = "amqp"

    def __init__(self, settings: AmqpSettings, site_id: str, outbox_dir: str, clock: Callable[[], float] = time.time,
                 connect: Optional[Callable[[], Link]] = None) -> None:
        self.settings, self.site_id, self.clock = settings, site_id, clock
        self.keys = {document: routing_key(document, site_id) for document in settings.documents}
        self.outbox = Outbox(outbox_dir)
        self.sender = Sender(self.outbox, connect or (lambda: PikaLink(settings)), settings.where, settings.retry_min_s,
                             settings.retry_max_s, clock)
        self.handoff = Handoff()
        self.writer = Writer(self.handoff, self._store, self.sender.wake, outbox_dir)

    def publish(self, publication: Publication) -> OutputResult:
        """Hand the publication's documents to the writer thread and return (no compression, disk
        or broker here).  The result's error says what the broker or the last outbox write did."""
        self.writer.start()
        self.sender.start()
        documents = publication.documents
        snapshots, errors = [], []
        for document, key in self.keys.items():
            if documents is None or (document == "node-xml" and not publication.hosts_changed):
                snapshots.append(Snapshot(document, key, resend=True))
                continue
            snapshot = self._snapshot(document, key, documents)
            if snapshot is None:
                errors.append(f"{document} not made")
                continue
            snapshots.append(snapshot)
        self.handoff.hand(snapshots)
        self.writer.wake()
        handed = sum(1 for snapshot in snapshots if not snapshot.resend)
        if self.writer.error is not None:
            errors.append(self.writer.error)
        up, error, failing_since, _last, _count = self.sender.state()
        depth = self.depth()
        note = f"AMQP {handed} handed over, {depth} waiting"
        if error is not None:
            failing_s = max(0.0, self.clock() - (failing_since or self.clock()))
            errors.append(f"{self.settings.where}: {error} (failing for {failing_s:.0f} s); {depth} documents wait in the outbox")
        return OutputResult(note=note, error="; ".join(errors) or None, written=bool(handed))

    @staticmethod
    def _snapshot(document: str, key: str, documents: Any) -> Optional[Snapshot]:
        """The document as references to the publication's pieces, made (once per publish) now."""
        created = documents.site.assembled_at
        if document == "node-xml":
            chunks: Optional[Sequence[bytes]] = documents.node_xml_chunks()
            return None if chunks is None else Snapshot(document, key, created, pieces=chunks)
        if document == "glue-ldif":  # both trees as [glue] versions has them, as `glueinfo ldif` prints them
            ldif = documents.ldif_pieces()
            if ldif.build is not None and ldif.build.texts:  # a daemon's: the render cache's texts, shared
                return Snapshot(document, key, created, texts=ldif.build.texts, pieces=(ldif.tail,))
            return Snapshot(document, key, created, pieces=(ldif.to_bytes(),))  # a one-shot publish's
        body: Optional[bytes] = documents.glue2_json if document == "glue21-json" else documents.crr_json
        return None if body is None else Snapshot(document, key, created, pieces=(body,))

    def _store(self, snapshot: Snapshot) -> bool:
        """The writer's work on one snapshot (on its thread): a resend request carried out if due;
        a document compressed (the LDIF) and put in the outbox unless its bytes are those last put
        and that one is still waiting, or was confirmed less than ``resend`` seconds ago.  True
        when something now waits to be sent; WriteError."""
        if snapshot.resend:
            return self._resend_if_due(snapshot.key)
        kind, content_type = DOCUMENTS[snapshot.document][0], DOCUMENTS[snapshot.document][1]
        chunks: Sequence[bytes]
        chunks = [gzip_chunks(snapshot.chunks())] if kind in GZIPPED else list(snapshot.chunks())
        header = new_header(snapshot.key, content_type, kind, self.site_id, chunks, snapshot.created)
        last = self.outbox.last(snapshot.key)
        if last is not None:
            previous, waiting, at = last
            if previous.digest == header.digest and (waiting or self.clock() - at < self.settings.resend_s):
                return False
        self.outbox.put(header, chunks)
        return True

    def _resend_if_due(self, key: str) -> bool:
        last = self.outbox.last(key)
        if last is None or last[1] or self.clock() - last[2] < self.settings.resend_s:
            return False
        return self.outbox.resend(key)

    def depth(self) -> int:
        """Documents waiting: in the outbox, or handed over and not yet written there."""
        return len(set(self.outbox.waiting()) | self.handoff.unwritten())

    def outbox_state(self) -> OutboxState:
        """What /metrics shows: documents waiting, the last confirm, whether the broker answers,
        and the broker's or the outbox's last error."""
        up, error, _since, last, count = self.sender.state()
        problems = [e for e in (self.writer.error, error) if e]
        return OutboxState(self.name, self.depth(), last, count, up, "; ".join(problems) or None)

    def close(self, drain: bool = True) -> None:
        """Stop the writer once it wrote what was handed over, then the sender, after at most
        what is left of ``drain_timeout`` seconds spent sending what waits (``drain`` False: at
        once, a reload's next output takes over the outbox)."""
        started = time.monotonic()
        if not self.writer.stop(max(self.settings.drain_s, 2.0)):
            log.warning("AMQP outbox %s: the writer did not finish within %g s; %d documents not written",
                        self.outbox.directory, max(self.settings.drain_s, 2.0), len(self.handoff.unwritten()))
        drain_s = max(0.0, self.settings.drain_s - (time.monotonic() - started)) if drain and self.sender.running else 0.0
        if not self.sender.stop(drain_s):
            log.warning("AMQP %s: the sender did not stop within %g s; %d documents wait in %s for the next start",
                        self.settings.where, self.settings.drain_s, self.depth(), self.outbox.directory)
        elif self.depth():
            log.info("AMQP %s: %d documents wait in %s for the next start", self.settings.where, self.depth(),
                     self.outbox.directory)
        self.outbox.close()


def _make(context: OutputContext) -> AmqpOutput:
    settings = amqp_settings(context.sections.get("amqp", {}))
    site_id = context.settings.site_id
    if not site_id:
        raise ValueError("[site] id is not set: the amqp output's routing keys carry it")
    if "glue21-json" in settings.documents and not context.settings.publishes("2.0"):
        raise ValueError("[amqp] documents: glue21-json needs GLUE 2 ([glue] versions has no 2.0)")
    too_long = [key for key in (routing_key(d, site_id) for d in settings.documents) if len(key.encode()) > MAX_ROUTING_KEY]
    if too_long:
        raise ValueError(f"[site] id is too long for a routing key ({too_long[0][:40]}...: over {MAX_ROUTING_KEY} bytes)")
    state_dir = str(context.sections.get("run", {}).get("state_dir") or "")
    if not state_dir:
        raise ValueError("[run] state_dir is empty: the amqp output keeps its outbox there")
    if context.options.get("amqp_connect") is None and importlib.util.find_spec("pika") is None:
        raise ValueError("needs the Python package pika: pip install 'glueinfo[amqp]' (Debian: python3-pika)")
    return AmqpOutput(settings, site_id, os.path.join(state_dir, OUTBOX_DIR), context.clock,
                      connect=context.options.get("amqp_connect"))


OUTPUT = OutputPlugin("amqp", _make, description="push the GLUE 2.1 JSON (and Node XML) to an AMQP broker, "
                      "through an outbox in [run] state_dir")
