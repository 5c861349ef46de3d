# swarmkit-operator developer entry points. `make test` is THE test command (CI runs it).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Two install levels in one venv: RUN_STAMP is what the local cluster, the operator and
# `make demo` need (a newcomer's first command installs nothing of the test tool chain);
# STAMP adds the test, lint and docs packages and the test tools (Chromium, botocore, checkov).
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help venv lint generate verify docs test test-unit test-integration cluster-binaries clients harness-clis node \
	node-apt node-binaries test-real-node \
        cluster-up cluster-down operator-up operator-down demo bench-reconcile bench-runs \
        bench-runner bench-funnel bench-tracing bench-providers bench-import bench-gateway bench-review bench-promotion bench-spend bench-serve bench-webview bench-clients bench-images bench-ab bench chaos chart-lint \
        test-helm kind-e2e clean chromium botocore checkov images images-if-built jaeger web-auth

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# The product distribution (pyproject.toml) and, beside it, the dev-only one (hack/: the local
# cluster, the image builds, the generators; hack/pyproject.toml), both editable.
$(RUN_STAMP): pyproject.toml hack/pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11+"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[operator,runtime,tracing,cli]' -e ./hack
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(PY) -m pip install --quiet -e '.[operator,runtime,tracing,cli,test,dev,docs]' -e ./hack
	$(MAKE) --no-print-directory chromium botocore checkov
	touch $(STAMP)

# The Bedrock tests check the runner's SigV4 signatures with botocore's own signer and its
# request bodies with botocore's bedrock-runtime service model. botocore needs
# python-dateutil<3 and kubernetes>=37 needs >=3, so it lives outside .venv, in its own
# directory (tests/support/aws.py runs it there).
BOTOCORE_VERSION := 1.44.8
BOTOCORE_DIR := $(HOME)/.cache/swarmkit-operator/botocore-$(BOTOCORE_VERSION)
botocore:
	@test -d $(BOTOCORE_DIR)/botocore || \
	    $(PY) -m pip install --quiet --no-warn-conflicts --target $(BOTOCORE_DIR) botocore==$(BOTOCORE_VERSION)

# tests/unit/operator_runs/test_checkov.py scans the chart and the operator's objects with
# checkov. Its pins (packaging<24, boto3==1.35.49, networkx<2.7) conflict with the
# project's, so it gets its own virtualenv in the shared cache (flock: other worktrees may
# be installing it at the same moment).
CHECKOV_VERSION := 3.3.30
CHECKOV_DIR := $(HOME)/.cache/swarmkit-operator/checkov-$(CHECKOV_VERSION)
checkov:
	@mkdir -p $(HOME)/.cache/swarmkit-operator/locks
	@flock $(HOME)/.cache/swarmkit-operator/locks/checkov.lock sh -c '\
	    test -f $(CHECKOV_DIR)/.installed || { rm -rf $(CHECKOV_DIR) && \
	    $(PYTHON) -m venv $(CHECKOV_DIR) && \
	    $(CHECKOV_DIR)/bin/pip install --quiet checkov==$(CHECKOV_VERSION) && \
	    touch $(CHECKOV_DIR)/.installed; }'

# The web view's browser tests drive Debian's chromium with Playwright (Playwright's own
# browser download is not used). Installed with apt-get when missing (as root).
chromium:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "warning: chromium missing; the browser tests need it (apt-get install chromium chromium-driver)"; fi

venv: $(STAMP) ## create .venv and install every Python dependency

lint: $(STAMP) ## ruff, mypy --strict, import-linter, function length, dead code (hack/lint)
	$(VENV)/bin/ruff check operator runtime_image hack tests bench
	$(VENV)/bin/ruff format --check operator runtime_image hack tests bench
	$(VENV)/bin/mypy operator/swarmkit_api operator/swarmkit_operator operator/swarmkit_cli runtime_image/swarmkit_runner hack/swarmkit_devcluster hack/swarmkit_codegen
	$(VENV)/bin/lint-imports
	$(PY) hack/lint/function_length.py
	$(PY) hack/lint/dead_code.py

# The generators are dev-only (hack/swarmkit_codegen, never in an image).
generate: $(STAMP) ## write every generated file (CRDs, chart templates, values schema, docs reference)
	$(PY) -m swarmkit_codegen.crdgen --out .
	$(PY) -m swarmkit_codegen.docgen --out .

