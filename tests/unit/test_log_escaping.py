"""Nothing a request carries can break a line of the log (issue 28).

``logs.escape`` writes C0 controls, DEL, C1 controls and U+2028/U+2029 as
``\\xNN`` (``\\u2028``, ``\\u2029``); the request log escapes every field it
takes from the request (address, method, path, query string, user, project),
and so do the lines of unexpected errors. The handlers ``logs.setup`` makes
(oslo.log's, or the operator's from ``log_config_append``) escape the line of
every record and the words of a traceback's exceptions, whatever logged them:
a traceback stays several lines, each one of oslo.log's. The real server's
log: tests/functional/test_log_injection.py.
"""

from __future__ import annotations

import logging

import pytest

from placement_svc import app, logs
from placement_svc import conf as placement_conf
from placement_svc.http import auth, requestlog
from tests.unit.test_logs import conf_with
from tests.unit.test_requestlog import TOKEN_AND_LATEST, call, make_app, the_line

GLOBAL = "req-12345678-1234-4abc-8def-123456789abc"


# -- the escaping itself ---------------------------------------------------------


@pytest.mark.parametrize(
    "text, escaped",
    [
        ("/x\nFAKE LINE", "/x\\x0aFAKE LINE"),
        ("a\r\nb", "a\\x0d\\x0ab"),
        ("nul\x00byte", "nul\\x00byte"),
        ("tab\tbell\x07esc\x1b[31m", "tab\\x09bell\\x07esc\\x1b[31m"),
        ("\x0b\x0c\x1c\x1d\x1e\x1f", "\\x0b\\x0c\\x1c\\x1d\\x1e\\x1f"),
        ("del\x7f", "del\\x7f"),
        ("c1 \x80 nel \x85 \x9f", "c1 \\x80 nel \\x85 \\x9f"),
        ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
    ],
)
def test_controls_are_written_as_backslash_escapes(text, escaped):
    assert logs.escape(text) == escaped
    assert escaped.splitlines() == [escaped]


@pytest.mark.parametrize(
    "text",
    [
        "",
        '/traits?name=startswith:CUSTOM_&x="y"',
        "é ü ß ✓ \xa0 \xff 名前",  # printable beyond ASCII, NBSP and ÿ included
        "a literal \\x0a stays as it is",
    ],
)
def test_everything_else_is_left_alone(text):
    assert logs.escape(text) == text


def test_every_character_that_splits_a_line_is_escaped():
    every = "".join(map(chr, range(0x3000)))
    assert len(logs.escape(every).splitlines()) == 1
    assert "\x00" not in logs.escape(every)


# -- the request log ------------------------------------------------------------


@pytest.fixture
def log(caplog, monkeypatch):
    ticks = iter([100.0, 100.0123])
    monkeypatch.setattr(requestlog.time, "perf_counter", lambda: next(ticks))
    caplog.set_level(logging.INFO, logger="placement_svc.requests")
    return caplog


def test_a_newline_in_the_path_of_a_401_stays_in_its_line(log):
    status, headers, body = call(make_app(), "GET", "/x\nFAKE LINE")
    assert status == "401 Unauthorized"
    assert the_line(log) == (
        f'127.0.0.1 "GET /x\\x0aFAKE LINE" status: 401 len: {len(body)} microversion: -'
        f" time: 0.0123s request_id: {headers['x-openstack-request-id']} user: - project: -"
    )


def test_a_nul_and_c1_and_line_separators_in_the_path_and_query_are_escaped(log):
    # The WSGI path is the decoded one, as latin-1: %00, %C2%85 (NEL) and
    # %E2%80%A8 (U+2028) arrive as these characters.
    path = "/y\x00z/\xc2\x85/\xe2\x80\xa8"
    _status, headers, body = call(make_app(), "GET", path, "q=\r\x7f", **TOKEN_AND_LATEST)
    assert the_line(log) == (
        f'127.0.0.1 "GET /y\\x00z/\xc2\\x85/\xe2\\x80\xa8?q=\\x0d\\x7f" status: 404'
        f" len: {len(body)} microversion: 1.51 time: 0.0123s"
        f" request_id: {headers['x-openstack-request-id']} user: admin project: admin"
    )


