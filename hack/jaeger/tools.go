//go:build tools

// Package tools pins Jaeger (built by hack/jaeger.sh for the tracing tests: it accepts OTLP
// from a live controller and answers trace queries).
package tools

import (
	_ "github.com/jaegertracing/jaeger/cmd/jaeger"
)
