#!/usr/bin/env bash
# A hub and N member clusters in kind, for users with Docker (the project's own tests use
# `propagator local`, which needs no Docker). Kubeconfigs go to $DIR/<name>.yaml; the
# members are joined to the hub's fleet "kind" once the CRDs are installed.
#
#   hack/kind/up.sh [MEMBERS] [DIR]      (default: 3 members, ~/.local/state/propagator/kind)
#   hack/kind/down.sh [DIR]
set -euo pipefail

members=${1:-3}
dir=${2:-${XDG_STATE_HOME:-$HOME/.local/state}/propagator/kind}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
propagator=${PROPAGATOR:-$here/.venv/bin/propagator}

for tool in kind kubectl docker; do
  command -v "$tool" >/dev/null || { echo "kind/up: '$tool' is needed" >&2; exit 1; }
done
[ -x "$propagator" ] || { echo "kind/up: run 'make install' first ($propagator)" >&2; exit 1; }
mkdir -p "$dir"

create() {  # name
  if kind get clusters 2>/dev/null | grep -qx "propagator-$1"; then
    echo "kind/up: propagator-$1 exists, reusing it"
  else
    kind create cluster --name "propagator-$1" --kubeconfig "$dir/$1.yaml" --wait 120s
  fi
  kind get kubeconfig --name "propagator-$1" > "$dir/$1.yaml"
}

create hub
for i in $(seq 1 "$members"); do create "member-$i"; done

export KUBECONFIG=$dir/hub.yaml
"$propagator" crds | kubectl apply -f -
kubectl wait --for condition=Established crd --all --timeout 60s
regions=(eu-west us-east ap-south)
for i in $(seq 1 "$members"); do
  # The controller runs on this host, so the members' host-side addresses work as they are.
  "$propagator" fleet join "member-$i" --kubeconfig "$dir/member-$i.yaml" --fleet kind \
    --label env=kind --region "${regions[$(( (i - 1) % 3 ))]}" \
    --layer "$([ "$i" -eq "$members" ] && echo edge || echo core)"
done
echo
echo "Hub and $members members are up. Next:"
echo "  export KUBECONFIG=$dir/hub.yaml"
echo "  $propagator run"
