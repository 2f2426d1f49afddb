"""Configuration: oslo.config options with upstream Placement's groups and names.

An operator's existing placement.conf keeps its meaning here. Options that
upstream has and this service does not need yet are accepted (so a file that
sets them still loads) and say so in their help.
"""

from __future__ import annotations

from oslo_config import cfg
from oslo_log import log as oslo_log
from oslo_middleware import cors, http_proxy_to_wsgi
from oslo_middleware.healthcheck import opts as healthcheck_opts
from oslo_policy import opts as policy_opts

from placement_svc import microversion as mv

QUICKSTART_CONNECTION = "sqlite:///placement.sqlite"

database_opts = [
    cfg.StrOpt(
        "connection",
        secret=True,
        help="The SQLAlchemy URL of the placement database, for example "
        "mysql+pymysql://placement:secret@db/placement or "
        "postgresql://placement:secret@db/placement. "
        "postgresql:// and mysql:// use psycopg and PyMySQL when the default "
        "drivers are not installed. When placement-svc runs with no "
        "configuration file at all it uses " + QUICKSTART_CONNECTION + ".",
    ),
    cfg.IntOpt(
        "connection_recycle_time",
        default=3600,
        min=-1,
        help="Connections unused for this many seconds are replaced before "
        "use; -1 never replaces them.",
    ),
    cfg.IntOpt(
        "max_pool_size",
        default=5,
        min=0,
        help="Connections kept open per worker process (PostgreSQL and MySQL); 0 means no limit.",
    ),
    cfg.IntOpt(
        "max_overflow",
        default=50,
        min=0,
        help="Connections a worker may open beyond max_pool_size under load.",
    ),
    cfg.IntOpt(
        "pool_timeout",
        default=30,
        min=1,
        help="Seconds to wait for a free pooled connection before failing.",
    ),
    cfg.IntOpt(
        "max_retries",
        default=10,
        min=-1,
        help="Times to retry the first connection to the database at start-up; -1 retries forever.",
    ),
    cfg.IntOpt(
        "retry_interval",
        default=10,
        min=0,
        help="Seconds between those start-up connection attempts.",
    ),
    cfg.IntOpt(
        "db_max_retries",
        default=20,
        min=0,
        help="Times a transaction is re-run after a deadlock, a lock timeout "
        "or a lost connection before the request fails with 503. Counted apart "
        "from [placement] allocation_conflict_retry_count.",
    ),
    cfg.BoolOpt(
        "sync_on_startup",
        default=False,
        help="Bring the schema to the latest revision when the service starts. "
        "An empty database is always brought up to date, so the quick start "
        "needs no separate 'db sync'.",
    ),
    cfg.StrOpt(
        "mysql_sql_mode",
        default="TRADITIONAL",
        help="The SQL mode set on every MySQL/MariaDB connection; an empty "
        "value leaves the server's mode alone.",
    ),
    cfg.IntOpt(
        "mysql_wsrep_sync_wait",
        min=0,
        max=15,
        help="On a MariaDB Galera cluster: the wsrep_sync_wait set on every "
        "connection. 1 makes each read wait until this node has applied every "
        "write the cluster committed before it, so API processes on several "
        "hosts, each on its own node, read each other's writes at once. Unset "
        "leaves the server's value alone (0 by default: reads may lag).",
    ),
    cfg.IntOpt(
        "sqlite_busy_timeout",
        default=30,
        min=1,
        help="Seconds an SQLite writer waits for another writer (another "
        "worker process) before retrying its transaction.",
    ),
]

