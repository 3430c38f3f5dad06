#!/usr/bin/env bash
# Builds Prometheus and promtool from the module pinned in hack/prometheus/go.mod into a
# cache directory outside the clone (once: about 5 minutes on two cores) and prints the
# directory on its last line. The canary analysis tests start a real Prometheus from it.
#
#   PROPAGATOR_PROMETHEUS_DIR  where to put the binaries
#                              (default: ${XDG_CACHE_HOME:-~/.cache}/propagator/prometheus/<version>)
set -euo pipefail

module="$(cd "$(dirname "${BASH_SOURCE[0]}")/prometheus" && pwd)"
version=$(awk '$1 == "require" && $2 == "github.com/prometheus/prometheus" {print $3}' "$module/go.mod")
[ -n "$version" ] || { echo "prometheus: cannot read the version from $module/go.mod" >&2; exit 1; }
dir=${PROPAGATOR_PROMETHEUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/propagator/prometheus/$version}
stamp="prometheus=$version go.sum=$(sha256sum "$module/go.sum" | cut -c1-16)"

if [ -f "$dir/VERSIONS" ] && [ "$(cat "$dir/VERSIONS")" = "$stamp" ] \
  && [ -x "$dir/prometheus" ] && [ -x "$dir/promtool" ]; then
  echo "$dir"
  exit 0
fi
echo "prometheus: building prometheus and promtool $version into $dir (once)" >&2
mkdir -p "$dir"
(
  cd "$module"
  GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dir/" \
    github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
)
echo "$stamp" >"$dir/VERSIONS"
echo "$dir"
