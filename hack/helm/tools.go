//go:build tools

// Package tools pins helm (built by hack/helm.sh for the chart tests: lint, template with
// the values schema, install onto the local hub).
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
