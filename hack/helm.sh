#!/usr/bin/env bash
# Builds helm from the module pinned in hack/helm/go.mod into a cache directory outside the
# clone (once: a few minutes on two cores) and prints the directory on its last line. The
# chart tests lint, render and install charts/propagator with it.
#
#   PROPAGATOR_HELM_DIR  where to put the binary
#                        (default: ${XDG_CACHE_HOME:-~/.cache}/propagator/helm/<version>)
set -euo pipefail

module="$(cd "$(dirname "${BASH_SOURCE[0]}")/helm" && pwd)"
version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v4" {print $3}' "$module/go.mod")
[ -n "$version" ] || { echo "helm: cannot read the version from $module/go.mod" >&2; exit 1; }
dir=${PROPAGATOR_HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/propagator/helm/$version}
stamp="helm=$version go.sum=$(sha256sum "$module/go.sum" | cut -c1-16)"

if [ -f "$dir/VERSIONS" ] && [ "$(cat "$dir/VERSIONS")" = "$stamp" ] && [ -x "$dir/helm" ]; then
  echo "$dir"
  exit 0
fi
echo "helm: building helm $version into $dir (once)" >&2
mkdir -p "$dir"
(
  cd "$module"
  go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
    -o "$dir/helm" helm.sh/helm/v4/cmd/helm
)
echo "$stamp" >"$dir/VERSIONS"
echo "$dir"
