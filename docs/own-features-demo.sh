#!/usr/bin/env bash
# placement-svc's own microversions (1.40-1.43) on a small cloud, with curl.
#
#   bash docs/own-features-demo.sh [URL]      (default http://127.0.0.1:8778)
#
# Run it against an empty placement-svc (make serve in a fresh directory):
# it creates the providers below with fixed uuids, then asks one query per
# feature and prints, for each candidate, which provider serves each group.
#
#   HOST_A  in aggregate AZ1            HOST_B  VCPU 8, in no aggregate
#   +-- NUMA0  VCPU 4
#   |   +-- FPGA0  CUSTOM_FPGA 1
#   +-- NUMA1  VCPU 4
#       +-- FPGA1  CUSTOM_FPGA 1
set -euo pipefail
URL="${1:-http://127.0.0.1:8778}"
AZ1=a2a2a2a2-0000-4000-8000-000000000001
declare -A UUID=(
    [HOST_A]=aaaaaaaa-0000-4000-8000-000000000000
    [NUMA0]=aaaaaaaa-0000-4000-8000-000000000001
    [NUMA1]=aaaaaaaa-0000-4000-8000-000000000002
    [FPGA0]=aaaaaaaa-0000-4000-8000-000000000003
    [FPGA1]=aaaaaaaa-0000-4000-8000-000000000004
    [HOST_B]=bbbbbbbb-0000-4000-8000-000000000000
)

api() {  # METHOD PATH [BODY]: the response body, failing on an HTTP error
    curl -sf -X "$1" "$URL$2" -H 'x-auth-token: admin' \
        -H 'OpenStack-API-Version: placement latest' -H 'Content-Type: application/json' \
        ${3:+-d "$3"}
}

provider() {  # NAME [PARENT]
    local parent=""
    [ -n "${2:-}" ] && parent=", \"parent_provider_uuid\": \"${UUID[$2]}\""
    api POST /resource_providers "{\"name\": \"$1\", \"uuid\": \"${UUID[$1]}\"$parent}" > /dev/null
}

inventory() {  # NAME CLASS TOTAL
    api PUT "/resource_providers/${UUID[$1]}/inventories" \
        "{\"resource_provider_generation\": 0, \"inventories\": {\"$2\": {\"total\": $3}}}" \
        > /dev/null
}

api PUT /resource_classes/CUSTOM_FPGA > /dev/null
provider HOST_A
provider NUMA0 HOST_A
provider NUMA1 HOST_A
provider FPGA0 NUMA0
provider FPGA1 NUMA1
provider HOST_B
inventory NUMA0 VCPU 4
inventory NUMA1 VCPU 4
inventory FPGA0 CUSTOM_FPGA 1
inventory FPGA1 CUSTOM_FPGA 1
inventory HOST_B VCPU 8
api PUT "/resource_providers/${UUID[HOST_A]}/aggregates" \
    "{\"resource_provider_generation\": 0, \"aggregates\": [\"$AZ1\"]}" > /dev/null

# Each candidate as "group=PROVIDER ...", the providers by name.
names=""
for name in "${!UUID[@]}"; do names+="${UUID[$name]}=$name "; done
show() {  # VERSION QUERY
    echo "\$ GET /allocation_candidates?$2   (placement $1)"
    curl -s "$URL/allocation_candidates?$2" -H 'x-auth-token: admin' \
        -H "OpenStack-API-Version: placement $1" | NAMES="$names" python3 -c '
import json, os, sys
names = dict(pair.split("=") for pair in os.environ["NAMES"].split())
body = json.load(sys.stdin)
if "errors" in body:
    print(body["errors"][0]["status"], body["errors"][0]["detail"].split("\n\n ", 1)[-1].strip())
for request in body.get("allocation_requests", []):
    parts = []
    for group, providers in sorted(request["mappings"].items()):
        parts.append((group or "unsuffixed") + "=" + "+".join(names[p] for p in providers))
    print("  " + "  ".join(parts))
'
}

show 1.40 "resources=VCPU:2&root_member_of=$AZ1"
show 1.40 "resources=VCPU:2&root_member_of=!$AZ1"
show 1.40 "resources_A=VCPU:2&resources_B=VCPU:2"
show 1.41 "resources_A=VCPU:2&resources_B=VCPU:2&root_member_of=$AZ1"
show 1.42 "resources_A=VCPU:2&resources_B=VCPU:2&isolate=_A,_B&root_member_of=$AZ1"
show 1.43 "resources_CPU=VCPU:2&resources_ACC=CUSTOM_FPGA:1&same_subtree=_CPU,!_ACC"
