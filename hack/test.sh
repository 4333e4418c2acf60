#!/usr/bin/env bash
# hack/test.sh: the body of `make test`. It builds the control-plane tools
# and Flux's controllers (both cached), starts the local test clusters, runs
# the tests against them, and always tears the clusters down: on success, on failure and on Ctrl-C.
# After teardown it checks that no process of a cluster is left.
#
# `make test` runs in two shards at once, each on a cluster of its own
# (packages one at a time within a shard, -p 1, as before):
#   first   TEST_CLUSTER_STATE_DIR, with the real node: the packages that
#           use the real node or restart and reconfigure the cluster
#           (FIRST_SHARD below), then `make test-extra` (fuzzing);
#   second  TEST_CLUSTER_STATE_DIR-b, no real node: every other package.
# The first shard's output streams; the second's is kept in
# _output/test-second-shard.log and printed after the first ends (then
# live). TEST_SHARDS=1, a GOTESTPKGS other than ./..., or TEST_TARGETS
# (soak, benchmarks) run everything on one cluster.
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
# Flux's controllers for test/e2e's Flux test (cached per pin, hack/flux.sh).
FLUX_DIR="$(hack/flux.sh build)"
export FLUX_DIR
"${GO}" build -o "${localcluster}" ./hack/localcluster

# FIRST_SHARD: the packages of the first shard (go list patterns).
FIRST_SHARD=(./test/e2e ./test/cluster ./internal/deploy ./internal/localcluster/...)
shards="${TEST_SHARDS:-2}"
if [[ -n "${TEST_TARGETS:-}" || "${GOTESTPKGS:-./...}" != "./..." ]]; then
	shards=1
fi
second="${state}-b"
second_log="${root}/_output/test-second-shard.log"

pids=()
states=("${state}")
((shards == 1)) || states+=("${second}")
teardown() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n "${second_pid:-}" ]]; then
		kill -- "${second_pid}" 2>/dev/null || true
		wait "${second_pid}" 2>/dev/null || true
	fi
	local s logs
	for s in "${states[@]}"; do
		logs="${root}/_output/$(basename "${s}")-logs"
		if [[ -d "${s}/logs" ]]; then
			rm -rf "${logs}"
			cp -r "${s}/logs" "${logs}" || true
			log "component logs kept in ${logs#"${root}/"}"
		fi
		log "tearing down the test cluster in ${s}"
		if ! "${localcluster}" down --state-dir "${s}"; then
			log "teardown failed"
			rc=1
		fi
	done
	# A process is left when its status still reads as running after a
	# few seconds. Z (zombie) and X (dead, being reaped) are gone, as
	# localcluster down counts them, and so is a status that can no longer
	# be read: a zombie reaped between two looks (once a failed read of a
	# just-reaped kwok was taken for a process left behind).
	local left=() pid st tries
	for tries in 1 2 3 4 5 6 7 8 9 10; do
		left=()
		for pid in "${pids[@]}"; do
			st="$(grep '^State:' "/proc/${pid}/status" 2>/dev/null)" || continue
			[[ "${st}" =~ ^State:[[:space:]]*[ZX] ]] && continue
			left+=("${pid}")
		done
		((${#left[@]} == 0)) && break
		sleep 0.5
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
# The second cluster starts after the first (free ports are picked at
# start), without the real node (there is one per machine).
if ((shards == 2)); then
	log "starting the second test cluster in ${second} (no real node)"
	second_env="$("${localcluster}" up --state-dir "${second}" --real-node=false)"
fi
for s in "${states[@]}"; do
	for f in "${s}"/pids/*.pid; do pids+=("$(cat "${f}")"); done
done
eval "${env_lines}"
# Tests use INSTALLSTRATEGY_TEST_KUBECONFIG only; do not let the user's
# KUBECONFIG leak into anything else either.
export KUBECONFIG="${INSTALLSTRATEGY_TEST_KUBECONFIG}"
# TEST_TARGETS: what runs against the cluster (make soak runs soak-go,
# make bench-cluster the cluster benchmarks).
targets="${TEST_TARGETS:-test-go test-extra}"

if ((shards == 1)); then
	log "cluster up after $(($(date +%s) - start))s; running make ${targets} (${GOTESTFLAGS:-})"
	# shellcheck disable=SC2086 # targets are words
	make --no-print-directory ${targets}
	exit 0
fi

module="$("${GO}" list -m)"
second_pkgs="$("${GO}" list ./... | grep -v -x -F -f <("${GO}" list "${FIRST_SHARD[@]}") | sed "s|^${module}|.|" | tr '\n' ' ')"
log "clusters up after $(($(date +%s) - start))s; two shards (${GOTESTFLAGS:-}): the second (log in ${second_log#"${root}/"}) runs $(wc -w <<<"${second_pkgs}") packages"
(
	eval "${second_env}"
	export KUBECONFIG="${INSTALLSTRATEGY_TEST_KUBECONFIG}"
	# shellcheck disable=SC2086 # packages are words
	exec make --no-print-directory test-go GOTESTPKGS="${second_pkgs}"
) >"${second_log}" 2>&1 &
second_pid=$!

first_rc=0
# shellcheck disable=SC2086 # packages are words
make --no-print-directory test-go test-extra GOTESTPKGS="${FIRST_SHARD[*]}" || first_rc=$?
log "first shard done after $(($(date +%s) - start))s, exit ${first_rc}; the second shard's output:"
tail -n +1 -f --pid="${second_pid}" "${second_log}"
second_rc=0
wait "${second_pid}" || second_rc=$?
second_pid=""
log "second shard exit ${second_rc}"
if ((first_rc != 0 || second_rc != 0)); then
	exit 2
fi
