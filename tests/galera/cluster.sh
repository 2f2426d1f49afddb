#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster on this machine, for tests (issue 18).
#
#   tests/galera/cluster.sh start            fresh datadirs, bootstrap node 1, join 2 and 3,
#                                            wait until all 3 are Synced; database `test`
#                                            and root@127.0.0.1 (no password) on every port
#   tests/galera/cluster.sh stop             stop every node (by its pid file); idempotent
#   tests/galera/cluster.sh status           each node's cluster size and state (exit
#                                            status 1 when a node is stopped)
#   tests/galera/cluster.sh stop-node N      stop node N (1..3) alone
#   tests/galera/cluster.sh start-node N     start node N again: it rejoins the running
#                                            cluster by IST (no bootstrap), waits for Synced
#   tests/galera/cluster.sh urls             one SQLAlchemy URL per node
#
# Environment (defaults far from the system MariaDB on 3306):
#   PLACEMENT_GALERA_DIR          where the nodes live (${TMPDIR:-/tmp}/placement-galera)
#   PLACEMENT_GALERA_PORT         node 1's client port; node N's is this + N - 1 (13306)
#   PLACEMENT_GALERA_GCOMM_PORT   node 1's galera port (14567); node N's is this + 10 * (N - 1),
#                                 its IST port that + 1 and its SST (rsync) port that + 2
#   PLACEMENT_GALERA_TIMEOUT      seconds to wait for a node to be Synced (120)
#
# Every server reads only its own --defaults-file (never /etc/mysql/my.cnf) and has its own
# datadir, socket and pid file under PLACEMENT_GALERA_DIR; nodes are stopped by the pids
# this script recorded, never by name. Exit status: 0 success, 1 failure, 3 the packages are
# missing and cannot be installed (a test may skip on that).
set -euo pipefail

readonly PROG="${0##*/}"
readonly NODES=(1 2 3)
DIR="${PLACEMENT_GALERA_DIR:-${TMPDIR:-/tmp}/placement-galera}"
PORT="${PLACEMENT_GALERA_PORT:-13306}"
GCOMM_PORT="${PLACEMENT_GALERA_GCOMM_PORT:-14567}"
TIMEOUT="${PLACEMENT_GALERA_TIMEOUT:-120}"
MARIADBD=/usr/sbin/mariadbd
MARKER=.placement-galera

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

