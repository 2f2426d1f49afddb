#!/usr/bin/env bash
# "No valid host": why GET /allocation_candidates is empty, asked with curl
# (1.44, placement-svc's own) and with placement-svc on the command line.
#
#   bash docs/explain-demo.sh [URL [SERVER_LOG [PLACEMENT_CONF]]]
#
# URL: an empty placement-svc (default http://127.0.0.1:8778); SERVER_LOG:
# the file its stderr goes to, to show its log line for the empty answer;
# PLACEMENT_CONF: its placement.conf, for `placement-svc explain`. The script
# creates the hosts below with fixed uuids, then prints each command it runs
# (as typed, then run as shown) and its output.
#
#   compute1  VCPU 16 (14 in use), MEMORY_MB 32768, HW_CPU_X86_AVX2
#   compute2  VCPU 8, MEMORY_MB 4096, HW_CPU_X86_AVX2
#   compute3  VCPU 32, MEMORY_MB 65536
#   compute4  VCPU 4, MEMORY_MB 2048
#
# The flavor asks for 4 VCPU, 8 GiB and AVX2: no host has all three.
set -euo pipefail
URL="${1:-http://127.0.0.1:8778}"
SERVER_LOG="${2:-}"
PLACEMENT_CONF="${3:-}"
HERE="$(cd "$(dirname "$0")" && pwd)"
PATH="$HERE/../.venv/bin:$PATH"  # placement-svc, from a checkout after make
declare -A UUID=(
    [compute1]=c0000001-0000-4000-8000-000000000001
    [compute2]=c0000002-0000-4000-8000-000000000002
    [compute3]=c0000003-0000-4000-8000-000000000003
    [compute4]=c0000004-0000-4000-8000-000000000004
)
INSTANCE=1a1a1a1a-0000-4000-8000-000000000001

api() {  # METHOD PATH [BODY]: the response body, failing on an HTTP error
    curl -sf -X "$1" "$URL$2" -H 'x-auth-token: admin' \
        -H 'OpenStack-API-Version: placement latest' -H 'Content-Type: application/json' \
        ${3:+-d "$3"}
}

host() {  # NAME VCPU MEMORY_MB [TRAIT]
    api POST /resource_providers "{\"name\": \"$1\", \"uuid\": \"${UUID[$1]}\"}" > /dev/null
    api PUT "/resource_providers/${UUID[$1]}/inventories" \
        "{\"resource_provider_generation\": 0, \"inventories\": {
            \"VCPU\": {\"total\": $2}, \"MEMORY_MB\": {\"total\": $3}}}" > /dev/null
    if [ -n "${4:-}" ]; then
        api PUT "/resource_providers/${UUID[$1]}/traits" \
            "{\"resource_provider_generation\": 1, \"traits\": [\"$4\"]}" > /dev/null
    fi
}

host compute1 16 32768 HW_CPU_X86_AVX2
host compute2 8 4096 HW_CPU_X86_AVX2
host compute3 32 65536
host compute4 4 2048
api PUT "/allocations/$INSTANCE" "{\"allocations\": {\"${UUID[compute1]}\":
    {\"resources\": {\"VCPU\": 14, \"MEMORY_MB\": 4096}}},
    \"project_id\": \"demo\", \"user_id\": \"demo\", \"consumer_generation\": null,
    \"consumer_type\": \"INSTANCE\"}" > /dev/null

shown() {  # COMMAND: print it as typed, then run it (eval: what is shown is what runs)
    printf '$ %s\n' "$1"
    eval "$1"
}

FLAVOR='resources=VCPU:4,MEMORY_MB:8192&required=HW_CPU_X86_AVX2'
HEADERS="-H 'x-auth-token: admin' -H 'OpenStack-API-Version: placement 1.44'"

# The answer nova gets: no candidate. The request id names it in the log.
answer=$(shown "curl -s '$URL/allocation_candidates?$FLAVOR' \\
    $HEADERS \\
    -w '\nx-openstack-request-id: %header{x-openstack-request-id}\n'")
echo "$answer"
request_id=$(sed -n 's/^x-openstack-request-id: //p' <<< "$answer")
if [ -n "$SERVER_LOG" ]; then
    echo
    shown "grep '$request_id' $SERVER_LOG"
fi

echo
shown "curl -s '$URL/allocation_candidates/explain?$FLAVOR' \\
    $HEADERS -H 'Accept: text/plain'"

echo
shown "curl -s '$URL/allocation_candidates/explain?$FLAVOR&near_misses=1' \\
    $HEADERS \\
    | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)[\"near_misses\"][0], indent=2))'"

# Without AVX2, where would the flavor go, and how many times?
echo
shown "curl -s '$URL/allocation_candidates/capacity?resources=VCPU:4,MEMORY_MB:8192' \\
    $HEADERS -H 'Accept: text/plain'"

if [ -n "$PLACEMENT_CONF" ]; then
    echo
    shown "placement-svc explain --config-file $PLACEMENT_CONF \\
    '$FLAVOR&near_misses=2'"
fi
