"""The real ``placement-svc`` command, run as a subprocess, on every database backend.

``db sync`` is idempotent and ``db version`` then says head; ``serve`` brings an
empty database up, answers the API and logs each request; several workers and
a path prefix work; ``explain`` and ``capacity`` print, from the database,
what the API's /allocation_candidates/explain and /capacity answer (as text
or as the same JSON), and refuse a bad query with the API's own message;
every mistake an operator can make ends with one line on stderr and a
non-zero status, never a traceback. PostgreSQL and MariaDB are skipped when
unreachable, unless CI=true.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pathlib
import socket
import urllib.error
import urllib.request
import uuid

import pytest
import sqlalchemy as sa

from placement_svc import app
from placement_svc.db import migration
from placement_svc.db.engine import Database, create_engine
from tests.support import databases, fixtures
from tests.support.servers import (
    ADMIN_LATEST,
    assert_one_line_error,
    environment,
    free_port,
    get,
    import_wsgi,
    python_output,
    run,
    serving,
    write_conf,
)
from tests.support.small_cloud import FLAVOR, HOST_A, HOST_B, HOST_C, small_cloud


@pytest.fixture
def database_url(backend, tmp_path):
    """The URL of a new, empty database on each backend of the matrix."""
    with databases.empty_database_url(backend, tmp_path) as url:
        yield url


class TestDatabaseCommands:
    @pytest.mark.slow
    def test_sync_twice_then_version_is_head(self, tmp_path, database_url):
        conf_path = write_conf(tmp_path, database_url)
        assert run(
            "db", "version", "--config-file", conf_path, cwd=tmp_path, check=True
        ).stdout == ("None\n")
        for _ in range(2):
            result = run("db", "sync", "--config-file", conf_path, cwd=tmp_path, check=True)
            assert len(result.stdout.splitlines()) <= 1
        result = run("--config-file", conf_path, "db", "version", cwd=tmp_path, check=True)
        assert result.stdout.strip() == migration.head()

    def test_without_any_configuration_file_sqlite_lands_in_the_current_directory(
        self, quickstart_dir
    ):
        run("db", "sync", cwd=quickstart_dir, check=True)
        assert (quickstart_dir / "placement.sqlite").exists()
        assert (
            run("db", "version", cwd=quickstart_dir, check=True).stdout.strip() == migration.head()
        )


class TestServe:
    def test_an_empty_database_is_migrated_and_serves_standard_traits(self, tmp_path, database_url):
        conf_path = write_conf(tmp_path, database_url)
        with serving(tmp_path, conf_path) as (base, log):
            status, body = get(base + "/traits", ADMIN_LATEST)
            assert status == 200
            assert "HW_CPU_X86_AVX2" in body["traits"]
        assert '"GET /traits" status: 200' in log.read_text()
        assert " INFO placement_svc.requests " in log.read_text()
        assert "Traceback" not in log.read_text()

    def test_two_workers_under_a_prefix(self, tmp_path, sqlite_url):
        conf_path = write_conf(tmp_path, sqlite_url)
        args = ("--workers", "2", "--prefix", "/placement")
        with serving(tmp_path, conf_path, *args, path="/placement/") as (base, log):
            statuses = {get(base + "/placement/traits", ADMIN_LATEST)[0] for _ in range(10)}
            assert statuses == {200}
            status, body = get(base + "/traits", ADMIN_LATEST)
            assert status == 404
            assert body["errors"][0]["status"] == 404
        assert log.read_text().count("Booting worker") == 2

    def test_an_out_of_date_schema_is_refused(self, tmp_path, sqlite_url):
        engine = sa.create_engine(sqlite_url)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE something_else (id INTEGER)")
        engine.dispose()
        conf_path = write_conf(tmp_path, sqlite_url)
        result = run(
            "serve", "--config-file", conf_path, "--bind", f"127.0.0.1:{free_port()}", cwd=tmp_path
        )
        assert_one_line_error(result, "run 'placement-svc db sync'")

    def test_sync_on_startup_migrates_a_database_that_is_not_empty(self, tmp_path, sqlite_url):
        engine = sa.create_engine(sqlite_url)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE something_else (id INTEGER)")
        engine.dispose()
        extra = "[placement_database]\nsync_on_startup = true\n"
        conf_path = write_conf(tmp_path, sqlite_url, extra)
        with serving(tmp_path, conf_path) as (base, _log):
            assert get(base + "/resource_classes", ADMIN_LATEST)[0] == 200


COMMANDS = [pytest.param(("db", "sync"), id="db-sync"), pytest.param(("serve",), id="serve")]


class TestErrors:
    @pytest.mark.parametrize("command", COMMANDS)
    def test_a_missing_configuration_file(self, tmp_path, command):
        result = run(*command, "--config-file", str(tmp_path / "nowhere.conf"), cwd=tmp_path)
        assert_one_line_error(result, "nowhere.conf")

    @pytest.mark.parametrize("command", COMMANDS)
    def test_an_unparsable_configuration_file(self, tmp_path, command):
        path = tmp_path / "broken.conf"
        path.write_text("this is not\n[an ini file\n")
        result = run(*command, "--config-file", str(path), cwd=tmp_path)
        assert_one_line_error(result, "broken.conf")

    @pytest.mark.parametrize("command", COMMANDS)
    def test_a_bad_value_in_the_configuration_file(self, tmp_path, command):
        conf_path = write_conf(
            tmp_path, "sqlite://", "[placement]\nmax_allocation_candidates = many\n"
        )
        result = run(*command, "--config-file", conf_path, cwd=tmp_path)
        assert_one_line_error(result, "max_allocation_candidates")

    @pytest.mark.parametrize("command", COMMANDS)
    @pytest.mark.parametrize(
        "connection, fragment",
        [
            ("postgresql+psycopg://placement:secret@127.0.0.1:1/placement", "127.0.0.1:1"),
            ("mysql+pymysql://placement:secret@127.0.0.1:1/placement", "127.0.0.1:1"),
            ("not a url", "bad database URL"),
            ("nosuchdb://placement@127.0.0.1/placement", "unknown database type"),
            (f"sqlite:////nonexistent-{uuid.uuid4().hex}/placement.db", "unable to open"),
        ],
        ids=["postgresql-unreachable", "mysql-unreachable", "garbage", "unknown-type", "sqlite"],
    )
    def test_a_database_that_cannot_be_used(self, tmp_path, command, connection, fragment):
        conf_path = write_conf(tmp_path, connection)
        bind = ("--bind", f"127.0.0.1:{free_port()}") if command == ("serve",) else ()
        result = run(*command, "--config-file", conf_path, *bind, cwd=tmp_path)
        assert_one_line_error(result, fragment)
        assert "secret" not in result.stderr

    def test_a_port_already_in_use(self, tmp_path):
        conf_path = write_conf(tmp_path, f"sqlite:///{tmp_path}/placement.db")
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            bind = f"127.0.0.1:{busy.getsockname()[1]}"
            result = run("serve", "--config-file", conf_path, "--bind", bind, cwd=tmp_path)
        assert_one_line_error(result, f"cannot listen on {bind}")


KEYSTONE_WITHOUT_PLUGIN = [
    pytest.param("", "[keystone_authtoken] auth_type", id="no-auth-type"),
    pytest.param(
        "[keystone_authtoken]\nauth_type = password\n",
        "auth_type = password needs [keystone_authtoken] auth_url",
        id="password-without-auth-url",
    ),
    pytest.param(
        "[keystone_authtoken]\nauth_section = keystone\n[keystone]\nusername = placement\n",
        "auth_type in [keystone] ([keystone_authtoken] auth_section)",
        id="auth-section-without-auth-type",
    ),
]


class TestKeystoneWithoutAnAuthPlugin:
    """Only [placement_database] connection: upstream's default strategy,
    keystone, with nothing to validate a token with."""

    @pytest.mark.parametrize("keystone, fragment", KEYSTONE_WITHOUT_PLUGIN)
    def test_serve_refuses_before_touching_the_database(self, tmp_path, keystone, fragment):
        path = tmp_path / "placement.conf"
        path.write_text(f"[placement_database]\nconnection = sqlite:///{tmp_path}/p.db\n{keystone}")
        bind = f"127.0.0.1:{free_port()}"
        result = run("serve", "--config-file", str(path), "--bind", bind, cwd=tmp_path)
        assert_one_line_error(result, fragment)
        assert not (tmp_path / "p.db").exists()

    def test_the_wsgi_application_refuses_with_the_same_line(self, tmp_path):
        (tmp_path / "placement.conf").write_text(
            f"[placement_database]\nconnection = sqlite:///{tmp_path}/p.db\n"
        )
        result = import_wsgi(tmp_path)
        assert result.returncode != 0
        last = result.stderr.splitlines()[-1]
        assert last.startswith("placement_svc.wsgi.RefusedToStart: placement-svc: error: ")
        assert "[keystone_authtoken] auth_type" in last
        assert "During handling" not in result.stderr

    def test_an_auth_plugin_with_its_options_is_enough(self, tmp_path, sqlite_url):
        """www_authenticate_uri is not needed: the 401 names auth_url."""
        path = tmp_path / "placement.conf"
        path.write_text(
            f"[placement_database]\nconnection = {sqlite_url}\n"
            "[keystone_authtoken]\nauth_type = password\n"
            "auth_url = http://keystone.invalid/identity\n"
        )
        with serving(tmp_path, str(path)) as (base, _log):
            request = urllib.request.Request(base + "/traits")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
        refused.value.close()  # its unread body holds the connection's socket open
        assert refused.value.code == 401
        assert refused.value.headers["www-authenticate"] == (
            'Keystone uri="http://keystone.invalid/identity"'
        )


LEAF_COMMANDS = [
    pytest.param(("db", "sync"), id="db-sync"),
    pytest.param(("db", "version"), id="db-version"),
    pytest.param(("serve",), id="serve"),
    pytest.param(("status", "upgrade", "check"), id="status-upgrade-check"),
    pytest.param(("policy", "show"), id="policy-show"),
]


class TestCommonOptions:
    def test_version_comes_from_the_package_metadata(self, tmp_path):
        result = run("--version", cwd=tmp_path, check=True)
        assert result.stdout == f"placement-svc {importlib.metadata.version('placement-svc')}\n"

    @pytest.mark.parametrize("command", LEAF_COMMANDS)
    def test_debug_after_the_command_shows_the_traceback(self, tmp_path, command):
        missing = str(tmp_path / "nowhere.conf")
        result = run(*command, "--config-file", missing, "--debug", cwd=tmp_path)
        assert result.returncode != 0
        assert "Traceback" in result.stderr
        last = result.stderr.splitlines()[-1]
        assert last == f"placement-svc: error: Failed to find some config files: {missing}"

    def test_debug_between_commands(self, tmp_path):
        missing = str(tmp_path / "nowhere.conf")
        result = run("db", "--debug", "version", "--config-file", missing, cwd=tmp_path)
        assert "Traceback" in result.stderr

    @pytest.mark.parametrize(
        "args",
        [
            ("status", "upgrade", "check", "--json", "--config-file", "{conf}"),
            ("status", "--config-file", "{conf}", "upgrade", "check", "--json"),
            ("--config-file", "{conf}", "status", "upgrade", "check", "--json"),
        ],
        ids=["after", "between", "before"],
    )
    def test_config_file_anywhere_around_status_upgrade_check(self, tmp_path, sqlite_url, args):
        conf_path = write_conf(tmp_path, sqlite_url)
        run("db", "sync", "--config-file", conf_path, cwd=tmp_path, check=True)
        result = run(*(a.format(conf=conf_path) for a in args), cwd=tmp_path, check=True)
        checks = json.loads(result.stdout)["checks"]
        assert checks[0] == {"check": "Database Schema", "result": 0, "details": None}

    def test_config_file_after_policy_show(self, tmp_path):
        (tmp_path / "rules.yaml").write_text('"placement:traits:list": "role:lister"\n')
        conf_path = write_conf(tmp_path, "sqlite://", "[oslo_policy]\npolicy_file = rules.yaml\n")
        result = run("policy", "show", "--config-file", conf_path, cwd=tmp_path, check=True)
        assert '"placement:traits:list": "role:lister"' in result.stdout.splitlines()

    def test_later_config_files_win_wherever_they_are_given(self, tmp_path, sqlite_url):
        """The first file's database has a schema, the second's has none."""
        first = write_conf(tmp_path, sqlite_url)
        run("db", "sync", "--config-file", first, cwd=tmp_path, check=True)
        second = tmp_path / "second.conf"
        second.write_text(f"[placement_database]\nconnection = sqlite:///{tmp_path}/second.db\n")
        args = ("--config-file", first, "db", "version", "--config-file", str(second))
        assert run(*args, cwd=tmp_path, check=True).stdout == "None\n"
        args = ("--config-file", str(second), "db", "version", "--config-file", first)
        assert run(*args, cwd=tmp_path, check=True).stdout.strip() == migration.head()


class TestHelp:
    @pytest.mark.parametrize(
        "command",
        [(), ("db",), ("status",), ("status", "upgrade"), ("policy",)]
        + [param.values[0] for param in LEAF_COMMANDS]
        + [("explain",), ("capacity",)],
        ids=" ".join,
    )
    def test_every_command_has_help(self, tmp_path, command):
        result = run(*command, "--help", cwd=tmp_path, check=True)
        assert result.stdout.startswith("usage: placement-svc")
        if command:
            assert "--config-file PATH" in result.stdout
            assert "--debug" in result.stdout


WSGI_REQUEST = """
import json, wsgiref.util
from placement_svc.wsgi import application
environ = {}
wsgiref.util.setup_testing_defaults(environ)
environ.update(
    PATH_INFO="/traits",
    HTTP_X_AUTH_TOKEN="admin",
    HTTP_OPENSTACK_API_VERSION="placement latest",
)
answer = {}
def start_response(status, headers, exc_info=None):
    answer["status"] = status
