"""The operator's console (GET /console) in a real browser, against a real
``placement-svc serve`` with a seeded cloud (conftest.py, seed.py).

Every number the console shows is compared with what the API answers to
the same question, read here with urllib. A screenshot of every page state
checked is saved under artifacts/console/.
"""

from __future__ import annotations

import pathlib
import re
from urllib.parse import quote

import pytest

from tests.browser import seed

expect = pytest.importorskip("playwright.sync_api").expect

pytestmark = pytest.mark.database  # the server opens a SQLite database

INCLUDE = "include=inventories,usages,traits,aggregates"
NOAUTH_LABEL = "User (noauth2: admin, or user:project)"
ASSETS = pathlib.Path(__file__).resolve().parents[2] / "placement_svc" / "console" / "assets"


# ---- helpers -----------------------------------------------------------------


def api(server, path, token="admin"):
    """GET ``path`` as ``token``: (status, body)."""
    status, body, _ = seed.call(server.url, "GET", path, headers={"x-auth-token": token})
    return status, body


def api_ok(server, path):
    status, body = api(server, path)
    assert status == 200, (path, status, body)
    return body


def sign_in(page, server, route="#/", user="admin"):
    """Open the console at ``route`` and sign in as ``user`` (noauth2)."""
    page.goto(server.console + route)
    page.get_by_label(NOAUTH_LABEL).fill(user)
    page.get_by_role("button", name="Sign in").click()


def capacity(inventory) -> int:
    return int((inventory["total"] - inventory["reserved"]) * inventory["allocation_ratio"])


def cloud(server) -> dict[str, dict]:
    """Every provider with its inventories, usages, traits and aggregates,
    by uuid, as the API says (1.45)."""
    body = api_ok(server, f"/resource_providers?{INCLUDE}")
    return {
        p["uuid"]: {
            "name": p["name"],
            "parent": p["parent_provider_uuid"],
            "root": p["root_provider_uuid"],
            "inventories": p["inventories"]["inventories"],
            "usages": p["usages"]["usages"],
            "traits": p["traits"]["traits"],
            "aggregates": p["aggregates"]["aggregates"],
        }
        for p in body["resource_providers"]
    }


def cloud_one_by_one(server) -> dict[str, dict]:
    """The same, from the reads every microversion has (for a service
    capped below 1.45)."""
    out = {}
    for p in api_ok(server, "/resource_providers")["resource_providers"]:
        base = f"/resource_providers/{p['uuid']}"
        out[p["uuid"]] = {
            "name": p["name"],
            "parent": p["parent_provider_uuid"],
            "root": p["root_provider_uuid"],
            "inventories": api_ok(server, f"{base}/inventories")["inventories"],
            "usages": api_ok(server, f"{base}/usages")["usages"],
            "traits": api_ok(server, f"{base}/traits")["traits"],
            "aggregates": api_ok(server, f"{base}/aggregates")["aggregates"],
        }
    return out


def expected_rows(providers) -> dict[str, dict[str, list[str]]]:
    """What the cloud view must say per provider and class: "used / capacity"
    and the inventory in words."""
    return {
        uuid: {
            rc: [
                f"{p['usages'].get(rc, 0)} / {capacity(inv)}",
                f"(total {inv['total']}, reserved {inv['reserved']}, "
                f"ratio {inv['allocation_ratio']!r})",
            ]
            for rc, inv in p["inventories"].items()
        }
        for uuid, p in providers.items()
    }


SHOWN_ROWS = """() => {
  const out = {};
  for (const li of document.querySelectorAll("li.provider")) {
    const rows = {};
    for (const tr of li.querySelectorAll(":scope > .card tr[data-rc]")) {
      rows[tr.dataset.rc] = [
        tr.querySelector(".used-cap").textContent,
        tr.querySelector(".inventory").textContent,
      ];
    }
    out[li.dataset.uuid] = rows;
  }
  return out;
}"""


def shown_rows(page) -> dict:
    return page.evaluate(SHOWN_ROWS)


def matched_uuids(page) -> set[str]:
    return set(
        page.eval_on_selector_all(
            "li.provider[data-match=true]", "els => els.map(e => e.dataset.uuid)"
        )
    )


def wait_for_cloud(page, providers):
    roots = {p["root"] for p in providers.values()}
    expect(page.locator("#trees > li.tree")).to_have_count(len(roots))
    expect(page.locator("#summary")).to_have_attribute("data-matched", str(len(providers)))


