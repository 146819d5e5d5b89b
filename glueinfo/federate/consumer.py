"""The federation view's consumer: its own durable queue on the sites' exchange, read on one thread.

At each connection it declares the exchange (a durable topic exchange, as
glueinfo's amqp output declares it), its durable queue (``[federate]
queue``: one per view, so several views consuming the same exchange each
get every document) and one binding ``KIND.#`` per kind it keeps.  While
the view is away the broker keeps the messages in that queue.

Each message is handed to ``deliver`` and acknowledged only once it
returned: a message it accepted is on disk by then, one it refused is
dropped for good (a refusal is never retried).  While messages come, the
broker is read every half second (``ROUND_S``): what arrived meanwhile is
taken at once and acknowledged in one ``multiple`` ack.  Each read has its
own cost in pika and the kernel (a wake-up, a poll, the reads, an
acknowledgement): at 200 sites every 60 s, with nothing done with the
messages, pika took 0.6 ms of CPU a message when each was read as it
came, 0.37 ms read every quarter second and 0.2 ms every half second; a
change reaches the view at most half a second later.  With nothing coming,
it waits for the broker without a time limit (pika answers its heartbeats
meanwhile); :meth:`Consumer.stop` wakes it.  When ``deliver`` raises (the
disk refuses), the message is given back to the broker (nack with
requeue) and the consumer pauses for the retry wait before reading again,
so nothing is lost and the disk is not hammered.  ``prefetch`` bounds the
messages held unacknowledged.

Failure behaviour: a broker that cannot be reached or drops the connection
is one WARNING (then INFO while it lasts), retried after ``retry_min``
doubling to ``retry_max`` seconds; the rest of the view (LDAP, HTTP) goes
on with what it holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from glueinfo.core.backoff import next_wait
from glueinfo.publish.outputs.amqp import AmqpSettings, connection_parameters, describe

log = logging.getLogger(__name__)

Deliver = Callable[[str, Any, bytes], None]  # (routing key, pika BasicProperties, body)
ROUND_S = 0.5  # while messages come, the broker is read (and what was kept acknowledged) this often


@dataclass
class ConsumerState:
    up: Optional[bool] = None
    last_error: Optional[str] = None
    failing_since: Optional[float] = None
    last_message_at: Optional[float] = None
    messages_total: int = 0


class Consumer:
    """See the module docstring.  ``start`` runs it on a daemon thread; ``stop`` ends it."""

    def __init__(self, settings: AmqpSettings, queue: str, kinds: Sequence[str], deliver: Deliver, prefetch: int = 64,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings, self.queue, self.kinds, self.deliver = settings, queue, tuple(kinds), deliver
        self.prefetch = prefetch
        self.clock = clock
        self.state = ConsumerState()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._backoff_s = 0.0
        self._paused = False
        self._unacked = 0  # the delivery tag of the last message kept and not yet acknowledged
        self._unacked_count = 0
        self._connection: Any = None  # the open connection, for stop() to wake

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="glueinfo-federate-consumer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        connection = self._connection
        if connection is not None:
            try:  # the consumer waits on the broker without a time limit: woken to see the stop
                connection.add_callback_threadsafe(lambda: None)
            except Exception as exc:  # closed meanwhile: its thread is ending anyway
                log.debug("federation broker wake at stop: %s", exc)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._paused = False
            self._unacked = self._unacked_count = 0  # delivery tags belong to a channel: a new one starts again
            try:
                self._consume()
            except Exception as exc:  # the broker, the network, pika: tried again later, never raised
                self._failed(describe(exc))
            if self._stop.is_set():
                return
            self._stop.wait(self._backoff_s or self.settings.retry_min_s)

    def _consume(self) -> None:
        import pika

        connection = pika.BlockingConnection(connection_parameters(self.settings, f"glueinfo federate {self.queue}"))
        try:
            channel = connection.channel()
            channel.exchange_declare(exchange=self.settings.exchange, exchange_type="topic", durable=True)
            channel.queue_declare(queue=self.queue, durable=True)
            for kind in self.kinds:
                channel.queue_bind(queue=self.queue, exchange=self.settings.exchange, routing_key=f"{kind}.#")
            channel.basic_qos(prefetch_count=self.prefetch)
            channel.basic_consume(queue=self.queue, on_message_callback=self._on_message)
            if self.state.failing_since is not None:
                log.info("federation broker %s: consuming again after %.0f s", self.settings.where,
                         self.clock() - self.state.failing_since)
            self.state.up, self.state.last_error, self.state.failing_since = True, None, None
            self._backoff_s = 0.0
            self._connection = connection
            if self._stop.is_set():  # stopped before stop() could see the connection to wake it
                return
            coming = False  # whether the last round brought messages
            while not self._stop.is_set():
                before = self.state.messages_total
                if coming:  # let the next ones gather in the socket, then take all that came
                    if self._stop.wait(ROUND_S):
                        break
                    while True:
                        taken = self.state.messages_total
                        connection.process_data_events(time_limit=0)
                        if self.state.messages_total == taken or self._paused:
                            break
                        if self._unacked_count >= max(1, self.prefetch // 2):  # a backlog: the broker sends on
                            self._ack(channel)
                else:  # nothing came: wait for the broker (a message, its heartbeats, stop's wake-up)
                    connection.process_data_events(time_limit=None)
                if self._paused:  # the disk refused: give the broker its messages back and wait
                    channel.cancel()
                    return
                self._ack(channel)
                coming = self.state.messages_total != before
            self._ack(channel)  # stopping: what was kept is acknowledged, not delivered again
        finally:
            self._connection = None
            try:
                if connection.is_open:
                    connection.close()
            except Exception as exc:  # closing a connection that is going anyway
                log.debug("federation broker close: %s", exc)

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        self.state.messages_total += 1
        self.state.last_message_at = self.clock()
        if self._paused:  # delivered before the pause took effect: given back untouched
            channel.basic_nack(delivery_tag=method.delivery_tag, requeue=True)
            return
        try:
            self.deliver(method.routing_key, properties, body)
        except OSError as exc:  # not kept: the broker keeps it and delivers it again after the pause
            self._ack(channel)  # the ones before it were kept
            channel.basic_nack(delivery_tag=method.delivery_tag, requeue=True)
            self._failed(f"a document could not be kept: {exc}")
            self._paused = True
            return
        self._unacked = method.delivery_tag
        self._unacked_count += 1

    def _ack(self, channel: Any) -> None:
        """Acknowledge every message kept so far in one frame (``multiple``): once a round, not
        one frame per message, which was a tenth of the view's CPU (the prefetch bounds what is
        held unacknowledged meanwhile)."""
        if self._unacked:
            channel.basic_ack(delivery_tag=self._unacked, multiple=True)
            self._unacked = self._unacked_count = 0

    def _failed(self, error: str) -> None:
        first = self.state.failing_since is None
        self._backoff_s = next_wait(self._backoff_s, self.settings.retry_min_s, self.settings.retry_max_s)
        if first:
            self.state.failing_since = self.clock()
        level = logging.WARNING if first or error != self.state.last_error else logging.INFO
        self.state.up, self.state.last_error = False, error
        log.log(level, "federation broker %s: %s; the view keeps what it holds; next attempt in %.3g s",
                self.settings.where, error, self._backoff_s)
