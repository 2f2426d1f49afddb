"""``placement-svc``: the command line.

    placement-svc db sync       bring the schema to the latest revision and add
                                the standard resource classes and traits (a
                                database upstream Placement made is adopted)
    placement-svc db version    print the schema revision of the database
    placement-svc db hand-back  make the database one upstream Placement serves
    placement-svc serve         answer the API under gunicorn
    placement-svc status upgrade check
                                is the database ready for this release?
    placement-svc policy show   print the effective policy
    placement-svc explain QUERY why an allocation candidates query has the
                                candidates it has (or none)
    placement-svc capacity QUERY
                                how many copies of the query fit, per tree

This module is the argparse layer only: ``serve`` and its gunicorn are in
serving.py; what the commands share with the WSGI module (configuration,
database, application) is in bootstrap.
``explain`` and ``capacity`` answer what GET /allocation_candidates/explain
and /capacity answer (api/allocation_candidates.py), from the configured
database, for an operator on a host the API cannot be reached from: the
same query string, the same checks and words, the same units of work.

Every failure an operator can cause (a missing or unparsable configuration
file, a bad value in it, a bad or unreachable database URL, an out-of-date
schema, a query the API would answer with 400) ends with one line on
stderr, ``placement-svc: error: ...``, and exit status 1. ``--debug`` adds
the traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
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


# -- commands ----------------------------------------------------------------


def db_sync(conf, args) -> None:
    adopted = sync_database(conf)
    if adopted:
        print(
            f"Adopted a database of upstream OpenStack Placement (schema revision {adopted}); "
            "no row was changed."
        )


def db_hand_back(conf, args) -> None:
    dropped = hand_back_database(conf)
    own = f" Dropped {', '.join(dropped)} (placement-svc's own, no cloud data)." if dropped else ""
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


# -- the command line ----------------------------------------------------------


def _workers(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return int(value)


def _seconds(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds, got {value!r}")
    return int(value)


def _prefix(value: str) -> str:
    if value in ("", "/"):
        return ""
    if not value.startswith("/"):
        raise argparse.ArgumentTypeError(f"expected a path starting with '/', got {value!r}")
    return value.rstrip("/")


def _add_common_args(parser, depth: int) -> None:
    """--config-file, --config-dir and --debug on the command and on every
    sub-command, so they may come before or after any of them.

    argparse copies a sub-command's values over its parent's when both use
    one destination, so each depth has its own (``config_files_1``, ...),
    merged by ``common_args``. Only the top has defaults.
    """
    default = {} if depth == 0 else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "--config-file",
        action="append",
        metavar="PATH",
        dest=f"config_files_{depth}",
        help="a placement.conf to read; repeat for several, later ones win. "
        "Default: placement.conf (or placement-svc.conf) in ~/.placement/, ~/, "
        "/etc/placement/ or /etc/; with none at all, a SQLite database "
        "placement.sqlite in the current directory and noauth2.",
        **default,
    )
    parser.add_argument(
        "--config-dir",
        metavar="DIR",
        dest=f"config_dir_{depth}",
        help="a directory of *.conf files read after the configuration files",
        **default,
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        dest=f"debug_{depth}",
        help="log at DEBUG and show tracebacks of errors",
        **default,
    )


def common_args(args) -> argparse.Namespace:
    """Merge the per-depth values into ``config_files``, ``config_dir`` and
    ``debug``: files in command-line order, the last --config-dir, any --debug."""
    values = vars(args)
    depths = range(MAX_DEPTH + 1)
    args.config_files = [f for d in depths for f in values.get(f"config_files_{d}") or []]
    args.config_dir = next(
        (values[f"config_dir_{d}"] for d in reversed(depths) if values.get(f"config_dir_{d}")),
        None,
    )
    args.debug = any(values.get(f"debug_{d}") for d in depths)
    return args


def _version() -> str:
    try:
        return f"{PROG} {importlib.metadata.version(PROG)}"
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return f"{PROG} (version unknown: not installed)"


def _command(commands, name: str, depth: int, **kwargs) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, **kwargs)
    _add_common_args(parser, depth)
    return parser


# The deepest sub-command: status upgrade check.
MAX_DEPTH = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="The OpenStack Placement API service and its database tools.",
    )
    parser.add_argument("--version", action="version", version=_version())
    _add_common_args(parser, 0)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_db_commands(commands)
    _add_serve_command(commands)
    _add_status_commands(commands)
    _add_policy_commands(commands)
    candidates_commands.add_commands(commands, _command)
    return parser


def _add_db_commands(commands) -> None:
    db = _command(
        commands, "db", 1, help="database schema tools", description="Database schema tools."
    )
    db_commands = db.add_subparsers(dest="db_command", metavar="DB_COMMAND", required=True)
    text = (
        "Bring the database schema to the latest revision and add the standard "
        "resource classes and traits that are missing. Safe to run again."
    )
    sync = _command(db_commands, "sync", 2, help=text, description=text)
    sync.set_defaults(func=db_sync, log_level=logging.WARNING)
    text = (
        "Make the database one upstream OpenStack Placement 16.0.0 serves as its own: "
        "upstream's schema revision, without placement-svc's own tables (they hold no "
        "cloud data). Stop every placement-svc process first; 'db sync' takes it back."
    )
    back = _command(db_commands, "hand-back", 2, help=text, description=text)
    back.set_defaults(func=db_hand_back, log_level=logging.WARNING)
    text = "Print the schema revision of the database ('None' when it has no schema)."
    version = _command(db_commands, "version", 2, help=text, description=text)
    version.set_defaults(func=db_version, log_level=logging.WARNING)


def _add_serve_command(commands) -> None:
    text = (
        "Serve the Placement API with gunicorn. An empty database gets its schema "
        "first; an out-of-date one is refused (run 'db sync'). Logs go to stderr."
    )
    srv = _command(commands, "serve", 1, help="serve the Placement API", description=text)
    srv.add_argument(
        "--bind",
        type=serving.parse_bind,
        default=serving.DEFAULT_BIND,
        metavar="HOST:PORT",
        help=f"address to listen on (default {serving.DEFAULT_BIND})",
    )
    srv.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="worker processes, each with its own database connections (default 1)",
    )
    srv.add_argument(
        "--graceful-timeout",
        type=_seconds,
        default=serving.DEFAULT_GRACEFUL_TIMEOUT,
        metavar="SECONDS",
        help="on SIGTERM, stop accepting connections and give the requests in progress "
        "and those already accepted this long to finish; then stop them anyway "
        f"(default {serving.DEFAULT_GRACEFUL_TIMEOUT})",
    )
    srv.add_argument(
        "--prefix",
        type=_prefix,
        default="",
        metavar="PATH",
        help="serve under this path, e.g. /placement (default: at the root)",
    )
    srv.set_defaults(func=serving.serve, log_level=logging.INFO)


def _add_status_commands(commands) -> None:
    text = "Status checks, as in OpenStack's <service>-status commands."
    status = _command(commands, "status", 1, help="status checks", description=text)
    status_commands = status.add_subparsers(
        dest="status_command", metavar="STATUS_COMMAND", required=True
    )
    upgrade = _command(status_commands, "upgrade", 2, help="upgrade checks", description=text)
    upgrade_commands = upgrade.add_subparsers(
        dest="upgrade_command", metavar="UPGRADE_COMMAND", required=True
    )
    text = (
        "Check that the database is ready for this release and print a table of "
        "results. Exit status: 0 all passed, 1 a warning, 2 a failure, 255 the "
        "checks could not run."
    )
    check = _command(upgrade_commands, "check", 3, help=text, description=text)
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    # An error is 255 here: 1 is a warning in OpenStack's upgrade-check codes.
    check.set_defaults(func=status_upgrade_check, log_level=logging.WARNING, error_code=255)


def _add_policy_commands(commands) -> None:
    pol = _command(commands, "policy", 1, help="policy tools", description="Policy tools.")
    pol_commands = pol.add_subparsers(
        dest="policy_command", metavar="POLICY_COMMAND", required=True
    )
    text = (
        "Print the effective policy, one 'rule: check' line per rule: the defaults "
        "with [oslo_policy] and the policy file applied, as the service enforces it."
    )
    show = _command(pol_commands, "show", 2, help=text, description=text)
    show.set_defaults(func=policy_show, log_level=logging.WARNING)


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


def main(argv=None) -> int:
    args = common_args(build_parser().parse_args(argv))
    logging.config.dictConfig(logging_config(args))
    try:
        conf = load_conf(args.config_files, args.config_dir)
        if args.debug:
            conf.set_override("debug", True)
        logs.setup(conf, args.log_level)
        redact.guard_handlers()  # no line shows the database password
        args.func(conf, args)
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


if __name__ == "__main__":
    sys.exit(main())
