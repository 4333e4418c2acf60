#!/usr/bin/env bash
# A tour of kubectl-installstrategy on the real KubeVirt strategies. The full
# demo (local cluster, operator, install and upgrade of the sample product)
# comes with the operator; this part needs no cluster.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=_output/bin/kubectl-installstrategy
data=../shared/testdata/kubevirt
if [[ ! -d "$data" ]]; then
	echo "demo: $data not found (the shared test data sits beside the repository)" >&2
	exit 1
fi
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

step "kubectl installstrategy inspect $data/kubevirt-v1.9.0.configmap.yaml | head -40"
"$bin" inspect "$data/kubevirt-v1.9.0.configmap.yaml" >"$tmp/inspect.txt"
head -40 "$tmp/inspect.txt"

step "kubectl installstrategy verify $data/kubevirt-v1.9.0.configmap.yaml"
"$bin" verify "$data/kubevirt-v1.9.0.configmap.yaml"

step "kubectl installstrategy diff --summary v1.8.4 v1.9.0 | head -20"
status=0
"$bin" diff --summary "$data/kubevirt-v1.8.4.configmap.yaml" "$data/kubevirt-v1.9.0.configmap.yaml" >"$tmp/diff.txt" || status=$?
head -20 "$tmp/diff.txt"
echo "(exit status $status: 1 means the strategies differ)"
step "decode v1.9.0 | encode --format native | verify  (adds a sha256 digest)"
"$bin" decode "$data/kubevirt-v1.9.0.configmap.yaml" 2>/dev/null >"$tmp/manifests.yaml"
"$bin" encode "$tmp/manifests.yaml" --version v1.9.0 --registry quay.io/kubevirt -n kubevirt \
	--identifier "$(cat "$data/kubevirt-v1.9.0.id")" 2>/dev/null >"$tmp/native.yaml"
"$bin" verify "$tmp/native.yaml" --strict

step "tamper with one byte of the stored text, verify again"
python3 - "$tmp/native.yaml" <<'PY' || true
import sys
p = sys.argv[1]
s = open(p).read()
i = s.index("manifests: ") + len("manifests: ") + 200
s = s[:i] + ("A" if s[i] != "A" else "B") + s[i+1:]
open(p, "w").write(s)
PY
if "$bin" verify "$tmp/native.yaml"; then
	echo "demo: a tampered strategy verified" >&2
	exit 1
fi
printf '\nThe operator demo (install and upgrade on a local cluster) comes with the operator.\n'
