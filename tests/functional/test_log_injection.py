"""No request writes a second line, or a NUL, into the real server's log (issue 28).

``placement-svc serve`` with ``log_file``: an unauthenticated ``GET
/x%0aFAKE LINE`` (a 401) is one line, with the newline as ``\\x0a``;
``%00``, a NEL (``%c2%85``), and a tab and a C1 byte in the token (the
user and project; gunicorn refuses the other controls in a header) are
escaped the same way, and the log holds no NUL, no line of the client's
making.
"""

from __future__ import annotations

import http.client
import urllib.parse

from tests.support.servers import serving, write_conf


def send(base: str, path: str, headers: dict | None = None) -> tuple[int, str]:
    """(status, x-openstack-request-id) of GET ``path`` sent as it is."""
    netloc = urllib.parse.urlsplit(base).netloc
    connection = http.client.HTTPConnection(netloc, timeout=10)
    try:
        connection.putrequest("GET", path, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        answer.read()
        return answer.status, answer.headers["x-openstack-request-id"]
    finally:
        connection.close()


def the_line(lines: list[str], request_id: str) -> str:
    (line,) = [line for line in lines if f"request_id: {request_id} " in line]
    return line


def test_controls_from_a_request_are_escaped_in_the_log_file(tmp_path, sqlite_url):
    log_file = tmp_path / "placement.log"
    conf = write_conf(tmp_path, sqlite_url, f"[DEFAULT]\nlog_file = {log_file}\n")
    with serving(tmp_path, conf) as (base, _stderr):
        newline = send(base, "/x%0aFAKE%20LINE")
        nul = send(base, "/y%00z?q=%00")
        nel = send(base, "/n%c2%85FAKE")
        token = send(
            base,
            "/",
            {"X-Auth-Token": "ad\tmin:pro\x85ject", "OpenStack-API-Version": "placement 1.39"},
        )
    raw = log_file.read_bytes()
    lines = raw.decode("utf-8").splitlines()
    assert [status for status, _id in (newline, nul, nel)] == [401, 401, 401]
    assert not [line for line in lines if line.startswith("FAKE")]
    assert len([line for line in lines if "FAKE LINE" in line]) == 1
    assert b"\x00" not in raw
    assert ' "GET /x\\x0aFAKE LINE" status: 401 len: ' in the_line(lines, newline[1])
    assert ' "GET /y\\x00z?q=%00" status: 401 len: ' in the_line(lines, nul[1])
    # The path as WSGI has it: the UTF-8 bytes as latin-1, the C1 one escaped.
    assert ' "GET /n\xc2\\x85FAKE" status: 401 len: ' in the_line(lines, nel[1])
    assert token[0] == 200
    line = the_line(lines, token[1])
    assert line.endswith(" user: ad\\x09min project: pro\\x85ject")
    assert " ad\\x09min pro\\x85ject " in line  # oslo.log's context, too
