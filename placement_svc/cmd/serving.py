"""``placement-svc serve``: the API under gunicorn, whose master forks the
workers of http_worker.py (each reads requests whole before it runs one)."""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import shutil
import socket
import tempfile

from gunicorn import glogging
from gunicorn.app.base import BaseApplication

from placement_svc.cmd import framing, http_worker, runtime
from placement_svc.cmd.arguments import parse_bind
from placement_svc.cmd.bootstrap import (
    PROG,
    Failure,
    build_app,
    check_front_door,
    prepare_database,
    shown_url,
)
from placement_svc.operating import metrics

LOG = logging.getLogger(__name__)


def serve(conf, args) -> None:
    check_front_door(conf)
    check_bind(args.bind)
    metrics_listen = conf.metrics.listen if conf.metrics.enabled else None
    if metrics_listen:
        check_bind(_config_bind(metrics_listen, "[metrics] listen"))
    prepare_database(conf, create_if_empty=True, wait=True)
    build_app(conf)  # fail here, once, rather than in every worker
    framing.configure(conf)  # read by the workers, forked from here on
    if conf.metrics.enabled:
        share_metrics()  # for the workers, forked from here on
    LOG.info(
        "database %s, auth_strategy %s, config files %s",
        shown_url(conf.placement_database.connection),
        conf.api.auth_strategy,
        ", ".join(conf.config_file) or "none (quick-start defaults)",
    )
    options = {
        "bind": args.bind,
        "workers": args.workers,
        # SIGTERM: stop accepting, let every request already accepted finish,
        # kill what still runs after this many seconds (see ReadAheadWorker).
        "graceful_timeout": args.graceful_timeout,
        "worker_class": http_worker.ReadAheadWorker,
        "sendfile": False,  # answers go through the worker's buffers
        "proc_name": PROG,
        "accesslog": None,  # placement_svc.requests logs every request instead
        # gunicorn's own cap on the request line (4094 bytes, at most 8190)
        # is off: the worker applies [api] max_request_line instead,
        # which lets through the application's longest URL (a bulk read
        # names 1000 uuids).
        "limit_request_line": 0,
        "limit_request_fields": conf.api.max_header_fields,
        "limit_request_field_size": conf.api.max_header_field_size,
        "logger_class": _GunicornLogs,
        "child_exit": _worker_exited,
    }
    if metrics_listen:
        host, _colon, port = metrics_listen.rpartition(":")

        def serve_metrics(_arbiter):  # gunicorn's when_ready: in the master
            metrics.serve_shared(host.strip("[]"), int(port))
            LOG.info("metrics without authentication at http://%s/metrics", metrics_listen)

        options["when_ready"] = serve_metrics
    _Gunicorn(conf, args.prefix, options).run()


class _GunicornLogs(glogging.Logger):
    """gunicorn's own lines (listening, workers booting and exiting) through
    the root logger, which logs.setup configured from [DEFAULT]: gunicorn
    keeps no handlers of its own and leaves the root alone."""

    def setup(self, cfg) -> None:
        self.error_log.handlers.clear()
        self.error_log.propagate = True
        self.error_log.setLevel(logging.INFO)
        self.access_log.handlers.clear()
        self.access_log.propagate = False  # placement_svc.requests has every request


def _config_bind(value: str, option: str) -> str:
    try:
        return parse_bind(value)
    except argparse.ArgumentTypeError as exc:
        raise Failure(f"{option}: {exc}") from None


def share_metrics() -> None:
    """Every worker counts into one directory, so any worker's GET /metrics
    reports them all: $PROMETHEUS_MULTIPROC_DIR when the operator set it
    (emptied of an earlier run's files), else a new temporary directory,
    removed when the service stops."""
    directory = os.environ.get(metrics.MULTIPROC_ENV)
    if not directory:
        directory = tempfile.mkdtemp(prefix="placement-svc-metrics-")
        master = os.getpid()
        # Workers are forked with this registration: only the master removes it.
        atexit.register(
            lambda: os.getpid() == master and shutil.rmtree(directory, ignore_errors=True)
        )
    metrics.use_directory(directory)
    LOG.info("metrics of every worker in %s", directory)


def _worker_exited(_server, worker) -> None:
    metrics.process_dead(worker.pid)


class _Gunicorn(BaseApplication):
    """Gunicorn with options from our command line; every worker builds its own
    application (load runs after the fork), so no connection crosses a fork."""

    def __init__(self, conf, prefix: str, options: dict):
        self.conf, self.prefix, self.options = conf, prefix, options
        super().__init__(prog=PROG)

    def load_config(self):
        for key, value in self.options.items():
            self.cfg.set(key, value)
        if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 24
            self.cfg.set("control_socket_disable", True)  # no .gunicorn/ in the CWD

    def load(self):
        application = build_app(self.conf, self.prefix)
        runtime.tune()
        return application


def check_bind(bind: str) -> None:
    """Fail with one line now when the address cannot be listened on, rather
    than letting gunicorn retry and log for several seconds."""
    host, _colon, port = bind.rpartition(":")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(
            host or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, kind, proto, _name, address = infos[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        raise Failure(f"cannot listen on {bind}: {exc.strerror or exc}") from exc