def funnels(body) -> list[list[int]]:
    """The explain body's funnels, as the console must draw them: per group
    the providers left after each step, then the trees."""
    out = []
    for group in body["groups"].values():
        out.append(
            [group["considered"], *(s["after"] for s in group["funnel"]), group["providers"]]
        )
    out.append(
        [
            body["trees_for_all_groups"],
            *(s["after"] for s in body["request_filters"]),
            *(s["after"] for s in body["merge_rules"]),
            body["trees_with_candidates"],
        ]
    )
    return out


SHOWN_FUNNELS = """() => [...document.querySelectorAll("#explain table.funnel")].map(
  (table) => [...table.querySelectorAll("tbody tr")].map((tr) => {
    const count = Number(tr.querySelector(".count").textContent);
    if (String(count) !== tr.dataset.count) throw new Error("count text and data differ");
    return count;
  }))"""


# ---- the tests ---------------------------------------------------------------


def test_sign_in_keeps_the_token_in_this_tab_and_sends_it(page, server, shots):
    requests = []
    page.on("request", lambda r: requests.append(r))
    page.goto(server.console)
    field = page.get_by_label(NOAUTH_LABEL)
    expect(field).to_be_visible()
    expect(field).to_be_focused()
    shots(page, "sign-in")

    field.fill("admin")
    field.press("Enter")
    expect(page.locator("#who-name")).to_have_text("admin")
    expect(page.locator("#trees > li.tree").first).to_be_visible()
    expect(page.locator("#version")).to_have_text("API 1.51")
    expect(page.locator("#version")).to_have_attribute(
        "title",
        "The console asks for microversion 1.51; the service serves 1.0 to 1.51.",
    )
    assert page.evaluate("sessionStorage.getItem('placement-console-token')") == "admin"
    assert page.evaluate("localStorage.length") == 0

    api_requests = [r for r in requests if r.url.startswith(server.url + "/resource_providers")]
    assert api_requests
    for request in api_requests:
        headers = request.all_headers()
        assert headers["x-auth-token"] == "admin"
        assert headers["openstack-api-version"] == "placement 1.51"
    # The version document is read first, without a token.
    version_reads = [r for r in requests if r.url == server.url + "/"]
    assert version_reads and "x-auth-token" not in version_reads[0].all_headers()
    assert requests.index(version_reads[0]) < requests.index(api_requests[0])

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label(NOAUTH_LABEL)).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('placement-console-token')") is None


def test_cloud_shows_the_apis_numbers(page, server, shots):
    providers = cloud(server)
    sign_in(page, server)
    wait_for_cloud(page, providers)
    shots(page, "cloud")

    assert shown_rows(page) == expected_rows(providers)
    # One request for the whole cloud.
    summary = page.locator("#summary")
    roots = {p["root"] for p in providers.values()}
    expect(summary).to_have_text(f"The cloud: {len(providers)} providers in {len(roots)} trees.")
    # Children are drawn inside their parents.
    for uuid, p in providers.items():
        if p["parent"]:
            inside = page.locator(f'li.provider[data-uuid="{p["parent"]}"] > ul.children > li')
            expect(inside.and_(page.locator(f'[data-uuid="{uuid}"]'))).to_have_count(1)
    # Bars carry their numbers for assistive technology.
    meter = page.locator(
        f'li.provider[data-uuid="{seed.numa(1, 0)}"] > .card tr[data-rc="VCPU"] [role=meter]'
    )
    inv = providers[seed.numa(1, 0)]["inventories"]["VCPU"]
    expect(meter).to_have_attribute("aria-valuemax", str(capacity(inv)))
    expect(meter).to_have_attribute(
        "aria-valuenow", str(providers[seed.numa(1, 0)]["usages"]["VCPU"])
    )
    # Traits, and aggregates shortened with the full uuid at hand.
    storage = page.locator(f'li.provider[data-uuid="{seed.STORAGE}"]')
    expect(storage).to_have_class(re.compile(r"\bis-sharing\b"))
    expect(storage.locator(".traits")).to_contain_text("MISC_SHARES_VIA_AGGREGATE")
    expect(storage.locator(f'abbr[title="{seed.AGG_STORAGE}"]')).to_have_text(
        seed.AGG_STORAGE[:8] + "…"
    )
    # The sharing provider names the roots of the trees in its aggregate.
    sharing_with = {
        p["root"]
        for p in providers.values()
        if set(p["aggregates"]) & set(providers[seed.STORAGE]["aggregates"])
        and p["root"] != seed.STORAGE
    }
    links = storage.locator(".shares a")
    expect(links).to_have_count(len(sharing_with))
    assert {h.split("/")[-1] for h in links.evaluate_all("l => l.map(a => a.hash)")} == (
        sharing_with
    )


