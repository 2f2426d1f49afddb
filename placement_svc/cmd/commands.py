"""What each command of the command line does (cli.py parses it with
arguments.py, then hands it here): reading the configuration, setting up
logging, running the command, and one error line for whatever goes wrong.
"""

from __future__ import annotations

import logging
import logging.config
import sys

from placement_svc import logs, policy, redact
from placement_svc.cmd import candidates_commands, serving, status
from placement_svc.cmd.bootstrap import (
    LOG_FORMAT,
    PROG,
    Failure,
    database_version,
    hand_back_database,
    load_conf,
    one_line,
    sync_database,
)
from placement_svc.db.adoption import UPSTREAM_HEAD

LOG = logging.getLogger(__name__)


def db_sync(conf, args) -> None:
    adopted = sync_database(conf)
    if adopted:
        print(
            f"Adopted a database of upstream OpenStack Placement (schema revision {adopted}); "
            "no row was changed."
        )


def db_hand_back(conf, args) -> None:
    dropped = hand_back_database(conf)
    own = f" Dropped placement-svc's own tables: {'; '.join(dropped)}." if dropped else ""
    print(
        f"The database is at upstream OpenStack Placement's schema revision "
        f"{UPSTREAM_HEAD}: openstack-placement 16.0.0 serves it.{own} Run "
        f"'{PROG} db sync' to serve it with {PROG} again."
    )


def db_version(conf, args) -> None:
    print(database_version(conf) or "None")


def status_upgrade_check(conf, args) -> None:
    """Exit with the worst check's code (0, 1 or 2), or with 255 and one error
    line when the checks cannot run: never 1 for an error, which reads as a warning."""
    try:
        code = status.upgrade_check(conf, as_json=args.json)
    except Exception as exc:  # noqa: BLE001 - whatever it is, one line and 255
        _fail(args, str(exc) if isinstance(exc, Failure) else f"unexpected {exc!r}")
        code = status.CANNOT_CHECK
    if code:
        sys.exit(code)


def policy_show(conf, args) -> None:
    """Print every policy rule as enforced with this configuration: the
    defaults, [oslo_policy] enforce_new_defaults and the policy file applied."""
    try:
        enforcer = policy.make_enforcer(conf)
    except policy.PolicyFileError as exc:
        raise Failure(one_line(exc)) from exc
    print(policy.render_effective(enforcer), end="")


# What runs each command: arguments.py's ``run`` names.
COMMANDS = {
    "db sync": db_sync,
    "db hand-back": db_hand_back,
    "db version": db_version,
    "serve": serving.serve,
    "status upgrade check": status_upgrade_check,
    "policy show": policy_show,
    "explain": candidates_commands.explain,
    "capacity": candidates_commands.capacity,
}


def logging_config(args) -> dict:
    """Logging until the configuration is read (a bad file's error, say):
    one handler on stderr. logs.setup then sets it up from [DEFAULT], and
    gunicorn logs through the root (_GunicornLogs)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"placement": {"format": LOG_FORMAT}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "placement",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": logging.getLevelName(args.log_level), "handlers": ["stderr"]},
        "loggers": {
            "placement_svc": {"level": "DEBUG" if args.debug else "NOTSET"},
            "alembic": {"level": "WARNING"},
        },
    }


def run(args) -> int:
    """Run the command ``args`` (parsed by arguments.py) names: its exit status."""
    logging.config.dictConfig(logging_config(args))
    try:
        conf = load_conf(args.config_files, args.config_dir)
        if args.debug:
            conf.set_override("debug", True)
        logs.setup(conf, args.log_level)
        redact.guard_handlers()  # no line shows the database password
        COMMANDS[args.run](conf, args)
    except Failure as exc:
        return _fail(args, str(exc))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: still one line, unless --debug
        hint = "" if args.debug else " (--debug shows the traceback)"
        return _fail(args, f"unexpected {type(exc).__name__}: {one_line(exc)}{hint}")
    return 0


def _fail(args, message: str) -> int:
    if args.debug:
        LOG.exception("the command failed")  # scrubbed too: see redact.remember
    print(f"{PROG}: error: {redact.scrub(message)}", file=sys.stderr)
    return getattr(args, "error_code", 1)
