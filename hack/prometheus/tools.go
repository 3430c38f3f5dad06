//go:build tools

// Package tools pins Prometheus and promtool (built by hack/prometheus.sh for the tests
// that need a real Prometheus server, and for `promtool check rules`).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
