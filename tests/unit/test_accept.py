"""Accept headers read as upstream's webob reads them."""

from __future__ import annotations

import pytest

from placement_svc.http import accept

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(
    "header, json_ok, error_type",
    [
        (None, True, "application/json"),
        ("", True, "application/json"),
        ("*/*", True, "application/json"),
        ("application/json", True, "application/json"),
        ("application/*", True, "application/json"),
        (BROWSER, True, "text/html"),
        (BROWSER.rsplit(",", 1)[0], False, "text/html"),
        ("text/plain", False, "text/plain"),
        ("text/*", False, "text/html"),
        ("application/json;q=0", False, "text/plain"),
        ("*/*;q=0", False, "text/plain"),
        ("application/json;q=0.1, */*;q=0", True, "application/json"),
        ("application/json, text/html", True, "text/html"),
        ("text/html;q=0.5, application/json", True, "application/json"),
        ("application/json;charset=utf-8", False, "text/plain"),
        ("garbage", True, "text/html"),
        ("application/json;q=abc", True, "text/html"),
        ("application/json;q=1.0000", True, "text/html"),
    ],
)
def test_json_and_error_media_type_as_webob_decides(header, json_ok, error_type):
    assert accept.accepts_json(header) is json_ok
    assert accept.error_media_type(header) == error_type


def test_a_header_that_does_not_parse_is_none():
    assert accept.parse("garbage") is None
    assert accept.parse("text/html;q=2") is None


def test_ranges_carry_their_quality():
    assert accept.parse("text/html;q=0.5, */*") == [("text", "html", 0.5), ("*", "*", 1.0)]