def test_the_forwarded_address_user_and_project_are_escaped_too(log):
    application = make_app(**{"oslo_middleware.enable_proxy_headers_parsing": True})
    _status, headers, body = call(
        application,
        "GET",
        "/",
        HTTP_X_FORWARDED_FOR="203.0.113.9\nFAKE",
        HTTP_X_AUTH_TOKEN="al\nice:pro\x00ject",
        HTTP_OPENSTACK_API_VERSION="placement 1.20",
    )
    assert the_line(log) == (
        f'203.0.113.9\\x0aFAKE "GET /" status: 200 len: {len(body)} microversion: 1.20'
        f" time: 0.0123s request_id: {headers['x-openstack-request-id']}"
        " user: al\\x0aice project: pro\\x00ject"
    )


def test_the_starting_request_line_is_escaped(caplog):
    caplog.set_level(logging.DEBUG, logger="placement_svc.requests")
    call(make_app(), "GET", "/x\nFAKE", "a=\x00")
    (starting,) = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert starting == 'Starting request: 127.0.0.1 "GET /x\\x0aFAKE?a=\\x00"'


def test_a_request_id_with_a_trailing_newline_is_not_the_global_one():
    seen = {}

    def application(environ, start_response):
        seen.update(environ)
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    wrapped = requestlog.RequestLog(application, make_conf())
    for inbound, taken in [(GLOBAL, GLOBAL), (GLOBAL + "\n", None), (GLOBAL + "\nX", None)]:
        seen.clear()
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "SCRIPT_NAME": ""}
        environ["HTTP_X_OPENSTACK_REQUEST_ID"] = inbound
        wrapped(environ, lambda status, headers, exc_info=None: None)
        assert seen.get(requestlog.GLOBAL) == taken


def make_conf():
    return placement_conf.make_conf(config_files=[], quickstart_if_unconfigured=False)


def test_an_unexpected_error_is_logged_with_the_path_escaped(caplog, monkeypatch):
    def broken(req, resp):
        raise RuntimeError("a handler broke")

    monkeypatch.setattr(app.root, "home", broken)
    call(make_app(), "GET", "/", "x=\n\x00", **TOKEN_AND_LATEST)
    (record,) = [r for r in caplog.records if r.name == "placement_svc.app"]
    assert record.getMessage() == "unexpected error serving GET /?x=\\x0a\\x00"


def test_an_error_around_falcon_is_logged_with_the_path_escaped(caplog, monkeypatch):
    def broken(self, environ, start_response):
        raise RuntimeError("the auth layer broke")

    monkeypatch.setattr(auth.NoAuthMiddleware, "__call__", broken)
    _status, headers, _body = call(make_app(), "GET", "/x\nFAKE\u2028", **TOKEN_AND_LATEST)
    (record,) = [r for r in caplog.records if r.name == "placement_svc.http.guard"]
    assert record.getMessage() == (
        "unexpected error serving GET /x\\x0aFAKE\\u2028"
        f" (request_id {headers['x-openstack-request-id']})"
    )


# -- oslo.log's handlers, and the operator's ---------------------------------------


class Hostile(Exception):
    """An exception whose words carry what a request sent."""


def raise_hostile(words: str):
    try:
        raise ValueError("the cause\nFAKE CAUSE")
    except ValueError as cause:
        raise Hostile(words) from cause


