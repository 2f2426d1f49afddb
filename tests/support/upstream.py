"""Upstream OpenStack Placement 16.0.0, from PyPI, as a test oracle.

``venv()`` makes (once, in the checkout's ``.upstream-venv``, which
bench/gabbi_upstream.sh shares) a virtualenv with openstack-placement, gunicorn
and the database drivers upstream's URLs name (psycopg2, PyMySQL).
``migrate(url, revision)`` runs upstream's own migrations to one of its
revisions; ``serving(url, ...)`` runs upstream's API under gunicorn on a free
port of this machine, noauth2, until the block ends. Upstream reads the URL
as ``postgresql+psycopg2://`` where ours says ``postgresql+psycopg://``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from sqlalchemy.engine import make_url

VERSION = os.environ.get("UPSTREAM_VERSION", "16.0.0")
ROOT = pathlib.Path(__file__).resolve().parents[2]
VENV = ROOT / ".upstream-venv"
PACKAGES = (f"openstack-placement=={VERSION}", "gunicorn", "psycopg2-binary", "PyMySQL")


def venv() -> pathlib.Path:
    """The virtualenv's directory, made or completed first if need be (by
    one test process at a time: pytest-xdist's workers may all ask at once)."""
    python = VENV / "bin" / "python"
    ready = VENV / f".ready-{VERSION}"
    if ready.exists():
        return VENV
    with open(ROOT / ".upstream-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            if not python.exists():
                subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            subprocess.run([*pip, *PACKAGES], check=True, timeout=900)
            ready.touch()
    return VENV


def url_for_upstream(url: str) -> str:
    """Our URL as upstream's oslo.db reads it (the driver it has)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed.render_as_string(hide_password=False)


def _conf_dir(directory: pathlib.Path, url: str) -> pathlib.Path:
    conf_dir = directory / "upstream-etc"
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / "placement.conf").write_text(
        "[api]\nauth_strategy = noauth2\n"
        f"[placement_database]\nconnection = {url_for_upstream(url)}\n"
    )
    return conf_dir


_MIGRATE = """
import sys
from oslo_config import cfg
from placement import conf, db_api
from placement.db.sqlalchemy import migration
config = cfg.ConfigOpts()
conf.register_opts(config)
config(["--config-file", sys.argv[1]], project="placement", default_config_files=None)
db_api.configure(config)
migration.upgrade(sys.argv[2])
"""


def migrate(url: str, directory: pathlib.Path, revision: str = "head") -> None:
    """Upstream's own migrations, to ``revision``, on an empty database."""
    conf = _conf_dir(directory, url) / "placement.conf"
    subprocess.run(
        [str(venv() / "bin" / "python"), "-c", _MIGRATE, str(conf), revision],
        check=True,
        capture_output=True,
        timeout=300,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(url: str, directory: pathlib.Path) -> Iterator[str]:
    """Upstream's API over the database at ``url``; yields its base URL."""
    conf_dir = _conf_dir(directory, url)
    port = free_port()
    log = (directory / "upstream-server.log").open("ab")
    server = subprocess.Popen(
        [
            str(venv() / "bin" / "gunicorn"),
            "-w",
            "1",
            "-t",
            "120",
            "-b",
            f"127.0.0.1:{port}",
            "placement.wsgi.api:application",
        ],
        env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(conf_dir)},
        stdout=log,
        stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "upstream Placement did not start: "
                        + (directory / "upstream-server.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.3)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
