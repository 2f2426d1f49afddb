"""``placement-svc status upgrade check``, run as a subprocess, on every database backend.

A database at the latest schema with sound data passes (0); a schema that is
out of date fails (2) and says to run ``db sync``; consumers without a project
or user of their own, and allocations without a consumer record, are warnings
(1); a provider without a root provider id is a failure (2), as upstream
treats it, and so is a JSON policy file. An unreachable database is
neither: one error line and 255.
PostgreSQL and MariaDB are skipped when unreachable, unless CI=true.
"""

from __future__ import annotations

import json
import uuid

import sqlalchemy as sa

from placement_svc.db import migration, tables
from tests.support.servers import assert_one_line_error, run, write_conf

SUCCESS, WARNING, FAILURE = 0, 1, 2
CHECKS = [
    "Database Schema",
    "Missing Root Provider IDs",
    "Incomplete Consumers",
    "Allocations Without Consumers",
    "Policy File JSON to YAML Migration",
]
INCOMPLETE_ID = "00000000-0000-0000-0000-000000000000"


def check(tmp_path, url):
    """(exit status, {check name: (result, details)}) of the JSON output."""
    conf_path = write_conf(tmp_path, url)
    result = run("status", "upgrade", "check", "--json", "--config-file", conf_path, cwd=tmp_path)
    assert result.stderr == ""
    output = json.loads(result.stdout)
    assert output["name"] == "Upgrade Check Results"
    assert [c["check"] for c in output["checks"]] == CHECKS
    return result.returncode, {c["check"]: (c["result"], c["details"]) for c in output["checks"]}


def add_provider(conn, root=True) -> int:
    rp_uuid = str(uuid.uuid4())
    rp_id = conn.execute(
        sa.insert(tables.resource_providers).values(
            uuid=rp_uuid, name=f"rp-{rp_uuid[:8]}", generation=0
        )
    ).inserted_primary_key[0]
    if root:
        conn.execute(
            sa.update(tables.resource_providers)
            .where(tables.resource_providers.c.id == rp_id)
            .values(root_provider_id=rp_id)
        )
    return rp_id


def add_consumer(conn, project: str, user: str) -> str:
    project_id = conn.execute(
        sa.insert(tables.projects).values(external_id=project)
    ).inserted_primary_key[0]
    user_id = conn.execute(sa.insert(tables.users).values(external_id=user)).inserted_primary_key[0]
    consumer_uuid = str(uuid.uuid4())
    conn.execute(
        sa.insert(tables.consumers).values(
            uuid=consumer_uuid, project_id=project_id, user_id=user_id, generation=1
        )
    )
    return consumer_uuid


def add_allocation(conn, rp_id: int, consumer_uuid: str) -> None:
    conn.execute(
        sa.insert(tables.allocations).values(
            resource_provider_id=rp_id, consumer_id=consumer_uuid, resource_class_id=0, used=1
        )
    )


def test_a_current_schema_with_sound_data_passes(tmp_path, test_db):
    with test_db.engine.begin() as conn:
        rp_id = add_provider(conn)
        add_allocation(conn, rp_id, add_consumer(conn, "project-a", "user-a"))
    status, results = check(tmp_path, test_db.url)
    assert status == SUCCESS
    assert results == {name: (SUCCESS, None) for name in CHECKS}


def test_the_table_output_has_the_upgrade_check_shape(tmp_path, test_db):
    conf_path = write_conf(tmp_path, test_db.url)
    result = run("status", "upgrade", "check", "--config-file", conf_path, cwd=tmp_path)
    assert result.returncode == SUCCESS, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["|", "Upgrade", "Check", "Results", "|"]
    for name in CHECKS:
        assert f"| Check: {name} " in result.stdout
    assert result.stdout.count("| Result: Success ") == len(CHECKS)


def test_an_out_of_date_schema_fails_and_says_to_run_db_sync(tmp_path, test_db):
    with test_db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = 'older'"))
    try:
        status, results = check(tmp_path, test_db.url)
    finally:
        with test_db.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE alembic_version SET version_num = :head"),
                {"head": migration.head()},
            )
    assert status == FAILURE
    result, details = results["Database Schema"]
    assert result == FAILURE
    assert "revision older" in details and migration.head() in details
    assert "placement-svc db sync" in details
    assert all(results[name] == (SUCCESS, None) for name in CHECKS[1:])


def test_an_empty_database_fails_and_the_data_checks_are_not_run(tmp_path, sqlite_url):
    status, results = check(tmp_path, sqlite_url)
    assert status == FAILURE
    assert results["Database Schema"][0] == FAILURE
    assert "no placement schema" in results["Database Schema"][1]
    for name in [
        "Missing Root Provider IDs",
        "Incomplete Consumers",
        "Allocations Without Consumers",
    ]:
        result, details = results[name]
        assert result == SUCCESS
        assert details.startswith("Not checked: the database has no ")


