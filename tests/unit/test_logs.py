"""placement_svc.logs: oslo.log set up from [DEFAULT] as upstream's services
set it up, in this process (the real server's lines: tests/functional/test_logging.py)."""

from __future__ import annotations

import logging
import sys

from oslo_log import handlers as oslo_handlers

from placement_svc import conf as placement_conf
from placement_svc import logs
from placement_svc.http import requestlog


def conf_with(tmp_path, text: str):
    path = tmp_path / "placement.conf"
    path.write_text("[DEFAULT]\n" + text)
    return placement_conf.make_conf(["--config-file", str(path)])


def test_without_a_destination_the_lines_go_to_stderr(tmp_path, restore_logging):
    logs.setup(conf_with(tmp_path, ""), logging.WARNING)
    root = logging.getLogger()
    assert [type(h) for h in root.handlers] == [logging.StreamHandler]
    assert root.handlers[0].stream is sys.stderr
    assert root.level == logging.WARNING


def test_debug_sets_the_root_to_debug_whatever_the_command(tmp_path, restore_logging):
    logs.setup(conf_with(tmp_path, "debug = true\n"), logging.WARNING)
    assert logging.getLogger().level == logging.DEBUG


def test_use_syslog_adds_oslo_logs_syslog_handler(tmp_path, restore_logging):
    logs.setup(conf_with(tmp_path, "use_syslog = true\nuse_stderr = true\n"))
    kinds = {type(h) for h in logging.getLogger().handlers}
    assert oslo_handlers.OSSysLogHandler in kinds


def test_the_context_format_string_shows_both_request_ids(tmp_path, restore_logging):
    log_file = tmp_path / "p.log"
    conf = conf_with(
        tmp_path,
        f"log_file = {log_file}\n"
        "logging_context_format_string = CTX %(global_request_id)s %(request_id)s %(message)s\n",
    )
    logs.setup(conf)
    context = requestlog._Logged(request_id="req-local", global_request_id="req-global")
    logging.getLogger("placement_svc.requests").info("the line", extra={"context": context})
    logging.getLogger("placement_svc.requests").info("no context")
    assert log_file.read_text().splitlines()[-2] == "CTX req-global req-local the line"
    assert log_file.read_text().splitlines()[-1].endswith(" [-] no context")


def test_a_line_logged_while_a_request_is_answered_carries_its_ids(tmp_path, restore_logging):
    log_file = tmp_path / "p.log"
    conf = conf_with(tmp_path, f"log_file = {log_file}\n")
    logs.setup(conf)

    def application(environ, start_response):
        logging.getLogger("placement_svc.db.engine").warning("inside")
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    wrapped = requestlog.RequestLog(application, conf)
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/",
        "HTTP_X_OPENSTACK_REQUEST_ID": "req-12345678-1234-4abc-8def-123456789abc",
        "wsgi.url_scheme": "http",
        "SERVER_NAME": "p",
        "SERVER_PORT": "80",
    }
    headers = {}
    wrapped(environ, lambda status, sent, exc_info=None: headers.update(sent))
    logging.getLogger("placement_svc.db.engine").warning("after")
    local = headers["x-openstack-request-id"]
    lines = log_file.read_text().splitlines()
    inside = next(line for line in lines if line.endswith(" inside"))
    assert f"[req-12345678-1234-4abc-8def-123456789abc {local} - - - - - -] inside" in inside
    assert lines[-1].endswith(" WARNING placement_svc.db.engine [-] after")
