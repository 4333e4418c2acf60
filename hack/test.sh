#!/usr/bin/env bash
# hack/test.sh: the body of `make test`. It builds the control-plane tools
# (cached), starts one local cluster in TEST_CLUSTER_STATE_DIR, runs
# `make test-go test-extra` against it, and always tears the cluster down:
# on success, on failure and on Ctrl-C. After teardown it checks that no
# process of the cluster is left.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

GO="${GO:-go}"
state="${TEST_CLUSTER_STATE_DIR:-${root}/_output/test-cluster}"
localcluster="${LOCALCLUSTER:-${root}/_output/bin/localcluster}"

log() { printf '[test] %s\n' "$*" >&2; }

start=$(date +%s)
TOOLS_DIR="$(hack/tools.sh build)"
export TOOLS_DIR
"${GO}" build -o "${localcluster}" ./hack/localcluster

pids=()
teardown() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -d "${state}/logs" ]]; then
		rm -rf "${root}/_output/test-cluster-logs"
		cp -r "${state}/logs" "${root}/_output/test-cluster-logs" || true
		log "component logs kept in _output/test-cluster-logs"
	fi
	log "tearing down the test cluster in ${state}"
	if ! "${localcluster}" down --state-dir "${state}"; then
		log "teardown failed"
		rc=1
	fi
	local left=()
	for pid in "${pids[@]}"; do
		if [[ -e /proc/${pid} ]] && ! grep -q '^State:.*Z' "/proc/${pid}/status" 2>/dev/null; then
			left+=("${pid}")
		fi
	done
	if ((${#left[@]})); then
		log "processes left behind after teardown: ${left[*]}"
		ps -o pid,cmd -p "$(IFS=,; echo "${left[*]}")" >&2 || true
		rc=1
	fi
	log "done in $(($(date +%s) - start))s, exit ${rc}"
	exit "${rc}"
}
trap teardown EXIT
trap 'log interrupted; exit 130' INT TERM

log "starting the test cluster in ${state}"
env_lines="$("${localcluster}" up --state-dir "${state}")"
eval "${env_lines}"
for f in "${state}"/pids/*.pid; do pids+=("$(cat "${f}")"); done
# Tests use INSTALLSTRATEGY_TEST_KUBECONFIG only; do not let the user's
# KUBECONFIG leak into anything else either.
export KUBECONFIG="${INSTALLSTRATEGY_TEST_KUBECONFIG}"
# TEST_TARGETS: what runs against the cluster (make soak runs soak-go,
# make bench-cluster the cluster benchmarks).
targets="${TEST_TARGETS:-test-go test-extra}"
log "cluster up after $(($(date +%s) - start))s; running make ${targets} (${GOTESTFLAGS:-})"

# shellcheck disable=SC2086 # targets are words
make --no-print-directory ${targets}