def test_oslo_logs_lines_and_tracebacks_keep_to_their_lines(tmp_path, restore_logging):
    log_file = tmp_path / "p.log"
    logs.setup(conf_with(tmp_path, f"log_file = {log_file}\n"))
    logger = logging.getLogger("placement_svc.somewhere")
    logger.info("a value %s", "from\nthe\x00request\u2028")
    logger.warning("an f-string: /x\nFAKE LINE")
    try:
        raise_hostile("/x\x00\nFAKE ERROR")
    except Hostile:
        logger.exception("failed serving %s", "/x\rFAKE")
        # oslo.log appends the first line of an exception it was not handed
        logger.warning("still inside")
    lines = log_file.read_text().splitlines()
    assert "\x00" not in log_file.read_text()
    assert not [line for line in lines if line.startswith("FAKE")]
    assert lines[0].endswith(
        " INFO placement_svc.somewhere [-] a value from\\x0athe\\x00request\\u2028"
    )
    assert lines[1].endswith(" WARNING placement_svc.somewhere [-] an f-string: /x\\x0aFAKE LINE")
    assert lines[2].endswith(
        " ERROR placement_svc.somewhere [-] failed serving /x\\x0dFAKE:"
        " tests.unit.test_log_escaping.Hostile: /x\\x00\\x0aFAKE ERROR"
    )
    assert lines[-1].endswith(
        " WARNING placement_svc.somewhere [-] still inside:"
        " tests.unit.test_log_escaping.Hostile: /x\\x00"
    )
    # The traceback: several lines, each after oslo.log's exception prefix.
    traceback = lines[3:-1]
    assert all(" ERROR placement_svc.somewhere " in line for line in traceback)
    assert any(line.endswith(" ValueError: the cause\\x0aFAKE CAUSE") for line in traceback)
    assert any(line.endswith("Hostile: /x\\x00\\x0aFAKE ERROR") for line in traceback)
    assert any(line.endswith("Traceback (most recent call last):") for line in traceback)
    assert any("raise Hostile(words) from cause" in line for line in traceback)


def test_a_line_logged_while_a_request_is_answered_is_escaped(tmp_path, restore_logging):
    log_file = tmp_path / "p.log"
    conf = conf_with(tmp_path, f"log_file = {log_file}\n")
    logs.setup(conf)

    def application(environ, start_response):
        logging.getLogger("placement_svc.db.engine").warning("inside %s", environ["PATH_INFO"])
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/x\nFAKE", "SCRIPT_NAME": ""}
    environ["HTTP_X_OPENSTACK_REQUEST_ID"] = GLOBAL
    requestlog.RequestLog(application, conf)(environ, lambda *args: None)
    lines = log_file.read_text().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith("] inside /x\\x0aFAKE")
    assert f"[{GLOBAL} req-" in lines[0]
    assert '"GET /x\\x0aFAKE" status: 200 len: 0 ' in lines[1]


def test_the_operators_own_formatters_escape_too(tmp_path, restore_logging):
    log_file = tmp_path / "own.log"
    (tmp_path / "logging.ini").write_text(
        "[loggers]\nkeys = root\n[handlers]\nkeys = file\n[formatters]\nkeys = plain\n"
        "[logger_root]\nlevel = INFO\nhandlers = file\n"
        f"[handler_file]\nclass = FileHandler\nformatter = plain\nargs = ('{log_file}',)\n"
        "[formatter_plain]\nformat = OWN %(levelname)s %(message)s\n"
    )
    logs.setup(conf_with(tmp_path, f"log_config_append = {tmp_path / 'logging.ini'}\n"))
    logger = logging.getLogger("placement_svc.somewhere")
    logger.info("a value %s", "from\nthe request")
    try:
        raise_hostile("/x\nFAKE ERROR")
    except Hostile:
        logger.exception("failed")
    lines = log_file.read_text().splitlines()
    assert lines[:2] == ["OWN INFO a value from\\x0athe request", "OWN ERROR failed"]
    assert lines[2] == "Traceback (most recent call last):"
    assert lines[-1] == "tests.unit.test_log_escaping.Hostile: /x\\x0aFAKE ERROR"
    assert "ValueError: the cause\\x0aFAKE CAUSE" in lines
    assert not [line for line in lines if line.startswith("FAKE")]


def test_json_records_are_left_to_json(tmp_path, restore_logging):
    log_file = tmp_path / "p.json"
    logs.setup(conf_with(tmp_path, f"log_file = {log_file}\nuse_json = true\n"))
    logging.getLogger("placement_svc.somewhere").info("a value %s", "from\nthe request")
    (line,) = log_file.read_text().splitlines()
    assert '"message": "a value from\\nthe request"' in line


def test_setting_up_twice_escapes_once(tmp_path, restore_logging):
    log_file = tmp_path / "p.log"
    conf = conf_with(tmp_path, f"log_file = {log_file}\n")
    logs.setup(conf)
    for handler in logging.getLogger().handlers:
        logs._one_line(handler)
    logging.getLogger("placement_svc.somewhere").info("a %s", "b\nc")
    assert log_file.read_text().splitlines()[-1].endswith(" a b\\x0ac")