FILTERS = [
    ("name", {"#f-name": "NUMA1"}, lambda p: "numa1" in p["name"].lower()),
    ("trait", {"#f-trait": "HW_CPU_X86_AVX2"}, lambda p: "HW_CPU_X86_AVX2" in p["traits"]),
    ("no-trait", {"#f-trait": "!HW_CPU_X86_AVX2"}, lambda p: "HW_CPU_X86_AVX2" not in p["traits"]),
    ("aggregate", {"#f-aggregate": seed.AGG_RACK[:8]}, lambda p: seed.AGG_RACK in p["aggregates"]),
    ("class", {"#f-rc": "DISK_GB"}, lambda p: "DISK_GB" in p["inventories"]),
    (
        "free",
        {"#f-free-class": "VCPU", "#f-free-amount": "20"},
        lambda p: (
            "VCPU" in p["inventories"]
            and capacity(p["inventories"]["VCPU"]) - p["usages"].get("VCPU", 0) >= 20
        ),
    ),
    (
        "trait-and-free",
        {"#f-trait": "HW_NUMA_ROOT", "#f-free-class": "MEMORY_MB", "#f-free-amount": "1"},
        lambda p: (
            "HW_NUMA_ROOT" in p["traits"]
            and capacity(p["inventories"]["MEMORY_MB"]) - p["usages"].get("MEMORY_MB", 0) >= 1
        ),
    ),
]


def shown_context(page) -> set[str]:
    return set(
        page.eval_on_selector_all(
            "li.provider[data-match=false]", "els => els.map(e => e.dataset.uuid)"
        )
    )


def test_filters_show_the_expected_providers(page, server, shots):
    providers = cloud(server)
    sign_in(page, server)
    wait_for_cloud(page, providers)
    summary = page.locator("#summary")
    for name, fill, wanted in FILTERS:
        for selector, value in fill.items():
            if selector in ("#f-rc", "#f-free-class"):
                page.select_option(selector, value)
            else:
                page.fill(selector, value)
        expected = {uuid for uuid, p in providers.items() if wanted(p)}
        assert expected and expected != set(providers), name  # a filter that says something
        expect(summary).to_have_attribute("data-matched", str(len(expected)))
        assert matched_uuids(page) == expected, name
        # The others shown are the ancestors of those that match, for context.
        ancestors = set()
        for uuid in expected:
            while providers[uuid]["parent"]:
                uuid = providers[uuid]["parent"]
                ancestors.add(uuid)
        assert shown_context(page) == ancestors - expected, name
        roots = {providers[u]["root"] for u in expected}
        expect(page.locator("#trees > li.tree")).to_have_count(len(roots))
        if name in ("name", "free"):
            shots(page, f"cloud-filter-{name}")
        if name == "free":
            # The filters are in the page's URL: a reload shows the same.
            assert "free=VCPU:20" in page.url
            page.reload()
            expect(summary).to_have_attribute("data-matched", str(len(expected)))
            assert matched_uuids(page) == expected
            expect(page.locator("#f-free-class")).to_have_value("VCPU")
        page.get_by_role("button", name="Clear filters").click()
        expect(summary).to_have_attribute("data-matched", str(len(providers)))


