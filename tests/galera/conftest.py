"""A 3-node MariaDB Galera cluster for the tests of this directory (issue 18).

``galera`` (module scope) starts the cluster with tests/galera/cluster.sh on
ports of its own, in a directory of its own, and stops it when the module is
done, whatever happened. When the cluster cannot start, the module's tests
fail under CI=true (as tests/support/databases.py's servers do); without
CI they are skipped when the packages are missing and cannot be installed,
and fail otherwise: a cluster that was there and would not start is a fault
to see.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.databases import in_ci

SCRIPT = Path(__file__).resolve().parent / "cluster.sh"
NODES = (1, 2, 3)
# cluster.sh's exit status when mariadb-server / galera-4 are missing and cannot be installed.
CANNOT_INSTALL = 3


def _free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pick_ports() -> tuple[int, int]:
    """Bases for cluster.sh's client ports (base + 0..2) and galera ports (base + 0..22):
    below the ephemeral range, away from 3306 and 4567, and free now (another test run on
    this machine may have its own cluster)."""
    for _attempt in range(50):
        client = random.randrange(20000, 29000, 10)
        gcomm = client + 100
        wanted = [client + n - 1 for n in NODES]
        wanted += [gcomm + 10 * (n - 1) + k for n in NODES for k in range(3)]
        if all(_free(port) for port in wanted):
            return client, gcomm
    raise RuntimeError("no free ports for a Galera cluster between 20000 and 29200")


@dataclass
class Cluster:
    """A running cluster: its nodes' URLs, and the script to stop and start them."""

    directory: Path
    env: dict
    urls: dict[int, str] = field(default_factory=dict)
    began: float = field(default_factory=time.monotonic)
    # Where a test wrote its figures (JSON): the module's duration is added at the end.
    figures_path: Path | None = None

    def script(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(SCRIPT), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )

    def run(self, *args: str, timeout: float = 180) -> str:
        result = self.script(*args, timeout=timeout)
        assert result.returncode == 0, (
            f"cluster.sh {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout}{result.stderr}"
        )
        return result.stdout

    def stop_node(self, node: int) -> None:
        self.run("stop-node", str(node))

    def start_node(self, node: int) -> None:
        self.run("start-node", str(node))

    def status(self) -> str:
        return self.script("status").stdout

    def log(self, node: int) -> Path:
        return self.directory / f"node{node}" / "error.log"


# Why the cluster did not start, once it has failed: ("skip" or "fail", message). pytest
# sets a module fixture up again for each test after it failed; one attempt is enough.
_NOT_STARTED: list[tuple[str, str]] = []


def _not_started(how: str, message: str):
    if how == "skip":
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="module")
def galera():
    if _NOT_STARTED:
        _not_started(*_NOT_STARTED[0])
    # Not under pytest's tmp_path: its parents are private (0700), and the servers run as
    # the mysql user when we are root; cluster.sh needs a directory that user can reach.
    directory = Path(tempfile.mkdtemp(prefix="placement-galera-"))
    directory.chmod(0o755)
    client_port, gcomm_port = _pick_ports()
    env = dict(
        os.environ,
        PLACEMENT_GALERA_DIR=str(directory),
        PLACEMENT_GALERA_PORT=str(client_port),
        PLACEMENT_GALERA_GCOMM_PORT=str(gcomm_port),
    )
    cluster = Cluster(directory, env)
    try:
        result = cluster.script("start", timeout=300)
    except subprocess.TimeoutExpired as exc:
        result = subprocess.CompletedProcess(exc.cmd, 1, "", f"timed out after {exc.timeout}s")
    try:
        if result.returncode != 0:
            message = (
                f"the Galera cluster did not start (cluster.sh start exited "
                f"{result.returncode}):\n{result.stderr[-4000:]}"
            )
            if in_ci():
                _NOT_STARTED.append(("fail", f"CI=true requires the Galera cluster: {message}"))
            elif result.returncode == CANNOT_INSTALL:
                _NOT_STARTED.append(("skip", f"MariaDB Galera cannot be installed: {message}"))
            else:
                _NOT_STARTED.append(("fail", f"{message}\n(files kept in {directory})"))
            _not_started(*_NOT_STARTED[0])
        urls = result.stdout.split()
        cluster.urls = dict(zip(NODES, urls, strict=True))
        print(f"\nGalera cluster up in {time.monotonic() - cluster.began:.1f}s under {directory}")
        yield cluster
    finally:
        stopped = cluster.script("stop", timeout=180)
        keep = _NOT_STARTED or os.environ.get("PLACEMENT_GALERA_KEEP")
        if stopped.returncode == 0 and not keep:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            print(f"Galera cluster files kept in {directory}:\n{stopped.stderr}")
        seconds = round(time.monotonic() - cluster.began, 1)
        print(f"\nGalera module: {seconds}s, cluster start and stop included")
        if cluster.figures_path is not None and cluster.figures_path.exists():
            figures = json.loads(cluster.figures_path.read_text())
            figures["module_seconds"] = seconds
            cluster.figures_path.write_text(json.dumps(figures, indent=2, sort_keys=True))
