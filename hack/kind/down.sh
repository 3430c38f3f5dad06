#!/usr/bin/env bash
# Delete the kind clusters that hack/kind/up.sh created, and their kubeconfigs.
set -euo pipefail
dir=${1:-${XDG_STATE_HOME:-$HOME/.local/state}/propagator/kind}
for cluster in $(kind get clusters 2>/dev/null | grep '^propagator-' || true); do
  kind delete cluster --name "$cluster"
done
rm -rf "$dir"