def test_chips_set_their_filter_on_trees_drawn_again(page, server, shots):
    """A trait or aggregate chip sets that filter (by mouse or keyboard),
    also once a filter has come and gone and the trees are drawn again."""
    providers = cloud(server)
    sign_in(page, server)
    wait_for_cloud(page, providers)
    summary = page.locator("#summary")
    clear = page.get_by_role("button", name="Clear filters")
    page.fill("#f-name", "numa1")
    named = {u for u, p in providers.items() if "numa1" in p["name"].lower()}
    expect(summary).to_have_attribute("data-matched", str(len(named)))
    clear.click()
    wait_for_cloud(page, providers)

    host = page.locator(f'li.provider[data-uuid="{seed.compute(2)}"] > .card')
    host.get_by_role("button", name="CUSTOM_GOLD", exact=True).click()
    expect(page.locator("#f-trait")).to_have_value("CUSTOM_GOLD")
    gold = {u for u, p in providers.items() if "CUSTOM_GOLD" in p["traits"]}
    expect(summary).to_have_attribute("data-matched", str(len(gold)))
    assert matched_uuids(page) == gold
    assert "trait=CUSTOM_GOLD" in page.url

    clear.click()
    wait_for_cloud(page, providers)
    rack = page.locator(f'li.provider[data-uuid="{seed.compute(3)}"] > .card').get_by_role(
        "button", name=f"aggregate {seed.AGG_RACK}: show its members"
    )
    rack.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#f-aggregate")).to_have_value(seed.AGG_RACK)
    in_rack = {u for u, p in providers.items() if seed.AGG_RACK in p["aggregates"]}
    expect(summary).to_have_attribute("data-matched", str(len(in_rack)))
    assert matched_uuids(page) == in_rack
    shots(page, "cloud-chip-aggregate")


def test_trees_come_in_pages(page, server, shots):
    providers = cloud(server)
    roots = sorted({p["root"] for p in providers.values()})
    assert len(roots) == 4
    sign_in(page, server, "#/?per_page=3")
    top = page.get_by_role("navigation", name="Pages of trees (top)")
    expect(top.locator(".where")).to_have_text("Trees 1–3 of 4 (page 1 of 2)")
    expect(page.locator("#trees > li.tree")).to_have_count(3)
    first = set(page.eval_on_selector_all("#trees > li.tree", "ls => ls.map(l => l.dataset.root)"))
    expect(top.get_by_role("button", name="← Previous")).to_be_disabled()
    top.get_by_role("button", name="Next →").focus()
    page.keyboard.press("Enter")
    expect(top.locator(".where")).to_have_text("Trees 4–4 of 4 (page 2 of 2)")
    expect(page.locator("#trees > li.tree")).to_have_count(1)
    last = set(page.eval_on_selector_all("#trees > li.tree", "ls => ls.map(l => l.dataset.root)"))
    assert first | last == set(roots) and not first & last
    # Next is disabled on the last page: the keyboard lands on Previous.
    expect(top.get_by_role("button", name="Next →")).to_be_disabled()
    expect(top.get_by_role("button", name="← Previous")).to_be_focused()
    assert "page=2" in page.url and "per_page=3" in page.url
    shots(page, "cloud-page-2")
    page.reload()
    expect(top.locator(".where")).to_have_text("Trees 4–4 of 4 (page 2 of 2)")