api_opts = [
    cfg.StrOpt(
        "auth_strategy",
        default="keystone",
        choices=[
            (
                "keystone",
                "Use keystonemiddleware's auth_token, configured by the "
                "[keystone_authtoken] group, which must name an auth plugin "
                "(auth_type, or auth_section) with that plugin's options.",
            ),
            ("noauth2", "Trust the X-Auth-Token header as 'user[:project]'; for tests only."),
        ],
        help="How requests are authenticated. When placement-svc runs with no "
        "configuration file at all it uses noauth2.",
    ),
    cfg.StrOpt(
        "max_microversion",
        choices=[f"1.{minor}" for minor in range(39, mv.MAX_VERSION.minor + 1)],
        help="The newest microversion served and advertised. Unset: the newest "
        "placement-svc has. 1.39 serves exactly what upstream Placement serves: "
        "placement-svc's own versions (1.40 and later, see docs/microversions.rst) "
        "are then refused as any version upstream does not know, with 406.",
    ),
    cfg.IntOpt(
        "max_request_line",
        default=40992,
        min=4096,
        help="placement-svc's own, for 'placement-svc serve': the longest "
        "request line (method, URL and HTTP version) read, in bytes. A longer "
        "one is answered 414 as soon as this many bytes have come, without "
        "reading the rest. The default lets through the longest URL the "
        "application takes (40,960 characters, answered 414 past that).",
    ),
    cfg.IntOpt(
        "max_header_fields",
        default=100,
        min=1,
        max=32768,
        help="placement-svc's own, for 'placement-svc serve': the most header "
        "fields a request may have; more are refused with 400.",
    ),
    cfg.IntOpt(
        "max_header_field_size",
        default=8190,
        min=1024,
        max=8190,
        help="placement-svc's own, for 'placement-svc serve': the longest "
        "header field (name and value), in bytes; a longer one is refused "
        "with 400 as soon as that many bytes have come.",
    ),
    cfg.IntOpt(
        "client_header_timeout",
        default=20,
        min=1,
        help="placement-svc's own, for 'placement-svc serve': the seconds a "
        "client has, from when its connection is accepted (on a connection "
        "kept open after an answer, from the first byte of the next request), "
        "to send its request line and headers. Then the connection is "
        "closed, with a 408 "
        "if part of a request came. A worker reads every connection's "
        "request at once, without waiting for any: a slow client holds a "
        "socket, never a worker.",
    ),
    cfg.IntOpt(
        "client_body_timeout",
        default=20,
        min=1,
        help="placement-svc's own, for 'placement-svc serve': the most "
        "seconds a request's body may come without a byte (then 408), and "
        "a client may read none of its answer (then its connection is "
        "closed).",
    ),
    cfg.IntOpt(
        "keepalive_timeout",
        default=10,
        min=0,
        help="placement-svc's own, for 'placement-svc serve': the seconds a "
        "client connection is kept open after an answer, waiting for the "
        "client's next request (HTTP keep-alive); 0 closes every connection "
        "after one answer, as gunicorn's sync worker does. An idle "
        "connection holds a socket, never a worker, and is the first closed "
        "at max_client_connections. A connection is closed after its answer "
        "anyway when other requests are waiting for its worker.",
    ),
    cfg.IntOpt(
        "max_client_connections",
        default=1000,
        min=16,
        help="placement-svc's own, for 'placement-svc serve': the most client "
        "connections each worker process holds (sending their requests, "
        "waiting for their turn, reading their answers, kept open for their "
        "next request). At the cap an idle one kept open is closed to make "
        "room, or else the one that has been sending its request the "
        "longest. The open-file limit is raised to make room for them if it "
        "can be; a warning says when it cannot.",
    ),
    cfg.IntOpt(
        "max_pending_request_bytes",
        default=64 * 1024 * 1024,
        min=16 * 1024 * 1024,
        help="placement-svc's own, for 'placement-svc serve': the most memory, "
        "in bytes, that the unfinished requests one worker process is reading "
        "may hold. Past it the one holding the most is answered 503 with "
        "Retry-After.",
    ),
]

placement_opts = [
    cfg.BoolOpt(
        "randomize_allocation_candidates",
        default=False,
        help="Return allocation candidates in a random order, a fair sample "
        "when 'limit' cuts the list; otherwise the order is stable.",
    ),
    cfg.StrOpt(
        "incomplete_consumer_project_id",
        default="00000000-0000-0000-0000-000000000000",
        help="The project id given to consumers written before microversion "
        "1.8, which carried none.",
    ),
    cfg.StrOpt(
        "incomplete_consumer_user_id",
        default="00000000-0000-0000-0000-000000000000",
        help="The user id given to consumers written before microversion 1.8, which carried none.",
    ),
    cfg.IntOpt(
        "allocation_conflict_retry_count",
        default=10,
        min=0,
        help="Times an allocation write is retried after another writer "
        "changed one of its providers, before the answer is 409. Counted apart "
        "from [placement_database] db_max_retries.",
    ),
    cfg.IntOpt(
        "max_allocation_candidates",
        default=-1,
        min=-1,
        help="The most allocation candidates any request may return, applied "
        "while they are generated; -1 means no limit beyond 'limit'.",
    ),
    cfg.StrOpt(
        "allocation_candidates_generation_strategy",
        default="depth-first",
        choices=[
            ("depth-first", "Exhaust one root provider's candidates before the next."),
            ("breadth-first", "Take candidates from every root provider in turn."),
        ],
        help="The order in which candidates are generated across root "
        "providers when max_allocation_candidates cuts the list.",
    ),
    cfg.IntOpt(
        "allocation_candidates_search_budget",
        default=1_000_000,
        min=1,
        help="placement-svc's own: the most steps the search of one "
        "GET /allocation_candidates (or its explain or capacity) may take, a "
        "step being one provider tried for one request group, and each "
        "candidate found costing one step per request group and resource "
        "class it places. A request that needs more is answered 400, naming "
        "this option, instead of holding a worker and its memory for as long "
        "as it takes. The default ends the costliest searches within about a "
        "second of one CPU; the largest of the benchmarks (bench/huge.py's "
        "84,000 candidates) takes about 580,000 steps.",
    ),
    cfg.IntOpt(
        "max_request_groups",
        default=64,
        min=1,
        help="placement-svc's own: the most request groups (the unsuffixed "
        "group and each resources<N>, required<N>, member_of<N> suffix) one "
        "GET /allocation_candidates may name; more are answered 400. "
        "Upstream Placement sets no limit.",
    ),
]

