"""What every entry point does before it can answer: one place, three users.

``placement-svc`` (cli), its ``status upgrade check`` (status) and the WSGI
module (wsgi) all read the configuration, make an engine, reach and prepare
the database and build the application the same way, and fail the same way:
a ``Failure`` whose message is the one line an operator reads. This module
imports neither argparse nor gunicorn, so a WSGI server that loads
``placement_svc.wsgi`` does not pay for the command line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

from oslo_config import cfg
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from placement_svc import conf as placement_conf
from placement_svc import install, redact
from placement_svc.app import create_app
from placement_svc.cmd import PROG, keystone_conf
from placement_svc.cmd.prefix import PrefixMount
from placement_svc.db import adoption, migration
from placement_svc.db.engine import create_engine

CONFIG_FILE = "placement.conf"
# Every log line of the service, gunicorn's own included:
#   2025-01-31 12:00:00,123 4242 INFO placement_svc.requests 127.0.0.1 "GET /" ...
LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"

LOG = logging.getLogger(__name__)


class Failure(Exception):
    """A problem the operator can fix; its message is the one line printed."""


def one_line(exc) -> str:
    """An exception's text on one line: drivers' messages span several; the
    configured database URL's secrets as ``***`` (redact.remember)."""
    return redact.scrub(" ".join(str(exc).split())) or type(exc).__name__


# -- configuration -----------------------------------------------------------


def load_conf(config_files=(), config_dir=None, default_files=None) -> cfg.ConfigOpts:
    """The configuration, every value checked now rather than at first use."""
    args = []
    for path in config_files:
        args += ["--config-file", path]
    if config_dir:
        args += ["--config-dir", config_dir]
    try:
        conf = placement_conf.make_conf(args, config_files=default_files)
        for group, opts in placement_conf.list_opts():
            for opt in opts:
                getattr(conf[group], opt.dest)
    except cfg.Error as exc:
        raise Failure(one_line(exc)) from exc
    # From now on no message nor log line of this process shows them.
    redact.remember(conf.placement_database.connection)
    return conf


def wsgi_config_files(environ=None) -> list[str] | None:
    """$OS_PLACEMENT_CONFIG_DIR/placement.conf, as upstream's WSGI script reads;
    None (oslo.config's standard places) when the variable is unset."""
    environ = os.environ if environ is None else environ
    dirname = environ.get("OS_PLACEMENT_CONFIG_DIR", "").strip()
    return [os.path.join(dirname, CONFIG_FILE)] if dirname else None


def check_front_door(conf) -> None:
    """Refuse keystone authentication that could not validate a single token,
    before the database is touched (see keystone_conf)."""
    message = keystone_conf.problem(conf)
    if message:
        raise Failure(message)


# -- the database ------------------------------------------------------------


def shown_url(url: str) -> str:
    """The URL as it may be printed: its password, in the user information
    or the query string, as ``***`` (see redact)."""
    return redact.mask_url(url)


@contextlib.contextmanager
def database_errors(url: str):
    """Turn what the database layer raises into one-line Failures, the URL
    masked and its secrets scrubbed from the driver's words."""
    shown = shown_url(url)

    def said(exc) -> str:
        return redact.scrub(one_line(exc), url)

    try:
        yield
    except Failure:
        raise
    except sa_exc.NoSuchModuleError as exc:
        raise Failure(f"unknown database type in {shown}: {said(exc)}") from exc
    except sa_exc.ArgumentError as exc:
        raise Failure(f"bad database URL {shown}: {said(exc)}") from exc
    except ImportError as exc:
        extra = "mysql" if url.startswith("mysql") else "postgresql"
        raise Failure(
            f"no database driver for {shown}: {said(exc)}; "
            f"{install.extra_command(extra)} installs one"
        ) from exc
    except sa_exc.DBAPIError as exc:
        raise Failure(f"database {shown}: {said(exc.orig or exc)}") from exc
    except sa_exc.SQLAlchemyError as exc:
        raise Failure(f"database {shown}: {said(exc)}") from exc


