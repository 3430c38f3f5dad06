#!/usr/bin/env bash
# Builds Prometheus and promtool from the module pinned in hack/prometheus/go.mod (once:
# about 5 minutes on two cores) and prints their directory. The canary analysis and
# dashboard tests start a real Prometheus from it; the alert tests run promtool.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/gotool.sh" prometheus github.com/prometheus/prometheus \
  github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
