#!/usr/bin/env bash
# hack/test.sh: the body of `make test`. It builds the control-plane tools
# and Flux's controllers (both cached), starts the local test clusters, runs
# the tests against them, and always tears the clusters down: on success, on failure and on Ctrl-C.
# After teardown it checks that no process of a cluster is left.
#
# `make test` runs in three shards at once, each on a cluster of its own
# (packages one at a time within a shard, -p 1, as before):
#   a  TEST_CLUSTER_STATE_DIR, with the real node: the packages that use
#      the real node or start clusters of their own (SHARD_A below), the
#      tests of ./test/e2e that use the real node (REAL_NODE_TESTS), then
#      `make test-extra` (fuzzing);
#   b  TEST_CLUSTER_STATE_DIR-b, no real node: the other tests of ./test/e2e;
#   c  TEST_CLUSTER_STATE_DIR-c, no real node: every other package.
# Shard a's output streams; b's and c's are kept in
# _output/test-shard-b.log and _output/test-shard-c.log and printed after
# a ends (then live). TEST_SHARDS=1, a GOTESTPKGS other than ./..., or
# TEST_TARGETS (soak, benchmarks) run everything on one cluster.
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

# SHARD_A: the packages of shard a (go list patterns) besides ./test/e2e's
# real-node tests; ./pkg/engine, ./hack/krew and ./pkg/loader even out the
# shards' times.
SHARD_A=(./test/cluster ./internal/deploy ./internal/localcluster/... ./pkg/engine ./hack/krew ./pkg/loader)
# REAL_NODE_TESTS: the tests of ./test/e2e that use the real node (run -run
# on shard a, -skip on shard b: each test runs once). A test that calls
# testenv's RealNode must have a name it matches (TestReal..., ...OnRealNode):
# on shard b it would fail, as there is no real node there.
REAL_NODE_TESTS='^(TestReal.*|Test.*OnRealNode)$'
GOTESTFLAGS="${GOTESTFLAGS:--count=1 -timeout=25m -p 1}"
export GOTESTFLAGS
shards="${TEST_SHARDS:-3}"
if [[ -n "${TEST_TARGETS:-}" || "${GOTESTPKGS:-./...}" != "./..." ]]; then
	shards=1
fi
if [[ "${shards}" != 1 && "${shards}" != 3 ]]; then
	log "TEST_SHARDS=${shards}: 1 or 3"
	exit 2
fi
shard_log() { printf '%s/_output/test-shard-%s.log' "${root}" "$1"; }

pids=()
states=("${state}")
((shards == 1)) || states+=("${state}-b" "${state}-c")
declare -A shard_pid=()
teardown() {
	local rc=$?
	trap - EXIT INT TERM
	local p
	for p in "${shard_pid[@]}"; do
		kill -- "-${p}" 2>/dev/null || kill -- "${p}" 2>/dev/null || true
		wait "${p}" 2>/dev/null || true
	done
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
# The other clusters start after the first (free ports are picked at
# start), without the real node (there is one per machine).
declare -A shard_env=()
if ((shards == 3)); then
	for x in b c; do
		log "starting the test cluster of shard ${x} in ${state}-${x} (no real node)"
		shard_env[${x}]="$("${localcluster}" up --state-dir "${state}-${x}" --real-node=false)"
	done
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
c_pkgs="$("${GO}" list ./... | grep -v -x -F -f <("${GO}" list ./test/e2e "${SHARD_A[@]}") | sed "s|^${module}|.|" | tr '\n' ' ')"
# A -run or -skip of GOTESTFLAGS and the split of ./test/e2e would
# override each other: then shard a runs all of ./test/e2e.
e2e_a=(-run "${REAL_NODE_TESTS}")
e2e_b=(-skip "${REAL_NODE_TESTS}")
if [[ " ${GOTESTFLAGS} " =~ [[:space:]]--?(test\.)?(run|skip)[[:space:]=] ]]; then
	e2e_a=()
	e2e_b=()
fi
log "clusters up after $(($(date +%s) - start))s; three shards (${GOTESTFLAGS}): b (log in $(shard_log b | sed "s|^${root}/||")) runs ./test/e2e ${e2e_b[*]}, c (log in $(shard_log c | sed "s|^${root}/||")) $(wc -w <<<"${c_pkgs}") packages"

# in_shard X CMD...: CMD in the background against shard X's cluster, in
# a process group of its own (teardown ends the whole group: make, go
# test and what the tests started), its output in its log.
in_shard() {
	local x="$1"
	shift
	(
		eval "${shard_env[${x}]}"
		export KUBECONFIG="${INSTALLSTRATEGY_TEST_KUBECONFIG}"
		echo "$*"
		exec setsid "$@"
	) >"$(shard_log "${x}")" 2>&1 </dev/null &
	shard_pid[${x}]=$!
}
# go test is called directly for ./test/e2e: make would expand the $ of
# the regexp.
if ((${#e2e_b[@]})); then
	# shellcheck disable=SC2086 # flags are words
	in_shard b "${GO}" test ${GOTESTFLAGS} "${e2e_b[@]}" ./test/e2e
else
	in_shard b true
fi
# shellcheck disable=SC2086 # packages are words
in_shard c make --no-print-directory test-go GOTESTPKGS="${c_pkgs}"

# Shard a runs all its steps even when one fails.
a_rc=0
# shellcheck disable=SC2086 # packages are words
make --no-print-directory test-go GOTESTPKGS="${SHARD_A[*]}" || a_rc=$?
echo "go test ${GOTESTFLAGS} ${e2e_a[*]} ./test/e2e"
# shellcheck disable=SC2086 # flags are words
"${GO}" test ${GOTESTFLAGS} "${e2e_a[@]}" ./test/e2e || a_rc=$?
make --no-print-directory test-extra || a_rc=$?
log "shard a done after $(($(date +%s) - start))s, exit ${a_rc}"
failed=$((a_rc != 0))
for x in b c; do
	log "shard ${x}'s output:"
	tail -n +1 -f --pid="${shard_pid[${x}]}" "$(shard_log "${x}")"
	rc=0
	wait "${shard_pid[${x}]}" || rc=$?
	unset "shard_pid[${x}]"
	log "shard ${x} done after $(($(date +%s) - start))s (or before), exit ${rc}"
	((rc == 0)) || failed=1
done
if ((failed)); then
	exit 2
fi