def test_consumers_with_the_incomplete_ids_are_a_warning(tmp_path, test_db):
    with test_db.engine.begin() as conn:
        rp_id = add_provider(conn)
        add_allocation(conn, rp_id, add_consumer(conn, INCOMPLETE_ID, INCOMPLETE_ID))
        add_allocation(conn, rp_id, add_consumer(conn, "project-b", "user-b"))
    status, results = check(tmp_path, test_db.url)
    assert status == WARNING
    result, details = results["Incomplete Consumers"]
    assert result == WARNING
    assert details.startswith("1 consumers have no project or user of their own")
    assert results["Allocations Without Consumers"] == (SUCCESS, None)


def test_the_configured_incomplete_ids_are_the_ones_looked_for(tmp_path, test_db):
    with test_db.engine.begin() as conn:
        rp_id = add_provider(conn)
        add_allocation(conn, rp_id, add_consumer(conn, "legacy-project", "user-c"))
        add_allocation(conn, rp_id, add_consumer(conn, "project-d", "legacy-user"))
        add_allocation(conn, rp_id, add_consumer(conn, INCOMPLETE_ID, INCOMPLETE_ID))
    conf_path = write_conf(
        tmp_path,
        test_db.url,
        "[placement]\nincomplete_consumer_project_id = legacy-project\n"
        "incomplete_consumer_user_id = legacy-user\n",
    )
    result = run("status", "upgrade", "check", "--json", "--config-file", conf_path, cwd=tmp_path)
    assert result.returncode == WARNING
    checks = {c["check"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["Incomplete Consumers"]["details"].startswith("2 consumers ")


def test_allocations_without_a_consumer_record_are_a_warning(tmp_path, test_db):
    with test_db.engine.begin() as conn:
        rp_id = add_provider(conn)
        orphan = str(uuid.uuid4())
        add_allocation(conn, rp_id, orphan)
        conn.execute(
            sa.insert(tables.allocations).values(
                resource_provider_id=rp_id, consumer_id=orphan, resource_class_id=1, used=512
            )
        )
        add_allocation(conn, rp_id, str(uuid.uuid4()))
    status, results = check(tmp_path, test_db.url)
    assert status == WARNING
    result, details = results["Allocations Without Consumers"]
    assert result == WARNING
    assert details.startswith("2 consumers have allocations but no consumer record")
    assert results["Incomplete Consumers"] == (SUCCESS, None)


def test_a_provider_without_a_root_is_a_failure_as_upstream(tmp_path, test_db):
    with test_db.engine.begin() as conn:
        add_provider(conn)
        add_provider(conn, root=False)
        add_allocation(conn, add_provider(conn), str(uuid.uuid4()))
    status, results = check(tmp_path, test_db.url)
    assert status == FAILURE
    result, details = results["Missing Root Provider IDs"]
    assert result == FAILURE
    assert details.startswith("1 resource providers have no root provider id")
    assert results["Allocations Without Consumers"][0] == WARNING


def test_a_json_policy_file_is_a_failure_as_upstream(tmp_path, test_db):
    (tmp_path / "policy.json").write_text('{"placement:traits:list": "rule:admin_api"}')
    conf_path = write_conf(tmp_path, test_db.url, "[oslo_policy]\npolicy_file = policy.json\n")
    result = run("status", "upgrade", "check", "--json", "--config-file", conf_path, cwd=tmp_path)
    assert result.returncode == FAILURE
    checks = {c["check"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["Policy File JSON to YAML Migration"]["result"] == FAILURE
    assert (
        "oslopolicy-convert-json-to-yaml" in checks["Policy File JSON to YAML Migration"]["details"]
    )


def test_an_unreachable_database_is_one_error_line_and_255(tmp_path):
    conf_path = write_conf(tmp_path, "postgresql+psycopg://placement:secret@127.0.0.1:1/x")
    result = run("status", "upgrade", "check", "--config-file", conf_path, cwd=tmp_path)
    assert result.returncode == 255
    assert result.stdout == ""
    assert_one_line_error(result, "127.0.0.1:1")
    assert "secret" not in result.stderr


def test_a_missing_config_file_is_one_error_line_and_255_not_a_warning(tmp_path):
    result = run(
        "status", "upgrade", "check", "--config-file", str(tmp_path / "nope.conf"), cwd=tmp_path
    )
    assert result.returncode == 255
    assert_one_line_error(result, "nope.conf")
