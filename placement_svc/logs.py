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

Nothing a request carries can break a line, or write a NUL or a terminal's
escape sequence into the log: ``escape`` writes the C0 controls, DEL, the C1
controls and U+2028/U+2029 as ``\\xNN`` (``\\x0a`` for a newline) and
``\\u2028``/``\\u2029``. The request log (requestlog.py) and the lines of
unexpected errors escape what they take from the request; beyond them, the
handlers set up here (oslo.log's, or the ``log_config_append`` file's) escape
the line of every record, the exception words oslo.log appends to it
included, and in a traceback the words of each exception: a traceback stays
several lines, each after oslo.log's exception prefix. JSON records
(``use_json``) are left to JSON's own escaping.
"""

from __future__ import annotations

import contextvars
import importlib.metadata
import logging
import re
import sys
import traceback

from oslo_config import cfg
from oslo_log import formatters
from oslo_log import log as oslo_log

from placement_svc import redact

PROJECT = "placement"
# The request being answered (requestlog.py sets it): its ids for every line
# logged meanwhile, in the [...] of oslo.log's context format.
CURRENT: contextvars.ContextVar = contextvars.ContextVar("placement_request", default=None)
# What can end a line or garble it: C0, DEL, C1, the line and paragraph separators.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Formatters that write a record as a document of their own, escaped their way.
_STRUCTURED = (formatters.JSONFormatter, formatters.FluentFormatter)
# A traceback's own lines, between the frames (see _traceback).
_HEADINGS = (
    "Traceback (most recent call last):\n",
    getattr(traceback, "_cause_message", ""),
    getattr(traceback, "_context_message", ""),
)
_ESCAPING = "_placement_escapes"  # set on a formatter _one_line has changed


def escape(text: str) -> str:
    """``text`` with each control character (C0, DEL, C1, U+2028, U+2029) as
    ``\\xNN`` (``\\uNNNN`` beyond Latin-1): on one line, readable, and
    printable as it is. Anything else, a backslash included, is left alone."""
    return _CONTROLS.sub(_escaped, text)


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


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
        _one_line(handler)
    # No line shows the database's password, the WSGI entry point's included
    # (redact.py; cli.py calls it too, for handlers set up later).
    redact.guard_handlers()
    if conf.log_config_append:
        return
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)
    root.setLevel(logging.DEBUG if conf.debug else level)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _one_line(handler: logging.Handler) -> None:
    """Make ``handler``'s formatter escape (``escape``) the line of each
    record it writes, and the words of the exceptions in a traceback.

    The line is escaped whole (oslo.log's context, the message, the summary
    of the exception it appends), not only the message: an exception's words
    reach it without passing through the record's arguments. A traceback is
    written as oslo.log's formatter, or logging's, writes it, but with each
    exception's own words escaped (``_traceback``); a formatter of another
    class keeps its own way with tracebacks.
    """
    formatter = handler.formatter
    if formatter is None:  # logging's default, made explicit to be changed
        formatter = logging.Formatter()
        handler.setFormatter(formatter)
    if isinstance(formatter, _STRUCTURED) or getattr(formatter, _ESCAPING, False):
        return
    message = formatter.formatMessage
    kind = type(formatter).formatException

    def format_message(record: logging.LogRecord) -> str:
        return escape(message(record))

    def format_exception(ei, record: logging.LogRecord | None = None) -> str:
        if record is None or kind is logging.Formatter.formatException:
            return _traceback(ei).removesuffix("\n")
        return _oslo_traceback(formatter, ei, record)

    formatter.formatMessage = format_message  # type: ignore[method-assign]
    if kind in (logging.Formatter.formatException, formatters.ContextFormatter.formatException):
        formatter.formatException = format_exception  # type: ignore[method-assign]
    setattr(formatter, _ESCAPING, True)


def _oslo_traceback(formatter, ei, record: logging.LogRecord) -> str:
    """oslo.log's ContextFormatter.formatException, on ``_traceback``: each
    line after [DEFAULT] logging_exception_prefix."""
    prefix = formatter.conf.logging_exception_prefix
    if "%(asctime)" in prefix:
        record.asctime = formatter.formatTime(record, formatter.datefmt)
    formatter._compute_iso_time(record)
    return "\n".join(f"{prefix % record.__dict__}{line}" for line in _traceback(ei).split("\n"))


def _traceback(ei) -> str:
    """What ``traceback.print_exception`` writes for ``ei``, with all but the
    code escaped piece by piece: the frames (file, line, function, source)
    and the headings come from the code, while what each exception of the
    chain says of itself may come from a request, line breaks included."""
    try:
        shown = traceback.TracebackException(type(ei[1]), ei[1], ei[2], compact=True)
        code = set(_HEADINGS)
        chain, seen = [shown], set()
        while chain:
            one = chain.pop()
            if id(one) not in seen:
                seen.add(id(one))
                code.update(one.stack.format())
                chain.extend(e for e in (one.__cause__, one.__context__) if e is not None)
                chain.extend(getattr(one, "exceptions", None) or ())  # a group's
        return "".join(piece if piece in code else _escape_line(piece) for piece in shown.format())
    except TypeError as error:  # https://bugs.python.org/issue28603, as oslo.log has it
        return f"<Unprintable exception due to {error}>\n"


def _escape_line(piece: str) -> str:
    """``piece`` escaped, but for the line break that ends it."""
    if piece.endswith("\n"):
        return escape(piece[:-1]) + "\n"
    return escape(piece)


def _version() -> str:
    try:
        return importlib.metadata.version("placement-svc")
    except importlib.metadata.PackageNotFoundError:  # a source tree
        return "unknown"
