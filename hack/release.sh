#!/usr/bin/env bash
# hack/release.sh: the body of `make release`. It builds the plugin for
# linux and darwin on amd64 and arm64, and the operator (with its chart
# renderer, installstrategy-helm-render, in the same tarball) for the same
# platforms, stripped (-s -w), -trimpath, CGO_ENABLED=0, with version,
# commit and commit date stamped (-X into internal/buildinfo); packs each
# binary with LICENSE into a tarball; writes SHA256SUMS; and generates the
# krew plugin manifest installstrategy.yaml from the plugin's tarballs
# (hack/krew). Platforms are built one after the other.
#
# Environment: VERSION, COMMIT, BUILD_DATE (RFC 3339), RELEASE_DIR,
# RELEASE_PLATFORMS ("os/arch ..."), GO. The archives are reproducible:
# sorted entries, owner 0, mtime = BUILD_DATE, gzip without a timestamp.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

GO="${GO:-go}"
: "${VERSION:?VERSION is required}"
: "${COMMIT:?COMMIT is required}"
: "${BUILD_DATE:?BUILD_DATE is required}"
out="${RELEASE_DIR:-${root}/_output/release}"
platforms="${RELEASE_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}"
pkg=github.com/installstrategy/installstrategy/internal/buildinfo
ldflags="-s -w -X ${pkg}.version=${VERSION} -X ${pkg}.commit=${COMMIT} -X ${pkg}.date=${BUILD_DATE}"

log() { printf '[release] %s\n' "$*" >&2; }

rm -rf "${out}"
mkdir -p "${out}"
build="$(mktemp -d)"
trap 'rm -rf "${build}"' EXIT

for platform in ${platforms}; do
	os="${platform%/*}"
	arch="${platform#*/}"
	for bin in kubectl-installstrategy installstrategy-operator; do
		dir="${build}/${bin}_${os}_${arch}"
		mkdir -p "${dir}"
		# The operator's tarball also holds its chart renderer, which it
		# runs from beside its own binary.
		files="${bin}"
		[[ "${bin}" == installstrategy-operator ]] && files="${bin} installstrategy-helm-render"
		for f in ${files}; do
			log "building ${f} for ${os}/${arch}"
			CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch}" "${GO}" build -trimpath -ldflags "${ldflags}" -o "${dir}/${f}" "./cmd/${f}"
		done
		cp LICENSE "${dir}/LICENSE"
		# shellcheck disable=SC2086 # files is a list of names
		tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="${BUILD_DATE}" \
			-C "${dir}" -cf - ${files} LICENSE | gzip -n >"${out}/${bin}_${VERSION}_${os}_${arch}.tar.gz"
	done
done

(cd "${out}" && sha256sum -- *.tar.gz >SHA256SUMS)
"${GO}" run ./hack/krew --dir "${out}" --version "${VERSION}"
log "wrote $(ls "${out}" | wc -l) files to ${out}"
