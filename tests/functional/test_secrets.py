"""The database password never shows: the real ``placement-svc``, as a subprocess.

A connection URL carries its password in the user information and in the
query string (``?password=``, PyMySQL's ``passwd=``). Whatever the command
(``db version``, ``status upgrade check``, ``explain``, ``serve``), whether
the database cannot be reached (its error line, the start-up retries' log
lines, ``--debug``'s traceback) or answers (``serve``'s start-up line, the
status table), neither password appears on stdout, stderr or in the log:
the URL is shown with ``***`` in their place. PostgreSQL (trust
authentication: any password is accepted) is skipped when unreachable,
unless CI=true.
"""

from __future__ import annotations

import pytest

from tests.support import databases
from tests.support.servers import (
    ADMIN_LATEST,
    free_port,
    get,
    run,
    serving,
    write_conf,
)

USERINFO_SECRET = "Us3rinfoS3cret"
QUERY_SECRET = "Qu3ryS3cret"
SECRETS = (USERINFO_SECRET, QUERY_SECRET)

UNREACHABLE = [
    pytest.param(
        f"postgresql+psycopg://placement:{USERINFO_SECRET}@127.0.0.1:1/placement"
        f"?password={QUERY_SECRET}&connect_timeout=3",
        "postgresql+psycopg://placement:***@127.0.0.1:1/placement?password=***&connect_timeout=3",
        id="postgresql-password",
    ),
    pytest.param(
        f"mysql+pymysql://placement:{USERINFO_SECRET}@127.0.0.1:1/placement"
        f"?charset=utf8mb4&password={QUERY_SECRET}",
        "mysql+pymysql://placement:***@127.0.0.1:1/placement?charset=utf8mb4&password=***",
        id="mysql-password",
    ),
    pytest.param(
        f"mysql+pymysql://placement:{USERINFO_SECRET}@127.0.0.1:1/placement?passwd={QUERY_SECRET}",
        "mysql+pymysql://placement:***@127.0.0.1:1/placement?passwd=***",
        id="mysql-passwd",
    ),
]

COMMANDS = [
    pytest.param(("db", "version"), id="db-version"),
    pytest.param(("status", "upgrade", "check"), id="status"),
    pytest.param(("explain", "resources=VCPU:1"), id="explain"),
    pytest.param(("serve",), id="serve"),
]


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, text


def command_line(command, conf_path, *extra) -> tuple:
    bind = ("--bind", f"127.0.0.1:{free_port()}") if command == ("serve",) else ()
    return (*command, "--config-file", conf_path, *bind, *extra)


class TestUnreachable:
    @pytest.mark.parametrize("command", COMMANDS)
    @pytest.mark.parametrize("url, shown", UNREACHABLE)
    def test_the_error_line_shows_the_masked_url(self, tmp_path, command, url, shown):
        conf_path = write_conf(tmp_path, url)
        result = run(*command_line(command, conf_path), cwd=tmp_path)
        assert result.returncode != 0
        assert_no_secret(result.stdout, result.stderr)
        assert f"placement-svc: error: database {shown}: " in result.stderr
        assert "Traceback" not in result.stderr

    @pytest.mark.parametrize("command", [COMMANDS[0], COMMANDS[3]])
    def test_debug_shows_the_traceback_without_the_secrets(self, tmp_path, command):
        url, shown = UNREACHABLE[0].values
        conf_path = write_conf(tmp_path, url)
        result = run(*command_line(command, conf_path, "--debug"), cwd=tmp_path)
        assert result.returncode == 1
        assert "Traceback" in result.stderr
        assert shown in result.stderr
        assert_no_secret(result.stdout, result.stderr)

    def test_serve_logs_its_retries_without_the_secrets(self, tmp_path):
        url, shown = UNREACHABLE[0].values
        conf_path = write_conf(
            tmp_path, url, "[placement_database]\nmax_retries = 1\nretry_interval = 0\n"
        )
        result = run(*command_line(("serve",), conf_path), cwd=tmp_path)
        assert result.returncode == 1
        assert "database not reachable (retry 1 of 1" in result.stderr
        assert shown in result.stderr
        assert_no_secret(result.stdout, result.stderr)

    @pytest.mark.parametrize(
        "url, shown",
        [
            pytest.param(
                # SQLAlchemy takes what follows the first "@" for the host,
                # and psycopg names the host it cannot resolve.
                "postgresql+psycopg://placement:Us3r@infoS3cret@127.0.0.1:1/placement",
                "postgresql+psycopg://placement:***@127.0.0.1:1/placement",
                id="an-at-in-the-password",
            ),
            pytest.param(
                # SQLAlchemy takes "Qu3ryS3cret@127.0.0.1" for the port.
                "postgresql+psycopg://placement:pw@x:Qu3ryS3cret@127.0.0.1/placement",
                "postgresql+psycopg://placement:***@127.0.0.1/placement",
                id="an-at-and-a-colon-in-the-password",
            ),
        ],
    )
    def test_a_password_left_unencoded(self, tmp_path, url, shown):
        conf_path = write_conf(tmp_path, url)
        result = run("db", "version", "--config-file", conf_path, cwd=tmp_path)
        assert result.returncode == 1
        assert shown in result.stderr
        assert "infoS3cret" not in result.stderr
        assert_no_secret(result.stdout, result.stderr)


@pytest.fixture
def postgresql_url(tmp_path):
    """A new empty PostgreSQL database's URL, with a password in the user
    information and another in the query string (trust authentication
    ignores both), and the URL as it must be shown."""
    with databases.empty_database_url("postgresql", tmp_path) as url:
        head, _slash, database = url.rpartition("/")
        scheme, _sep, address = head.partition("://")
        user, _at, host = address.rpartition("@")
        user = user.partition(":")[0]
        yield (
            f"{scheme}://{user}:{USERINFO_SECRET}@{host}/{database}"
            f"?password={QUERY_SECRET}&application_name=secrets",
            f"{scheme}://{user}:***@{host}/{database}?password=***&application_name=secrets",
        )


class TestReachable:
    def test_serve_logs_the_masked_url_at_start(self, tmp_path, postgresql_url):
        url, shown = postgresql_url
        conf_path = write_conf(tmp_path, url)
        with serving(tmp_path, conf_path) as (base, log):
            assert get(base + "/resource_classes", ADMIN_LATEST)[0] == 200
            assert get(base + "/healthcheck", {"accept": "application/json"})[0] == 200
        written = log.read_text()
        assert f"database {shown}, auth_strategy noauth2" in written
        assert_no_secret(written)

    def test_status_and_db_version(self, tmp_path, postgresql_url):
        url, _shown = postgresql_url
        conf_path = write_conf(tmp_path, url)
        for command in (("db", "version"), ("status", "upgrade", "check")):
            result = run(*command, "--config-file", conf_path, cwd=tmp_path)
            assert result.returncode in (0, 2), result.stderr  # 2: the schema is missing
            assert_no_secret(result.stdout, result.stderr)
        result = run("explain", "resources=VCPU:1", "--config-file", conf_path, cwd=tmp_path)
        assert "not initialised" in result.stderr
        assert_no_secret(result.stdout, result.stderr)

    def test_serve_on_sqlite_with_a_password_in_the_query(self, tmp_path, sqlite_url):
        url = f"{sqlite_url}?password={QUERY_SECRET}"
        conf_path = write_conf(tmp_path, url)
        with serving(tmp_path, conf_path) as (base, log):
            assert get(base + "/traits", ADMIN_LATEST)[0] == 200
        written = log.read_text()
        assert f"database {sqlite_url}?password=***," in written
        assert_no_secret(written)
