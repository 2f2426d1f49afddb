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

Requests still run one at a time per worker, as the sync worker runs them.
Unlike the sync worker's, a connection stays open after its answer (HTTP
keep-alive, as HTTP/1.1 clients ask by default) for the client's next
request, for at most ``[api] keepalive_timeout`` seconds idle: a client
making several requests in a row (nova's report client, the CLI) saves a
connection each (0.1 ms back to back, 0.4 ms after an idle moment). It
is closed instead when other requests are waiting for the worker, so that
the client's next connection goes to a worker that is free; idle, it is
the first closed at the connection cap. On SIGTERM a worker takes every
connection already queued for it, closes its listening sockets, answers
what it holds and closes idle connections (the graceful drain).
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import selectors
import time

from gunicorn.http import errors as http_errors
from gunicorn.http import parser as http_parser
from gunicorn.http import wsgi as http_wsgi
from gunicorn.workers.sync import SyncWorker

from placement_svc import errors
from placement_svc.cmd import connections, framing, runtime
from placement_svc.http import requestlog

LOG = logging.getLogger(__name__)

# An answer is kept in memory up to this many bytes; past it the worker
# writes it out before it makes more (a streamed answer of many megabytes).
WRITE_AHEAD = 1024 * 1024
# How often the connections' timeouts are looked at.
EXPIRE_EVERY = 0.25


class _Buffered:
    """The client socket as gunicorn's request handling sees it: reads come
    from the request already read, writes go into the answer's buffer (and
    out through ``flush`` once the buffer is over WRITE_AHEAD)."""

    def __init__(self, connection: connections.Connection, flush, keepable: bool):
        self.connection = connection
        # Kept open after the answer, what came past this request's end is
        # the next one's: the connection holds it until then.
        end = connection.end if keepable and connection.end is not None else None
        self._view = memoryview(bytes(connection.data[:end]))
        connection.data = bytearray(connection.data[end:]) if end is not None else bytearray()
        self._flush = flush
        self._timeout = None
        # Whether the answer may keep the connection open (_KeptResponse asks),
        # whether its headers said it would, and whether it was written whole
        # (an application failing after its headers leaves it short: closed).
        self.keepable = end is not None
        self.kept = False
        self.finished = False

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


class _KeptResponse(http_wsgi.Response):
    """gunicorn's response, which the sync worker forces to close its
    connection: here it stays open when the worker says it may (its
    ``sock``, a _Buffered, is keepable) and the request and answer allow
    it (HTTP/1.1 or keep-alive asked, a known length, no "Connection:
    close"); the worker then reads the connection's next request."""

    def force_close(self):
        if not getattr(self.sock, "keepable", False):
            super().force_close()

    def default_headers(self):
        headers = super().default_headers()
        if isinstance(self.sock, _Buffered):
            self.sock.kept = not self.should_close()
        return headers

    def close(self):
        super().close()  # the last chunk of a chunked answer
        if isinstance(self.sock, _Buffered):
            self.sock.finished = True


class ReadAheadWorker(SyncWorker):
    """gunicorn's sync worker behind a loop that reads requests whole and
    writes answers out (see the module's text; each connection's course is
    in connections.py)."""

    def init_process(self):
        # This process's requests are read by framing.BoundedRequest (gunicorn makes
        # them through RequestParser.mesg_class).
        http_parser.RequestParser.mesg_class = framing.BoundedRequest
        # ...and answered by _KeptResponse (gunicorn's wsgi.create makes it).
        http_wsgi.Response = _KeptResponse
        self.connection_cap = _raise_file_limit(framing.LIMITS.connections)
        super().init_process()

    # -- the loop ----------------------------------------------------------

    def run(self):
        self.selector = selectors.DefaultSelector()
        self.connections = connections.Connections(
            self.selector, self.connection_cap, self.log, self.notify
        )
        self.listening = list(self.sockets)
        for listener in self.listening:
            listener.setblocking(False)
            self.selector.register(listener, selectors.EVENT_READ, listener)
        self.selector.register(self.PIPE[0], selectors.EVENT_READ, None)
        ready = self.connections.ready
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
                for key, mask in self.selector.select(0 if ready else 1.0):
                    self._event(key, mask)
                now = time.monotonic()
                if now - expired >= EXPIRE_EVERY:
                    self.connections.expire(now, stopping_since)
                    expired = now
                if ready:
                    self._run_one(ready.popleft())
        finally:
            self.connections.close_all()
            self.selector.close()

    def _event(self, key, mask) -> None:
        if key.data is None:  # the signal pipe: a wake-up
            try:
                os.read(self.PIPE[0], 4096)
            except OSError:
                pass
        elif key.data in self.listening:
            if not self.connections.ready:  # busy: leave new connections to another worker
                self._accept(key.data)
        else:
            self.connections.event(key.data)

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
            self.connections.adopt(sock, peer, listener.getsockname())
            if self.connections.ready:
                return

    def _take_queued_and_stop_listening(self) -> None:
        """SIGTERM: take what the kernel queued for this worker, then close
        the listening sockets (once every worker has, new connections are
        refused, which a client or load balancer can retry elsewhere,
        rather than reset after their request was sent)."""
        self.connections.keeping = False
        for listener in self.listening:
            address = listener.getsockname()
            while True:
                try:
                    sock, peer = listener.accept()
                except OSError:
                    break
                self.connections.adopt(sock, peer, address)
            self.selector.unregister(listener)
            listener.close()
        self.listening = []

    # -- running -----------------------------------------------------------

    def _run_one(self, connection: connections.Connection) -> None:
        # The connection stays open for the client's next request unless the
        # worker is stopping, or other requests wait for it: closed, the
        # client's next connection goes to whichever worker is free.
        keepable = (
            self.alive
            and self.connections.keeping
            and framing.LIMITS.keepalive_timeout > 0
            and not self.connections.ready
        )
        buffered = _Buffered(connection, self.connections.write_blocking, keepable)
        listener = _Closed(connection.server_address)
        requestlog.hold_lines()  # the request's line once its answer is out
        try:
            self.handle(listener, buffered, connection.peer)
        except Exception:  # handle answers errors itself; this is a last resort
            self.log.exception("Error handling a request from %s", connection.peer)
        connection.keep = buffered.keepable and buffered.kept and buffered.finished
        self.connections.start_writing(connection)
        requestlog.write_held()
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
