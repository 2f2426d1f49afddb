"""Secrets out of what is shown: the database URL's password, wherever it is.

A connection URL carries its password in the user:password part, or in the
query string (``?password=...``, PyMySQL's ``passwd=``, libpq's
``sslpassword=``, ...): every value of a query key that names a password,
a secret or a token is one too. ``mask_url`` is the URL as a message or a
log line may show it, with each of them as ``***`` (SQLAlchemy's
``hide_password`` style, which hides the first kind only). The text of the
URL is otherwise the operator's own, as written, so it is masked even when
SQLAlchemy cannot parse it; a password with an ``@`` that is not
percent-encoded (SQLAlchemy would take what follows it for the host) is
masked up to the last ``@`` before the host.

``scrub`` takes those secrets out of any text (a driver's error, a
traceback) as ``***``. ``remember`` (bootstrap.load_conf calls it with the
configured URL) makes every later ``scrub`` and every log record from then
on in this process (and the processes it forks) do so without being told
the URL: a line logged by any module, a driver's words included, cannot
carry the password. ``guard_handlers`` (cli.main calls it once logging is
set up) scrubs each line as the handlers write it, what oslo.log adds to
a record included.

This module is named ``redact``, not ``secrets``: the standard library's
``secrets`` would be shadowed by it for a script run from this directory.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from urllib.parse import unquote, unquote_plus

MASK = "***"
# Query keys whose values are secrets, matched case-insensitively anywhere in
# the key: password, passwd (PyMySQL), sslpassword (libpq), pwd, secret,
# client_secret, token, auth_token...
SECRET_KEY = re.compile(r"passw(or)?d|pwd|secret|token", re.IGNORECASE)
# Secrets shorter than this are masked in a URL but not searched for in
# free text: replacing every "ab" of a message would garble it and hide
# nothing worth hiding.
MIN_SCRUBBED = 4
UNPARSABLE = "(unparsable URL)"

# What SQLAlchemy's make_url reads (sqlalchemy.engine.url._parse_url): the
# scheme, then user[:password]@ with the password up to the first "@"; the
# host and port end at the first "/" or "?", the database at the first "?".
_SQLALCHEMY = re.compile(
    r"[\w+]+://"
    r"(?:[^:/]*(?::(?P<password>[^@]*))?@)?"
    r"(?P<authority>[^/?]*)"
    r"[^?]*"
    r"(?:\?(?P<query>.*))?",
    re.DOTALL,
)
# What a URL is by RFC 3986: the query from the first "?", the user
# information up to the last "@" before the first "/" or "?".
_STANDARD = re.compile(
    r"[\w+]+://"
    r"(?:[^:/?@]*(?::(?P<password>[^/?]*))?@)?"
    r"[^/?@]*"
    r"[^?]*"
    r"(?:\?(?P<query>.*))?",
    re.DOTALL,
)


def is_secret_key(key: str) -> bool:
    """Whether a query key's values are secrets."""
    return bool(SECRET_KEY.search(unquote_plus(key)))


def _query_spans(query: str, offset: int):
    """(start, end) of each secret value in the query string that starts at
    ``offset``. A piece without "=" after a secret one is the rest of that
    value (an "&" not percent-encoded in it): in the same span."""
    spans: list[list[int]] = []
    secret = False
    at = offset
    for piece in query.split("&"):
        key, equals, _value = piece.partition("=")
        if equals:
            secret = is_secret_key(key)
            if secret:
                spans.append([at + len(key) + 1, at + len(piece)])
        elif secret:
            spans[-1][1] = at + len(piece)
        at += len(piece) + 1
    return [tuple(span) for span in spans]


def _spans(url: str) -> list[tuple[int, int]] | None:
    """(start, end) of every secret in the URL's text, as SQLAlchemy reads it
    and as RFC 3986 does (they differ only for a URL with a character left
    unencoded: both are masked, whichever the driver is given); None when
    it is no URL at all."""
    spans = []
    matched = False
    for pattern in (_SQLALCHEMY, _STANDARD):
        match = pattern.fullmatch(url)
        if match is None:
            continue
        matched = True
        if match.group("password") is not None:
            start, end = match.span("password")
            if pattern is _SQLALCHEMY and "@" in match.group("authority"):
                # An "@" not percent-encoded in the password: SQLAlchemy stops
                # the password at the first one; up to the last, it is the
                # rest of it, not a host.
                end = match.start("authority") + match.group("authority").rindex("@")
            spans.append((start, end))
        if match.group("query") is not None:
            spans += _query_spans(match.group("query"), match.start("query"))
    return sorted(spans) if matched else None


