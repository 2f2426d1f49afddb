"""The client connections one worker of ``placement-svc serve`` holds, from
accepted to closed (http_worker.py drives them; framing.py says where a
request ends and what the limits are).

Each connection goes READING (its request comes in, without blocking) ->
READY (whole, queued for the worker to run) -> WRITING (its answer goes
out) -> LINGERING (half-closed, what the client still sends is dropped) ->
closed; a request the application never sees (408, 413, 503) goes from
READING straight to WRITING. An answer that keeps its connection open
(keep-alive) goes from WRITING back to READING, for the next request.
``Connections`` keeps them on the worker's selector, counts the memory their
unfinished requests take, and applies the time-outs and caps that the
module text of http_worker.py lists.
"""

from __future__ import annotations

import errno
import selectors
import socket
import time
from collections import deque

from gunicorn import util as gunicorn_util

from placement_svc import errors
from placement_svc.cmd import framing
from placement_svc.http import reading

READ_SIZE = 65536
# After its answer a connection is half-closed and what the client still
# sends is read and dropped (so that the kernel does not reset the
# connection under the answer) for at most this long and this much.
LINGER_SECONDS = 2.0
LINGER_BYTES = 65536
# When the worker stops, a connection that has sent nothing yet is given
# this long to start.
STOP_GRACE_SECONDS = 1.0

READING, READY, WRITING, LINGERING = "reading", "ready", "writing", "lingering"


class Connection:
    """One client connection and what has come and is to go."""

    def __init__(self, sock, peer, server_address, now: float):
        self.sock = sock
        self.key = sock.fileno()
        self.peer = peer
        self.server_address = server_address
        self.data = bytearray()
        self.accepted = now
        self.progress = now  # the last time a byte came or went
        self.state = READING
        self.head_end = -1  # the index just past the blank line
        self.scanned = 0  # how far the blank line was looked for
        self.end: int | None = None  # the whole request's length, once known
        self.chunk_at = 0
        self.continued = False  # "100 Continue" sent
        self.handed_over = False  # gunicorn's parser judges it as it is
        self.out = bytearray()
        self.lingered = 0
        self.keep = False  # the answer keeps the connection open
        self.answered = 0  # answers given on it

    @property
    def idle(self) -> bool:
        """Kept open after an answer, and nothing of a next request yet."""
        return self.state == READING and bool(self.answered) and not self.data

    def fileno(self) -> int:
        return self.sock.fileno()


