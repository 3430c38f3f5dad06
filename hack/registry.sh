#!/usr/bin/env bash
# Builds the chart tests' OCI registry (hack/registry/main.go over the registry in the
# go-containerregistry module pinned in hack/registry/go.mod; once) and prints its directory.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/gotool.sh" registry github.com/google/go-containerregistry \
  github.com/propagator/hack/registry