# [healthcheck]: oslo.middleware's options (detailed, backends,
# allowed_source_ranges, ignore_proxied_requests, and disable_by_file_path
# for its disable_by_file backend), then the database check's (health.py).
healthcheck_opts_all = [
    *healthcheck_opts.HEALTHCHECK_OPTS,
    *healthcheck_opts.DISABLE_BY_FILE_OPTS,
    cfg.FloatOpt(
        "database_timeout",
        default=2.0,
        min=0.1,
        help="Seconds GET /healthcheck waits for the database to answer a "
        "trivial query before it answers 503. The database check always runs; "
        "'backends' adds oslo.middleware's checks to it.",
    ),
    cfg.FloatOpt(
        "database_result_ttl",
        default=1.0,
        min=0.0,
        help="Seconds a worker reuses its last database check's result for "
        "further health checks; 0 queries the database for every one.",
    ),
]

metrics_opts = [
    cfg.BoolOpt(
        "enabled",
        default=True,
        help="Count requests, database retries, generation conflicts and "
        "allocation candidates answers, and serve them in the Prometheus "
        "text format at GET /metrics (policy placement:metrics, admins by "
        "default). False: nothing is counted and /metrics is a 404.",
    ),
    cfg.StrOpt(
        "listen",
        help="HOST:PORT where 'placement-svc serve' also answers the metrics, "
        "without authentication, for a Prometheus server that cannot send a "
        "keystone token: bind it to a private address. Every worker's counts, "
        "as at /metrics. Unset: only the API's GET /metrics.",
    ),
]

console_opts = [
    cfg.BoolOpt(
        "enabled",
        default=True,
        help="Serve the operator's console, a page of pictures of the cloud "
        "(trees, usage, why no valid host), at GET /console. Its files carry "
        "no data and need no token; the page reads the API with the token "
        "its user gives it, so policy decides what each person sees. False: "
        "/console is a 404.",
    ),
]

# Upstream's [cors] defaults (set in its WSGI start-up): the headers a
# browser client sends and may read, OpenStack-API-Version among them. Set on
# oslo.middleware's shared options before any configuration is read, so a
# value in placement.conf still wins and the sample shows them.
cors.set_defaults(
    allow_headers=[
        "X-Auth-Token",
        "X-Openstack-Request-Id",
        "X-Identity-Status",
        "X-Roles",
        "X-Service-Catalog",
        "X-User-Id",
        "X-Tenant-Id",
        "OpenStack-API-Version",
    ],
    expose_headers=[
        "X-Auth-Token",
        "X-Openstack-Request-Id",
        "X-Subject-Token",
        "X-Service-Token",
        "OpenStack-API-Version",
    ],
    allow_methods=["GET", "PUT", "POST", "DELETE", "PATCH"],
)

GROUPS = {
    "placement_database": database_opts,
    "api": api_opts,
    "placement": placement_opts,
    "cors": cors.CORS_OPTS,
    "oslo_middleware": http_proxy_to_wsgi.OPTS,
    "healthcheck": healthcheck_opts_all,
    "metrics": metrics_opts,
    "console": console_opts,
}


def register_opts(conf: cfg.ConfigOpts) -> None:
    for group, opts in GROUPS.items():
        conf.register_opts(opts, group=group)
    # [oslo_policy] (policy_file = policy.yaml, enforce_new_defaults, ...):
    # oslo.policy's own options and defaults, registered as upstream does.
    policy_opts.set_defaults(conf)
    # [DEFAULT] debug, log_file, log_dir, use_syslog, use_journal, use_json,
    # log_config_append, the format strings...: oslo.log's, as every
    # OpenStack service has them (logs.py sets the logging up from them).
    oslo_log.register_options(conf)


def list_opts():
    """The options for oslo-config-generator (namespace placement_svc)."""
    own = [(group, list(opts)) for group, opts in GROUPS.items()]
    return own + [(group, list(opts)) for group, opts in policy_opts.list_opts()]


def make_conf(args=None, config_files=None, quickstart_if_unconfigured=True) -> cfg.ConfigOpts:
    """Build a ConfigOpts from command-line style args and config files.

    With no configuration file at all (none given, none in oslo's standard
    places), the quick-start defaults apply: SQLite in the current directory
    and noauth2.
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    if config_files is None:
        config_files = cfg.find_config_files(project="placement")
    conf(args or [], project="placement", default_config_files=list(config_files))
    if quickstart_if_unconfigured and not conf.config_file:
        conf.set_default("connection", QUICKSTART_CONNECTION, group="placement_database")
        conf.set_default("auth_strategy", "noauth2", group="api")
    return conf
