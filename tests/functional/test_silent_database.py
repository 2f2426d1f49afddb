"""A database server that takes the connection and never answers.

A host gone from the network, or a hung node, holds a new connection
without a word; a connect without a timeout would wait until gunicorn kills
the worker (a reset connection, not an answer). Through the whole
application, for PostgreSQL (psycopg) and MySQL (PyMySQL), a request is
then a 503 with Retry-After within both connect attempts (CONNECT_TIMEOUT
each, for PyMySQL the server's greeting included; or the URL's own
``connect_timeout``), naming the database as out of reach. The listener
is the test's own socket: no database is needed.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from placement_svc import app
from placement_svc.db import engine as engine_module
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures

CANNOT_BE_REACHED = "The database cannot be reached; please retry later."
URLS = {
    "postgresql": "postgresql+psycopg://placement@127.0.0.1:{port}/placement",
    "mysql": "mysql+pymysql://placement@127.0.0.1:{port}/placement",
}


@pytest.fixture
def silent_port():
    """A port whose listener accepts every connection and says nothing."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def answer_from(url: str):
    """GET /resource_providers on ``url``'s database, and the seconds it
    took; in a thread, so that a request which hangs fails the test."""
    engine = create_engine(url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
    result = {}

    def ask():
        started = time.monotonic()
        result["response"] = client.get("/resource_providers")
        result["took"] = time.monotonic() - started

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the request hangs on a silent database server"
    engine.dispose()
    return result["response"], result["took"]


@pytest.mark.parametrize("driver", sorted(URLS))
def test_a_silent_server_is_out_of_reach_after_the_connect_timeout(
    driver, silent_port, monkeypatch
):
    monkeypatch.setattr(engine_module, "CONNECT_TIMEOUT", 2)
    response, took = answer_from(URLS[driver].format(port=silent_port))
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) > 0
    [error] = response.json()["errors"]
    assert error["status"] == 503
    assert error["detail"].endswith(f" {CANNOT_BE_REACHED}  ")
    assert 2 <= took < 10  # two attempts of 2 s (and a short pause), not a hang


@pytest.mark.parametrize("driver", sorted(URLS))
def test_the_urls_connect_timeout_wins(driver, silent_port, monkeypatch):
    monkeypatch.setattr(engine_module, "CONNECT_TIMEOUT", 600)
    url = URLS[driver].format(port=silent_port) + "?connect_timeout=2"
    response, took = answer_from(url)
    assert response.status_code == 503, response.text
    assert took < 10
