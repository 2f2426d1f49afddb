"""Slow, idle and hostile clients of a real server (issue 28, item 1): many
connections of one kind, kept going by a thread, each of which would have
held a worker of gunicorn's sync worker until its request was read.

tests/functional/test_slow_clients.py and test_deploy_files.py attack the
service with them, and so does bench/slow_clients.py (which puts the
checkout on sys.path for it): the standard library only.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import urllib.parse

ATTACKERS = 200

# What each kind of attacker sends first, then again and again.
FIRST = {
    "trickled headers": b"GET /healthcheck HTTP/1.1\r\nHost: x\r\n",
    "trickled body": (
        b"POST /resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    ),
    "idle": b"",
    "unread answers": (
        b"GET /resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n\r\n"
    ),
}
AGAIN = {
    "trickled headers": b"X-a: b\r\n",
    "trickled body": b" ",
    "idle": b"",
    "unread answers": b"",
}


def address(base: str) -> tuple[str, int]:
    """The (host, port) of a base URL such as http://127.0.0.1:8778."""
    parts = urllib.parse.urlsplit(base)
    return parts.hostname, parts.port


@contextlib.contextmanager
def attack(base: str, kind: str, count: int = ATTACKERS, every: float = 1.0):
    """``count`` connections of ``kind`` to the server at ``base``, each
    sending ``AGAIN[kind]`` every ``every`` seconds; yields their sockets."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(address(base), timeout=10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        if FIRST[kind]:
            sock.sendall(FIRST[kind])
        sockets.append(sock)
    stop = threading.Event()

    def keep_going():
        while not stop.wait(every):
            for sock in sockets:
                with contextlib.suppress(OSError):
                    if AGAIN[kind]:
                        sock.send(AGAIN[kind])

    thread = threading.Thread(target=keep_going, daemon=True)
    thread.start()
    try:
        yield sockets
    finally:
        stop.set()
        thread.join()
        for sock in sockets:
            sock.close()
