"""redact: the database URL's secrets out of every message and log line.

The password in the user information and every value of a query key that
names a password, a secret or a token are shown as ``***``, whatever their
spelling (repeated keys, percent-encoded or ``+`` values, an ``&`` or an
``@`` left unencoded); a URL without any is shown as written. ``scrub``
takes them out of any text, and once ``remember`` has been told the URL,
out of every log record and every formatted line.
"""

from __future__ import annotations

import io
import logging

import pytest
from sqlalchemy.engine import make_url

from placement_svc import redact
from placement_svc.cmd import bootstrap


@pytest.fixture(autouse=True)
def _forget():
    yield
    redact.forget_all()


@pytest.mark.parametrize(
    "url, shown",
    [
        pytest.param(
            "postgresql+psycopg://placement:S3cret@db:5432/placement",
            "postgresql+psycopg://placement:***@db:5432/placement",
            id="userinfo",
        ),
        pytest.param(
            "postgresql+psycopg://u@h/db?password=S3cret",
            "postgresql+psycopg://u@h/db?password=***",
            id="query-password",
        ),
        pytest.param(
            "mysql+pymysql://u@h/db?charset=utf8mb4&password=S3cret",
            "mysql+pymysql://u@h/db?charset=utf8mb4&password=***",
            id="query-password-after-another-key",
        ),
        pytest.param(
            "mysql+pymysql://u@h/db?passwd=S3cret&charset=utf8mb4",
            "mysql+pymysql://u@h/db?passwd=***&charset=utf8mb4",
            id="pymysql-passwd",
        ),
        pytest.param(
            "mysql+pymysql://u:S3cretA@h/db?PassWord=S3cretB&PWD=x&sslpassword=y"
            "&client_secret=z&auth_token=t&Secret=s&connect_timeout=5",
            "mysql+pymysql://u:***@h/db?PassWord=***&PWD=***&sslpassword=***"
            "&client_secret=***&auth_token=***&Secret=***&connect_timeout=5",
            id="every-secret-key-any-case",
        ),
        pytest.param(
            "postgresql://u:S3cretA@h/db?password=S3cretB&password=S3cretC",
            "postgresql://u:***@h/db?password=***&password=***",
            id="repeated-keys",
        ),
        pytest.param(
            "postgresql://u:S3c%40ret@h/db?password=S3c%26r%2Bet+x&pass%77ord=y",
            "postgresql://u:***@h/db?password=***&pass%77ord=***",
            id="url-encoded",
        ),
        pytest.param(
            "postgresql://u@h/db?password=S3c&ret&sslmode=disable",
            "postgresql://u@h/db?password=***&sslmode=disable",
            id="unencoded-ampersand-in-value",
        ),
        pytest.param(
            "postgresql://u:p@ssw0rd@h:5432/db",
            "postgresql://u:***@h:5432/db",
            id="unencoded-at-in-password",
        ),
        pytest.param(
            "postgresql://u:p@ss:w0rd@h/db",
            "postgresql://u:***@h/db",
            id="unencoded-at-and-colon-unparsable",
        ),
        pytest.param(
            "postgresql://u:pa/ss?w@h/db?application_name=a@b",
            "postgresql://u:***@h/db?application_name=a@b",
            id="unencoded-slash-and-question-mark",
        ),
        pytest.param(
            # SQLAlchemy reads "placement@db" as the user, "3306/...=p" as the
            # password, "ssword" as the host: all of it is hidden.
            "mysql+pymysql://placement@db:3306/placement?password=p@ssword",
            "mysql+pymysql://placement@db:***",
            id="at-in-query-value-with-a-port",
        ),
        pytest.param(
            "postgresql://u:@h/db?password=",
            "postgresql://u:***@h/db?password=***",
            id="empty-secrets",
        ),
        pytest.param(
            "postgresql+psycopg://placement@db/placement?sslmode=require&connect_timeout=3",
            "postgresql+psycopg://placement@db/placement?sslmode=require&connect_timeout=3",
            id="no-password",
        ),
        pytest.param("sqlite:///placement.sqlite", "sqlite:///placement.sqlite", id="sqlite"),
        pytest.param("sqlite:////home/a@b/p.db", "sqlite:////home/a@b/p.db", id="sqlite-at"),
        pytest.param("sqlite://", "sqlite://", id="sqlite-memory"),
        pytest.param(
            "postgresql://u:S3cret@[::1]:5432/db", "postgresql://u:***@[::1]:5432/db", id="ipv6"
        ),
        pytest.param("not a url S3cret", "(unparsable URL)", id="not-a-url"),
        pytest.param("", "(unparsable URL)", id="empty"),
        pytest.param(None, "(unparsable URL)", id="none"),
    ],
)
def test_mask_url(url, shown):
    assert redact.mask_url(url) == shown
    assert bootstrap.shown_url(url) == shown


def test_the_mask_hides_what_sqlalchemy_hides_and_more():
    url = "postgresql+psycopg://u:S3cretA@h:5432/db?password=S3cretB"
    theirs = make_url(url).render_as_string(hide_password=True)
    assert theirs == "postgresql+psycopg://u:***@h:5432/db?password=S3cretB"
    assert redact.mask_url(url) == "postgresql+psycopg://u:***@h:5432/db?password=***"


