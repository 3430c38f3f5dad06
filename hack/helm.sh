#!/usr/bin/env bash
# Builds helm from the module pinned in hack/helm/go.mod (once: a few minutes on two cores)
# and prints its directory. The chart tests lint, render and install charts/propagator with it.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/gotool.sh" helm helm.sh/helm/v4 \
  -X helm.sh/helm/v4/internal/version.version=@VERSION@ helm.sh/helm/v4/cmd/helm
