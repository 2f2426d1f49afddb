"""The Placement data model as SQLAlchemy Core tables.

Table and column names follow upstream Placement's schema, so the data
model reads the same to an operator who knows it. Custom resource classes
get ids from 10000 up; ids below that are standard classes, in the order of
os-resource-classes' list.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    Update,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.types import TypeEngine

metadata = MetaData()

# Names and uuids compare exactly on every backend (MySQL's default
# collations would make "foo" and "FOO" the same provider name).
_MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def Name(length: int) -> TypeEngine[str]:  # noqa: N802 - reads like a column type
    return String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


MIN_CUSTOM_RESOURCE_CLASS_ID = 10000
# The largest amount an inventory (an INTEGER column) can hold.
MAX_INT = 2147483647


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _timestamps() -> tuple[Column, Column]:
    return (
        Column("created_at", DateTime, nullable=True, default=utcnow),
        Column("updated_at", DateTime, nullable=True, onupdate=utcnow),
    )


resource_classes = Table(
    "resource_classes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", Name(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("name", name="uniq_resource_classes0name"),
    **_MYSQL,
)

traits = Table(
    "traits",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", Name(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("name", name="uniq_traits0name"),
    **_MYSQL,
)

resource_providers = Table(
    "resource_providers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("uuid", Name(36), nullable=False),
    Column("name", Name(200), nullable=False),
    Column("generation", Integer, nullable=False, default=0),
    Column("root_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=True),
    Column("parent_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=True),
    *_timestamps(),
    UniqueConstraint("uuid", name="uniq_resource_providers0uuid"),
    UniqueConstraint("name", name="uniq_resource_providers0name"),
    Index("resource_providers_root_provider_id_idx", "root_provider_id"),
    Index("resource_providers_parent_provider_id_idx", "parent_provider_id"),
    **_MYSQL,
)

inventories = Table(
    "inventories",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("resource_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=False),
    Column("resource_class_id", Integer, ForeignKey("resource_classes.id"), nullable=False),
    Column("total", Integer, nullable=False),
    Column("reserved", Integer, nullable=False),
    Column("min_unit", Integer, nullable=False),
    Column("max_unit", Integer, nullable=False),
    Column("step_size", Integer, nullable=False),
    Column("allocation_ratio", Float, nullable=False),
    *_timestamps(),
    UniqueConstraint(
        "resource_provider_id",
        "resource_class_id",
        name="uniq_inventories0resource_provider_resource_class",
    ),
    Index("inventories_resource_class_id_idx", "resource_class_id"),
    **_MYSQL,
)

projects = Table(
    "projects",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("external_id", Name(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("external_id", name="uniq_projects0external_id"),
    **_MYSQL,
)

users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("external_id", Name(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("external_id", name="uniq_users0external_id"),
    **_MYSQL,
)

consumer_types = Table(
    "consumer_types",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", Name(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("name", name="uniq_consumer_types0name"),
    **_MYSQL,
)

consumers = Table(
    "consumers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("uuid", Name(36), nullable=False),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("generation", Integer, nullable=False, default=0),
    Column("consumer_type_id", Integer, ForeignKey("consumer_types.id"), nullable=True),
    *_timestamps(),
    UniqueConstraint("uuid", name="uniq_consumers0uuid"),
    Index("consumers_project_id_user_id_uuid_idx", "project_id", "user_id", "uuid"),
    Index("consumers_consumer_type_id_idx", "consumer_type_id"),
    **_MYSQL,
)

allocations = Table(
    "allocations",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("resource_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=False),
    Column("consumer_id", Name(36), nullable=False),
    Column("resource_class_id", Integer, ForeignKey("resource_classes.id"), nullable=False),
    Column("used", Integer, nullable=False),
    *_timestamps(),
    Index(
        "allocations_resource_provider_class_used_idx",
        "resource_provider_id",
        "resource_class_id",
        "used",
    ),
    Index("allocations_resource_class_id_idx", "resource_class_id"),
    Index("allocations_consumer_id_idx", "consumer_id"),
    **_MYSQL,
)

# Holds (1.51, placement-svc's own; db/holds.py): the consumers whose
# allocations expire unless confirmed, and when, in microseconds since the
# epoch by the database's clock. No foreign key: a consumer's row goes and
# comes with its allocations, its hold is looked up by uuid.
allocation_holds = Table(
    "allocation_holds",
    metadata,
    Column("consumer_id", Name(36), primary_key=True),
    Column("expires_at", BigInteger, nullable=False),
    Column("created_at", DateTime, nullable=True),
    Index("allocation_holds_expires_at_idx", "expires_at"),
    **_MYSQL,
)

placement_aggregates = Table(
    "placement_aggregates",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("uuid", Name(36), nullable=False),
    *_timestamps(),
    UniqueConstraint("uuid", name="uniq_placement_aggregates0uuid"),
    **_MYSQL,
)

resource_provider_aggregates = Table(
    "resource_provider_aggregates",
    metadata,
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id"),
        primary_key=True,
    ),
    Column("aggregate_id", Integer, ForeignKey("placement_aggregates.id"), primary_key=True),
    *_timestamps(),
    Index("resource_provider_aggregates_aggregate_id_idx", "aggregate_id"),
    **_MYSQL,
)

resource_provider_traits = Table(
    "resource_provider_traits",
    metadata,
    Column("trait_id", Integer, ForeignKey("traits.id"), primary_key=True),
    Column(
        "resource_provider_id",
        Integer,
        ForeignKey("resource_providers.id"),
        primary_key=True,
    ),
    *_timestamps(),
    Index("resource_provider_traits_resource_provider_id_idx", "resource_provider_id"),
    **_MYSQL,
)

# placement-svc's own: the world generation is the sum of these rows, which
# triggers on the shape's tables move in every statement that changes what
# GET /allocation_candidates reads of the cloud's shape, whoever writes (see
# shape_changes.py). A process keeps that shape between requests and reads
# it again only when the sum has moved (candidates/world.py).
world_changes = Table(
    "world_changes",
    metadata,
    Column("stripe", Integer, primary_key=True, autoincrement=False),
    Column("generation", BigInteger, nullable=False),
    **_MYSQL,
)

# The shape of the cloud: any write to these tables changes it (the names of
# traits and classes too: a request's names are looked up in the shape)...
WORLD_TABLES = frozenset(
    {
        "inventories",
        "resource_provider_traits",
        "resource_provider_aggregates",
        "traits",
        "resource_classes",
    }
)
# ...and so do a provider's creation, deletion and any update of its row but
# one that sets only these (generations go up with every claim).
_NOT_SHAPE = frozenset({"generation", "updated_at", "name"})


def changes_world(stmt: Any, multiparams: Any = (), params: Any = None) -> bool:
    """Whether an INSERT, UPDATE or DELETE statement changes the shape of
    the cloud. Unsure (an unknown form of statement) counts as yes."""
    table = getattr(getattr(stmt, "table", None), "name", None)
    if table in WORLD_TABLES:
        return True
    if table != resource_providers.name:
        return False
    if not isinstance(stmt, Update):
        return True
    columns = {getattr(key, "key", key) for key in getattr(stmt, "_values", None) or ()}
    # Parameters named as a column set that column; others (b_id...) bind
    # the statement's own bindparams.
    named = resource_providers.c
    for each in ([params] if params else []) + list(multiparams or ()):
        if isinstance(each, dict):
            columns.update(k for k in each if k in named)
        elif isinstance(each, list | tuple):
            columns.update(k for row in each if isinstance(row, dict) for k in row if k in named)
    return not columns or not columns <= _NOT_SHAPE


# Deleted in this order (children first) when a database is emptied.
ALL_TABLES = [
    allocations,
    consumers,
    consumer_types,
    projects,
    users,
    resource_provider_traits,
    resource_provider_aggregates,
    placement_aggregates,
    inventories,
    resource_providers,
    traits,
    resource_classes,
]