verify: $(STAMP) ## regenerate into a temp dir and fail on any difference
	$(PY) -m swarmkit_codegen.crdgen --verify .
	$(PY) -m swarmkit_codegen.docgen --verify .

# The documentation site: broken links, missing pages and nav entries are errors (--strict).
# Built into site/ (ignored by git); tests/unit/test_docs_site.py opens it in Chromium.
docs: $(STAMP) ## build the docs site (MkDocs + Material, strict) into site/
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir site

cluster-binaries: $(RUN_STAMP) ## build (once, cached) etcd, kube-apiserver, controller-manager, scheduler, kubectl, helm
	$(PY) -m swarmkit_devcluster build

# The third-party SDK clients the suite drives against serve, the gateway and the remote agent
# skill: the A2A Go SDK's client (hack/a2a-go-client, built from the Go module proxy) and the
# npm packages of hack/node-clients (A2A JavaScript SDK 1.x and 0.3, TypeScript MCP SDK).
# Cached under ~/.cache/swarmkit-operator keyed by their inputs: a no-op once there.
clients: $(STAMP) node ## build/install (once, cached) the third-party A2A/MCP SDK clients the tests drive
	$(PY) -m swarmkit_devcluster clients

# The coding harness CLIs harness nodes run (Claude Code, ...), pinned in hack/harness-clis
# (package.json + package-lock.json, the versions of swarmkit_api.harness.HARNESSES): npm ci
# into ~/.cache/swarmkit-operator/harness-clis/<lock hash>/ once (a no-op when cached).
harness-clis: $(STAMP) node ## install (once, cached) the pinned harness CLIs the harness tests run
	$(PY) -m swarmkit_devcluster harness-clis

# The tracing tests and `make demo TRACING=1` export to a real Jaeger v2, built from the Go
# module proxy (hack/jaeger: go.mod/go.sum committed) into
# ~/.cache/swarmkit-operator/jaeger-<version>/jaeger once (locked; a no-op when cached).
jaeger: $(STAMP) ## build (once, cached) Jaeger v2 from Go modules for the tracing tests
	$(PY) -m swarmkit_devcluster jaeger

# The per-user web view signs people in through a real oauth2-proxy (the chart's proxy) and a
# real OIDC provider (mockoidc's server in a small command), both built from the Go module
# proxy (hack/oauth2-proxy, hack/mockoidc: go.mod/go.sum committed) into
# ~/.cache/swarmkit-operator/{oauth2-proxy,mockoidc}/<version>/ once (a no-op when cached).
web-auth: $(RUN_STAMP) ## build (once, cached) oauth2-proxy and an OIDC provider for the web view tests
	$(PY) -m swarmkit_devcluster build --web-auth