def test_provider_and_consumer_pages(page, server, shots):
    uuid = seed.numa(1, 0)
    providers = cloud(server)
    me = providers[uuid]
    sign_in(page, server, f"#/provider/{uuid}")
    expect(page.locator("h1")).to_have_text(f"Provider {me['name']}")
    expect(page.locator("#provider-facts .p-uuid")).to_have_text(uuid)
    detail = api_ok(server, f"/resource_providers/{uuid}")
    expect(page.locator("#provider-facts .p-generation")).to_have_text(str(detail["generation"]))
    expect(page.locator("#provider-facts .p-parent a")).to_have_text(
        providers[me["parent"]]["name"]
    )
    expect(page.locator("#provider-facts .p-root a")).to_have_attribute(
        "href", f"#/provider/{me['root']}"
    )
    for rc, inv in me["inventories"].items():
        row = page.locator(f'#inventory-table tr[data-rc="{rc}"]')
        used = me["usages"].get(rc, 0)
        expect(row.locator(".used")).to_have_text(str(used))
        expect(row.locator(".capacity")).to_have_text(str(capacity(inv)))
        expect(row.locator(".free")).to_have_text(str(capacity(inv) - used))
        expect(row.locator("td.num")).to_have_text(
            [
                str(used),
                str(capacity(inv)),
                str(capacity(inv) - used),
                str(inv["total"]),
                str(inv["reserved"]),
                repr(inv["allocation_ratio"]),
                str(inv["min_unit"]),
                str(inv["max_unit"]),
                str(inv["step_size"]),
            ]
        )
    consumers = api_ok(server, f"/allocations?resource_provider_uuid={uuid}")["allocations"]
    assert consumers
    rows = page.locator("#consumers-table tbody tr")
    expect(rows).to_have_count(len(consumers))
    for consumer, body in consumers.items():
        row = page.locator(f'#consumers-table tr[data-consumer="{consumer}"]')
        expect(row.locator(".c-project")).to_have_text(body["project_id"])
        expect(row.locator(".c-user")).to_have_text(body["user_id"])
        expect(row.locator(".c-type")).to_have_text(body["consumer_type"])
        here = ", ".join(f"{k} {v}" for k, v in body["allocations"][uuid]["resources"].items())
        expect(row.locator(".c-here")).to_have_text(here)
        expect(row.locator(".c-all li")).to_have_count(len(body["allocations"]))
    shots(page, "provider")

    # The parent's page lists its children.
    page.locator("#provider-facts .p-parent a").click()
    expect(page.locator("h1")).to_have_text(f"Provider {providers[me['parent']]['name']}")
    children = sorted(p["name"] for p in providers.values() if p["parent"] == me["parent"])
    expect(page.locator("#provider-facts .p-children a")).to_have_text(children)
    page.go_back()

    consumer = next(iter(consumers))
    page.locator(f'#consumers-table tr[data-consumer="{consumer}"] th a').click()
    expect(page).to_have_url(re.compile(f"#/consumer/{consumer}$"))
    body = api_ok(server, f"/allocations/{consumer}")
    expect(page.locator("#consumer-facts .c-project")).to_have_text(body["project_id"])
    expect(page.locator("#consumer-facts .c-user")).to_have_text(body["user_id"])
    expect(page.locator("#consumer-facts .c-type")).to_have_text(body["consumer_type"])
    rows = page.locator("#allocations-table tbody tr")
    expect(rows).to_have_count(len(body["allocations"]))
    for rp, allocation in body["allocations"].items():
        row = page.locator(f'#allocations-table tr[data-provider="{rp}"]')
        expect(row.locator("th a")).to_have_text(providers[rp]["name"])
        for rc, amount in allocation["resources"].items():
            expect(row.locator(f'td[data-rc="{rc}"]')).to_have_text(str(amount))
    shots(page, "consumer")
    # Each provider is a link to its page.
    page.locator(f'#allocations-table tr[data-provider="{seed.STORAGE}"] th a').click()
    expect(page.locator("h1")).to_have_text("Provider shared-storage")
    expect(page.locator("#provider-facts .p-shares a")).to_have_count(2)


WHY_QUERY = "resources=VCPU:20,MEMORY_MB:4096,DISK_GB:10&required=HW_CPU_X86_AVX2"


def test_why_form_puts_the_query_in_the_url_and_draws_the_explanation(page, server, shots):
    sign_in(page, server, "#/why")
    page.get_by_label("VCPU", exact=True).fill("20")
    page.get_by_label("MEMORY_MB", exact=True).fill("4096")
    page.get_by_label("DISK_GB", exact=True).fill("10")
    page.get_by_role("textbox", name="Required traits").fill("HW_CPU_X86_AVX2")
    page.get_by_role("button", name="Explain", exact=True).click()
    expect(page).to_have_url(re.compile(re.escape(f"#/why?{WHY_QUERY}") + "$"))
    expect(page.locator("#why-results")).to_have_attribute("data-done", "true")

    explain = api_ok(server, f"/allocation_candidates/explain?{WHY_QUERY}")
    copies = api_ok(server, f"/allocation_candidates/capacity?{WHY_QUERY}")

    def check():
        assert page.evaluate(SHOWN_FUNNELS) == funnels(explain)
        expect(page.locator("#verdict .candidates")).to_have_text(str(explain["candidates"]))
        texts = [fail["text"] for miss in explain["near_misses"] for fail in miss["fails"]]
        assert texts
        expect(page.locator("#near-misses li.fail")).to_have_text(texts)
        expect(page.locator("#near-misses > li .miss-head a")).to_have_text(
            [miss["root"]["name"] for miss in explain["near_misses"]]
        )
        expect(page.locator("#capacity-total .total")).to_have_text(str(copies["total"]))
        shown = page.eval_on_selector_all(
            "#capacity-table tbody tr", "rs => rs.map(r => [r.dataset.root, r.dataset.copies])"
        )
        assert shown == [[t["root"]["uuid"], str(t["copies"])] for t in copies["trees"]]

    check()
    shots(page, "why")

    page.reload()
    expect(page.locator("#why-results")).to_have_attribute("data-done", "true")
    expect(page.get_by_label("VCPU", exact=True)).to_have_value("20")
    expect(page.get_by_role("textbox", name="Required traits")).to_have_value("HW_CPU_X86_AVX2")
    check()

    # A granular group, written as extra query lines.
    page.get_by_label("Extra query lines, one name=value a line").fill(
        "resources_NUMA=VCPU:2\nsame_subtree=_NUMA\ngroup_policy=none"
    )
    page.get_by_role("button", name="Explain", exact=True).click()
    granular = f"{WHY_QUERY}&resources_NUMA=VCPU:2&same_subtree=_NUMA&group_policy=none"
    expect(page).to_have_url(re.compile(re.escape(f"#/why?{granular}") + "$"))
    expect(page.locator("#why-results")).to_have_attribute("data-done", "true")
    explain = api_ok(server, f"/allocation_candidates/explain?{granular}")
    assert len(explain["groups"]) == 2
    expect(page.locator("#funnel-group-_NUMA")).to_be_visible()
    assert page.evaluate(SHOWN_FUNNELS) == funnels(explain)