def _merged(spans):
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def mask_url(url: str | None) -> str:
    """The URL as it may be shown: its password and every secret query value
    as ``***``; what is not a URL as "(unparsable URL)"."""
    url = (url or "").strip()
    spans = _spans(url)
    if spans is None:
        return UNPARSABLE
    shown, at = [], 0
    for start, end in _merged(spans):
        shown += [url[at:start], MASK]
        at = end
    return "".join([*shown, url[at:]])


def secrets_in(url: str | None) -> set[str]:
    """The URL's secrets as text may carry them: each as written in the URL
    and as decoded (what the driver was given), and each piece of one
    between "@"s (what SQLAlchemy takes from one with an "@" left in it for
    a host); those at least MIN_SCRUBBED long."""
    url = (url or "").strip()
    found = set()
    for start, end in _spans(url) or ():
        raw = url[start:end]
        for text in (raw, *raw.split("@")):
            found.update((text, unquote(text), unquote_plus(text)))
    return {text for text in found if len(text) >= MIN_SCRUBBED}


# Replaced whole, never changed in place: a reader in another thread sees
# the old set or the new one.
_remembered: frozenset[str] = frozenset()
_lock = threading.Lock()
_factory_installed = False
# Whether guard_handlers has run: the handlers scrub tracebacks as they
# write them, formatted as usual, and the record factory leaves them be.
_guarded = False


def remember(url: str | None) -> None:
    """Scrub this URL's secrets from every later ``scrub`` and log record."""
    global _remembered, _factory_installed
    found = secrets_in(url)
    if not found:
        return
    with _lock:
        _remembered = _remembered | found
        if not _factory_installed:
            _install_record_factory()
            _factory_installed = True


def scrub(text: str, url: str | None = None) -> str:
    """``text`` without the secrets of ``url`` and of the remembered URLs."""
    found = _remembered | secrets_in(url) if url else _remembered
    if not found or not text:
        return text
    for secret in sorted(found, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _carries_a_secret(text: str) -> bool:
    return any(secret in text for secret in _remembered)


def _install_record_factory() -> None:
    """Every log record made from now on, by any logger, is scrubbed of the
    remembered secrets: its message (the arguments merged into it, as
    logging would) and, when they carry one and no guard_handlers scrubs
    the lines, its traceback and stack (the traceback then appended to the
    message, already formatted). A record without any is left as it was."""
    make_record = logging.getLogRecordFactory()

    def scrubbed_record(*args, **kwargs):
        record = make_record(*args, **kwargs)
        if not _remembered:
            return record
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - logging reports it when it formats the record
            return record
        if _carries_a_secret(message):
            record.msg, record.args = scrub(message), None
        if _guarded:
            return record
        if record.exc_info and record.exc_info[1] is not None:
            text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            if _carries_a_secret(text):
                record.msg = f"{record.getMessage()}\n{scrub(text)}"
                record.args, record.exc_info, record.exc_text = None, None, None
        if record.stack_info and _carries_a_secret(record.stack_info):
            record.stack_info = scrub(record.stack_info)
        return record

    logging.setLogRecordFactory(scrubbed_record)


def guard_handlers() -> None:
    """Scrub every line the handlers configured now write, once formatted:
    what the record factory cannot reach is in it too (oslo.log adds, to a
    WARNING logged while an exception is handled, that exception's text,
    read when the line is formatted). Each handler's formatter keeps its
    class; its ``format`` is wrapped, once."""
    global _guarded
    _guarded = True
    loggers = [logging.getLogger()] + [
        logger
        for logger in list(logging.Logger.manager.loggerDict.values())
        if isinstance(logger, logging.Logger)
    ]
    for logger in loggers:
        for handler in list(logger.handlers):
            formatter = handler.formatter
            if formatter is None:
                formatter = logging.Formatter()
                handler.setFormatter(formatter)
            if getattr(formatter, "_placement_scrubbed", False):
                continue
            formatter.format = _scrubbing(formatter.format)
            formatter._placement_scrubbed = True


def _scrubbing(format_record):
    def format(record):
        return scrub(format_record(record))

    return format


def forget_all() -> None:
    """For tests: no remembered secret (the record factory stays, idle; the
    handlers guarded stay so, and the factory scrubs tracebacks again)."""
    global _remembered, _guarded
    with _lock:
        _remembered = frozenset()
        _guarded = False
