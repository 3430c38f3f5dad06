#!/usr/bin/env bash
# Builds Jaeger (v2: an OpenTelemetry Collector distribution that accepts OTLP and answers
# trace queries) from the module pinned in hack/jaeger/go.mod (once: about 10 minutes on
# two cores) and prints its directory. The tracing test sends a live controller's spans to it.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/gotool.sh" jaeger github.com/jaegertracing/jaeger \
  github.com/jaegertracing/jaeger/cmd/jaeger