@pytest.mark.parametrize(
    "key, secret",
    [
        ("password", True),
        ("PASSWORD", True),
        ("passwd", True),
        ("sslpassword", True),
        ("pwd", True),
        ("client_secret", True),
        ("auth_token", True),
        ("pass%77ord", True),
        ("passfile", False),
        ("sslmode", False),
        ("charset", False),
        ("user", False),
    ],
)
def test_is_secret_key(key, secret):
    assert redact.is_secret_key(key) is secret


def test_secrets_in_as_written_and_as_decoded():
    url = "postgresql://u:S3c%40retA@h/db?password=S3c%26r+etB&password=S3cretC&sslmode=x"
    assert redact.secrets_in(url) >= {
        "S3c%40retA",
        "S3c@retA",
        "S3c%26r+etB",
        "S3c&r etB",
        "S3cretC",
    }
    assert "sslmode" not in "".join(redact.secrets_in(url))
    assert redact.secrets_in("postgresql://u@h/db") == set()
    assert redact.secrets_in("not a url") == set()


def test_secrets_in_holds_the_pieces_of_a_password_with_an_at():
    """SQLAlchemy takes what follows the first "@" for the host: a driver
    that cannot resolve it names it."""
    assert "ssw0rdX" in redact.secrets_in("postgresql://u:Pa@ssw0rdX@h/db")


def test_short_secrets_are_masked_in_the_url_but_not_scrubbed_from_text():
    url = "postgresql://u:abc@h/db"
    assert redact.mask_url(url) == "postgresql://u:***@h/db"
    assert redact.scrub("a cabbage", url) == "a cabbage"


def test_scrub_with_the_url():
    url = "postgresql://u:S3cretA@h/db?password=S3cr%2BetB"
    text = "failed for 'S3cretA' and S3cr+etB and S3cr%2BetB"
    assert redact.scrub(text, url) == "failed for '***' and *** and ***"
    assert redact.scrub(text) == text  # nothing remembered


def test_scrub_uses_the_remembered_urls():
    redact.remember("mysql+pymysql://u@h/db?passwd=S3cretB")
    assert redact.scrub("Access denied: S3cretB") == "Access denied: ***"
    assert bootstrap.one_line(ValueError("bad\n S3cretB")) == "bad ***"


def test_remember_a_url_without_secrets_changes_nothing():
    redact.remember("sqlite:///placement.sqlite")
    assert redact.scrub("sqlite:///placement.sqlite") == "sqlite:///placement.sqlite"


@pytest.fixture
def log():
    """A logger with its own handler, formatting as bootstrap.LOG_FORMAT does."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("tests.redact")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


def test_every_log_record_is_scrubbed_once_the_url_is_remembered(log):
    logger, stream = log
    redact.remember("postgresql://u:S3cretA@h/db?password=S3cretB")
    logger.warning("connecting with %s and %s", "S3cretA", "S3cretB")
    logger.info("no secret in %s", "this line")
    try:
        raise RuntimeError("the driver said S3cretB")
    except RuntimeError:
        logger.exception("failed")
    written = stream.getvalue()
    assert "S3cret" not in written
    assert "WARNING connecting with *** and ***" in written
    assert "INFO no secret in this line" in written
    assert "RuntimeError: the driver said ***" in written
    assert "Traceback" in written


def test_guarded_handlers_scrub_what_the_formatter_adds(log):
    """oslo.log appends the exception being handled to a WARNING when the
    line is formatted: only the formatted line shows it."""
    logger, stream = log
    handler = logger.handlers[0]

    class Appending(logging.Formatter):
        def format(self, record):
            return super().format(record) + ": the driver said S3cretB"

    handler.setFormatter(Appending("%(message)s"))
    redact.remember("postgresql://u@h/db?password=S3cretB")
    redact.guard_handlers()
    redact.guard_handlers()  # once is enough; twice changes nothing
    logger.warning("not reachable")
    assert stream.getvalue() == "not reachable: the driver said ***\n"
    assert isinstance(handler.formatter, Appending)


def test_database_errors_mask_the_url_and_scrub_the_drivers_words():
    from sqlalchemy import exc as sa_exc

    url = "postgresql+psycopg://u:S3cretA@127.0.0.1:1/db?password=S3cretB"
    with pytest.raises(bootstrap.Failure) as failure:
        with bootstrap.database_errors(url):
            raise sa_exc.OperationalError("SELECT 1", {}, Exception("no S3cretA nor S3cretB"))
    assert str(failure.value) == (
        "database postgresql+psycopg://u:***@127.0.0.1:1/db?password=***: no *** nor ***"
    )


def test_guarded_handlers_scrub_a_traceback_left_as_it_is(log):
    logger, stream = log
    redact.remember("postgresql://u@h/db?password=S3cretB")
    redact.guard_handlers()
    try:
        raise RuntimeError("the driver said S3cretB")
    except RuntimeError:
        logger.exception("failed")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "ERROR failed"
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == "RuntimeError: the driver said ***"
    assert "S3cretB" not in stream.getvalue()
