"""``application`` for WSGI servers: ``gunicorn placement_svc.wsgi:application``.

The configuration is $OS_PLACEMENT_CONFIG_DIR/placement.conf when that
variable is set (as upstream's WSGI script reads it), otherwise oslo.config's
standard places (placement.conf in ~/.placement/, ~/, /etc/placement/,
/etc/); with no file at all, the quick-start defaults (SQLite in the current
directory, noauth2).

The schema must be at the latest revision ('placement-svc db sync'), unless
[placement_database] sync_on_startup is true; the standard resource classes
and traits are added at import, as upstream does at start. Each process that
imports this module builds its own application and database engine. When
the server has not configured Python logging, the request log and warnings
go to stderr at INFO in the format ``placement-svc serve`` uses.

What ``placement-svc serve`` refuses (a bad configuration, keystone without
an auth plugin, an out-of-date schema) fails the import with the same one
line as the exception's message, and no chain of causes behind it.
"""

import logging

from placement_svc import bootstrap, runtime


class RefusedToStart(RuntimeError):
    """The service cannot answer with this configuration or database."""


def init_application():
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format=bootstrap.LOG_FORMAT)
        logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        conf = bootstrap.load_conf(default_files=bootstrap.wsgi_config_files())
        bootstrap.check_front_door(conf)
        bootstrap.prepare_database(conf, create_if_empty=False, wait=True)
        app = bootstrap.build_app(conf)
    except bootstrap.Failure as exc:
        raise RefusedToStart(f"{bootstrap.PROG}: error: {exc}") from None
    runtime.tune_gc()
    return app


application = init_application()
