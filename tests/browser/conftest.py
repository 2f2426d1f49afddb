"""Fixtures of the console's browser tests: a real ``placement-svc serve``
on SQLite with a seeded cloud (``seed.py``), another capped at 1.39 and
mounted under a prefix, and the system's Chromium driven by Playwright
(sync API). Nothing is downloaded: Playwright runs /usr/bin/chromium.

Each test gets a fresh browser context (so an empty sessionStorage) and a
page whose console messages and errors are kept: a Content-Security-Policy
violation or an uncaught error fails the test."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import subprocess

import pytest

from tests.browser import seed
from tests.support import servers

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "console"
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 900}


@dataclasses.dataclass
class Server:
    url: str  # the API's root, no trailing slash (the prefix included)
    log: pathlib.Path

    @property
    def console(self) -> str:
        return f"{self.url}/console/"


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The system's Chromium: installed with apt-get when missing and
    running as root; otherwise a failure under CI=true, else a skip."""
    pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    if not os.path.exists(CHROMIUM) and hasattr(os, "geteuid") and os.geteuid() == 0:
        if shutil.which("apt-get"):
            # A new machine's package lists may be missing or stale.
            subprocess.run(["apt-get", "update"], check=False, timeout=600)
            subprocess.run(["apt-get", "install", "-y", "chromium"], check=False, timeout=900)
    if not os.path.exists(CHROMIUM):
        reason = f"{CHROMIUM} is missing (apt-get install chromium, as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return CHROMIUM


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Server:
    """``placement-svc serve`` on SQLite, noauth2, every microversion, with
    the seeded cloud."""
    tmp = tmp_path_factory.mktemp("console-server")
    conf = servers.write_conf(tmp, f"sqlite:///{tmp / 'placement.db'}")
    with servers.serving(tmp, conf) as (url, log):
        seed.seed(url)
        yield Server(url, log)


@pytest.fixture(scope="session")
def old_server(tmp_path_factory) -> Server:
    """The same cloud on a service capped at 1.39 (``[api]
    max_microversion``, upstream's last) and mounted under /placement."""
    tmp = tmp_path_factory.mktemp("console-server-1.39")
    conf = servers.write_conf(
        tmp, f"sqlite:///{tmp / 'placement.db'}", extra="max_microversion = 1.39\n"
    )
    with servers.serving(tmp, conf, "--prefix", "/placement", path="/placement/") as (url, log):
        base = f"{url}/placement"
        seed.seed(base, microversion="placement 1.39")
        yield Server(base, log)


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=8000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclasses.dataclass
class Watched:
    """What a page said in its console, and its uncaught errors."""

    messages: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def csp_violations(self) -> list[str]:
        return [m for m in self.messages if "Content Security Policy" in m]


@pytest.fixture
def watched() -> Watched:
    return Watched()


@pytest.fixture
def page(browser, watched):
    """A page in a fresh context (its own sessionStorage). It must log no
    CSP violation and raise no uncaught error."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.on("console", lambda message: watched.messages.append(message.text))
    page.on("pageerror", lambda error: watched.errors.append(str(error)))
    yield page
    context.close()
    assert not watched.csp_violations, watched.csp_violations
    assert not watched.errors, watched.errors


@pytest.fixture(scope="session")
def shots():
    """Save a screenshot of a page as artifacts/console/NAME.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def shoot(page, name: str) -> None:
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    return shoot
