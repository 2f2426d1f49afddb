"""The worker processes of ``placement-svc serve``: gunicorn's sync worker,
which runs one request at a time, behind a loop that reads each request
whole before the worker runs it and writes each answer out after.

gunicorn's sync worker gave a connection the whole process from the moment
it accepted it: ten clients that sent their headers a line every five
seconds held two workers until the master killed them, and no one else was
answered. Here a worker accepts connections, reads them all at once without
blocking (a selector over every connection), and runs a request only when
its line, headers and body are all in memory; its answer goes into memory
too and is written out by the same loop. A slow or idle client costs a
socket and its buffer, never the worker. What bounds them:

- the request line and header section must arrive within
  ``[api] client_header_timeout`` seconds of the connection;
- a body, and an answer being read, may make no progress for at most
  ``[api] client_body_timeout`` seconds;
- a worker holds at most ``[api] max_client_connections`` connections: at
  the cap the oldest one still sending its request is closed for a new one;
- the unfinished requests a worker holds take at most
  ``[api] max_pending_request_bytes`` of memory: past it, the largest is
  answered 503;
- a request line longer than ``[api] max_request_line`` is refused with 414
  once that many bytes have come, and a body over the application's limit
  with 413 before it is read.

A huge answer (a streamed list) is written out as it is made once more than
WRITE_AHEAD bytes of it wait, as before: only a client reading such an
answer holds the worker while it does, and one that stops reading it is
dropped after ``client_body_timeout`` seconds without progress.

Requests still run one at a time per worker, as the sync worker runs them;
connections close after one answer, as the sync worker closes them. On
SIGTERM a worker takes every connection already queued for it, closes its
listening sockets and answers what it holds (the graceful drain).
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import selectors
import socket
import time
from collections import deque

from gunicorn import util as gunicorn_util
from gunicorn.http import errors as http_errors
from gunicorn.http import parser as http_parser
from gunicorn.workers.sync import SyncWorker

from placement_svc import errors
from placement_svc.cmd import framing, runtime
from placement_svc.http import reading

LOG = logging.getLogger(__name__)

READ_SIZE = 65536
# An answer is kept in memory up to this many bytes; past it the worker
# writes it out before it makes more (a streamed answer of many megabytes).
WRITE_AHEAD = 1024 * 1024
# After its answer a connection is half-closed and what the client still
# sends is read and dropped (so that the kernel does not reset the
# connection under the answer) for at most this long and this much.
LINGER_SECONDS = 2.0
LINGER_BYTES = 65536
# When the worker stops, a connection that has sent nothing yet is given
# this long to start.
STOP_GRACE_SECONDS = 1.0
# How often the connections' timeouts are looked at.
EXPIRE_EVERY = 0.25


# -- connections ----------------------------------------------------------------

READING, READY, WRITING, LINGERING = "reading", "ready", "writing", "lingering"


class _Connection:
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

    def fileno(self) -> int:
        return self.sock.fileno()


class _Buffered:
    """The client socket as gunicorn's request handling sees it: reads come
    from the request already read, writes go into the answer's buffer (and
    out through ``flush`` once the buffer is over WRITE_AHEAD)."""

    def __init__(self, connection: _Connection, flush):
        self.connection = connection
        self._view = memoryview(bytes(connection.data))
        connection.data = bytearray()
        self._flush = flush
        self._timeout = None

    def recv(self, size: int) -> bytes:
        chunk, self._view = self._view[:size], self._view[size:]
        return bytes(chunk)

    def sendall(self, data) -> None:
        self.connection.out += data
        if len(self.connection.out) > WRITE_AHEAD:
            self._flush(self.connection)

    def send(self, data) -> int:
        self.sendall(data)
        return len(data)

    def gettimeout(self):
        return self._timeout

    def settimeout(self, value) -> None:
        self._timeout = value

    def setblocking(self, flag) -> None:
        self._timeout = None if flag else 0.0

    def shutdown(self, how) -> None:
        pass  # the loop half-closes once the answer is out

    def close(self) -> None:
        pass  # the loop closes once the answer is out

    def fileno(self) -> int:
        return self.connection.sock.fileno()

    def getpeername(self):
        return self.connection.peer

    def getsockname(self):
        return self.connection.server_address


class _Closed:
    """What gunicorn's request handling asks of the listening socket a
    connection came from (its address, for the WSGI environ)."""

    def __init__(self, address):
        self.address = address

    def getsockname(self):
        return self.address


class ReadAheadWorker(SyncWorker):
    """gunicorn's sync worker behind a loop that reads requests whole and
    writes answers out (see the module's text)."""

    def init_process(self):
        # This process's requests are read by framing.BoundedRequest (gunicorn makes
        # them through RequestParser.mesg_class).
        http_parser.RequestParser.mesg_class = framing.BoundedRequest
        self.connection_cap = _raise_file_limit(framing.LIMITS.connections)
        super().init_process()

    # -- the loop ----------------------------------------------------------

    def run(self):
        self.selector = selectors.DefaultSelector()
        self.connections: dict[int, _Connection] = {}
        self.ready: deque[_Connection] = deque()
        self.pending_bytes = 0
        self.listening = list(self.sockets)
        for listener in self.listening:
            listener.setblocking(False)
            self.selector.register(listener, selectors.EVENT_READ, listener)
        self.selector.register(self.PIPE[0], selectors.EVENT_READ, None)
        stopping_since = None
        expired = time.monotonic()
        try:
            while True:
                self.notify()
                if not self.is_parent_alive():
                    return
                if not self.alive and stopping_since is None:
                    stopping_since = time.monotonic()
                    self._take_queued_and_stop_listening()
                if stopping_since is not None and not self.connections:
                    return
                for key, mask in self.selector.select(0 if self.ready else 1.0):
                    self._event(key, mask)
                now = time.monotonic()
                if now - expired >= EXPIRE_EVERY:
                    self._expire(now, stopping_since)
                    expired = now
                if self.ready:
                    self._run_one(self.ready.popleft())
        finally:
            for connection in list(self.connections.values()):
                self._close(connection)
            self.selector.close()

    def _event(self, key, mask) -> None:
        if key.data is None:  # the signal pipe: a wake-up
            try:
                os.read(self.PIPE[0], 4096)
            except OSError:
                pass
        elif key.data in self.listening:
            if not self.ready:  # busy: leave new connections to another worker
                self._accept(key.data)
        else:
            connection = key.data
            if connection.state == READING:
                self._read(connection)
            elif connection.state == WRITING:
                self._write(connection)
            elif connection.state == LINGERING:
                self._linger(connection)

    def _accept(self, listener) -> None:
        """Take connections until one has brought a whole request (as the
        sync worker took one at a time, the other workers take the rest)."""
        for _ in range(64):
            try:
                sock, peer = listener.accept()
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNABORTED):
                    self.log.warning("accepting a connection: %s", exc)
                return
            self._adopt(sock, peer, listener.getsockname())
            if self.ready:
                return

    def _adopt(self, sock, peer, server_address) -> None:
        if len(self.connections) >= self.connection_cap:
            self._evict_oldest()
        sock.setblocking(False)
        gunicorn_util.close_on_exec(sock)
        connection = _Connection(sock, peer, server_address, time.monotonic())
        self.connections[sock.fileno()] = connection
        self.selector.register(sock, selectors.EVENT_READ, connection)
        self._read(connection)  # the request has often come with the connection

    def _take_queued_and_stop_listening(self) -> None:
        """SIGTERM: take what the kernel queued for this worker, then close
        the listening sockets (once every worker has, new connections are
        refused, which a client or load balancer can retry elsewhere,
        rather than reset after their request was sent)."""
        for listener in self.listening:
            address = listener.getsockname()
            while True:
                try:
                    sock, peer = listener.accept()
                except OSError:
                    break
                self._adopt(sock, peer, address)
            self.selector.unregister(listener)
            listener.close()
        self.listening = []

    # -- reading -----------------------------------------------------------

    def _read(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(connection)
            return
        if not data:  # the client gave up before its request was whole
            self._close(connection)
            return
        connection.data += data
        connection.progress = time.monotonic()
        self.pending_bytes += len(data)
        self._frame(connection)
        if connection.state == READING and self.pending_bytes > framing.LIMITS.pending_bytes:
            self._shed_largest()

    def _frame(self, connection: _Connection) -> None:
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

    def _send_continue(self, connection: _Connection) -> None:
        try:
            connection.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            connection.continued = True
        except OSError:
            pass

    def _hand_over(self, connection: _Connection) -> None:
        """The request is whole (or the parser is to refuse it): queue it."""
        self.selector.unregister(connection.sock)
        self.pending_bytes -= len(connection.data)
        connection.state = READY
        self.ready.append(connection)

    # -- running -----------------------------------------------------------

    def _run_one(self, connection: _Connection) -> None:
        buffered = _Buffered(connection, self._write_blocking)
        listener = _Closed(connection.server_address)
        try:
            self.handle(listener, buffered, connection.peer)
        except Exception:  # handle answers errors itself; this is a last resort
            self.log.exception("Error handling a request from %s", connection.peer)
        self._start_writing(connection)
        runtime.give_back_memory()

    def handle_request(self, listener, req, client, addr):
        # The body is here already, and "100 Continue" was sent while it came
        # if the client asked for it: gunicorn must not send it again.
        req._expected_100_continue = False
        return super().handle_request(listener, req, client, addr)

    def handle_error(self, req, client, addr, exc):
        """A request line or header section over its limits: upstream's JSON
        error (414, or 400 as the application words a bad request) rather
        than gunicorn's HTML; any other error as gunicorn answers it."""
        if isinstance(exc, http_errors.LimitRequestLine):
            error: errors.PlacementError = errors.UriTooLong(
                f"The request line is longer than {framing.LIMITS.request_line} bytes."
            )
        elif isinstance(exc, http_errors.LimitRequestHeaders):
            error = errors.BadRequest(f"The request's header fields are over a limit: {exc}.")
        else:
            return super().handle_error(req, client, addr, exc)
        self.log.info("refused a request from %s: %s", addr, error.message)
        client.sendall(framing.error_answer(error))

    # -- writing -----------------------------------------------------------

    def _answer(self, connection: _Connection, error: errors.PlacementError) -> None:
        """Answer a request the application never sees, and close."""
        self.log.info("answered %s to %s: %s", error.status, connection.peer, error.message)
        self.pending_bytes -= len(connection.data)
        connection.data = bytearray()
        if connection.state == READING:
            self.selector.unregister(connection.sock)
        connection.out += framing.error_answer(error)
        self._start_writing(connection)

    def _start_writing(self, connection: _Connection) -> None:
        connection.state = WRITING
        connection.progress = time.monotonic()
        self._write(connection, registered=False)

    def _write(self, connection: _Connection, registered: bool = True) -> None:
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
            self._close(connection, registered=False)
            return
        if registered:
            self.selector.unregister(connection.sock)
        self._start_lingering(connection)

    def _write_blocking(self, connection: _Connection) -> None:
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

    def _start_lingering(self, connection: _Connection) -> None:
        try:
            connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(connection, registered=False)
            return
        connection.state = LINGERING
        connection.progress = time.monotonic()
        self.selector.register(connection.sock, selectors.EVENT_READ, connection)

    def _linger(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        connection.lingered += len(data)
        if not data or connection.lingered > LINGER_BYTES:
            self._close(connection)

    # -- ending ------------------------------------------------------------

    def _expire(self, now: float, stopping_since: float | None) -> None:
        for connection in list(self.connections.values()):
            if connection.state == READING:
                if stopping_since is not None and not connection.data:
                    if now - stopping_since > STOP_GRACE_SECONDS:
                        self._close(connection)
                elif connection.head_end < 0:
                    if now - connection.accepted > framing.LIMITS.header_timeout:
                        self._time_out(connection, "its request line and headers")
                elif now - connection.progress > framing.LIMITS.body_timeout:
                    self._time_out(connection, "its request's body")
            elif connection.state == WRITING:
                if now - connection.progress > framing.LIMITS.body_timeout:
                    self._close(connection)
            elif connection.state == LINGERING:
                if now - connection.progress > LINGER_SECONDS:
                    self._close(connection)

    def _time_out(self, connection: _Connection, what: str) -> None:
        if not connection.data:  # an idle connection: nothing to answer
            self._close(connection)
            return
        self._answer(
            connection,
            errors.RequestTimeout(f"The client did not send {what} in time."),
        )

    def _evict_oldest(self) -> None:
        """At the connection cap: close the connection that has been
        sending its request the longest (or lingering, or writing, in that
        order of preference) to make room."""
        for state in (LINGERING, READING, WRITING):
            for connection in self.connections.values():
                if connection.state == state:
                    if state == READING and connection.data:
                        self.log.info(
                            "closed %s to make room: %d connections",
                            connection.peer,
                            len(self.connections),
                        )
                    self._close(connection)
                    return

    def _shed_largest(self) -> None:
        """Over max_pending_request_bytes: answer 503 to the unfinished
        request that holds the most memory."""
        reading = [c for c in self.connections.values() if c.state == READING]
        largest = max(reading, key=lambda c: len(c.data))
        self._answer(
            largest,
            errors.ServiceUnavailable(
                "The service holds too many unfinished requests; try again.",
                headers={"Retry-After": "1"},
            ),
        )

    def _close(self, connection: _Connection, registered: bool | None = None) -> None:
        if registered is None:
            registered = connection.state in (READING, WRITING, LINGERING)
        if registered:
            try:
                self.selector.unregister(connection.sock)
            except (KeyError, ValueError):
                pass
        if connection.state == READING:
            self.pending_bytes -= len(connection.data)
        self.connections.pop(connection.key, None)
        try:
            connection.sock.close()
        except OSError:
            pass
        connection.state = "closed"


def _raise_file_limit(wanted: int) -> int:
    """Raise this process's open-file limit as far as it may go, and return
    how many client connections it leaves room for (beside the database
    pool, the log and the listening sockets)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted + 256
    if hard != resource.RLIM_INFINITY:
        target = min(target, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    room = wanted if soft == resource.RLIM_INFINITY else min(wanted, soft - 128)
    if room < wanted:
        LOG.warning(
            "[api] max_client_connections is %d, but the open-file limit (%d) leaves room for %d",
            wanted,
            soft,
            room,
        )
    return max(room, 16)
