# Propagator developer commands. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STATE_DIR ?= $(HOME)/.local/state/propagator/local

.PHONY: install crds reference docs testbin prometheus helm faketime jaeger registry chartrender lint typecheck unit e2e test bench local-up local-down demo demo-down clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok
# from hack/tools/go.mod into ~/.cache/propagator/testbin/<k8s-version> (once).
testbin:
	bash hack/testbin.sh

# Prometheus and promtool from hack/prometheus/go.mod (the canary analysis, dashboard and
# alert tests), into ~/.cache/propagator/prometheus/<version> (once).
prometheus:
	bash hack/prometheus.sh

# helm from hack/helm/go.mod (the chart tests).
helm:
	bash hack/helm.sh

# The chart tests' OCI registry from hack/registry/ (go-containerregistry's, pinned).
registry:
	bash hack/registry.sh

# The chart renderer the controller runs (hack/chartrender/: Helm's packages, pinned).
chartrender:
	bash hack/chartrender.sh

# libfaketime from Debian's package (the shard tests' skewed clocks).
faketime:
	bash hack/faketime.sh

# Jaeger from hack/jaeger/go.mod (the OTLP tracing test).
jaeger:
	bash hack/jaeger.sh

# Regenerate charts/propagator/crds/ from the models in api/ (a unit test fails on drift),
# and the chart's values.schema.json and dashboards.
crds: install
	$(VENV)/bin/propagator crds --output-dir charts/propagator/crds
	$(VENV)/bin/propagator chart --output-dir charts/propagator --agent-output-dir charts/propagator-agent

# Regenerate docs/reference/ (resources, settings, metrics, commands) from the code (a unit
# test fails on drift).
reference: install
	$(VENV)/bin/propagator reference --output-dir docs/reference

# The documentation site (mkdocs.yml) into site/; --strict: a broken link fails it.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: install
	$(PY) -m mypy

unit: install testbin
	$(PY) -m pytest tests --ignore=tests/e2e

e2e: install testbin prometheus helm jaeger registry chartrender faketime
	$(PY) -m pytest tests/e2e

test: lint typecheck unit docs e2e

# bench.fanout, bench.propagation, bench.scale and bench.failover start local clusters
# (bench.failover waits out the default 300 s toleration; bench.scale with
# 100, 300 and 1,000 far members takes the longest; --clusters 100,300 for a shorter run;
# then again at 1,000 with each far member used only in its own namespace). Each run is
# recorded in bench/results/ and docs/benchmarks.md written from them (bench.pages).
bench: install testbin helm registry chartrender
	$(PY) -m bench.calls --record
	$(PY) -m bench.snapshot --record
	$(PY) -m bench.scheduler --record
	$(PY) -m bench.health --record
	$(PY) -m bench.fanout --record
	$(PY) -m bench.propagation --record
	$(PY) -m bench.scale --record
	$(PY) -m bench.scale --clusters 1000 --limited --record
	$(PY) -m bench.scale --clusters 1000 --pull --record
	$(PY) -m bench.pull --record
	$(PY) -m bench.pairs --record
	$(PY) -m bench.failover --record
	$(PY) -m bench.canary --record
	$(PY) -m bench.waves --record
	$(PY) -m bench.charts --fleet --record
	$(PY) -m bench.tenancy --record
	$(PY) -m bench.pages

local-up: install testbin
	$(VENV)/bin/propagator local up --state-dir $(STATE_DIR)

# A hub, three members, the CRDs, a fleet, the controller and docs/examples propagated;
# stays in the foreground (Ctrl-C or `make demo-down` stops everything).
demo: install testbin
	bash hack/demo.sh up

demo-down: install
	bash hack/demo.sh down

local-down: install
	$(VENV)/bin/propagator local down --state-dir $(STATE_DIR)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