# Node.js + npm for those clients; installed with apt-get when missing (as root).
node:
	@if command -v node >/dev/null && command -v npm >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing nodejs and npm (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	else echo "warning: node/npm missing; the third-party SDK tests need them (apt-get install nodejs npm)"; fi

# The real node (issue 38, opt-in): kubelet, kube-proxy, containerd, runc (cgo + seccomp),
# CNI plugins and kube-router (firewall only), each from a wrapper module under hack/ with a
# committed go.mod/go.sum, cached in ~/.cache/swarmkit-operator like the control plane.
# The host packages it needs come from apt-get when missing (as root).
NODE_APT := iptables ipset conntrack libseccomp-dev busybox-static
node-apt:
	@missing=$$(for p in $(NODE_APT); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $$missing (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "error: the real node needs $$missing (apt-get install $$missing, as root)"; exit 1; fi

node-binaries: $(RUN_STAMP) node-apt ## build (once, cached) the real node: kubelet, kube-proxy, containerd, runc, CNI, kube-router
	$(PY) -m swarmkit_devcluster build --node

# REAL_NODE=1 make cluster-up: the real node too (root; one per machine, queued by a lock).
REAL_NODE_PREREQ := $(if $(filter 1,$(REAL_NODE)),node-binaries images)
cluster-up: cluster-binaries $(REAL_NODE_PREREQ) ## start the local control plane + process node (REAL_NODE=1: + the real node) (idempotent)
	$(PY) -m swarmkit_devcluster up

cluster-down: $(RUN_STAMP) ## stop the operator, the control plane and the process node; remove state
	$(PY) -m swarmkit_devcluster down

operator-up: cluster-up ## install CRDs and run the operator in the background (.cluster/operator.log)
	$(PY) -m swarmkit_devcluster operator-up

operator-down: $(RUN_STAMP) ## stop the background operator
	$(PY) -m swarmkit_devcluster operator-down

test-unit: clients harness-clis jaeger
	$(PY) -m pytest tests/unit -q

test-integration: $(STAMP) cluster-binaries clients harness-clis jaeger web-auth
	$(PY) -m pytest tests/integration -q -m 'not real_node'

# The tests where a kernel boundary is the point, on a private cluster with the real node (root;
# one real node per machine: a second cluster waits for the machine's lock). Part of `make test`.
REAL_NODE_PYTEST := REAL_NODE=1 $(PY) -m pytest tests -q -p no:cacheprovider -m real_node
test-real-node: $(STAMP) cluster-binaries node-binaries images ## the real-node tests (kubelet + containerd; root)
	$(REAL_NODE_PYTEST)

# The runtime and operator images, built for real without a Docker daemon (buildah + debootstrap
# from Debian's packages, installed when missing; needs root). Cached under
# ~/.cache/swarmkit-operator/images: a second run with unchanged inputs is a few seconds.
images: $(RUN_STAMP) ## build both images (buildah, no daemon) into the process node's image store
	$(PY) -m swarmkit_devcluster images

# Rebuild only images that were built before and whose inputs changed (never a cold build).
images-if-built: $(RUN_STAMP)
	$(PY) -m swarmkit_devcluster images --if-built

# make test builds both images when they are missing or stale (a cold build is ~3 min as
# root; cached after), so the image tests run everywhere and the suite skips nothing.
# It prints how long the steps before pytest took, then pytest's 20 slowest tests and its own
# total (the closing line stays pytest's, which CI reads): a change that slows the suite shows.
# The real-node tests run first, in their own session (a private cluster with the real node,
# taken under the machine's lock), then everything else on the process node, whatever the
# first session's outcome; the closing line stays the second pytest's, and make fails if
# either failed.
test: $(STAMP) ## lint + verify + docs + the whole test suite (prints the 20 slowest tests and the times)
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory lint verify docs cluster-binaries clients harness-clis jaeger web-auth images node-binaries; \
	echo "make test: lint, verify, docs and the builds took $$(( $$(date +%s) - start )) s; pytest follows"
	@start=$$(date +%s); rn=0; $(REAL_NODE_PYTEST) || rn=$$?; \
	echo "make test: the real-node tests took $$(( $$(date +%s) - start )) s (exit $$rn)"; \
	$(PY) -m pytest tests -q -p no:cacheprovider --durations=20 --durations-min=1 -m 'not real_node' \
	&& exit $$rn

# `make demo` runs its Run on the real node (kubelet + containerd, the runtime image) where the
# machine can run one: as root. REAL_NODE=0 keeps it on the process node (no node build, no lock);
# a non-root user gets the process node. The choice is made here, before `cluster-up`'s
# prerequisites are read, so the real node's builds come only when it is used.
DEMO_REAL_NODE := $(if $(REAL_NODE),$(REAL_NODE),$(if $(filter 0,$(shell id -u)),1,0))
demo: $(RUN_STAMP) ## the whole thing: cluster (as root with the real node), operator, examples, one Run, its output (TRACING=1: + Jaeger, the trace)
	@$(MAKE) --no-print-directory REAL_NODE=$(DEMO_REAL_NODE) operator-up
	REAL_NODE=$(DEMO_REAL_NODE) $(PY) -m swarmkit_devcluster demo

bench-reconcile: $(STAMP) cluster-binaries ## benchmark: reconcile 1,000 skills / 200 agents / 20 topologies
	$(PY) bench/bench_reconcile.py

bench-runs: $(STAMP) cluster-binaries ## benchmark: operator overhead (runner stand-in) vs the real runner, cold start; 3 runs each
	$(PY) bench/bench_runs.py

bench: $(STAMP) cluster-binaries ## scale benchmarks: reconcile 1k/5k/20k skills, fan-out, restart, 500 Runs; one table, bench/results.json
	$(PY) bench/bench.py

# Issue 43's figures: 5,000 and 20,000 Skills, 3 repeats each (~1 h on 2 cores), recorded
# into bench/results/bench-scale.json (then `make generate` renders the performance page).
SCALE_SIZES ?= 5000,20000
SCALE_REPEAT ?= 3
bench-scale: $(STAMP) cluster-binaries ## benchmark: reconcile at 5k and 20k skills, goals as ratios to their floors; recorded
	$(PY) bench/record.py --json-file .bench-scale.json bench-scale -- \
	    $(PY) bench/bench_scale.py --sizes $(SCALE_SIZES) --repeat $(SCALE_REPEAT) --json .bench-scale.json

chaos: $(STAMP) cluster-binaries jaeger ## the reliability suite at full size (SWARMKIT_CHAOS=full; figures in chaos-report.json)
	SWARMKIT_CHAOS=full SWARMKIT_CHAOS_REPORT=$(CURDIR)/chaos-report.json \
	    $(PY) -m pytest tests/chaos -q -p no:cacheprovider -s

bench-review: $(STAMP) cluster-binaries ## benchmark: review decision → resumed run latency
	$(PY) bench/bench_review.py

bench-promotion: $(STAMP) cluster-binaries ## benchmark: spec change -> promoted (20 cases); an EvalRun's overhead per case against the same Runs by hand
	$(PY) bench/bench_promotion.py

bench-spend: $(STAMP) cluster-binaries ## benchmark: SpendQuota reservation on Run start, concurrent Runs vs a quota
	$(PY) bench/bench_spend.py

bench-runner: $(STAMP) ## benchmark: runner cold start, level-1 catalog cost, MCP overhead
	$(PY) bench/bench_runner.py

bench-funnel: $(STAMP) ## benchmark: funnel gate overhead per gated artifact (validate, judge)
	$(PY) bench/bench_funnel.py

bench-providers: $(STAMP) ## benchmark: runner overhead per model call (whole, streamed), time to first token
	$(PY) bench/bench_providers.py

bench-serve: $(STAMP) ## benchmark: served A2A task overhead over in-process, tasks/s per replica
	$(PY) bench/bench_serve.py

bench-tracing: $(STAMP) jaeger ## benchmark: runner cold start and per-span cost, tracing off vs on (real Jaeger)
	$(PY) bench/bench_tracing.py

bench-import: $(STAMP) ## benchmark: kubectl swarmkit import (fixture tree, 1,644-file workspace)
	$(PY) bench/bench_import.py

bench-gateway: $(STAMP) ## benchmark: MCP gateway call overhead over a direct upstream call
	$(PY) bench/bench_gateway.py

bench-webview: $(STAMP) ## benchmark: web view render time for 1,000 skills
	$(PY) bench/bench_webview.py

bench-clients: $(STAMP) node ## benchmark: make clients cold (empty Go/npm caches) and warm
	$(PY) bench/bench_clients.py

bench-images: $(STAMP) ## benchmark: make images cold (scratch store, as root) and warm
	$(PY) bench/bench_images.py

# The runtime change's A/B (docs/design/operator-runtime.md): the code before it against it.
AB_A ?= f610011
AB_B ?= 3886b86
bench-ab: $(STAMP) cluster-binaries ## benchmark: the operator at two revisions (AB_A, AB_B), alternating, N = 1,000
	$(PY) bench/bench_ab.py --a $(AB_A) --b $(AB_B)

chart-lint: $(STAMP) cluster-binaries ## helm lint/template, values schema, Argo CD health Lua, Dockerfile checks
	$(PY) -m pytest tests/unit/test_chart_render.py tests/unit/test_chart_values.py \
	    tests/unit/test_argocd_health.py tests/unit/test_chart_images.py -q

test-helm: $(STAMP) cluster-binaries ## the chart on the real control plane: dry-run, RBAC, GitOps, install
	$(PY) -m pytest tests/integration/test_helm_dryrun.py tests/integration/test_helm_rbac.py \
	    tests/integration/test_helm_gitops.py tests/integration/test_helm_install.py -q

kind-e2e: ## with Docker + kind: build both images, install the chart, run the examples (not in CI)
	hack/kind-e2e.sh

clean: ## remove the venv and caches (the Kubernetes binary cache in ~/.cache stays)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
