"""Where a request ends, from its bytes alone: what the serve worker reads
before it runs a request (placement_svc.cmd.framing)."""

from __future__ import annotations

import pytest

from placement_svc.cmd.framing import Head, chunked_end, read_head

LINE = b"POST /resource_providers HTTP/1.1"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (b"Host: x", Head()),
        (b"Content-Length: 12", Head(content_length=12)),
        (b"content-length:   7  ", Head(content_length=7)),
        (b"Content-Length: 5\r\nContent-Length: 5", Head(content_length=5)),
        (b"Transfer-Encoding: chunked", Head(chunked=True)),
        (b"Transfer-Encoding: gzip, Chunked", Head(chunked=True)),
        (b"Expect: 100-continue\r\nContent-Length: 3", Head(3, expects_continue=True)),
        (b"Expect: something-else\r\nContent-Length: 3", Head(3)),
        # what gunicorn's parser must judge (and refuses)
        (b"Content-Length: 5\r\nContent-Length: 6", Head(unclear=True)),
        (b"Content-Length: -1", Head(unclear=True)),
        (b"Content-Length: 0x10", Head(unclear=True)),
        (b"Content-Length: 9999999999999999999999", Head(unclear=True)),
        (b"Transfer-Encoding: chunked\r\nContent-Length: 4", Head(unclear=True)),
        (b"Transfer-Encoding: chunked, gzip", Head(unclear=True)),
    ],
)
def test_the_head_says_how_the_body_is_framed(fields, expected):
    assert read_head(LINE + b"\r\n" + fields) == expected


def test_http_1_0_neither_continues_nor_chunks():
    head = b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3"
    assert read_head(head) == Head(content_length=3)
    assert read_head(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked") == Head(unclear=True)


def test_a_chunked_body_ends_after_its_last_chunk_and_trailers():
    body = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
    assert chunked_end(body, 0) == (len(body), True, False)
    with_trailer = b"3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"
    assert chunked_end(with_trailer, 0) == (len(with_trailer), True, False)


def test_a_chunked_body_read_in_pieces_resumes_where_it_stopped():
    body = b"5\r\nhello\r\na\r\n0123456789\r\n0\r\n\r\n"
    position, whole = 0, False
    for end in range(1, len(body) + 1):
        position, whole, bad = chunked_end(body[:end], position)
        assert not bad
        assert whole == (end == len(body))
    assert position == len(body)


@pytest.mark.parametrize(
    "body",
    [b"zz\r\nhello\r\n", b"-5\r\nhello\r\n", b"1" * 2000, b"11111111111111111\r\n"],
)
def test_a_malformed_chunked_body_is_handed_to_the_parser(body):
    assert chunked_end(body, 0)[2] is True
