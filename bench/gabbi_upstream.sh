#!/usr/bin/env bash
# Run this project's gabbi files against upstream OpenStack Placement, to see
# where the two services answer differently.
#
#   bash bench/gabbi_upstream.sh [gabbits/FILE.yaml ...]     (default: all)
#
# The first run makes a virtualenv in .upstream-venv with openstack-placement
# from PyPI (UPSTREAM_VERSION, default 16.0.0) and gunicorn. Each file gets a
# fresh SQLite database and its own upstream server (noauth2) on
# 127.0.0.1:$PORT (default 8799), and runs with gabbi-run from .venv (run
# `make test` once first). The file's `fixtures` are dropped, so files whose
# fixture changes the configuration (cors, policy-*) fail for that reason.
# A file that also passes here is behaviour shared with upstream; a failure is
# either a difference listed in README.rst ("Deliberate differences") or a
# bug. Full output: $OUT/<file>.txt (default OUT=.upstream-runs).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VERSION="${UPSTREAM_VERSION:-16.0.0}"
PORT="${PORT:-8799}"
OUT="${OUT:-.upstream-runs}"
VENV=.upstream-venv
GABBI_RUN=.venv/bin/gabbi-run
[ -x "$GABBI_RUN" ] || { echo "no $GABBI_RUN: run 'make test' first" >&2; exit 2; }
if [ ! -x "$VENV/bin/placement-manage" ]; then
    python3 -m venv "$VENV" &&
        "$VENV/bin/pip" install --quiet "openstack-placement==$VERSION" gunicorn \
            > "$VENV/install.log" 2>&1 || { cat "$VENV/install.log" >&2; exit 2; }
fi
mkdir -p "$OUT"
work=$(mktemp -d)
server=""
stop() { [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; server=""; }
trap 'stop; rm -rf "$work"' EXIT

files=("$@")
[ ${#files[@]} -gt 0 ] || files=(gabbits/*.yaml)
failed=0
for file in "${files[@]}"; do
    name=$(basename "$file" .yaml)
    rm -f "$work/placement.sqlite"
    printf '[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = sqlite:///%s\n' \
        "$work/placement.sqlite" > "$work/placement.conf"
    "$VENV/bin/placement-manage" --config-file "$work/placement.conf" db sync > /dev/null 2>&1
    OS_PLACEMENT_CONFIG_DIR="$work" "$VENV/bin/gunicorn" -w 1 -t 120 -b "127.0.0.1:$PORT" \
        placement.wsgi.api:application > "$work/server.log" 2>&1 &
    server=$!
    for _ in $(seq 60); do
        curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
        sleep 0.5
    done
    # The environment tests/support/fixtures.py gives each file.
    for var in RP_UUID ALT_RP_UUID PARENT_PROVIDER_UUID ALT_PARENT_PROVIDER_UUID CONSUMER_UUID \
        ALT_CONSUMER_UUID PROJECT_ID ALT_PROJECT_ID USER_ID ALT_USER_ID AGGREGATE_UUID \
        ALT_AGGREGATE_UUID; do
        export "$var=$(python3 -c 'import uuid; print(uuid.uuid4())')"
    done
    export RP_NAME="rp-${RP_UUID:0:8}" ALT_RP_NAME="rp-${ALT_RP_UUID:0:8}"
    .venv/bin/python -c '
import sys, yaml
suite = yaml.safe_load(open(sys.argv[1]))
suite.pop("fixtures", None)
print(yaml.safe_dump(suite))' "$file" > "$work/suite.yaml"
    "$GABBI_RUN" "127.0.0.1:$PORT" < "$work/suite.yaml" > "$OUT/$name.txt" 2>&1
    status=$?
    stop
    summary=$(grep -E '^(Ran|OK|FAILED)' "$OUT/$name.txt" | tr '\n' ' ')
    echo "$name: $summary"
    [ $status -eq 0 ] || failed=$((failed + 1))
done
echo "$failed of ${#files[@]} files had failures against upstream $VERSION (details in $OUT/)"
