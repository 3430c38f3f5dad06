#!/usr/bin/env bash
# Builds programs from a module pinned under hack/<name>/go.mod into a cache directory
# outside the clone, once per pinned version and go.sum, and prints the directory on its
# last line. hack/prometheus.sh, hack/helm.sh and hack/jaeger.sh call it.
#
#   gotool.sh NAME MODULE [-X LDFLAG]... PACKAGE...
#     NAME     the directory under hack/ holding go.mod, and the cache's sub-directory
#     MODULE   the pinned module whose version names the cache directory
#     -X VAR   a linker -X flag whose value is the module version (VAR=<version> is added)
#     PACKAGE  a main package to build; the program is named after its last path element
#
#   PROPAGATOR_<NAME>_DIR  where to put the programs
#                          (default: ${XDG_CACHE_HOME:-~/.cache}/propagator/<name>/<version>)
set -euo pipefail

name=$1 pinned=$2
shift 2
ldflags="-s -w"
while [ "${1:-}" = "-X" ]; do
  ldflags="$ldflags -X $2"
  shift 2
done
packages=("$@")
[ ${#packages[@]} -gt 0 ] || { echo "gotool: no package to build for $name" >&2; exit 2; }

module="$(cd "$(dirname "${BASH_SOURCE[0]}")/$name" && pwd)"
version=$(awk -v m="$pinned" '$1 == "require" && $2 == m {print $3}' "$module/go.mod")
[ -n "$version" ] || { echo "$name: cannot read the $pinned version from $module/go.mod" >&2; exit 1; }
ldflags=${ldflags//@VERSION@/$version}
override="PROPAGATOR_$(echo "$name" | tr '[:lower:]-' '[:upper:]_')_DIR"
dir=${!override:-${XDG_CACHE_HOME:-$HOME/.cache}/propagator/$name/$version}
stamp="$name=$version go.sum=$(sha256sum "$module/go.sum" | cut -c1-16)"
# A program of our own (hack/<name>/main.go) is built again when its source changes.
if [ -f "$module/main.go" ]; then
  stamp="$stamp main.go=$(sha256sum "$module/main.go" | cut -c1-16)"
fi

built() {
  [ -f "$dir/VERSIONS" ] && [ "$(cat "$dir/VERSIONS")" = "$stamp" ] || return 1
  for p in "${packages[@]}"; do [ -x "$dir/${p##*/}" ] || return 1; done
}
if built; then
  echo "$dir"
  exit 0
fi
echo "$name: building ${packages[*]##*/} $version into $dir (once)" >&2
mkdir -p "$dir"
(cd "$module" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$dir/" "${packages[@]}")
echo "$stamp" >"$dir/VERSIONS"
echo "$dir"