body = b"".join(application(environ, start_response))
print(answer["status"], "HW_CPU_X86_AVX2" in json.loads(body)["traits"])
"""


WSGI_MODULES = """
import json, sys
import placement_svc.wsgi
print(json.dumps({
    "gunicorn": any(name.partition(".")[0] == "gunicorn" for name in sys.modules),
    "ours": {n: m.__file__ for n, m in sys.modules.items() if n.startswith("placement_svc")},
}))
"""


def imports_of(path: str) -> set[str]:
    """The top-level names every import statement in a source file names."""
    names = set()
    for node in ast.walk(ast.parse(pathlib.Path(path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


class TestWsgi:
    def test_the_wsgi_path_loads_neither_gunicorn_nor_the_command_line(self, quickstart_dir):
        """A WSGI server pays for no command line: gunicorn stays unloaded,
        and no module of ours on the way imports argparse (oslo.config
        itself does, which is not ours to change)."""
        run("db", "sync", cwd=quickstart_dir, check=True)  # the quick-start SQLite file
        output = python_output("-c", WSGI_MODULES, cwd=quickstart_dir)
        loaded = json.loads(output.splitlines()[-1])
        assert loaded["gunicorn"] is False
        assert "placement_svc.cmd.bootstrap" in loaded["ours"]
        assert "placement_svc.cmd.cli" not in loaded["ours"]
        for name, path in loaded["ours"].items():
            assert not imports_of(path) & {"argparse", "gunicorn"}, name

    def test_the_application_reads_os_placement_config_dir(self, tmp_path, sqlite_url):
        conf_path = write_conf(tmp_path, sqlite_url)
        run("db", "sync", "--config-file", conf_path, cwd=tmp_path, check=True)
        env = dict(environment(tmp_path), OS_PLACEMENT_CONFIG_DIR=str(tmp_path))
        assert python_output("-c", WSGI_REQUEST, cwd=tmp_path, env=env).strip() == "200 OK True"

    def test_the_application_wants_a_synced_database(self, tmp_path, sqlite_url):
        write_conf(tmp_path, sqlite_url)
        result = import_wsgi(tmp_path)
        assert result.returncode != 0
        assert "run 'placement-svc db sync'" in result.stderr


# -- explain and capacity: the API's answers, from the database ----------------

EXPLAIN_FLAVOR = f"""\
Candidates: 0, in 0 trees (the cloud: 3 providers in 3 trees).

