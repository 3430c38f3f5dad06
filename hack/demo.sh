#!/usr/bin/env bash
# `make demo`: a local hub and three members, the CRDs, a fleet, the controller, and the
# applications of docs/examples propagated; then `kubectl get ap,mc -o wide`.
# Stays in the foreground: Ctrl-C (or `make demo-down` from another shell) stops everything.
#
#   hack/demo.sh up     start (the default)
#   hack/demo.sh down   stop the controller and the clusters
set -euo pipefail
cd "$(dirname "$0")/.."

STATE_DIR=${STATE_DIR:-$HOME/.local/state/propagator/demo}
PROPAGATOR=${PROPAGATOR:-.venv/bin/propagator}
TESTBIN=$(bash hack/testbin.sh | tail -1)
KUBECTL="$TESTBIN/kubectl --kubeconfig $STATE_DIR/kubeconfigs/hub.yaml"
PIDFILE=$STATE_DIR/controller.pid
LOG=$STATE_DIR/controller.log

down() {
  if [[ -f $PIDFILE ]]; then
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
  if [[ -d $STATE_DIR ]]; then
    "$PROPAGATOR" local down --state-dir "$STATE_DIR"
  fi
}

wait_for() {  # wait_for DESCRIPTION COMMAND...: retry for up to 5 minutes
  local what=$1; shift
  for _ in $(seq 600); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "demo: gave up waiting for $what; controller log: $LOG" >&2
  tail -20 "$LOG" >&2
  return 1
}

applied() {  # every ApplicationPropagation has Applied=True
  local out
  out=$($KUBECTL get ap -A -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Applied")].status}{"\n"}{end}')
  [[ -n $out ]] && ! grep -qv '=True$' <<<"$out"
}

up() {
  if [[ -f $STATE_DIR/state.json ]]; then
    echo "demo: already running (state in $STATE_DIR); make demo-down first" >&2
    exit 1
  fi
  "$PROPAGATOR" local up --state-dir "$STATE_DIR"
  trap 'echo; echo "demo: stopping"; down' EXIT
  $KUBECTL apply --server-side -f <("$PROPAGATOR" crds --admission-policy) >/dev/null
  wait_for "the CRDs" $KUBECTL wait --for condition=Established crd --all --timeout 60s
  local regions=(eu-west us-east ap-south) layers=(high-performance high-performance edge)
  for m in 1 2 3; do
    local canary=()  # member-1 is the canary cluster of docs/examples/app-canary.yaml
    [[ $m == 1 ]] && canary=(--label canary=true)
    "$PROPAGATOR" fleet join "member-$m" \
      --kubeconfig "$STATE_DIR/kubeconfigs/member-$m.yaml" \
      --hub-kubeconfig "$STATE_DIR/kubeconfigs/hub.yaml" \
      --fleet prod --label env=prod "${canary[@]}" --region "${regions[m-1]}" --layer "${layers[m-1]}"
  done
  PROPAGATOR_HUB_KUBECONFIG=$STATE_DIR/kubeconfigs/hub.yaml \
    PROPAGATOR_METRICS_PORT=${METRICS_PORT:-8080} PROPAGATOR_HEALTH_PORT=${HEALTH_PORT:-8081} \
    PROPAGATOR_PROBE_INTERVAL_S=2 \
    "$PROPAGATOR" run >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  echo "demo: controller started (log: $LOG, metrics: http://localhost:${METRICS_PORT:-8080}/metrics)"
  wait_for "3 Ready members" bash -c "[[ \$($KUBECTL get mc --no-headers | grep -c ' True ') == 3 ]]"
  $KUBECTL apply -f docs/examples/tenant-quota.yaml -f docs/examples/app-divided.yaml \
    -f docs/examples/app-canary.yaml
  wait_for "the applications to be applied" applied
  $KUBECTL get ap,mc -o wide -A
  echo
  echo "demo: running. export KUBECONFIG=$STATE_DIR/kubeconfigs/hub.yaml PATH=$TESTBIN:\$PATH"
  echo "demo: Ctrl-C or 'make demo-down' stops everything."
  wait "$(cat "$PIDFILE")" || true
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 [up|down]" >&2; exit 2 ;;
esac