def make_engine(conf):
    """The engine [placement_database] describes; a Failure for a bad URL."""
    url = conf.placement_database.connection
    if not url:
        raise Failure("[placement_database] connection is not set in the configuration")
    try:
        make_url(url)
    except ValueError as exc:
        # Its port is not a number: SQLAlchemy's words would quote what it
        # took for one, which may be a piece of a password with an "@".
        raise Failure(
            f"bad database URL {shown_url(url)}: its port is not a number "
            "(percent-encode any '@', ':', '/' or '?' in the user name or password)"
        ) from exc
    except sa_exc.ArgumentError:
        pass  # database_errors says so
    with database_errors(url):
        return create_engine(url, conf.placement_database)


@contextlib.contextmanager
def engine_for(conf):
    """An engine for one command, its errors as Failures, disposed after."""
    engine = make_engine(conf)
    try:
        with database_errors(conf.placement_database.connection):
            yield engine
    finally:
        engine.dispose()


def wait_for_database(engine, retries: int, interval: float) -> None:
    """Connect once, retrying like upstream's start-up (-1 retries forever)."""
    attempt = 0
    while True:
        try:
            with engine.connect():
                return
        except sa_exc.OperationalError as exc:
            if engine.dialect.name == "sqlite" or (0 <= retries <= attempt):
                raise
            attempt += 1
            LOG.warning(
                "database not reachable (retry %d%s in %ss): %s",
                attempt,
                "" if retries < 0 else f" of {retries}",
                interval,
                redact.scrub(
                    one_line(exc.orig or exc), engine.url.render_as_string(hide_password=False)
                ),
            )
            time.sleep(interval)


def prepare_database(conf, *, create_if_empty: bool, wait: bool) -> None:
    """What the service does before answering: reach the database, migrate it
    when it is empty (if allowed) or [placement_database] sync_on_startup says
    so, insist on the latest schema otherwise, add missing standard names."""
    db_conf = conf.placement_database
    with engine_for(conf) as engine:
        if wait:
            wait_for_database(engine, db_conf.max_retries, db_conf.retry_interval)
        if db_conf.sync_on_startup or (create_if_empty and migration.is_empty(engine)):
            LOG.info("bringing the database schema to %s", migration.head())
            migration.sync(engine)
        else:
            require_head(engine)
        sync_standard_names(engine)


def require_head(engine) -> None:
    """Refuse a schema this code was not written for, naming the fix."""
    current, head = migration.current(engine), migration.head()
    if adoption.is_upstream(current):
        raise Failure(
            f"the database was made by upstream OpenStack Placement (schema revision "
            f"{current}): run '{PROG} db sync' to adopt it in place"
        )
    if current != head:
        where = f"at revision {current}" if current else "not initialised"
        raise Failure(
            f"the database schema is {where}, this version needs {head}: run '{PROG} db sync'"
        )


def sync_standard_names(engine, attempts: int = 5) -> None:
    """Add missing standard classes and traits; several processes starting at
    once may race to insert the same names, the loser simply tries again."""
    for attempt in range(1, attempts + 1):
        try:
            migration.sync_standard_names(engine)
            return
        except sa_exc.IntegrityError:
            if attempt == attempts:
                raise
            time.sleep(0.1 * attempt)


def sync_database(conf) -> str | None:
    """``db sync``: the latest schema and the standard names, at once (no
    retries); a database upstream Placement made is adopted first. Returns
    the upstream revision adopted from, if any."""
    with engine_for(conf) as engine:
        try:
            return migration.sync(engine)
        except adoption.NotAdoptable as exc:
            raise Failure(f"cannot adopt this database: {exc}; nothing was changed") from exc


def hand_back_database(conf) -> list[str]:
    """``db hand-back``: the database as upstream Placement serves it."""
    with engine_for(conf) as engine:
        try:
            return migration.hand_back(engine)
        except adoption.NotAdoptable as exc:
            raise Failure(f"cannot hand this database back: {exc}") from exc


def database_version(conf) -> str | None:
    """``db version``: the schema revision, None for a database without one."""
    with engine_for(conf) as engine:
        return migration.current(engine)


# -- the application -----------------------------------------------------------


def build_app(conf, prefix: str = ""):
    """The WSGI application, under ``prefix`` when one is given; what stops
    create_app (a policy file it cannot load) is a Failure."""
    try:
        application = create_app(conf)
    except RuntimeError as exc:
        raise Failure(one_line(exc)) from exc
    return PrefixMount(application, prefix) if prefix else application