class Connections:
    """The connections of one worker, registered on its ``selector``: at
    most ``cap`` of them; ``ready`` holds those whose request is whole, in
    the order they became so. ``log`` is the worker's (gunicorn's) logger;
    ``notify`` tells the master the worker is alive while it waits on a
    reader of a huge answer."""

    def __init__(self, selector: selectors.BaseSelector, cap: int, log, notify):
        self.selector = selector
        self.cap = cap
        self.log = log
        self.notify = notify
        self.by_key: dict[int, Connection] = {}
        self.ready: deque[Connection] = deque()
        self.pending_bytes = 0
        self.keeping = True  # answers may keep connections open (not once stopping)

    def __len__(self) -> int:
        return len(self.by_key)

    def adopt(self, sock, peer, server_address) -> None:
        """Take a connection just accepted, and read what came with it."""
        if len(self.by_key) >= self.cap:
            self._evict_oldest()
        sock.setblocking(False)
        gunicorn_util.close_on_exec(sock)
        connection = Connection(sock, peer, server_address, time.monotonic())
        self.by_key[sock.fileno()] = connection
        self.selector.register(sock, selectors.EVENT_READ, connection)
        self._read(connection)  # the request has often come with the connection

    def event(self, connection: Connection) -> None:
        """The selector says ``connection`` can be read or written."""
        if connection.state == READING:
            self._read(connection)
        elif connection.state == WRITING:
            self._write(connection)
        elif connection.state == LINGERING:
            self._linger(connection)

    # -- reading -----------------------------------------------------------

    def _read(self, connection: Connection) -> None:
        try:
            data = connection.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close(connection)
            return
        if not data:  # the client gave up before its request was whole
            self.close(connection)
            return
        now = time.monotonic()
        if connection.answered and not connection.data:
            connection.accepted = now  # a next request: its headers' time starts
        connection.data += data
        connection.progress = now
        self.pending_bytes += len(data)
        self._frame(connection)
        if connection.state == READING and self.pending_bytes > framing.LIMITS.pending_bytes:
            self._shed_largest()

    def _frame(self, connection: Connection) -> None:
        data = connection.data
        if connection.head_end < 0:
            found = data.find(b"\r\n\r\n", max(0, connection.scanned - 3))
            if found < 0:
                connection.scanned = len(data)
                line_end = data.find(b"\n", 0, framing.LIMITS.request_line + 2)
                if (line_end < 0 and len(data) > framing.LIMITS.request_line) or len(
                    data
                ) > framing.LIMITS.header_section:
                    self._hand_over(connection)  # the parser refuses it: 414 or 400
                return
            connection.head_end = found + 4
            head = framing.read_head(bytes(data[:found]))
            if head.unclear:
                self._hand_over(connection)
                return
            if head.content_length is not None:
                if head.content_length > reading.MAX_BODY_BYTES:
                    self._answer(
                        connection,
                        errors.PayloadTooLarge(
                            f"Request body is larger than {reading.MAX_BODY_BYTES} bytes."
                        ),
                    )
                    return
                connection.end = connection.head_end + head.content_length
            elif head.chunked:
                connection.chunk_at = connection.head_end
            else:
                connection.end = connection.head_end
            if head.expects_continue and len(data) < (connection.end or len(data) + 1):
                self._send_continue(connection)
        if connection.end is None:  # chunked
            position, whole, bad = framing.chunked_end(data, connection.chunk_at)
            connection.chunk_at = position
            if bad or whole:
                self._hand_over(connection)
            elif position - connection.head_end > reading.MAX_BODY_BYTES + 65536:
                self._answer(
                    connection,
                    errors.PayloadTooLarge(
                        f"Request body is larger than {reading.MAX_BODY_BYTES} bytes."
                    ),
                )
        elif len(data) >= connection.end:
            self._hand_over(connection)

    def _send_continue(self, connection: Connection) -> None:
        try:
            connection.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            connection.continued = True
        except OSError:
            pass

    def _hand_over(self, connection: Connection) -> None:
        """The request is whole (or the parser is to refuse it): queue it."""
        self.selector.unregister(connection.sock)
        self.pending_bytes -= len(connection.data)
        connection.state = READY
        self.ready.append(connection)

    # -- writing -----------------------------------------------------------

    def _answer(self, connection: Connection, error: errors.PlacementError) -> None:
        """Answer a request the application never sees, and close."""
        self.log.info("answered %s to %s: %s", error.status, connection.peer, error.message)
        self.pending_bytes -= len(connection.data)
        connection.data = bytearray()
        if connection.state == READING:
            self.selector.unregister(connection.sock)
        connection.out += framing.error_answer(error)
        self.start_writing(connection)

    def start_writing(self, connection: Connection) -> None:
        """Write out the answer in ``connection.out`` (the worker's, once it
        has run the request), without waiting for a slow reader."""
        connection.state = WRITING
        connection.progress = time.monotonic()
        self._write(connection, registered=False)

    def _write(self, connection: Connection, registered: bool = True) -> None:
        try:
            while connection.out:
                sent = connection.sock.send(connection.out)
                del connection.out[:sent]
                connection.progress = time.monotonic()
        except (BlockingIOError, InterruptedError):
            if not registered:
                self.selector.register(connection.sock, selectors.EVENT_WRITE, connection)
            return
        except OSError:
            if registered:
                self.selector.unregister(connection.sock)
            self.close(connection, registered=False)
            return
        if registered:
            self.selector.unregister(connection.sock)
        if connection.keep and self.keeping:
            self._read_next(connection)
        else:
            self._start_lingering(connection)

    def write_blocking(self, connection: Connection) -> None:
        """Write out a large answer's buffer before more is made: the
        worker waits for this client, for at most client_body_timeout
        seconds without progress."""
        while connection.out:
            try:
                sent = connection.sock.send(connection.out)
                del connection.out[:sent]
                connection.progress = time.monotonic()
                continue
            except (BlockingIOError, InterruptedError):
                pass
            self.notify()
            waited = time.monotonic() - connection.progress
            if waited > framing.LIMITS.body_timeout:
                self.log.info(
                    "closed %s: it read nothing of its answer for %d s",
                    connection.peer,
                    framing.LIMITS.body_timeout,
                )
                raise BrokenPipeError(errno.EPIPE, "the client stopped reading")
            selector = selectors.DefaultSelector()
            try:
                selector.register(connection.sock, selectors.EVENT_WRITE)
                selector.select(min(1.0, framing.LIMITS.body_timeout - waited + 0.01))
            finally:
                selector.close()

    def _read_next(self, connection: Connection) -> None:
        """The answer is out and the connection stays open: read the next
        request (what came past the last one's end may be some or all of it)."""
        connection.answered += 1
        connection.state = READING
        connection.head_end = -1
        connection.scanned = 0
        connection.end = None
        connection.chunk_at = 0
        connection.continued = False
        connection.keep = False
        connection.accepted = connection.progress = time.monotonic()
        self.pending_bytes += len(connection.data)
        self.selector.register(connection.sock, selectors.EVENT_READ, connection)
        if connection.data:
            self._frame(connection)

    def _start_lingering(self, connection: Connection) -> None:
        try:
            connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.close(connection, registered=False)
            return
        connection.state = LINGERING
        connection.progress = time.monotonic()
        self.selector.register(connection.sock, selectors.EVENT_READ, connection)

    def _linger(self, connection: Connection) -> None:
        try:
            data = connection.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        connection.lingered += len(data)
        if not data or connection.lingered > LINGER_BYTES:
            self.close(connection)

    # -- ending ------------------------------------------------------------

    def expire(self, now: float, stopping_since: float | None) -> None:
        """Close or answer what has taken too long (``stopping_since``: when
        the worker was told to stop, if it was)."""
        for connection in list(self.by_key.values()):
            if connection.state == READING:
                if stopping_since is not None and not connection.data:
                    if connection.idle or now - stopping_since > STOP_GRACE_SECONDS:
                        self.close(connection)
                elif connection.idle:
                    if now - connection.accepted > framing.LIMITS.keepalive_timeout:
                        self.close(connection)
                elif connection.head_end < 0:
                    if now - connection.accepted > framing.LIMITS.header_timeout:
                        self._time_out(connection, "its request line and headers")
                elif now - connection.progress > framing.LIMITS.body_timeout:
                    self._time_out(connection, "its request's body")
            elif connection.state == WRITING:
                if now - connection.progress > framing.LIMITS.body_timeout:
                    self.close(connection)
            elif connection.state == LINGERING:
                if now - connection.progress > LINGER_SECONDS:
                    self.close(connection)

    def _time_out(self, connection: Connection, what: str) -> None:
        if not connection.data:  # an idle connection: nothing to answer
            self.close(connection)
            return
        self._answer(
            connection,
            errors.RequestTimeout(f"The client did not send {what} in time."),
        )

    def _evict_oldest(self) -> None:
        """At the connection cap: close an idle connection kept open after
        its answer, or else the one that has been sending its request the
        longest (or lingering, or writing, in that order of preference), to
        make room."""
        for connection in self.by_key.values():
            if connection.idle:
                self.close(connection)
                return
        for state in (LINGERING, READING, WRITING):
            for connection in self.by_key.values():
                if connection.state == state:
                    if state == READING and connection.data:
                        self.log.info(
                            "closed %s to make room: %d connections",
                            connection.peer,
                            len(self.by_key),
                        )
                    self.close(connection)
                    return

    def _shed_largest(self) -> None:
        """Over max_pending_request_bytes: answer 503 to the unfinished
        request that holds the most memory."""
        unfinished = [c for c in self.by_key.values() if c.state == READING]
        largest = max(unfinished, key=lambda c: len(c.data))
        self._answer(
            largest,
            errors.ServiceUnavailable(
                "The service holds too many unfinished requests; try again.",
                headers={"Retry-After": "1"},
            ),
        )

    def close(self, connection: Connection, registered: bool | None = None) -> None:
        if registered is None:
            registered = connection.state in (READING, WRITING, LINGERING)
        if registered:
            try:
                self.selector.unregister(connection.sock)
            except (KeyError, ValueError):
                pass
        if connection.state == READING:
            self.pending_bytes -= len(connection.data)
        self.by_key.pop(connection.key, None)
        try:
            connection.sock.close()
        except OSError:
            pass
        connection.state = "closed"

    def close_all(self) -> None:
        for connection in list(self.by_key.values()):
            self.close(connection)
