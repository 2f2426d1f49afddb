#!/usr/bin/env bash
# Serve upstream OpenStack Placement on a database of your choice, so that a
# bench script can measure it beside placement-svc on the same machine.
#
#   bash bench/upstream.sh DATABASE_URL &       # then: kill $!
#
#   bash bench/upstream.sh sqlite:////tmp/up.sqlite
#   bash bench/upstream.sh postgresql+psycopg2://postgres@127.0.0.1/bench_up
#   bash bench/upstream.sh 'mysql+pymysql://root@127.0.0.1/bench_up?charset=utf8mb4'
#
# The first run makes a virtualenv in .upstream-venv with openstack-placement
# from PyPI (UPSTREAM_VERSION, default 16.0.0), gunicorn, and the drivers
# upstream's oslo.db needs for PostgreSQL and MySQL (psycopg2-binary,
# PyMySQL); a venv made by bench/gabbi_upstream.sh gets the drivers added.
# Then it writes a placement.conf (the URL as [placement_database]
# connection, [api] auth_strategy = noauth2, so the token `admin` works) in
# $OUT/serve-$PORT/ (default OUT=.upstream-runs), runs `placement-manage db
# sync`, and serves placement.wsgi.api:application under gunicorn with
# $WORKERS sync workers (default 2) on 127.0.0.1:$PORT (default 8799), in the
# foreground: the script becomes the gunicorn master (exec), whose pid it
# writes to $PIDFILE (default $OUT/serve-$PORT/gunicorn.pid). Killing that pid
# (TERM) stops the server and its workers. The server's log goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -eq 1 ] || { sed -n '2,9p' "${BASH_SOURCE[0]}" >&2; exit 2; }
URL="$1"
VERSION="${UPSTREAM_VERSION:-16.0.0}"
PORT="${PORT:-8799}"
WORKERS="${WORKERS:-2}"
OUT="${OUT:-.upstream-runs}"
VENV=.upstream-venv
DIR="$OUT/serve-$PORT"
PIDFILE="${PIDFILE:-$DIR/gunicorn.pid}"

if [ ! -x "$VENV/bin/placement-manage" ]; then
    echo "making $VENV with openstack-placement==$VERSION (once)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "openstack-placement==$VERSION" gunicorn \
        > "$VENV/install.log" 2>&1 || { cat "$VENV/install.log" >&2; exit 2; }
fi
if ! "$VENV/bin/python" -c 'import psycopg2, pymysql' 2>/dev/null; then
    echo "adding psycopg2-binary and PyMySQL to $VENV (once)" >&2
    "$VENV/bin/pip" install --quiet psycopg2-binary PyMySQL \
        >> "$VENV/install.log" 2>&1 || { cat "$VENV/install.log" >&2; exit 2; }
fi
installed=$("$VENV/bin/python" -c \
    'import importlib.metadata as m; print(m.version("openstack-placement"))')
[ "$installed" = "$VERSION" ] ||
    { echo "$VENV holds openstack-placement $installed, not $VERSION: remove $VENV" >&2; exit 2; }

mkdir -p "$DIR"
printf '[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = %s\n' \
    "$URL" > "$DIR/placement.conf"
"$VENV/bin/placement-manage" --config-file "$DIR/placement.conf" db sync
echo "upstream placement $VERSION on 127.0.0.1:$PORT, $WORKERS workers, pid file $PIDFILE" >&2
# upstream's WSGI module reads $OS_PLACEMENT_CONFIG_DIR/placement.conf.
export OS_PLACEMENT_CONFIG_DIR="$DIR"
extra=()  # gunicorn >= 24 listens on a control socket in ~/.gunicorn/ unless told not to
if "$VENV/bin/gunicorn" --help | grep -- --no-control-socket > /dev/null; then extra=(--no-control-socket); fi
exec "$VENV/bin/gunicorn" "${extra[@]}" --workers "$WORKERS" --timeout 120 --bind "127.0.0.1:$PORT" \
    --pid "$PIDFILE" placement.wsgi.api:application
