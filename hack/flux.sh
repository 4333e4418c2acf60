#!/usr/bin/env bash
# hack/flux.sh builds Flux's source-controller and kustomize-controller from
# their source, at the versions pinned in hack/flux (a module of its own, so
# the project's go.mod does not carry Flux's dependencies), and copies their
# CRDs from the controllers' modules (config/crd/bases), into a cache folder
# outside the repository. test/e2e's Flux test runs them as processes
# against the local cluster (docs/UPGRADES.md, "Waiting on an Installation").
#
#   hack/flux.sh build   build what is missing or stale, print the folder
#   hack/flux.sh dir     print the folder only (builds nothing)
#   hack/flux.sh key     print the cache key
#
# The folder is ${FLUX_DIR} when set, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/installstrategy/tools/flux-<key>, where
# <key> is a hash of hack/flux/go.mod, go.sum, this script and the Go
# version, as hack/tools.sh keys the control-plane binaries: a fresh clone on
# the same machine reuses the binaries, and a change of pins builds again. A
# build is complete only when the folder holds a .stamp file with the key.
# A cold build takes about 18 CPU-minutes (some 10 minutes on 2 idle cores;
# an hour measured on a 2-core machine shared with other builds); a change
# of this script or the pins only relinks while the Go build cache is warm.
#
# Messages go to stderr; the folder is the only thing printed on stdout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="${root}/hack/flux"
controllers=(source-controller kustomize-controller)

log() { printf '[flux] %s\n' "$*" >&2; }

key() {
	{
		go env GOVERSION GOOS GOARCH
		cd "${root}"
		sha256sum hack/flux.sh hack/flux/go.mod hack/flux/go.sum
	} | sha256sum | cut -c1-16
}

dir() {
	if [[ -n "${FLUX_DIR:-}" ]]; then
		printf '%s\n' "${FLUX_DIR}"
	else
		printf '%s\n' "${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/installstrategy/tools/flux-$(key)"
	fi
}

build() {
	local out k start c src
	out="$(dir)"
	k="$(key)"
	if [[ -f "${out}/.stamp" && "$(cat "${out}/.stamp")" == "${k}" ]]; then
		log "up to date: ${out} (key ${k})"
		printf '%s\n' "${out}"
		return 0
	fi
	start=$(date +%s)
	log "building ${controllers[*]} into ${out} (key ${k}); a cold build takes about 10 minutes on 2 idle cores"
	mkdir -p "$(dirname "${out}")"
	tmp="$(mktemp -d "${out}.tmp.XXXXXX")"
	trap 'rm -rf "${tmp}"' EXIT
	mkdir -p "${tmp}/crds"
	export GOWORK=off GOFLAGS=-mod=readonly
	(cd "${mod}" && go mod download)
	for c in "${controllers[@]}"; do
		src="$(cd "${mod}" && go list -m -f '{{.Dir}}' "github.com/fluxcd/${c}")"
		cp "${src}"/config/crd/bases/*.yaml "${tmp}/crds/"
		(cd "${mod}" && go list -m -f '{{.Version}}' "github.com/fluxcd/${c}") >"${tmp}/${c}.version"
	done
	chmod u+w "${tmp}"/crds/*.yaml
	(cd "${mod}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${tmp}/" \
		github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller)
	printf '%s\n' "${k}" >"${tmp}/.stamp"
	rm -rf "${out}"
	mv "${tmp}" "${out}"
	trap - EXIT
	log "done in $(($(date +%s) - start))s: ${out}"
	printf '%s\n' "${out}"
}

case "${1:-build}" in
build) build ;;
dir) dir ;;
key) key ;;
*)
	echo "usage: $0 [build|dir|key]" >&2
	exit 2
	;;
esac
