#!/usr/bin/env bash
# Builds chartrender (hack/chartrender/main.go: one chart rendered for many clusters in one
# process, with the Helm packages pinned in hack/chartrender/go.mod; once) and prints its
# directory. The controller's render worker runs it (PROPAGATOR_CHART_RENDERER).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/gotool.sh" chartrender helm.sh/helm/v4 \
  github.com/propagator/hack/chartrender