Group '' (VCPU:4,MEMORY_MB:8192): providers
  providers considered            3
  resources VCPU:4                2  lacking capacity 1
  resources MEMORY_MB:8192        2  lacking capacity 1
  can serve a class of the group  3  in 1 tree

Trees
  every group can be served                       1
  required traits over the tree: HW_CPU_X86_AVX2  0  of 1
  with candidates                                 0

Near misses (fewest shortfalls first)
  host-a ({HOST_A}): 1 to fix
    - VCPU on host-a: needs 4, 2 free (total 16, reserved 0, ratio 1.0, used 14)
  host-b ({HOST_B}): 1 to fix
    - MEMORY_MB on host-b: needs 8192, 4096 free (total 4096, reserved 0, ratio 1.0, used 0)
"""

CAPACITY_HALF_FLAVOR = f"""\
Copies that fit: 7, in 3 trees.
  copies  tree
       4  host-c ({HOST_C})
       2  host-b ({HOST_B})
       1  host-a ({HOST_A})
"""


@pytest.fixture
def cloud_conf(test_db, tmp_path) -> str:
    """A placement.conf for this backend's test database, the small cloud in it."""
    small_cloud(candidates_client(test_db.db))
    return write_conf(tmp_path, test_db.url)


def candidates_client(database):
    """The API in-process, on ``database``, at the newest microversion."""
    return fixtures.api_client(app.create_app(fixtures.make_conf(), database))


