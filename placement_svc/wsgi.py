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
the server has not configured Python logging, the [DEFAULT] logging options
(oslo.log's) set it up, as for ``placement-svc serve`` (logs.py).

What ``placement-svc serve`` refuses (a bad configuration, keystone without
an auth plugin, an out-of-date schema) fails the import with the same one
line as the exception's message, and no chain of causes behind it.
"""

import logging

from placement_svc import logs
from placement_svc.cmd import bootstrap, runtime


class RefusedToStart(RuntimeError):
    """The service cannot answer with this configuration or database."""


def init_application():
    # Whether the server left logging to us, asked before reading the
    # configuration: a library's module-level logging.warning() on the way
    # would give the root a handler of its own (logging.basicConfig's).
    ours = not logging.getLogger().handlers
    try:
        conf = bootstrap.load_conf(default_files=bootstrap.wsgi_config_files())
        if ours:
            logs.setup(conf)
        bootstrap.check_front_door(conf)
        bootstrap.prepare_database(conf, create_if_empty=False, wait=True)
        app = bootstrap.build_app(conf)
    except bootstrap.Failure as exc:
        raise RefusedToStart(f"{bootstrap.PROG}: error: {exc}") from None
    runtime.tune()
    return app


application = init_application()
