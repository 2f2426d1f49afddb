"""The operator's console in Firefox: the system's Firefox ESR, driven by
puppeteer-core over WebDriver BiDi (firefox_smoke.mjs; no geckodriver, no
browser download), against the seeded ``placement-svc serve`` of
conftest.py.

The script signs in, reads the cloud view, one provider's page and the
"why no valid host" page, and prints what it read as JSON; this test
compares it with what the API answers to the same questions, read here
with urllib. Screenshots: artifacts/console/firefox-*.png.

Firefox (apt-get install firefox-esr), Node and npm (apt-get install
nodejs npm) are installed when missing and running as root; otherwise the
test fails under CI=true and is skipped elsewhere. puppeteer-core comes
from tests/browser/package-lock.json (``npm ci --ignore-scripts``), into
tests/browser/node_modules.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from tests.browser import seed
from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.database  # the server opens a SQLite database

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "firefox_smoke.mjs"
LOCK = HERE / "package-lock.json"
MODULES = HERE / "node_modules"
FIREFOX = "/usr/bin/firefox-esr"
PROVIDER = seed.numa(1, 0)  # a NUMA node with a consumer's allocation
WHY = "resources=VCPU:1"
INCLUDE = "include=inventories,usages,traits,aggregates"
SHOTS = ("firefox-cloud.png", "firefox-provider.png", "firefox-why.png")


# ---- what the machine must have ----------------------------------------------


@functools.cache
def _apt_updated() -> bool:
    return subprocess.run(["apt-get", "update"], check=False, timeout=600).returncode == 0


def _ensure(what: str, present, packages: list[str]) -> None:
    """``present()`` or else apt-get install ``packages`` (as root); still
    missing: a failure under CI=true, else a skip."""
    if not present() and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        _apt_updated()
        subprocess.run(["apt-get", "install", "-y", *packages], check=False, timeout=600)
    if not present():
        reason = f"{what} is missing (apt-get install {' '.join(packages)}, as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def puppeteer() -> pathlib.Path:
    """Firefox ESR, node and npm on the machine, and puppeteer-core as the
    lock file pins it in tests/browser/node_modules."""
    _ensure("Firefox ESR", lambda: os.access(FIREFOX, os.X_OK), ["firefox-esr"])
    _ensure("node and npm", lambda: shutil.which("node") and shutil.which("npm"), ["nodejs", "npm"])
    installed = MODULES / ".package-lock.json"  # written by npm with the tree
    if not installed.exists() or installed.stat().st_mtime < LOCK.stat().st_mtime:
        result = subprocess.run(
            ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stdout + result.stderr
    assert (MODULES / "puppeteer-core" / "package.json").exists()
    return MODULES


# ---- the API's answers ------------------------------------------------------


def api_ok(server, path):
    status, body, _ = seed.call(server.url, "GET", path)
    assert status == 200, (path, status, body)
    return body


def capacity(inventory) -> int:
    return int((inventory["total"] - inventory["reserved"]) * inventory["allocation_ratio"])


def ratio(value) -> str:
    return repr(float(value))


def funnels(body) -> list[list[int]]:
    """The explain body's funnels as the console draws them: per group the
    providers left after each step, then the trees."""
    out = [
        [group["considered"], *(s["after"] for s in group["funnel"]), group["providers"]]
        for group in body["groups"].values()
    ]
    out.append(
        [
            body["trees_for_all_groups"],
            *(s["after"] for s in body["request_filters"]),
            *(s["after"] for s in body["merge_rules"]),
            body["trees_with_candidates"],
        ]
    )
    return out


# ---- the test -----------------------------------------------------------------


def run_smoke(server) -> dict:
    started = time.time()
    argv = ["node", str(SCRIPT), server.console, str(ARTIFACTS)]
    argv += ["--provider", PROVIDER, "--why", WHY, "--firefox", FIREFOX]
    try:
        result = subprocess.run(argv, cwd=HERE, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"firefox_smoke.mjs ran over 90 s:\n{error.stdout}\n{error.stderr}")
    try:
        report = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"no JSON from firefox_smoke.mjs:\n{result.stdout}\n{result.stderr}")
    (ARTIFACTS / "firefox-report.json").write_text(json.dumps(report, indent=2))
    if result.returncode != 0 or not report["ok"]:
        lines = [f"firefox_smoke.mjs exited {result.returncode}: {report['failure']}"]
        for key in ("errors", "csp_violations", "failed_requests", "console"):
            lines += [f"{key}: {json.dumps(item)}" for item in report[key]]
        lines.append(f"stderr: {result.stderr[-2000:]}")
        pytest.fail("\n".join(lines))
    for name in SHOTS:
        shot = ARTIFACTS / name
        assert shot.exists() and shot.stat().st_mtime >= started - 1, shot
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot
    return report


def test_the_console_works_in_firefox(server, puppeteer):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    report = run_smoke(server)
    assert report["browser"].startswith("firefox/"), report["browser"]
    assert not report["errors"] or {e["tab"] for e in report["errors"]} == {"probe"}
    assert report["csp_violations"] == [] and report["failed_requests"] == []
    # The check would see a violation: a style attribute set on purpose in
    # a second tab is refused, and told both as an event and in the log.
    probe = report["csp_probe"]
    assert probe["event"] and probe["logged"] and not probe["style_applied"], probe

    providers = {
        p["uuid"]: p for p in api_ok(server, f"/resource_providers?{INCLUDE}")["resource_providers"]
    }
    roots = {p["root_provider_uuid"] for p in providers.values()}

    # The cloud: every provider's "used / capacity" and inventory in words.
    cloud = report["cloud"]
    assert cloud["who"] == "admin" and cloud["token_in_session"] == "admin"
    assert cloud["local_storage"] == 0
    assert cloud["version"] == f"API {api_ok(server, '/')['versions'][0]['max_version']}"
    assert cloud["summary"] == f"The cloud: {len(providers)} providers in {len(roots)} trees."
    assert cloud["matched"] == str(len(providers)) and cloud["providers"] == len(providers)
    assert cloud["trees"] == len(roots)
    assert cloud["headings"][0] == "The cloud"
    assert cloud["rows"] == {
        uuid: {
            rc: [
                f"{p['usages']['usages'].get(rc, 0)} / {capacity(inv)}",
                f"(total {inv['total']}, reserved {inv['reserved']}, "
                f"ratio {ratio(inv['allocation_ratio'])})",
            ]
            for rc, inv in p["inventories"]["inventories"].items()
        }
        for uuid, p in providers.items()
    }
    # The bars: their numbers for assistive technology, and a length set
    # through the CSSOM (which the policy allows).
    me = providers[PROVIDER]
    inventories, usages = me["inventories"]["inventories"], me["usages"]["usages"]
    assert set(cloud["meters"]) == set(inventories)
    for rc, meter in cloud["meters"].items():
        used, cap = usages.get(rc, 0), capacity(inventories[rc])
        assert (meter["now"], meter["max"]) == (str(used), str(cap)), rc
        assert float(meter["fill_width"].rstrip("%")) == pytest.approx(100 * used / cap, abs=0.01)
        assert (meter["fill_px"] > 0) == (used > 0), meter

    # The provider's page, reached by its link.
    page = report["provider"]
    detail = api_ok(server, f"/resource_providers/{PROVIDER}")
    assert page["hash"] == f"#/provider/{PROVIDER}"
    assert page["h1"] == f"Provider {me['name']}" and page["h1_focused"]
    assert page["uuid"] == PROVIDER and page["generation"] == str(detail["generation"])
    assert page["parent"] == providers[me["parent_provider_uuid"]]["name"]
    assert page["inventory"] == {
        rc: {
            "used": str(usages.get(rc, 0)),
            "capacity": str(capacity(inv)),
            "free": str(capacity(inv) - usages.get(rc, 0)),
            "numbers": [
                str(usages.get(rc, 0)),
                str(capacity(inv)),
                str(capacity(inv) - usages.get(rc, 0)),
                str(inv["total"]),
                str(inv["reserved"]),
                ratio(inv["allocation_ratio"]),
                str(inv["min_unit"]),
                str(inv["max_unit"]),
                str(inv["step_size"]),
            ],
        }
        for rc, inv in inventories.items()
    }
    consumers = api_ok(server, f"/allocations?resource_provider_uuid={PROVIDER}")["allocations"]
    assert consumers
    assert page["consumers"] == {
        consumer: {
            "project": body["project_id"],
            "user": body["user_id"],
            "type": body["consumer_type"],
            "here": ", ".join(
                f"{rc} {n}" for rc, n in body["allocations"][PROVIDER]["resources"].items()
            ),
        }
        for consumer, body in consumers.items()
    }

    # Why no valid host: the funnels, the verdict, the near misses, the copies.
    why = report["why"]
    explain = api_ok(server, f"/allocation_candidates/explain?{WHY}")
    copies = api_ok(server, f"/allocation_candidates/capacity?{WHY}")
    assert why["hash"] == f"#/why?{WHY}" and why["query"] == WHY
    assert why["h1"] == "Why no valid host?" and why["errors_shown"] == []
    drawn = [[shown for data, shown in funnel["counts"]] for funnel in why["funnels"]]
    assert all(data == shown for f in why["funnels"] for data, shown in f["counts"])
    assert drawn == funnels(explain)
    assert drawn[0][0] == len(providers)  # every provider considered
    assert why["candidates"] == str(explain["candidates"])
    assert why["near_misses"] == [
        fail["text"] for miss in explain["near_misses"] for fail in miss["fails"]
    ]
    assert why["capacity_total"] == str(copies["total"])
    assert why["capacity_rows"] == [[t["root"]["uuid"], str(t["copies"])] for t in copies["trees"]]
