"""The command line's grammar: argparse and nothing else of the service.

``placement-svc --version`` and ``--help`` (and a mistyped command) are
answered from this module alone, in a few hundredths of a second; the
service's modules (configuration, database, gunicorn, the engine: most of
a second to import) load once a command is to run (cli.main, commands.py).
Each command names what runs it with ``run`` (commands.COMMANDS).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging

from placement_svc.cmd import PROG

DEFAULT_BIND = "127.0.0.1:8778"
# gunicorn's own default: seconds a stopping server gives its workers.
DEFAULT_GRACEFUL_TIMEOUT = 30


def parse_bind(value: str) -> str:
    """HOST:PORT, checked as --bind and [metrics] listen take it."""
    host, colon, port = value.rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return value


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
    _add_candidates_commands(commands)
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
    sync.set_defaults(run="db sync", log_level=logging.WARNING)
    text = (
        "Make the database one upstream OpenStack Placement 16.0.0 serves as its own: "
        "upstream's schema revision, without placement-svc's own tables (they hold no "
        "cloud data). Stop every placement-svc process first; 'db sync' takes it back."
    )
    back = _command(db_commands, "hand-back", 2, help=text, description=text)
    back.set_defaults(run="db hand-back", log_level=logging.WARNING)
    text = "Print the schema revision of the database ('None' when it has no schema)."
    version = _command(db_commands, "version", 2, help=text, description=text)
    version.set_defaults(run="db version", log_level=logging.WARNING)


def _add_serve_command(commands) -> None:
    text = (
        "Serve the Placement API with gunicorn. An empty database gets its schema "
        "first; an out-of-date one is refused (run 'db sync'). Logs go to stderr."
    )
    srv = _command(commands, "serve", 1, help="serve the Placement API", description=text)
    srv.add_argument(
        "--bind",
        type=parse_bind,
        default=DEFAULT_BIND,
        metavar="HOST:PORT",
        help=f"address to listen on (default {DEFAULT_BIND})",
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
        default=DEFAULT_GRACEFUL_TIMEOUT,
        metavar="SECONDS",
        help="on SIGTERM, stop accepting connections and give the requests in progress "
        "and those already accepted this long to finish; then stop them anyway "
        f"(default {DEFAULT_GRACEFUL_TIMEOUT})",
    )
    srv.add_argument(
        "--prefix",
        type=_prefix,
        default="",
        metavar="PATH",
        help="serve under this path, e.g. /placement (default: at the root)",
    )
    srv.set_defaults(run="serve", log_level=logging.INFO)


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
    check.set_defaults(run="status upgrade check", log_level=logging.WARNING, error_code=255)


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
    show.set_defaults(run="policy show", log_level=logging.WARNING)


def _add_candidates_commands(commands) -> None:
    where = (
        "Reads the configured database directly, for an operator on a host the "
        "API cannot be reached from; no policy applies. QUERY is the query string "
        "of GET /allocation_candidates, checked as the API checks it at its newest "
        "microversion; quote it for the shell."
    )
    said = (
        "Why an allocation candidates query has the candidates it has, or none: "
        "what each filter and rule left, and the trees that almost fit "
        "(near_misses=N in QUERY: how many, as the API takes it). The text "
        "GET /allocation_candidates/explain answers to Accept: text/plain. "
    )
    explaining = _command(
        commands,
        "explain",
        1,
        help="why an allocation candidates query has the candidates it has",
        description=said + where,
    )
    said = (
        "How many copies of an allocation candidates query fit: in all, and tree "
        "by tree, the most first (limit=N in QUERY: N trees at most). The text "
        "GET /allocation_candidates/capacity answers to Accept: text/plain. "
    )
    counting = _command(
        commands,
        "capacity",
        1,
        help="how many copies of an allocation candidates query fit",
        description=said + where,
    )
    for parser, run in ((explaining, "explain"), (counting, "capacity")):
        parser.add_argument(
            "query", metavar="QUERY", help="e.g. 'resources=VCPU:2,MEMORY_MB:4096&required=...'"
        )
        parser.add_argument(
            "--json", action="store_true", help="print the JSON body the API answers instead"
        )
        parser.set_defaults(run=run, log_level=logging.WARNING)