check_settings() { # [create]: make PLACEMENT_GALERA_DIR when it is missing
    local n p
    [[ "$PORT" =~ ^[0-9]+$ && "$GCOMM_PORT" =~ ^[0-9]+$ ]] || die "ports must be numbers"
    [[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "PLACEMENT_GALERA_TIMEOUT must be a number of seconds"
    for n in "${NODES[@]}"; do
        for p in "$(client_port "$n")" "$(gcomm_port "$n")" "$(ist_port "$n")" \
            "$(sst_port "$n")"; do
            ((p > 1024 && p < 65536)) || die "port $p out of range"
            ((p != 3306 && p != 4567 && p != 4568 && p != 4444)) ||
                die "port $p is the system MariaDB's; choose others"
        done
    done
    if [[ ! -d "$DIR" && "${1:-}" == create ]]; then
        mkdir -m 755 -p "$DIR"
    fi
    [[ -d "$DIR" ]] && DIR="$(cd "$DIR" && pwd -P)"
    case "$DIR" in
    / | /var/lib/mysql | /var/lib/mysql/* | /run/mysqld | /run/mysqld/*)
        die "PLACEMENT_GALERA_DIR=$DIR is the system MariaDB's (or /)"
        ;;
    esac
}

# Who the servers run as: root's would be the mysql user (a root mariadbd's rsync SST daemon
# writes the joiner's datadir as uid nobody, and fails), anyone else's themselves.
run_user() {
    if [[ "$(id -u)" == 0 ]]; then
        id -u mysql >/dev/null 2>&1 || die "running as root needs a 'mysql' user to run mariadbd"
        echo mysql
    else
        id -un
    fi
}

# Give node N's directory to run_user, and check that it can reach it.
own_node_dir() {
    local n=$1 user
    user="$(run_user)"
    [[ "$user" == "$(id -un)" ]] && return 0
    chown -R "$user:" "$(node_dir "$n")"
    runuser -u "$user" -- test -w "$(node_dir "$n")/data" ||
        die "user $user cannot write $(node_dir "$n")/data: a directory above it is private;" \
            "choose a PLACEMENT_GALERA_DIR whose parents others may enter (chmod o+x)"
}

client_port() { echo $((PORT + $1 - 1)); }
gcomm_port() { echo $((GCOMM_PORT + 10 * ($1 - 1))); }
ist_port() { echo $(($(gcomm_port "$1") + 1)); }
sst_port() { echo $(($(gcomm_port "$1") + 2)); }
node_dir() { echo "$DIR/node$1"; }
cnf() { echo "$(node_dir "$1")/my.cnf"; }

galera_library() {
    local lib
    for lib in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so \
        /usr/lib/galera-4/libgalera_smm.so; do
        if [[ -e "$lib" ]]; then
            echo "$lib"
            return 0
        fi
    done
    return 1
}

# mariadb-server, galera-4 and rsync (the SST method), installed when missing.
ensure_packages() {
    local wanted=()
    [[ -x "$MARIADBD" ]] || wanted+=(mariadb-server)
    galera_library >/dev/null || wanted+=(galera-4)
    command -v rsync >/dev/null || wanted+=(rsync)
    command -v mariadb >/dev/null || wanted+=(mariadb-client)
    ((${#wanted[@]} == 0)) && return 0
    say "installing ${wanted[*]}"
    if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
        say "error: ${wanted[*]} missing, and apt-get cannot be run here (not root, or no apt)"
        exit 3
    fi
    # The package's own service may start on 3306; ours never use it.
    # A fresh container may have no package lists yet: update them and try once more.
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y "${wanted[@]}" >&2 &&
        ! { apt-get update >&2 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y "${wanted[@]}" >&2; }; then
        say "error: apt-get install ${wanted[*]} failed"
        exit 3
    fi
    [[ -x "$MARIADBD" ]] && galera_library >/dev/null && command -v rsync >/dev/null ||
        {
            say "error: still missing after apt-get: ${wanted[*]}"
            exit 3
        }
}

write_cnf() {
    local n=$1 dir addresses="" m
    dir="$(node_dir "$n")"
    for m in "${NODES[@]}"; do
        addresses+="${addresses:+,}127.0.0.1:$(gcomm_port "$m")"
    done
    cat >"$(cnf "$n")" <<EOF
# Written by $PROG; read by this node's mariadbd and clients only (--defaults-file).
[client]
socket = $dir/mysqld.sock
port = $(client_port "$n")
user = root

[mysqld]
user = $(run_user)
datadir = $dir/data
socket = $dir/mysqld.sock
pid-file = $dir/mysqld.pid
log-error = $dir/error.log
port = $(client_port "$n")
bind-address = 127.0.0.1
skip-name-resolve
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci
max_connections = 300
# Three nodes on 2 cores and a few hundred MB.
performance_schema = OFF
innodb_buffer_pool_size = 24M
innodb_log_file_size = 16M
innodb_log_buffer_size = 2M
innodb_flush_log_at_trx_commit = 0
key_buffer_size = 1M
aria_pagecache_buffer_size = 2M
table_open_cache = 256
thread_cache_size = 16
thread_stack = 256K
# Galera
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
wsrep_on = ON
wsrep_provider = $(galera_library)
wsrep_cluster_name = placement-galera
wsrep_cluster_address = gcomm://$addresses
wsrep_node_name = node$n
wsrep_node_address = 127.0.0.1:$(gcomm_port "$n")
wsrep_node_incoming_address = 127.0.0.1:$(client_port "$n")
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:$(sst_port "$n")
wsrep_slave_threads = 2
wsrep_provider_options = "base_port=$(gcomm_port "$n");gmcast.listen_addr=tcp://127.0.0.1:$(gcomm_port "$n");ist.recv_addr=127.0.0.1:$(ist_port "$n");gcache.size=32M;gcache.page_size=8M;gcs.fc_limit=64"
EOF
}

# The pid of node N's mariadbd if it is running (from the server's pid file, else the one
# recorded at launch), checked against /proc so a recycled pid is never signalled.
node_pid() {
    local n=$1 file pid
    for file in "$(node_dir "$n")/mysqld.pid" "$(node_dir "$n")/launched.pid"; do
        [[ -s "$file" ]] || continue
        pid="$(tr -dc 0-9 <"$file")"
        [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || continue
        if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--defaults-file=$(cnf "$n")"; then
            echo "$pid"
            return 0
        fi
    done
    return 1
}

sql() { # node, statement: through the node's own socket, as root
    mariadb --defaults-file="$(cnf "$1")" --batch --skip-column-names -e "$2"
}

wsrep_status() { # node, variable
    sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | awk '{print $2}'
}

launch() { # node, extra mariadbd arguments
    local n=$1 dir
    shift
    dir="$(node_dir "$n")"
    if node_pid "$n" >/dev/null; then
        say "node $n is already running (pid $(node_pid "$n"))"
        return 0
    fi
    say "starting node $n: client port $(client_port "$n"), galera $(gcomm_port "$n"),"\
" IST $(ist_port "$n"), SST $(sst_port "$n")${*:+ ($*)}"
    # Its own session, no terminal and no inherited pipes: it outlives this script, and a
    # caller capturing our output is not kept waiting by it.
    setsid "$MARIADBD" --defaults-file="$(cnf "$n")" "$@" \
        </dev/null >>"$dir/mariadbd.out" 2>&1 &
    echo $! >"$dir/launched.pid"
}

wait_synced() { # node: until it is Synced in a cluster of the nodes now running
    local n=$1 deadline state size want
    deadline=$((SECONDS + TIMEOUT))
    while :; do
        # The launched pid, not node_pid: until setsid has exec'd mariadbd it is a shell.
        if ! kill -0 "$(cat "$(node_dir "$n")/launched.pid" 2>/dev/null || echo 0)" 2>/dev/null &&
            ! node_pid "$n" >/dev/null; then
            tail -n 30 "$(node_dir "$n")/error.log" >&2 2>/dev/null || true
            die "node $n exited while starting; its log: $(node_dir "$n")/error.log"
        fi
        state="$(wsrep_status "$n" wsrep_local_state_comment || true)"
        size="$(wsrep_status "$n" wsrep_cluster_size || true)"
        want=0
        for m in "${NODES[@]}"; do
            node_pid "$m" >/dev/null && want=$((want + 1))
        done
        if [[ "$state" == Synced && "$size" == "$want" ]]; then
            say "node $n Synced, cluster size $size"
            return 0
        fi
        if ((SECONDS >= deadline)); then
            tail -n 30 "$(node_dir "$n")/error.log" >&2 2>/dev/null || true
            die "node $n not Synced after ${TIMEOUT}s (state '${state:-?}', size '${size:-?}')"
        fi
        sleep 0.3
    done
}

stop_node() {
    local n=$1 pid deadline wedged
    if ! pid="$(node_pid "$n")"; then
        say "node $n is not running"
        return 0
    fi
    say "stopping node $n (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 60))
    wedged=$((SECONDS + 15))
    while kill -0 "$pid" 2>/dev/null; do
        # A zombie (the orphan is not reaped at once) counts as gone.
        [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] && break
        # A SIGTERM that comes while mariadbd is still starting can leave it neither
        # stopping nor answering: after 15s without an answer on its socket, it is killed.
        if ((SECONDS >= deadline)) || { ((SECONDS >= wedged)) && ! timeout 5 mariadb-admin \
            --defaults-file="$(cnf "$n")" --connect-timeout=2 ping >/dev/null 2>&1; }; then
            say "node $n did not stop in $((SECONDS - deadline + 60))s; killing pid $pid"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    rm -f "$(node_dir "$n")/launched.pid"
}

cmd_start() {
    ensure_packages
    check_settings create
    local n running=0
    for n in "${NODES[@]}"; do
        node_pid "$n" >/dev/null && running=$((running + 1))
    done
    if ((running > 0)); then
        say "$running node(s) running under $DIR; stopping them for a fresh cluster"
        cmd_stop
    fi
    for n in "${NODES[@]}"; do
        # Remove only what this script made.
        if [[ -d "$(node_dir "$n")" ]]; then
            [[ -e "$(node_dir "$n")/$MARKER" ]] ||
                die "$(node_dir "$n") exists and was not made by $PROG; remove it or pick" \
                    "another PLACEMENT_GALERA_DIR"
            rm -rf "$(node_dir "$n")"
        fi
        mkdir -p "$(node_dir "$n")/data"
        touch "$(node_dir "$n")/$MARKER"
        write_cnf "$n"
        own_node_dir "$n"
    done
    # A start that fails leaves nothing running.
    trap 'say "start failed; stopping the nodes it started"; cmd_stop' EXIT
    say "initializing node 1's datadir"
    if ! mariadb-install-db --defaults-file="$(cnf 1)" --wsrep-on=OFF --skip-test-db \
        --auth-root-authentication-method=normal >"$(node_dir 1)/install-db.log" 2>&1; then
        cat "$(node_dir 1)/install-db.log" >&2
        die "mariadb-install-db failed"
    fi
    launch 1 --wsrep-new-cluster
    wait_synced 1
    sql 1 "CREATE DATABASE IF NOT EXISTS test;
        CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
        GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
    # One joiner at a time: each takes a full state transfer (rsync) from a Synced donor.
    for n in 2 3; do
        launch "$n"
        wait_synced "$n"
    done
    for n in "${NODES[@]}"; do
        wait_synced "$n" >/dev/null 2>&1 || die "node $n fell out of the cluster"
        mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$(client_port "$n")" -u root \
            -e 'SELECT 1' test >/dev/null ||
            die "root@127.0.0.1:$(client_port "$n")/test cannot be used"
    done
    trap - EXIT
    say "cluster of 3 ready under $DIR"
    cmd_urls
}

cmd_start_node() {
    local n=$1 log lines=0
    log="$(node_dir "$n")/error.log"
    [[ -f "$log" ]] && lines="$(wc -l <"$log")"
    launch "$n"
    wait_synced "$n"
    # How it caught up: wsrep_sst_rsync says IST when the donor's gcache still held
    # everything this node missed, SST when it had to copy the whole datadir.
    if tail -n "+$((lines + 1))" "$log" | grep -q "rsync IST completed on joiner"; then
        say "node $n rejoined by IST"
    elif tail -n "+$((lines + 1))" "$log" | grep -q "rsync SST completed on joiner"; then
        say "node $n rejoined by a full state transfer (SST)"
    fi
}

cmd_stop() {
    check_settings
    local n
    # The bootstrap node last: it then holds the newest state (safe_to_bootstrap).
    for n in 3 2 1; do
        stop_node "$n"
    done
}

cmd_status() {
    check_settings
    local n pid rc=0
    for n in "${NODES[@]}"; do
        if pid="$(node_pid "$n")"; then
            printf 'node%s port %s pid %s: cluster_size=%s state=%s\n' "$n" \
                "$(client_port "$n")" "$pid" "$(wsrep_status "$n" wsrep_cluster_size || true)" \
                "$(wsrep_status "$n" wsrep_local_state_comment || true)"
        else
            printf 'node%s port %s: stopped\n' "$n" "$(client_port "$n")"
            rc=1
        fi
    done
    return $rc
}

cmd_urls() {
    local n
    for n in "${NODES[@]}"; do
        echo "mysql+pymysql://root@127.0.0.1:$(client_port "$n")/test"
    done
}

node_arg() {
    [[ "${1:-}" =~ ^[123]$ ]] || die "which node? 1, 2 or 3"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
urls) check_settings && cmd_urls ;;
stop-node)
    node_arg "${2:-}"
    check_settings
    stop_node "$2"
    ;;
start-node)
    node_arg "${2:-}"
    check_settings
    [[ -e "$(node_dir "$2")/$MARKER" && -d "$(node_dir "$2")/data" ]] ||
        die "node $2 has no datadir under $DIR; run '$PROG start' first"
    cmd_start_node "$2"
    ;;
*) usage ;;
esac
