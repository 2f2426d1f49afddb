"""GET /console: the console's files, served without a token, with a strict
Content-Security-Policy, and nothing but the shipped files.

What the page does in a browser is tests/browser's; this is the service's
side: which URLs answer what, with which headers.
"""

from __future__ import annotations

import html.parser
import re

import falcon.testing
import pytest

from placement_svc import app, console
from tests.support.fixtures import make_conf

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


def client(**overrides) -> falcon.testing.TestClient:
    conf = make_conf(**{"placement_database.connection": "sqlite://", **overrides})
    return falcon.testing.TestClient(app.create_app(conf))


@pytest.fixture(scope="module")
def served() -> falcon.testing.TestClient:
    return client()


def test_the_page_needs_no_token_and_carries_the_policy(served):
    # No X-Auth-Token: an API URL would be a 401 under noauth2.
    assert served.simulate_get("/resource_providers").status_code == 401
    answer = served.simulate_get("/console")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/html; charset=UTF-8"
    assert answer.headers["content-security-policy"] == CSP
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["cache-control"] == "no-cache"
    assert re.fullmatch(r'"[0-9a-f]{32}"', answer.headers["etag"])
    assert int(answer.headers["content-length"]) == len(answer.content)
    assert served.simulate_get("/console/").content == answer.content


def test_the_page_knows_its_prefix_and_how_to_sign_in(served):
    page = served.simulate_get("/console").text
    assert "{{" not in page
    assert '<meta name="placement-root" content="/">' in page
    assert '<meta name="placement-auth" content="noauth2">' in page
    under = served.simulate_get("/console", extras={"SCRIPT_NAME": "/place<ment"}).text
    assert '<meta name="placement-root" content="/place&lt;ment/">' in under
    assert f'src="/place&lt;ment{console.PATH}/app.js"' in under


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text += data.strip()


def test_the_page_has_nothing_inline_and_every_file_it_names_is_served(served):
    parser = _Tags()
    parser.feed(served.simulate_get("/console").text)
    assert parser.script_text == ""
    named = []
    for tag, attrs in parser.tags:
        assert "style" not in attrs, tag
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        if tag == "script":
            named.append(attrs["src"])
        if tag == "link" and attrs.get("rel") == "stylesheet":
            named.append(attrs["href"])
    assert any(n.endswith(".js") for n in named) and any(n.endswith(".css") for n in named)
    for path in named:
        assert path.startswith(console.PATH + "/")
        answer = served.simulate_get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-security-policy"] == CSP


@pytest.mark.parametrize(
    "name, media_type",
    [("app.js", "text/javascript; charset=UTF-8"), ("console.css", "text/css; charset=UTF-8")],
)
def test_files_by_kind(served, name, media_type):
    answer = served.simulate_get(f"/console/{name}")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == media_type
    head = served.simulate_head(f"/console/{name}")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == answer.headers["content-length"]


def test_an_unchanged_file_is_a_304(served):
    etag = served.simulate_get("/console/app.js").headers["etag"]
    answer = served.simulate_get("/console/app.js", headers={"If-None-Match": f'"x", W/{etag}'})
    assert answer.status_code == 304
    assert answer.content == b""
    assert answer.headers["etag"] == etag
    other = served.simulate_get("/console/app.js", headers={"If-None-Match": '"x"'})
    assert other.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/console/nothing.js",
        "/console/../conf.py",
        "/console/%2e%2e/conf.py",
        "/console/assets/app.js",
        "/console/app.js/",
        "/console/__init__.py",
        "/console/index.html",  # the page is /console, with its prefix filled in
    ],
)
def test_only_shipped_files_are_served(served, path):
    answer = served.simulate_get(path)
    assert answer.status_code == 404
    assert answer.json["errors"][0]["status"] == 404
    assert answer.headers["content-security-policy"] == CSP


def test_a_path_that_only_begins_like_the_console_is_the_apis(served):
    answer = served.simulate_get("/consoles")
    assert answer.status_code == 401  # the API's: no token


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_only_get_and_head(served, method):
    answer = served.simulate_request(method, "/console")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"
    assert (
        answer.json["errors"][0]["detail"]
        .strip()
        .endswith(f"The method {method} is not allowed for this resource.")
    )


def test_off_by_an_option():
    off = client(**{"console.enabled": False})
    assert off.simulate_get("/console").status_code == 401  # the API's URL space: no token
    answer = off.simulate_get("/console", headers={"X-Auth-Token": "admin"})
    assert answer.status_code == 404


def test_the_microversion_cap_does_not_hide_it():
    capped = client(**{"api.max_microversion": "1.39"})
    assert capped.simulate_get("/console").status_code == 200


def test_the_metrics_count_the_console_by_its_urls():
    served = client()  # its own counts
    served.simulate_get("/console")
    served.simulate_get("/console/app.js")
    served.simulate_get("/console/nothing.js")
    scraped = served.simulate_get("/metrics", headers={"X-Auth-Token": "admin"}).text
    counted = [line for line in scraped.splitlines() if line.startswith("placement_http_requests")]
    assert any('route="/console"' in line and 'status="200"' in line for line in counted)
    assert any('route="/console/{name}"' in line and 'status="404"' in line for line in counted)
    assert not any('route="unmatched"' in line for line in counted), counted
