#!/usr/bin/env bash
# Fetches the Gateway API's standard CRDs from the pinned Go module (through the Go module
# proxy, into the Go module cache: outside the clone, once) and prints their directory.
# The canary tests install HTTPRoute from it on a member.
set -euo pipefail
GATEWAY_API_VERSION=v1.6.3
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/tools" && go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
echo "$dir/config/crd/standard"
