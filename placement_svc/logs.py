"""Logging as every OpenStack service sets it up: oslo.log, from ``[DEFAULT]``.

``debug``, ``log_file`` / ``log_dir``, ``use_syslog``, ``use_journal``,
``use_json``, ``log_config_append``, the format strings
(``logging_context_format_string`` and the rest) and ``default_log_levels``
work as they do for upstream Placement. Two things are this service's own:
with no destination configured the logs go to stderr (oslo.log's fallback
is stdout, where the commands print their answers), and a command that
prints an answer (``db sync``) logs only warnings unless ``debug`` is set.

A request's line (requestlog.py) carries its context: the global request id
(a well-formed ``X-OpenStack-Request-ID`` that came with it) and the local
one, and the user and project, in the ``[...]`` of the context format; any
other line logged while the request is answered carries its two ids.
"""

from __future__ import annotations

import contextvars
import importlib.metadata
import logging
import sys

from oslo_config import cfg
from oslo_log import log as oslo_log

PROJECT = "placement"
# The request being answered (requestlog.py sets it): its ids for every line
# logged meanwhile, in the [...] of oslo.log's context format.
CURRENT: contextvars.ContextVar = contextvars.ContextVar("placement_request", default=None)


class _RequestContext(logging.Filter):
    """Gives a record without a context of its own the current request's."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "context" not in record.__dict__:
            current = CURRENT.get()
            if current is not None:
                record.context = current
        return True


def setup(conf: cfg.ConfigOpts, level: int = logging.INFO) -> None:
    """Handlers and formats from ``conf``; the root logger at ``level`` (DEBUG
    with ``[DEFAULT] debug``), unless a ``log_config_append`` file says."""
    hook = sys.excepthook
    oslo_log.setup(conf, PROJECT, version=_version())
    # oslo.log would log uncaught exceptions itself; a refusal to start
    # (wsgi.RefusedToStart) must end, as Python ends it, with its one line.
    sys.excepthook = hook
    root = logging.getLogger()
    for handler in root.handlers:
        handler.addFilter(_RequestContext())
    if conf.log_config_append:
        return
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)
    root.setLevel(logging.DEBUG if conf.debug else level)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _version() -> str:
    try:
        return importlib.metadata.version("placement-svc")
    except importlib.metadata.PackageNotFoundError:  # a source tree
        return "unknown"
