"""conditional.py: the ETag of an answer and RFC 9110's weak comparison
for If-None-Match."""

from __future__ import annotations

import pytest

from placement_svc.http import conditional

TAG = conditional.etag(b'{"traits":[]}')


def test_the_etag_is_a_quoted_hash_of_the_bytes():
    assert TAG.startswith('"') and TAG.endswith('"') and len(TAG) == 34
    assert conditional.etag(b'{"traits":[]}') == TAG
    assert conditional.etag(b'{"traits":["X"]}') != TAG


@pytest.mark.parametrize(
    "header",
    [TAG, f"W/{TAG}", f'"other", {TAG}', f' "other" ,W/{TAG} ', "*", " * "],
)
def test_a_matching_if_none_match(header):
    assert conditional.matches(header, TAG)


@pytest.mark.parametrize("header", ['"other"', TAG.strip('"'), f"w/{TAG}", "", ","])
def test_a_different_if_none_match(header):
    assert not conditional.matches(header, TAG)
