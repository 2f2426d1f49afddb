"""A normal request's latency while 200 slow connections are open
(issue 28, item 1).

    .venv/bin/python bench/slow_clients.py [--attackers 200] [--requests 20]

Serves one SQLite database two ways, each with two worker processes:

- ``placement-svc serve --workers 2``: the read-ahead worker
  (placement_svc/cmd/http_worker.py);
- the same application under gunicorn's own sync worker
  (``gunicorn -w 2 placement_svc.wsgi:application``), as the deploy files
  ran it before: each accepted connection holds a worker until its request
  is read.

For each kind of attacker (none; request headers trickled, a line a
second; a body trickled, a byte a second; idle connections that send
nothing; requests whose answers are never read), it opens that many
connections, waits two seconds, then times ``--requests`` requests of
GET /resource_providers one after the other (10 s timeout each) and prints
the median, the slowest and how many got no answer (after three
unanswered in a row, the rest are not tried).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

sys.path.insert(0, str(ROOT))
# The attackers of tests/functional/test_slow_clients.py, and its free_port.
from tests.support.servers import free_port  # noqa: E402
from tests.support.slow_clients import FIRST, attack  # noqa: E402

# "none": the same requests without attackers, for comparison.
KINDS = ("none", *FIRST)


@contextlib.contextmanager
def server(argv, env, port: int):
    process = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=env["HOME"]
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit(f"{argv[0]} did not start")
            time.sleep(0.2)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def normal_requests(port: int, count: int) -> tuple[list[float], str]:
    """The seconds of each answered request, and how many got no answer
    within 10 s (after three in a row, the rest are not tried)."""
    seconds, failed, in_a_row = [], 0, 0
    for _ in range(count):
        if in_a_row == 3:
            return seconds, f"{failed} (gave up)"
        started = time.monotonic()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/resource_providers",
            headers={"x-auth-token": "admin", "openstack-api-version": "placement 1.39"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                answer.read()
            seconds.append(time.monotonic() - started)
            in_a_row = 0
        except OSError:
            failed += 1
            in_a_row += 1
    return seconds, str(failed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attackers", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        conf_dir = Path(home) / "etc"
        conf_dir.mkdir()
        (conf_dir / "placement.conf").write_text(
            f"[placement_database]\nconnection = sqlite:///{home}/p.db\n"
            "[api]\nauth_strategy = noauth2\n"
        )
        env = dict(os.environ, HOME=home, OS_PLACEMENT_CONFIG_DIR=str(conf_dir))
        conf = str(conf_dir / "placement.conf")
        subprocess.run(
            [BIN / "placement-svc", "db", "sync", "--config-file", conf], env=env, check=True
        )
        setups = {
            "placement-svc serve --workers 2": lambda port: [
                str(BIN / "placement-svc"),
                "serve",
                "--config-file",
                conf,
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
            ],
            "gunicorn -w 2 (sync worker)": lambda port: [
                str(BIN / "gunicorn"),
                "-w",
                "2",
                "-b",
                f"127.0.0.1:{port}",
                "placement_svc.wsgi:application",
            ],
        }
        print(f"{args.attackers} attacking connections, {args.requests} normal requests each")
        print(f"{'server':34} {'attackers':18} {'median ms':>10} {'max ms':>10} {'no answer':>10}")
        for name, argv in setups.items():
            for kind in KINDS:
                port = free_port()
                base = f"http://127.0.0.1:{port}"
                with server(argv(port), env, port):
                    attackers = (
                        contextlib.nullcontext()
                        if kind == "none"
                        else attack(base, kind, args.attackers)
                    )
                    with attackers:
                        time.sleep(2)
                        seconds, failed = normal_requests(port, args.requests)
                median = f"{statistics.median(seconds) * 1000:.1f}" if seconds else "-"
                slowest = f"{max(seconds) * 1000:.1f}" if seconds else "-"
                print(f"{name:34} {kind:18} {median:>10} {slowest:>10} {failed:>10}", flush=True)


if __name__ == "__main__":
    main()