def test_why_shows_a_bad_querys_400(page, server, shots):
    sign_in(page, server, "#/why")
    page.get_by_label("Query of GET /allocation_candidates").fill("resources=VCPU:x")
    page.get_by_role("button", name="Explain this query").click()
    expect(page).to_have_url(re.compile(r"#/why\?resources=VCPU:x$"))
    status, body = api(server, "/allocation_candidates/explain?resources=VCPU:x")
    assert status == 400
    lines = [line.strip() for line in body["errors"][0]["detail"].splitlines() if line.strip()]
    error = page.locator("#explain .error")
    expect(error.locator("h2")).to_have_text("Bad Request (HTTP 400)")
    for line in lines:
        expect(error).to_contain_text(line)
    expect(error).to_contain_text("Got: x.")
    expect(page.locator("#capacity .error")).to_contain_text("Got: x.")
    shots(page, "why-bad-query")


def test_a_refresh_answered_304_changes_nothing(page, server, shots):
    providers = cloud(server)
    sign_in(page, server, "#/?refresh=1")
    wait_for_cloud(page, providers)
    page.evaluate(
        """() => {
          for (const el of document.querySelectorAll("#trees, #trees *, #summary, .pager"))
            el.__mark = "before";
          window.__renders = document.querySelector("#trees").dataset.renders;
        }"""
    )
    before = page.locator("#trees").inner_text()

    def not_modified(response):
        return "/resource_providers?include=" in response.url and response.status == 304

    with page.expect_response(not_modified, timeout=8000) as answer:
        pass
    request = answer.value.request
    assert request.all_headers().get("if-none-match", "").startswith('"')
    expect(page.locator("#freshness")).to_contain_text("Unchanged since")
    unchanged = page.evaluate(
        """() => [...document.querySelectorAll("#trees, #trees *, #summary, .pager")]
          .every((el) => el.__mark === "before")
          && window.__renders === document.querySelector("#trees").dataset.renders"""
    )
    assert unchanged
    assert page.locator("#trees").inner_text() == before
    shots(page, "cloud-unchanged")


def test_a_new_allocation_appears_within_one_refresh(page, server, shots):
    target = seed.numa(3, 1)
    providers = cloud(server)
    sign_in(page, server, "#/?refresh=1")
    wait_for_cloud(page, providers)
    page.fill("#f-name", "compute")
    named = {u for u, p in providers.items() if "compute" in p["name"]}
    expect(page.locator("#summary")).to_have_attribute("data-matched", str(len(named)))
    mark = """(roots) => { for (const root of roots)
        document.querySelector(`li.tree[data-root="${root}"]`).__mark = 1; }"""
    page.evaluate(mark, [seed.compute(1), seed.compute(3)])
    link = page.locator(f'li.provider[data-uuid="{target}"] > .card a.provider-link')
    link.focus()
    cell = page.locator(f'li.provider[data-uuid="{target}"] > .card tr[data-rc="VCPU"] .used-cap')
    inventory = providers[target]["inventories"]["VCPU"]
    expect(cell).to_have_text(
        f"{providers[target]['usages'].get('VCPU', 0)} / {capacity(inventory)}"
    )

    consumer = "e0000000-0000-4000-8000-0000000000f7"
    _claim(server.url, consumer, target, {"VCPU": 3, "MEMORY_MB": 1024}, "dave")
    try:
        used = cloud(server)[target]["usages"]["VCPU"]
        expect(cell).to_have_text(f"{used} / {capacity(inventory)}", timeout=4000)
        expect(page.locator("#freshness")).to_have_text(re.compile(r"^Updated \d\d:\d\d:\d\d\."))
        # Rendered in place: the trees that did not change are the same
        # nodes; the one that did is new, and the keyboard focus is back on
        # the same link in it; the filter keeps its value.
        marked = """(roots) => roots.map((root) =>
            document.querySelector(`li.tree[data-root="${root}"]`).__mark === 1)"""
        assert page.evaluate(marked, [seed.compute(1), seed.compute(3)]) == [True, False]
        expect(link).to_be_focused()
        expect(page.locator("#f-name")).to_have_value("compute")
        shots(page, "cloud-updated")
    finally:
        seed.call(server.url, "DELETE", f"/allocations/{consumer}")


