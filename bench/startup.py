"""How long placement-svc takes to start (issue 29, item 5).

    .venv/bin/python bench/startup.py [--repeat 5]

Prints the median (and slowest) wall time of:

- ``placement-svc --version`` (``python -m placement_svc.cmd.cli --version``);
- importing ``placement_svc.cmd.commands``, the modules every command loads;
- ``placement-svc serve --workers 1`` on a synced SQLite database, from
  the exec to the first 200 answer to ``GET /`` (the master's checks, the
  fork and the worker's application).

The commands run with this interpreter and this process's environment, so
``PYTHONPATH=/other/checkout python bench/startup.py`` measures the
placement_svc found there (the code before a change, say).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def timed(argv, env) -> float:
    started = time.monotonic()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, cwd=env["HOME"])
    return time.monotonic() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_until_answered(conf: str, env) -> float:
    port = free_port()
    started = time.monotonic()
    argv = [sys.executable, "-m", "placement_svc.cmd.cli", "serve", "--config-file", conf]
    argv += ["--bind", f"127.0.0.1:{port}", "--workers", "1"]
    server = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL, cwd=env["HOME"])
    try:
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
                    if answer.status == 200:
                        return time.monotonic() - started
            if server.poll() is not None or time.monotonic() - started > 60:
                raise SystemExit("serve did not answer")
            time.sleep(0.01)
    finally:
        server.terminate()
        server.wait(timeout=40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        # run from elsewhere than a checkout, so that PYTHONPATH decides
        env = dict(os.environ, HOME=home)
        conf = Path(home) / "placement.conf"
        conf.write_text(
            f"[placement_database]\nconnection = sqlite:///{home}/p.db\n"
            "[api]\nauth_strategy = noauth2\n"
        )
        cli = [sys.executable, "-m", "placement_svc.cmd.cli"]
        subprocess.run(
            [*cli, "db", "sync", "--config-file", str(conf)], env=env, check=True, cwd=home
        )
        where = subprocess.run(
            [sys.executable, "-c", "import placement_svc; print(placement_svc.__file__)"],
            env=env,
            cwd=home,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(
            f"# placement_svc from {where}; python {sys.version.split()[0]}, {os.cpu_count()} cores"
        )
        cases = {
            "placement-svc --version": lambda: timed([*cli, "--version"], env),
            "import placement_svc.cmd.commands": lambda: timed(
                [sys.executable, "-c", "import placement_svc.cmd.commands"], env
            ),
            "serve --workers 1, first answer": lambda: serve_until_answered(str(conf), env),
        }
        for name, run in cases.items():
            seconds = [run() for _ in range(args.repeat)]
            print(
                f"{name:34} median {statistics.median(seconds):.3f} s"
                f"  slowest {max(seconds):.3f} s  ({args.repeat} runs)",
                flush=True,
            )


if __name__ == "__main__":
    main()
