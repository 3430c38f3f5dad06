#!/usr/bin/env bash
# Builds the Kubernetes test binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok) from the Go modules pinned in hack/tools/go.mod into a cache
# directory outside the clone, and k8s-semantics (hack/tools/k8s-semantics: Kubernetes' own
# answers for quantities, selectors and taints, which the tests compare with ours). Does
# nothing when the cache already holds binaries built from the same sources. Prints the
# directory on its last line.
#
#   PROPAGATOR_TESTBIN_DIR  where to put the binaries
#                           (default: ${XDG_CACHE_HOME:-~/.cache}/propagator/testbin/<k8s-version>)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools="$here/tools"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)
packages=(
  go.etcd.io/etcd/server/v3
  k8s.io/kubernetes/cmd/kube-apiserver
  k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler
  k8s.io/kubernetes/cmd/kubectl
  sigs.k8s.io/kwok/cmd/kwok
)

module_version() { awk -v m="$1" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$tools/go.mod"; }
k8s_version=$(module_version k8s.io/kubernetes)
etcd_version=$(module_version go.etcd.io/etcd/server/v3)
kwok_version=$(module_version sigs.k8s.io/kwok)
[ -n "$k8s_version" ] || { echo "testbin: cannot read the k8s.io/kubernetes version from $tools/go.mod" >&2; exit 1; }

dir=${PROPAGATOR_TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/propagator/testbin/$k8s_version}
stamp="kubernetes=$k8s_version etcd=$etcd_version kwok=$kwok_version go.sum=$(sha256sum "$tools/go.sum" | cut -c1-16)"

up_to_date() {
  [ -f "$dir/VERSIONS" ] && [ "$(cat "$dir/VERSIONS")" = "$stamp" ] || return 1
  for b in "${binaries[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

# The oracle is small and changes apart from the Kubernetes binaries: built on its own.
oracle_stamp="go.sum=$(sha256sum "$tools/go.sum" | cut -c1-16) main.go=$(sha256sum "$tools/k8s-semantics/main.go" | cut -c1-16)"
build_oracle() {
  if [ -x "$dir/k8s-semantics" ] && [ "$(cat "$dir/k8s-semantics.VERSION" 2>/dev/null)" = "$oracle_stamp" ]; then
    return 0
  fi
  command -v go >/dev/null || { echo "testbin: the 'go' command is needed to build k8s-semantics" >&2; exit 1; }
  echo "testbin: building k8s-semantics ($oracle_stamp)" >&2
  (cd "$tools" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dir/k8s-semantics.tmp" ./k8s-semantics)
  mv -f "$dir/k8s-semantics.tmp" "$dir/k8s-semantics"
  echo "$oracle_stamp" > "$dir/k8s-semantics.VERSION"
}

if up_to_date; then
  echo "testbin: up to date ($stamp)" >&2
  build_oracle
  echo "$dir"
  exit 0
fi

command -v go >/dev/null || { echo "testbin: the 'go' command is needed to build the Kubernetes test binaries" >&2; exit 1; }
echo "testbin: building $stamp into $dir (first run only; takes a while on a small machine)" >&2
mkdir -p "$dir"
work=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
ldflags+=" -X sigs.k8s.io/kwok/pkg/consts.Version=$kwok_version"

start=$(date +%s)
(cd "$tools" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$work/" "${packages[@]}")
# go build names a binary after its import path's last element that is not a major version.
mv "$work/server" "$work/etcd"
for b in "${binaries[@]}"; do mv -f "$work/$b" "$dir/$b"; done
echo "$stamp" > "$dir/VERSIONS"
echo "testbin: built in $(( $(date +%s) - start ))s" >&2
build_oracle
echo "$dir"
