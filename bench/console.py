"""The console at scale: first paint and filter times in a real browser.

Serves a fresh SQLite cloud with ``placement-svc serve`` (one worker),
loads it straight into the database with bench/scale.py's loader (nested
trees of a root and four GPU providers: 2,000 trees are 10,000 providers),
then opens GET /console in Debian's headless Chromium (Playwright, the
system browser) and times, per run, in a new browser context:

* the read: ``GET /resource_providers?include=inventories,usages,traits,
  aggregates`` over HTTP with urllib, the one request the cloud view makes;
* first paint: from navigation until the first page of trees is on
  screen (the summary line has its counts and the first tree is drawn);
* filters: from typing a name (one tree's root) until the summary shows
  what matches, then the same for a trait (half the trees), then clearing;
* a refresh: the console's conditional read of the cloud answered 304,
  from its request to the end of the answer, as the browser timed it.

    .venv/bin/python bench/console.py [--trees 2000] [--repeat 5]

Prints the median and the slowest of each. Needs /usr/bin/chromium (Debian's
package ``chromium``) and the test extra's playwright; nothing is
downloaded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import sqlalchemy as sa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale  # noqa: E402  (bench/scale.py: the loader)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN_KEY = "placement-console-token"  # placement_svc/console/assets/api.js
INCLUDE = "/resource_providers?include=inventories,usages,traits,aggregates"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(folder: str, port: int) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "placement_svc.cmd.cli",
        "serve",
        "--bind",
        f"127.0.0.1:{port}",
    ]
    env = dict(os.environ, HOME=folder)
    log = open(os.path.join(folder, "serve.log"), "wb")  # noqa: SIM115 (kept for the process)
    server = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
            return server
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit(f"the server did not start: see {folder}/serve.log") from None
            time.sleep(0.2)


def _read(base: str) -> tuple[float, int]:
    request = urllib.request.Request(
        base + INCLUDE,
        headers={"x-auth-token": "admin", "openstack-api-version": "placement 1.51"},
    )
    start = time.perf_counter()
    body = urllib.request.urlopen(request).read()
    return time.perf_counter() - start, len(body)


def _run(browser, base: str, trees: int) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(f"sessionStorage.setItem({TOKEN_KEY!r}, 'admin')")
    page = context.new_page()
    times: dict[str, float] = {}
    summary = page.locator("#summary[data-matched]")
    start = time.perf_counter()
    page.goto(f"{base}/console#/?refresh=2")
    summary.wait_for(timeout=60_000)
    page.locator("#trees > *").first.wait_for(timeout=60_000)
    times["first paint"] = time.perf_counter() - start

    def filtered(label: str, value: str, matched: str) -> float:
        field = page.get_by_label(label, exact=True)
        begin = time.perf_counter()
        field.fill(value)
        page.wait_for_function(
            "m => document.querySelector('#summary').dataset.matched === m", arg=matched
        )
        return time.perf_counter() - begin

    # The last tree's root alone (the loader names roots bench-nested-N).
    times["filter: a name"] = filtered("Name contains", f"bench-nested-{trees - 1}", "1")
    times["filter: cleared"] = filtered("Name contains", "", str(trees * 5))
    # Every other root has the trait (scale.load): half the trees' roots.
    times["filter: a trait"] = filtered("Trait", "CUSTOM_BENCH_GOLD", str((trees + 1) // 2))
    with page.expect_response(lambda r: INCLUDE in r.url and r.status == 304, timeout=30_000):
        pass  # the next refresh, answered 304
    times["refresh (304)"] = (
        page.evaluate(
            "performance.getEntriesByType('resource')"
            ".filter(e => e.name.includes('include=')).at(-1).duration"
        )
        / 1000
    )
    context.close()
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=2000, help="nested trees of 5 providers")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if not os.path.exists("/usr/bin/chromium"):
        raise SystemExit("needs Debian's chromium: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    folder = tempfile.mkdtemp(prefix="bench-console-")
    port = _free_port()
    server = _serve(folder, port)
    base = f"http://127.0.0.1:{port}"
    try:
        engine = sa.create_engine(f"sqlite:///{folder}/placement.sqlite")
        start = time.perf_counter()
        scale.load(engine, args.trees, "nested")
        engine.dispose()
        print(
            f"# {args.trees * 5} providers in {args.trees} trees loaded in "
            f"{time.perf_counter() - start:.1f} s",
            flush=True,
        )
        _read(base)  # the worker's first look at the new shape
        reads = [_read(base) for _ in range(args.repeat)]
        runs = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
            for _ in range(args.repeat):
                runs.append(_run(browser, base, args.trees))
            browser.close()
        seconds = [r[0] for r in reads]
        print(
            f"{'the read (include=, ' + format(reads[0][1] / 1e6, '.1f') + ' MB)':34} "
            f"median {statistics.median(seconds) * 1000:7.0f} ms  slowest "
            f"{max(seconds) * 1000:7.0f} ms"
        )
        for name in runs[0]:
            taken = [run[name] for run in runs]
            print(
                f"{name:34} median {statistics.median(taken) * 1000:7.0f} ms  slowest "
                f"{max(taken) * 1000:7.0f} ms"
            )
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
