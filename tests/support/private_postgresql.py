"""A PostgreSQL cluster of a test's own, to stop and start at will.

The shared server of the database matrix (tests/support/databases.py)
must never be stopped; a test of what the service does while its database
is down starts a cluster of its own instead: ``initdb`` into a new
temporary directory, ``pg_ctl start`` on a free port of 127.0.0.1 with trust
authentication and no Unix socket, so it meets nothing else on the machine
(the system PostgreSQL on 5432 included). ``close`` stops it (``pg_ctl
stop``, then its postmaster's pid if that was not enough) and removes the
directory.

The binaries are PATH's ``initdb`` and ``pg_ctl``, else the newest of
Debian's /usr/lib/postgresql/*/bin. PostgreSQL refuses to run as root: when
the tests run as root the cluster belongs to the ``postgres`` user (or
``nobody``), its commands run as that user.

``cluster()`` is the context manager a test module wants: it skips the test
when no cluster can be started, or fails it under CI=true, as
databases.unreachable does for the shared servers.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import sqlalchemy as sa

from tests.support import databases

STARTUP_SECONDS = 30
# Quick and small: the cluster is thrown away, its data need not survive a crash.
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "16MB",
    "max_connections": "40",
    "log_min_messages": "warning",
}


class NoCluster(Exception):
    """No private cluster could be made or started; the message says why."""


def binaries() -> str:
    """The directory of ``initdb`` and ``pg_ctl``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl", path=os.path.dirname(os.path.realpath(found))):
        return os.path.dirname(os.path.realpath(found))
    candidates = glob.glob("/usr/lib/postgresql/*/bin/initdb")

    def version(path: str) -> tuple[int, ...]:
        number = path.split("/")[-3]
        return tuple(int(part) for part in number.split(".") if part.isdigit())

    for initdb in sorted(candidates, key=version, reverse=True):
        directory = os.path.dirname(initdb)
        if os.access(os.path.join(directory, "pg_ctl"), os.X_OK):
            return directory
    raise NoCluster("no initdb and pg_ctl on PATH or in /usr/lib/postgresql/*/bin")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _owner() -> str | None:
    """The user the cluster's commands run as: None for this one, unless root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise NoCluster("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")


class PrivatePostgreSQL:
    """One cluster in its own temporary directory; ``start`` makes it once."""

    def __init__(self) -> None:
        self.bin = binaries()
        self.user = _owner()
        self.directory = tempfile.mkdtemp(prefix="placement-private-pg-")
        self.data = os.path.join(self.directory, "data")
        self.log = os.path.join(self.directory, "postgresql.log")
        self.port = 0
        self.pid: int | None = None  # the postmaster's, while it runs
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        self._initdb()

    def _run(self, *argv: str, timeout: float = STARTUP_SECONDS) -> subprocess.CompletedProcess:
        program = os.path.join(self.bin, argv[0])
        return subprocess.run(
            [program, *argv[1:]],
            cwd=self.directory,
            user=self.user,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            # PostgreSQL's own environment only: no PGHOST, PGPORT... of the caller's.
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
        )

    def _initdb(self) -> None:
        made = self._run(
            "initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"
        )
        if made.returncode != 0:
            raise NoCluster(f"initdb failed: {made.stderr.strip() or made.stdout.strip()}")

    def start(self) -> None:
        """Start the cluster (on a new free port the first time, then on the
        same one) and wait until it accepts connections."""
        for _attempt in range(3):
            port = self.port or free_port()
            options = " ".join(f"-c {key}={value!r}" for key, value in SETTINGS.items())
            started = self._run(
                "pg_ctl", "start", "-D", self.data, "-l", self.log, "-w",
                "-t", str(STARTUP_SECONDS), "-o", f"-p {port} {options}",
            )  # fmt: skip
            if started.returncode == 0:
                self.port = port
                self.pid = self._postmaster_pid()
                return
            if self.port:  # the port is ours: something else went wrong
                break
        raise NoCluster(f"pg_ctl start failed: {started.stderr.strip()}\n{self.log_text()}")

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode`` (smart, fast or immediate), waiting for it."""
        if self.pid is None:
            return
        stopped = self._run("pg_ctl", "stop", "-D", self.data, "-m", mode, "-w", "-t", "30")
        if stopped.returncode != 0 and self.running():
            raise RuntimeError(f"pg_ctl stop -m {mode} failed: {stopped.stderr.strip()}")
        self.pid = None

    def running(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def _postmaster_pid(self) -> int:
        with open(os.path.join(self.data, "postmaster.pid")) as first:
            return int(first.readline())

    def log_text(self) -> str:
        try:
            with open(self.log) as log:
                return log.read()
        except OSError:
            return ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self, database: str = "postgres") -> sa.Engine:
        """An engine on ``database``, autocommit and without a pool, for the
        test's own statements (CREATE DATABASE, pg_terminate_backend, locks)."""
        return sa.create_engine(
            self.url(database), isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool
        )

    def create_database(self, name: str) -> str:
        engine = self.admin()
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {name}")
        finally:
            engine.dispose()
        return self.url(name)

    def close(self) -> None:
        """Stop the cluster however it can be stopped, then remove its files."""
        try:
            if self.running():
                with contextlib.suppress(Exception):
                    self.stop("immediate")
            if self.running() and self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
                while self.running() and time.monotonic() < deadline:
                    time.sleep(0.05)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def cluster() -> Iterator[PrivatePostgreSQL]:
    """A started private cluster, closed afterwards. Skips the test when
    none can be started; fails it under CI=true."""
    made = None
    try:
        made = PrivatePostgreSQL()
        made.start()
    except (NoCluster, OSError, subprocess.SubprocessError) as exc:
        if made is not None:
            made.close()
        databases.unreachable(NoCluster(f"private PostgreSQL cluster: {exc}"))
    try:
        yield made
    finally:
        made.close()
