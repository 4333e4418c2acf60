#!/usr/bin/env bash
# make demo: the operator on a local cluster of its own. Builds what it needs
# (the control-plane binaries are cached by `make tools`), starts the cluster
# in _output/demo-cluster, installs the Installation CRD, runs the operator as
# a pod on the real node (image built without Docker; without a real node:
# as a local process, log in _output/demo-operator.log), installs the sample
# product at v1.0.0, upgrades it to v1.1.0 while `kubectl installstrategy
# status --watch` shows the rollout, prints what changed, and tears
# everything down on exit (success, failure or Ctrl-C). Ends with a short
# tour of the plugin on real KubeVirt strategies. Needs no stdin and no
# kubectl; works with CI=true.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin=$PWD/_output/bin
state=$PWD/_output/demo-cluster
oplog=$PWD/_output/demo-operator.log
ns=sample-demo
name=sample
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "build: control-plane tools (cached), operator, plugin, local cluster, demo client"
hack/tools.sh build >/dev/null
go build -o "$bin/" ./cmd/... ./hack/localcluster ./hack/images ./hack/deploy
go build -o "$bin/demo" ./hack/demo
start=$(date +%s)

operator_pid=""
cleanup() {
	status=$?
	trap - EXIT INT TERM
	if [[ -n "$operator_pid" ]] && kill -0 "$operator_pid" 2>/dev/null; then
		kill "$operator_pid" 2>/dev/null || true
		wait "$operator_pid" 2>/dev/null || true
	fi
	if [[ -e "$state/.localcluster" ]]; then
		"$bin/localcluster" down --state-dir "$state" >/dev/null 2>&1 || echo "demo: cluster teardown failed; run: $bin/localcluster down --state-dir $state" >&2
	fi
	if [[ $status -ne 0 ]]; then
		echo "demo: FAILED (exit $status); operator log: $oplog" >&2
		tail -20 "$oplog" >&2 2>/dev/null || true
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "start a local cluster (etcd, kube-apiserver, controllers, kwok with 3 fake nodes, a real node when root)"
"$bin/localcluster" up --state-dir "$state" --nodes 3 >/dev/null
kc=$state/kubeconfig
demo() { "$bin/demo" --kubeconfig "$kc" "$@"; }
plugin() { "$bin/kubectl-installstrategy" --kubeconfig "$kc" "$@"; }

if grep -q '"realNode"' "$state/state.json"; then
	# The operator as a pod: its image built without Docker, imported into
	# the real node, deployed as `make images deploy` does; its dump Jobs
	# run there too.
	img=localhost/installstrategy-operator:demo
	step "build the operator's and the sample product's images (no Docker); deploy the operator as a pod on the real node"
	run "$bin/images" --image "$img" --out "$PWD/_output/demo-images" --load-into "$state"
	"$bin/deploy" deploy --image "$img" --local-cluster "$state" --kubeconfig "$kc" | grep -v '^  '
	run demo pods installstrategy-system
else
	step "install the Installation CRD and start the operator (no real node: as a local process)"
	demo crd config/crd/bases/installstrategy.io_installations.yaml
	"$bin/installstrategy-operator" --kubeconfig "$kc" --metrics-bind-address 0 --health-probe-bind-address 0 >"$oplog" 2>&1 &
	operator_pid=$!
	echo "operator running (pid $operator_pid), log $oplog"
fi

real_node=""
if [[ -z "$operator_pid" ]]; then
	real_node=real-node
fi
step "install the sample product at v1.0.0${real_node:+ (its pods on the real node)}"
run demo create "$ns" "$name" v1.0.0 $real_node
run plugin status --watch -n "$ns" "$name" --timeout 3m
demo get "$ns"

if [[ -n "$real_node" ]]; then
	step "the product's admission webhook answers (sample-api, with the certificate the operator generated)"
	demo pods "$ns"
	run demo webhook "$ns"
fi

step "upgrade to v1.1.0 (handler DaemonSet canary first, api last, then prune)"
run demo set-version "$ns" "$name" v1.1.0
demo wait-target "$ns" "$name" v1.1.0
run plugin status --watch -n "$ns" "$name" --timeout 3m

step "kubectl get installations"
demo get "$ns"

step "what changed: the operator's Events"
demo events "$ns" "$name"

step "the stored strategy (older ones were garbage-collected)"
run plugin list -n "$ns"

if [[ -z "$operator_pid" ]]; then
	step "the operator pod, still on the real node"
	demo pods installstrategy-system
fi

elapsed=$(($(date +%s) - start))
step "operator demo done in ${elapsed}s (after the build)"

data=../shared/testdata/kubevirt
if [[ -d "$data" ]]; then
	step "the plugin on real KubeVirt strategies"
	run "$bin/kubectl-installstrategy" diff --summary "$data/kubevirt-v1.8.4.configmap.yaml" "$data/kubevirt-v1.9.0.configmap.yaml" | head -12 || true
	run "$bin/kubectl-installstrategy" verify "$data/kubevirt-v1.9.0.configmap.yaml" | tail -5
fi
