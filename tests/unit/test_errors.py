"""The one error format: statuses, titles, details, codes and request ids."""

from __future__ import annotations

import pytest

from placement_svc import errors


@pytest.mark.parametrize(
    "cls, status, title",
    [
        (errors.BadRequest, 400, "Bad Request"),
        (errors.Unauthorized, 401, "Unauthorized"),
        (errors.Forbidden, 403, "Forbidden"),
        (errors.NotFound, 404, "Not Found"),
        (errors.NotAcceptable, 406, "Not Acceptable"),
        (errors.Conflict, 409, "Conflict"),
        (errors.PayloadTooLarge, 413, "Request Entity Too Large"),
        (errors.UriTooLong, 414, "Request-URI Too Long"),
        (errors.UnsupportedMediaType, 415, "Unsupported Media Type"),
        (errors.InternalError, 500, "Internal Server Error"),
        (errors.ServiceUnavailable, 503, "Service Unavailable"),
    ],
)
def test_each_error_has_its_status_and_title(cls, status, title):
    error = cls("why")
    assert (error.status, error.title) == (status, title)


def test_the_detail_is_the_explanation_then_the_message():
    error = errors.NotFound("No such resource class CUSTOM_X.")
    assert error.detail == (
        "The resource could not be found.\n\n No such resource class CUSTOM_X.  "
    )


def test_an_error_without_a_message_is_its_explanation_and_upstreams_blanks():
    assert errors.NotFound().detail == "The resource could not be found.\n\n   "


def test_the_default_code_is_upstreams():
    assert errors.BadRequest("x").code == "placement.undefined_code"
    assert errors.DEFAULT == "placement.undefined_code"


@pytest.mark.parametrize(
    "name, code",
    [
        ("INVENTORY_INUSE", "placement.inventory.inuse"),
        ("CONCURRENT_UPDATE", "placement.concurrent_update"),
        ("DUPLICATE_NAME", "placement.duplicate_name"),
        ("PROVIDER_IN_USE", "placement.resource_provider.inuse"),
        ("PROVIDER_CANNOT_DELETE_PARENT", "placement.resource_provider.cannot_delete_parent"),
        ("RESOURCE_PROVIDER_NOT_FOUND", "placement.resource_provider.not_found"),
        ("ILLEGAL_DUPLICATE_QUERYPARAM", "placement.query.duplicate_key"),
        ("QUERYPARAM_BAD_VALUE", "placement.query.bad_value"),
        ("QUERYPARAM_MISSING_VALUE", "placement.query.missing_value"),
    ],
)
def test_error_codes_are_spelled_as_upstream(name, code):
    assert getattr(errors, name) == code


def test_a_code_given_to_an_error_is_kept():
    error = errors.Conflict("busy", code=errors.CONCURRENT_UPDATE)
    assert error.code == "placement.concurrent_update"


def test_the_body_has_no_code_before_1_23():
    body = errors.error_body(errors.NotFound(), "req-1", with_code=False)
    assert body == {
        "errors": [
            {
                "status": 404,
                "title": "Not Found",
                "detail": "The resource could not be found.\n\n   ",
                "request_id": "req-1",
            }
        ]
    }


def test_the_body_has_the_code_from_1_23():
    error = errors.Conflict("busy", code=errors.CONCURRENT_UPDATE)
    entry = errors.error_body(error, "req-2", with_code=True)["errors"][0]
    assert entry["code"] == "placement.concurrent_update"
    assert entry["status"] == 409
    assert entry["request_id"] == "req-2"


def test_the_body_has_no_request_id_when_there_is_none():
    entry = errors.error_body(errors.BadRequest("x"), None, with_code=True)["errors"][0]
    assert "request_id" not in entry
    assert entry["code"] == errors.DEFAULT


def test_method_not_allowed_names_the_method_and_the_allowed_ones():
    error = errors.MethodNotAllowed("DELETE", ["GET", "POST"])
    assert error.status == 405
    assert error.headers == {"Allow": "GET, POST"}
    assert "The method DELETE is not allowed for this resource." in error.detail


def test_headers_given_to_an_error_are_copied():
    given = {"Retry-After": "1"}
    error = errors.ServiceUnavailable("busy", headers=given)
    given["Retry-After"] = "2"
    assert error.headers == {"Retry-After": "1"}


def test_a_message_is_flattened_to_one_line_as_upstream_details_are():
    error = errors.BadRequest("JSON does not validate: 'x'\n\nFailed validating\r\n  here")
    assert error.detail == (
        "The server could not comply with the request since it is either malformed or "
        "otherwise incorrect.\n\n JSON does not validate: 'x'  Failed validating   here  "
    )


def test_strip_tags_breaks_at_br_and_drops_tags_and_comment_marks_as_webob():
    assert errors.strip_tags("a\nb<br />c<!-- d -->e<b>f</b>") == "a b\nc d ef"