def test_a_non_admin_sees_the_apis_403_explained(page, server, shots):
    sign_in(page, server, user="reader:proj")
    status, body = api(server, f"/resource_providers?{INCLUDE}", token="reader:proj")
    assert status == 403
    refusal = body["errors"][0]
    error = page.locator("main .error")
    expect(error.locator("h2")).to_have_text(f"{refusal['title']} (HTTP 403)")
    for line in refusal["detail"].splitlines():
        if line.strip():
            expect(error).to_contain_text(line.strip())
    expect(error).to_contain_text(refusal["code"])
    expect(error.locator(".sentence")).to_have_text(
        "Your token is not allowed to list the resource providers with their inventories, "
        "usages, traits and aggregates (policy rule placement:resource_providers:list)."
    )
    expect(page.get_by_role("button", name="Sign out and use another token")).to_be_visible()
    shots(page, "forbidden")

    page.goto(server.console + f"#/why?{WHY_QUERY}")
    expect(page.locator("#explain .error .sentence")).to_contain_text(
        "policy rule placement:allocation_candidates:explain"
    )
    page.get_by_role("button", name="Sign out and use another token").first.click()
    expect(page.get_by_label(NOAUTH_LABEL)).to_be_visible()


def test_keyboard_reaches_filters_and_a_provider_link(page, server, shots):
    providers = cloud(server)
    sign_in(page, server)
    wait_for_cloud(page, providers)
    reached = []
    for _ in range(40):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            """() => { const el = document.activeElement;
              return {id: el.id, cls: el.className, outline: getComputedStyle(el).outlineStyle,
                      href: el.getAttribute("href")}; }"""
        )
        reached.append(focused)
        assert focused["outline"] != "none", focused  # a visible focus ring
        if "provider-link" in focused["cls"]:
            break
    ids = [f["id"] for f in reached]
    assert ids.index("f-name") < ids.index("f-trait") < ids.index("f-free-amount")
    link = reached[-1]
    assert "provider-link" in link["cls"], reached
    shots(page, "keyboard-focus")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(re.escape(link["href"]) + "$"))
    uuid = link["href"].split("/")[-1]
    expect(page.locator("h1")).to_have_text(f"Provider {providers[uuid]['name']}")
    expect(page.locator("h1")).to_be_focused()


def test_no_page_breaks_the_content_security_policy(browser, page, server, watched):
    sign_in(page, server)
    expect(page.locator("#trees > li.tree").first).to_be_visible()
    page.fill("#f-trait", "CUSTOM_GOLD")
    expect(page.locator("#summary")).to_have_attribute("data-matched", "1")
    for route, ready in [
        (f"#/provider/{seed.STORAGE}", "#consumers-table"),
        (f"#/consumer/{seed.consumer(3)}", "#allocations-table"),
        (f"#/why?{WHY_QUERY}", "#capacity-table"),
        ("#/why?resources=VCPU:x", "#explain .error"),
        ("#/nowhere", "h1"),
    ]:
        page.goto(server.console + route)
        expect(page.locator(ready)).to_be_visible()
    assert watched.messages is not None and not watched.csp_violations
    assert not watched.errors

    # The check would see one: a style attribute is refused and reported.
    context = browser.new_context()
    try:
        probe = context.new_page()
        probe.goto(server.console)
        expect(probe.get_by_label(NOAUTH_LABEL)).to_be_visible()
        with probe.expect_console_message(lambda m: "Content Security Policy" in m.text):
            probe.evaluate("document.body.setAttribute('style', 'color: red')")
    finally:
        context.close()


