#!/usr/bin/env bash
# kind end-to-end: for people with Docker (CI has none and does not run this).
#
#   hack/kind-e2e.sh            # or: make kind-e2e
#
# 1. creates (or reuses) a kind cluster,
# 2. resolves the base-image digests the Dockerfiles pin (they are placeholders in the repo,
#    see operator/Dockerfile) and builds both images,
# 3. loads them into the cluster, installs the chart with them,
# 4. applies examples/ into a fresh namespace, waits for every object to be Ready, creates
#    the example Run and waits for Succeeded=True,
# 5. runs the e2e suite (tests/e2e, when present) against the cluster.
#
# Needs: docker (with buildx), kind, kubectl, helm (the ones `make cluster-binaries` builds in
# ~/.cache/swarmkit-operator are used when not on PATH).
#
# Environment:
#   KIND_CLUSTER   cluster name (swarmkit-e2e)        KEEP_CLUSTER=0  delete it at the end
#   TAG            image tag (e2e)                    NAMESPACE       operator namespace
#   BUILD_BASE / RUN_BASE (operator), PYTHON_IMAGE / NODE_IMAGE (runtime): pinned bases,
#   resolved with imagetools if unset
set -euo pipefail

cd "$(dirname "$0")/.."
KIND_CLUSTER=${KIND_CLUSTER:-swarmkit-e2e}
TAG=${TAG:-e2e}
NAMESPACE=${NAMESPACE:-swarmkit-system}
KEEP_CLUSTER=${KEEP_CLUSTER:-1}
RELEASE=swarmkit
OPERATOR_IMAGE=ghcr.io/swarmkit-operator/swarmkit-operator
RUNTIME_IMAGE=ghcr.io/swarmkit-operator/swarmkit-runtime
WORKSPACE_NS=swarmkit-e2e-$(date +%s)

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'kind-e2e: %s\n' "$*" >&2; exit 1; }

tool() {  # tool NAME: a binary on PATH, else the one `make cluster-binaries` built
  local found
  if found=$(command -v "$1"); then echo "$found"; return; fi
  found=$(ls -1 "${HOME}"/.cache/swarmkit-operator/*/*/"$1" 2>/dev/null | tail -n 1 || true)
  [[ -n "$found" ]] || die "$1 not found: install it (https://kind.sigs.k8s.io for kind)"
  echo "$found"
}

command -v docker >/dev/null || die "docker not found; this script needs Docker (CI uses the process node instead)"
docker info >/dev/null 2>&1 || die "docker is installed but not running"
KIND=$(tool kind)
KUBECTL=$(tool kubectl)
HELM=$(tool helm)

digest_of() {  # digest_of IMAGE:TAG -> IMAGE:TAG@sha256:...
  local d
  d=$(docker buildx imagetools inspect "$1" --format '{{json .Manifest.Digest}}' | tr -d '"')
  [[ "$d" == sha256:* ]] || die "could not resolve the digest of $1"
  echo "$1@$d"
}

say "resolving pinned base images"
BUILD_BASE=${BUILD_BASE:-$(digest_of docker.io/library/python:3.11-slim-bookworm)}
RUN_BASE=${RUN_BASE:-$(digest_of gcr.io/distroless/python3-debian12:nonroot)}
echo "BUILD_BASE=$BUILD_BASE"
echo "RUN_BASE=$RUN_BASE"
echo "(pin these in operator/Dockerfile to make plain \`docker build\` work)"

say "building $OPERATOR_IMAGE:$TAG"
docker build -f operator/Dockerfile \
  --build-arg "BUILD_BASE=$BUILD_BASE" --build-arg "RUN_BASE=$RUN_BASE" \
  -t "$OPERATOR_IMAGE:$TAG" .

say "building $RUNTIME_IMAGE:$TAG"
[[ -f runtime_image/Dockerfile ]] || die "runtime_image/Dockerfile is missing"
# runtime_image/Dockerfile takes PYTHON_IMAGE (build and run stage) and NODE_IMAGE (node/npx
# for MCP servers); both are placeholders in the repo, so resolve them like the operator's.
runtime_args=(
  --build-arg "PYTHON_IMAGE=${PYTHON_IMAGE:-$(digest_of docker.io/library/python:3.11-slim-bookworm)}"
  --build-arg "NODE_IMAGE=${NODE_IMAGE:-$(digest_of docker.io/library/node:22-bookworm-slim)}"
)
docker build -f runtime_image/Dockerfile "${runtime_args[@]}" -t "$RUNTIME_IMAGE:$TAG" .

if "$KIND" get clusters | grep -qx "$KIND_CLUSTER"; then
  say "reusing kind cluster $KIND_CLUSTER"
else
  say "creating kind cluster $KIND_CLUSTER"
  "$KIND" create cluster --name "$KIND_CLUSTER" --wait 120s
fi
cleanup() {
  if [[ "$KEEP_CLUSTER" == 0 ]]; then "$KIND" delete cluster --name "$KIND_CLUSTER"; fi
}
trap cleanup EXIT
KUBECONFIG_FILE=$(mktemp)
"$KIND" get kubeconfig --name "$KIND_CLUSTER" >"$KUBECONFIG_FILE"
export KUBECONFIG=$KUBECONFIG_FILE
k() { "$KUBECTL" "$@"; }

say "loading images into the cluster"
"$KIND" load docker-image --name "$KIND_CLUSTER" "$OPERATOR_IMAGE:$TAG" "$RUNTIME_IMAGE:$TAG"

say "installing the chart"
start=$(date +%s)
"$HELM" upgrade --install "$RELEASE" charts/swarmkit-operator \
  --namespace "$NAMESPACE" --create-namespace \
  --set image.tag="$TAG" --set image.pullPolicy=Never --set runtimeImage.tag="$TAG" \
  --wait --timeout 5m
k -n "$NAMESPACE" rollout status "deployment/$RELEASE-swarmkit-operator" --timeout=180s

say "applying examples/ into namespace $WORKSPACE_NS"
k create namespace "$WORKSPACE_NS"
k -n "$WORKSPACE_NS" apply -f examples/00-workspace.yaml -f examples/10-skills.yaml \
  -f examples/20-agents.yaml -f examples/30-topology.yaml
for kind in workspaces skills agents topologies; do
  k -n "$WORKSPACE_NS" wait "$kind" --all --for=condition=Ready --timeout=180s
done
echo "all examples Ready $(( $(date +%s) - start ))s after the chart install began"

say "running the example Run"
k -n "$WORKSPACE_NS" create -f examples/40-run.yaml
k -n "$WORKSPACE_NS" wait run/review-demo --for=condition=Succeeded --timeout=300s
k -n "$WORKSPACE_NS" get runs
k -n "$WORKSPACE_NS" get run review-demo -o jsonpath='{.status.output}{"\n"}'

if [[ -d tests/e2e ]]; then
  say "running tests/e2e against the kind cluster"
  SWARMKIT_E2E_KUBECONFIG=$KUBECONFIG_FILE SWARMKIT_E2E_NAMESPACE=$NAMESPACE \
    .venv/bin/python -m pytest tests/e2e -q
fi

say "kind e2e passed (cluster $KIND_CLUSTER kept: KUBECONFIG=$KUBECONFIG_FILE; KEEP_CLUSTER=0 deletes it)"
