"""``placement-svc status upgrade check``: is this database ready for this release?

The shape of every OpenStack service's ``<service>-status upgrade check``
(oslo.upgradecheck): a table of checks, each one Success, Warning or Failure
with details, and the worst of them as the exit status: 0, 1 or 2.
``--json`` prints the same as JSON. When the checks cannot run at all (the
database cannot be reached) the command prints one error line and exits
with 255, as oslo.upgradecheck does, so that no error reads as a result.

The checks read the tables with plain SQL and need nothing newer than the
first schema revision, so they also run on a database that still waits for
``db sync``.
"""

from __future__ import annotations

import types

import sqlalchemy as sa
from oslo_upgradecheck import common_checks, upgradecheck
from oslo_upgradecheck.upgradecheck import Code, Result

from placement_svc.cmd import bootstrap
from placement_svc.db import adoption, migration, tables

CANNOT_CHECK = 255

RP = tables.resource_providers
CONSUMER = tables.consumers
PROJECT = tables.projects
USER = tables.users
ALLOC = tables.allocations


class Checks(upgradecheck.UpgradeCommands):
    def __init__(self, engine, conf):
        self.engine = engine
        self.conf = conf
        self._tables = None

    def _missing(self, *names: str) -> Result | None:
        """A Success that says "not checked" when a table the check reads is absent."""
        if self._tables is None:
            self._tables = set(sa.inspect(self.engine).get_table_names())
        absent = [name for name in names if name not in self._tables]
        if not absent:
            return None
        return Result(Code.SUCCESS, f"Not checked: the database has no {absent[0]} table.")

    def _count(self, statement) -> int:
        with self.engine.connect() as conn:
            return conn.execute(statement).scalar_one()

    def _check_schema(self) -> Result:
        current, head = migration.current(self.engine), migration.head()
        if current == head:
            return Result(Code.SUCCESS)
        if adoption.is_upstream(current):
            try:
                with self.engine.connect() as conn:
                    adoption.check(conn)
            except adoption.NotAdoptable as exc:
                return Result(
                    Code.FAILURE,
                    f"The database was made by upstream OpenStack Placement (schema revision "
                    f"{current}) and cannot be adopted: {exc}.",
                )
            return Result(
                Code.FAILURE,
                f"The database was made by upstream OpenStack Placement (schema revision "
                f"{current}). Run '{bootstrap.PROG} db sync' to adopt it in place: no row "
                f"changes, and '{bootstrap.PROG} db hand-back' gives it back.",
            )
        where = f"is at revision {current}" if current else "has no placement schema"
        return Result(
            Code.FAILURE,
            f"The database {where}; this release needs revision {head}. "
            f"Run '{bootstrap.PROG} db sync'.",
        )

    def _check_root_provider_ids(self) -> Result:
        """Upstream's check of the same name, and a failure as there: a provider
        without a root is outside every tree the API answers about."""
        not_checked = self._missing(RP.name)
        if not_checked:
            return not_checked
        count = self._count(
            sa.select(sa.func.count()).select_from(RP).where(RP.c.root_provider_id.is_(None))
        )
        if not count:
            return Result(Code.SUCCESS)
        return Result(
            Code.FAILURE,
            f"{count} resource providers have no root provider id (rows written before "
            "Queens, or by hand). Set each one's root_provider_id to the id of the top "
            "of its tree (its own id when it has no parent), as upstream's "
            "'placement-manage db online_data_migrations' does.",
        )

    def _check_incomplete_consumers(self) -> Result:
        """Consumers without a project or user of their own: written before
        microversion 1.8, they carry the configured incomplete consumer ids."""
        not_checked = self._missing(CONSUMER.name, PROJECT.name, USER.name)
        if not_checked:
            return not_checked
        placement = self.conf.placement
        owners = CONSUMER.outerjoin(PROJECT, PROJECT.c.id == CONSUMER.c.project_id).outerjoin(
            USER, USER.c.id == CONSUMER.c.user_id
        )
        count = self._count(
            sa.select(sa.func.count())
            .select_from(owners)
            .where(
                sa.or_(
                    PROJECT.c.id.is_(None),
                    USER.c.id.is_(None),
                    PROJECT.c.external_id == placement.incomplete_consumer_project_id,
                    USER.c.external_id == placement.incomplete_consumer_user_id,
                )
            )
        )
        if not count:
            return Result(Code.SUCCESS)
        return Result(
            Code.WARNING,
            f"{count} consumers have no project or user of their own (their allocations "
            "were written with a microversion before 1.8): their usage counts under "
            "[placement] incomplete_consumer_project_id and incomplete_consumer_user_id "
            "until their allocations are written again with microversion 1.8 or later.",
        )

    def _check_allocations_without_consumers(self) -> Result:
        """What upstream's "Incomplete Consumers" check counts: allocations whose
        consumer has no row at all."""
        not_checked = self._missing(ALLOC.name, CONSUMER.name)
        if not_checked:
            return not_checked
        count = self._count(
            sa.select(sa.func.count(sa.distinct(ALLOC.c.consumer_id)))
            .select_from(ALLOC.outerjoin(CONSUMER, CONSUMER.c.uuid == ALLOC.c.consumer_id))
            .where(CONSUMER.c.id.is_(None))
        )
        if not count:
            return Result(Code.SUCCESS)
        return Result(
            Code.WARNING,
            f"{count} consumers have allocations but no consumer record (allocations "
            "written before Rocky, or by hand): their providers' usages count them, "
            "but no allocation listing shows them. Writing their allocations again "
            "(PUT /allocations/{consumer_uuid}) creates the record.",
        )

    def _check_policy_json(self) -> Result:
        """Upstream's too: a JSON [oslo_policy] policy_file is a failure."""
        return common_checks.check_policy_json(self, self.conf)

    _upgrade_checks = (
        ("Database Schema", _check_schema),
        ("Missing Root Provider IDs", _check_root_provider_ids),
        ("Incomplete Consumers", _check_incomplete_consumers),
        ("Allocations Without Consumers", _check_allocations_without_consumers),
        ("Policy File JSON to YAML Migration", _check_policy_json),
    )


def upgrade_check(conf, as_json: bool = False) -> int:
    """Print the results; the worst one's code. Raises bootstrap.Failure when
    the checks cannot run."""
    # oslo.upgradecheck takes --json from its module-level CONF, which its own
    # main() would have set from its own command line.
    upgradecheck.CONF = types.SimpleNamespace(command=types.SimpleNamespace(json=as_json))
    with bootstrap.engine_for(conf) as engine:
        return int(Checks(engine, conf).check())