class TestCandidatesCommands:
    def test_explain_prints_the_funnel_and_the_near_misses(self, tmp_path, cloud_conf):
        query = f"{FLAVOR}&near_misses=2"
        result = run("explain", query, "--config-file", cloud_conf, cwd=tmp_path, check=True)
        assert result.stdout == EXPLAIN_FLAVOR
        assert result.stderr == ""

    def test_capacity_prints_the_copies_per_tree(self, tmp_path, cloud_conf):
        query = "resources=VCPU:2,MEMORY_MB:2048"
        result = run("capacity", query, "--config-file", cloud_conf, cwd=tmp_path, check=True)
        assert result.stdout == CAPACITY_HALF_FLAVOR
        result = run(
            "capacity", f"{query}&limit=1", "--config-file", cloud_conf, cwd=tmp_path, check=True
        )
        assert result.stdout.splitlines() == [
            "Copies that fit: 7, in 3 trees.",
            "  copies  tree",
            f"       4  host-c ({HOST_C})",
        ]

    @pytest.mark.parametrize(
        "command, query",
        [
            ("explain", FLAVOR),
            ("explain", "resources=VCPU:2&near_misses=0"),
            ("capacity", "resources=VCPU:2,MEMORY_MB:2048&limit=2"),
        ],
    )
    def test_the_same_answers_as_the_api(self, tmp_path, test_db, cloud_conf, command, query):
        """--json prints the API's JSON body, and the text is the API's text/plain."""
        client = candidates_client(test_db.db)
        url = f"/allocation_candidates/{command}?{query}"
        as_json = run(command, query, "--json", "--config-file", cloud_conf, cwd=tmp_path)
        assert as_json.returncode == 0, as_json.stderr
        assert json.loads(as_json.stdout) == client.get(url).json()
        as_text = run(command, query, "--config-file", cloud_conf, cwd=tmp_path, check=True)
        assert as_text.stdout == client.get(url, headers={"accept": "text/plain"}).text