def test_the_assets_hold_no_inline_script_or_style():
    html = (ASSETS / "index.html").read_text()
    assert "{{PREFIX}}" in html and "{{AUTH}}" in html
    assert re.findall(r"<script\b[^>]*>", html) == [
        '<script type="module" src="{{PREFIX}}/console/app.js">'
    ]
    assert "<style" not in html and " style=" not in html and "on" + "click=" not in html
    for path in ASSETS.glob("*.js"):
        text = path.read_text()
        for forbidden in (
            "innerHTML",
            "eval(",
            "new Function",
            'setAttribute("style"',
            "http://",
            "https://",
        ):
            assert forbidden not in text, (path.name, forbidden)
        if path.name == "app.js":
            words = " ".join(text.replace("//", " ").split())
            assert "no framework, no build step, no third-party library" in words


def test_a_service_capped_at_1_39_under_a_prefix(page, old_server, shots):
    requests = []
    page.on("request", lambda r: requests.append(r))
    providers = cloud_one_by_one(old_server)
    sign_in(page, old_server, "#/?refresh=1")
    expect(page.locator("#version")).to_have_text("API 1.39")
    expect(page.locator("#version")).to_have_attribute(
        "title", re.compile(r"asks for microversion 1\.39; the service serves 1\.0 to 1\.39\.")
    )
    expect(page.locator("main .notice")).to_contain_text("needs 1.45")
    wait_for_cloud(page, providers)
    expect(page.locator("li.provider .loading")).to_have_count(0)
    assert shown_rows(page) == expected_rows(providers)
    storage = page.locator(f'li.provider[data-uuid="{seed.STORAGE}"]')
    expect(storage.locator(".shares a")).to_have_count(2)
    shots(page, "cloud-1.39")

    # A refresh reads the visible providers again: a new allocation shows.
    target = seed.numa(3, 0)
    consumer = "e0000000-0000-4000-8000-0000000000f8"
    _claim(old_server.url, consumer, target, {"VCPU": 5}, "erin")
    try:
        cell = page.locator(
            f'li.provider[data-uuid="{target}"] > .card tr[data-rc="VCPU"] .used-cap'
        )
        inventory = providers[target]["inventories"]["VCPU"]
        expect(cell).to_have_text(f"5 / {capacity(inventory)}", timeout=5000)
    finally:
        seed.call(old_server.url, "DELETE", f"/allocations/{consumer}")

    # A trait filter, asked of the API.
    page.fill("#f-trait", "HW_CPU_X86_AVX2")
    expected = {u for u, p in providers.items() if "HW_CPU_X86_AVX2" in p["traits"]}
    expect(page.locator("#summary")).to_have_attribute("data-matched", str(len(expected)))
    assert matched_uuids(page) == expected

    # Consumers read one by one.
    page.goto(old_server.console + f"#/provider/{seed.STORAGE}")
    here = api_ok(old_server, f"/resource_providers/{seed.STORAGE}/allocations")["allocations"]
    expect(page.locator("#consumers-table tbody tr")).to_have_count(len(here))
    expect(page.locator("#consumers .notice")).to_contain_text("needs 1.46")

    # No explanation below 1.44: said so, with the number of candidates.
    page.goto(old_server.console + f"#/why?{quote('resources=VCPU:2', safe='=:')}")
    expect(page.locator("#why-results .notice")).to_contain_text(
        "needs microversion 1.44 (GET /allocation_candidates/explain and /capacity); "
        "this service serves up to 1.39"
    )
    count = len(
        api_ok(old_server, "/allocation_candidates?resources=VCPU:2")["allocation_requests"]
    )
    expect(page.locator("#candidates-only")).to_contain_text(f"{count} allocation candidates")
    shots(page, "why-1.39")

    for request in requests:
        if request.url.startswith(old_server.url + "/") and request.url != old_server.url + "/":
            if "/console/" in request.url:
                continue
            assert request.all_headers()["openstack-api-version"] == "placement 1.39", request.url


def _claim(url: str, consumer: str, target: str, resources: dict, user: str) -> None:
    """A new instance of project-c on ``target``, written through the API."""
    status, answer, _ = seed.call(
        url,
        "PUT",
        f"/allocations/{consumer}",
        {
            "allocations": {target: {"resources": resources}},
            "project_id": "project-c",
            "user_id": user,
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert status == 204, answer
