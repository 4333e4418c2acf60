#!/usr/bin/env bash
# hack/tools.sh builds the local control-plane binaries pinned in hack/tools
# (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, and the
# kubelet of the real node) and hack/tools/kwok (kwok) into a cache folder
# outside the repository. As root it also installs, with apt-get, the Debian
# packages the real node runs on (containerd, runc, the CNI plugins,
# iptables) when they are missing; see docs/DEVELOPMENT.md, "The real node".
#
#   hack/tools.sh build   build what is missing or stale, print the folder
#   hack/tools.sh dir     print the folder only (builds nothing)
#   hack/tools.sh key     print the cache key
#
# The folder is ${TOOLS_DIR} when set, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/installstrategy/tools/<key>, where <key> is a
# hash of the tools modules (go.mod, go.sum), the tool sources, this script and
# the Go version. A fresh clone on the same machine therefore reuses the
# binaries, and a change of pins builds again. A build is complete only when
# the folder holds a .stamp file with the key, so an interrupted build is
# redone.
#
# Messages go to stderr; the folder is the only thing printed on stdout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${root}/hack/tools"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kwok)

log() { printf '[tools] %s\n' "$*" >&2; }

key() {
	{
		go env GOVERSION GOOS GOARCH
		cd "${root}"
		sha256sum hack/tools.sh hack/tools/go.mod hack/tools/go.sum \
			hack/tools/kwok/go.mod hack/tools/kwok/go.sum
		find hack/tools -name '*.go' -type f | LC_ALL=C sort | xargs sha256sum
	} | sha256sum | cut -c1-16
}

dir() {
	if [[ -n "${TOOLS_DIR:-}" ]]; then
		printf '%s\n' "${TOOLS_DIR}"
	else
		printf '%s\n' "${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/installstrategy/tools/$(key)"
	fi
}

# build_one NAME MODULE_DIR PACKAGE [LDFLAGS]
build_one() {
	local name="$1" moddir="$2" pkg="$3" ldflags="${4:-}" start
	start=$(date +%s)
	log "building ${name} (${pkg})"
	(cd "${moddir}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${ldflags}" -o "${tmp}/${name}" "${pkg}")
	log "built ${name} in $(($(date +%s) - start))s"
}

# host_packages installs what the real node of hack/localcluster runs on
# when it is missing (Debian/Ubuntu, root only; elsewhere the cluster starts
# without the real node and says why).
host_packages() {
	local missing=()
	command -v containerd >/dev/null 2>&1 || missing+=(containerd)
	command -v runc >/dev/null 2>&1 || missing+=(runc)
	[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null 2>&1 || missing+=(iptables)
	((${#missing[@]})) || return 0
	if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		log "the real node needs ${missing[*]} (not installed: not root or no apt-get); the cluster runs without it"
		return 0
	fi
	log "installing ${missing[*]} for the real node (apt-get)"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; then
		DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
	fi
}

build() {
	local out k
	host_packages
	out="$(dir)"
	k="$(key)"
	if [[ -f "${out}/.stamp" && "$(cat "${out}/.stamp")" == "${k}" ]]; then
		local ok=1 b
		for b in "${binaries[@]}"; do [[ -x "${out}/${b}" ]] || ok=0; done
		if ((ok)); then
			log "up to date: ${out} (key ${k})"
			printf '%s\n' "${out}"
			return 0
		fi
	fi
	log "building tools into ${out} (key ${k})"
	log "a cold build takes 10-15 minutes on 2 cores (about 900 MB of modules to download, then"
	log "kube-scheduler and kube-controller-manager compile most of Kubernetes; kwok is a separate"
	log "module); later runs reuse the binaries until hack/tools or the Go version changes"
	local start kube
	start=$(date +%s)
	mkdir -p "$(dirname "${out}")"
	tmp="$(mktemp -d "${out}.tmp.XXXXXX")"
	trap 'rm -rf "${tmp}"' EXIT
	log "downloading modules"
	(cd "${tools}" && go mod download)
	(cd "${tools}/kwok" && go mod download)
	kube="$(cd "${tools}" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
	local v major minor kflags
	v="${kube#v}"
	major="${v%%.*}"
	minor="${v#*.}"
	minor="${minor%%.*}"
	for pkgvar in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		kflags+=" -X ${pkgvar}.gitVersion=${kube} -X ${pkgvar}.gitMajor=${major} -X ${pkgvar}.gitMinor=${minor}"
		kflags+=" -X ${pkgvar}.gitTreeState=clean -X ${pkgvar}.buildDate=1970-01-01T00:00:00Z"
	done
	build_one etcd "${tools}" ./etcd
	build_one kube-scheduler "${tools}" k8s.io/kubernetes/cmd/kube-scheduler "${kflags}"
	build_one kube-controller-manager "${tools}" k8s.io/kubernetes/cmd/kube-controller-manager "${kflags}"
	build_one kube-apiserver "${tools}" k8s.io/kubernetes/cmd/kube-apiserver "${kflags}"
	build_one kubelet "${tools}" k8s.io/kubernetes/cmd/kubelet "${kflags}"
	build_one kwok "${tools}/kwok" sigs.k8s.io/kwok/cmd/kwok
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