BAD_QUERIES = [
    pytest.param("explain", "resources=VCPU:two", id="amount"),
    pytest.param("explain", "resources=VCPU:1&near_misses=51", id="near-misses-past-the-cap"),
    pytest.param("explain", "resources=VCPU:1&near_misses=-1", id="near-misses-negative"),
    pytest.param("capacity", "resources=VCPU:1&near_misses=5", id="near-misses-on-capacity"),
    pytest.param("capacity", "resources=VCPU:1&required=", id="blank-value-kept"),
    pytest.param("explain", "resources=VCPU:1&limit=1&limit=0", id="last-of-repeated-keys"),
    pytest.param("capacity", "resources_A=VCPU:1&isolate=_B", id="isolate-unknown-group"),
    pytest.param("explain", "", id="no-resources"),
]
# Refused by the search, once the database is read: on every backend.
UNKNOWN_NAMES = [
    pytest.param("explain", "resources=VCPU:1&required=CUSTOM_NOPE", id="unknown-trait"),
    pytest.param("capacity", "resources=CUSTOM_NOPE:1", id="unknown-class"),
    pytest.param("capacity", "resources=VCPU%00:1", id="nul-in-a-class"),
    pytest.param(
        "explain", "resources=VCPU:1&root_required=HW_CPU_X86_AVX2%00", id="nul-in-a-trait"
    ),
]


