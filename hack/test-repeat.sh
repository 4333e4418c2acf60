#!/usr/bin/env bash
# test-repeat.sh: the flake rate of `make test` (issue 24, item 5). Clones
# the committed HEAD of this repository into a fresh folder (nothing of the
# working tree, no build output: what CI gets), then runs `make test` there
# RUNS times in a row with CI=true and no stdin, each run's output in
# OUT/run-N.log (the clusters' component logs in OUT/run-N/), and prints
# one line per run (exit status, minutes, failed tests) and a summary. Exit status 0 only if every run passed. The clone
# sits beside this repository (the shared test data is found there) and is
# removed at the end; Ctrl-C stops the run in progress, which tears its
# clusters down.
#
#   make test-repeat               # RUNS=3, OUT=_output/test-repeat
#   make test-repeat RUNS=5 OUT=/tmp/flakes
#
# The tools are shared with other clones (hack/tools.sh caches them by pin
# outside the clone); the Go build cache is the user's, so only the first
# run of a fresh machine builds cold. A run takes about 14 minutes on two
# cores once both are warm.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${RUNS:-3}"
out="${OUT:-_output/test-repeat}"
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
	echo "test-repeat: RUNS=$runs: want a positive number of runs" >&2
	exit 2
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
head="$(git rev-parse HEAD)"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
	echo "test-repeat: the working tree has uncommitted changes; the runs test the committed $head without them" >&2
fi
# Beside this repository: the tests find ../shared/testdata from the
# repository's root (internal/shareddata), as they do in CI.
clone="$(mktemp -d "$(dirname "$PWD")/installstrategy-test-repeat.XXXXXX")"
trap 'rm -rf "$clone"' EXIT
git clone --quiet --no-local . "$clone" # an empty folder: git takes it
git -C "$clone" checkout --quiet "$head"
echo "test-repeat: $runs runs of make test on a clean clone of $head (logs in $out)"

failed=0
summary="$out/summary.txt"
: >"$summary"
for i in $(seq 1 "$runs"); do
	log="$out/run-$i.log"
	start=$(date +%s)
	status=0
	(cd "$clone" && CI=true make test </dev/null) >"$log" 2>&1 || status=$?
	# What hack/test.sh keeps of the run (the clusters' component logs,
	# the output of shards b and c) goes with it: the clone does not last.
	rm -rf "$out/run-$i"
	mkdir -p "$out/run-$i"
	cp -r "$clone"/_output/*-logs "$clone"/_output/*.log "$out/run-$i/" 2>/dev/null || true
	rm -rf "$clone/_output"
	minutes=$(awk -v s="$(($(date +%s) - start))" 'BEGIN { printf "%.1f", s / 60 }')
	tests="$(grep -E '^\s*--- FAIL: ' "$log" | sed -E 's/^\s*--- FAIL: ([^ ]+).*/\1/' | sort -u | paste -sd, - || true)"
	line="run $i: exit $status in $minutes min${tests:+, failed: $tests}"
	echo "$line" | tee -a "$summary"
	if ((status != 0)); then
		failed=$((failed + 1))
	fi
done
echo "test-repeat: $((runs - failed)) of $runs runs passed at $head" | tee -a "$summary"
((failed == 0))