def api_message(client, command: str, query: str) -> str:
    """The message of the 400 the API answers: its error's detail after
    webob's first sentence."""
    answer = client.get(f"/allocation_candidates/{command}?{query}")
    assert answer.status_code == 400, answer.text
    return answer.json()["errors"][0]["detail"].split("\n\n ", 1)[1].removesuffix("  ")


class TestCandidatesCommandErrors:
    @pytest.mark.parametrize("command, query", BAD_QUERIES)
    def test_a_bad_query_is_one_line_with_the_apis_message(
        self, tmp_path, sqlite_url, command, query
    ):
        conf_path = write_conf(tmp_path, sqlite_url)
        engine = create_engine(sqlite_url)
        migration.sync(engine)
        message = api_message(candidates_client(Database(engine)), command, query)
        engine.dispose()
        result = run(command, query, "--config-file", conf_path, cwd=tmp_path)
        assert result.returncode == 1
        assert result.stdout == ""
        assert result.stderr == f"placement-svc: error: {message}\n"

    @pytest.mark.parametrize("command, query", UNKNOWN_NAMES)
    def test_a_name_the_database_does_not_know(self, tmp_path, test_db, command, query):
        message = api_message(candidates_client(test_db.db), command, query)
        assert "No such" in message
        conf_path = write_conf(tmp_path, test_db.url)
        result = run(command, query, "--config-file", conf_path, cwd=tmp_path)
        assert result.returncode == 1
        assert result.stdout == ""
        assert result.stderr == f"placement-svc: error: {message}\n"

    def test_the_query_is_checked_before_the_database_is_reached(self, tmp_path):
        conf_path = write_conf(tmp_path, "postgresql+psycopg://placement:secret@127.0.0.1:1/p")
        result = run("explain", "resources=VCPU:0", "--config-file", conf_path, cwd=tmp_path)
        assert_one_line_error(result, "Requested resource VCPU requires amount >= 1. Got: 0.")
        assert result.returncode == 1

    @pytest.mark.parametrize("command", ["explain", "capacity"])
    @pytest.mark.parametrize(
        "connection, fragment",
        [
            ("postgresql+psycopg://placement:secret@127.0.0.1:1/placement", "127.0.0.1:1"),
            ("mysql+pymysql://placement:secret@127.0.0.1:1/placement", "127.0.0.1:1"),
        ],
        ids=["postgresql", "mysql"],
    )
    def test_an_unreachable_database(self, tmp_path, command, connection, fragment):
        conf_path = write_conf(tmp_path, connection)
        result = run(command, "resources=VCPU:1", "--config-file", conf_path, cwd=tmp_path)
        assert_one_line_error(result, fragment)
        assert result.returncode == 1
        assert result.stdout == ""
        assert "secret" not in result.stderr

    def test_a_database_without_the_schema_names_the_fix(self, tmp_path, database_url):
        conf_path = write_conf(tmp_path, database_url)
        result = run("capacity", "resources=VCPU:1", "--config-file", conf_path, cwd=tmp_path)
        assert_one_line_error(result, "not initialised", "run 'placement-svc db sync'")
        assert result.returncode == 1
