package localcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/ociimage"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// The real node: one kubelet with containerd and runc beside the kwok nodes,
// so that pods which ask for it run real containers. It is offline: images
// are imported with ctr (nothing is ever pulled: every registry resolves to
// a closed loopback port), pods on its bridge have no default route and an
// iptables guard drops anything forwarded into or out of the bridge, and
// their DNS is 127.0.0.1. See docs/DEVELOPMENT.md, "The real node".
//
// Each cluster takes a free slot N (1..maxSlots) by creating the bridge
// isrnN, so several clusters can run one real node each: the node is
// named and reached at 127.0.3.N, its pods get 10.88.N.0/24 and the host
// end of the bridge, 10.88.N.1, forwards RealNodeAPIPort to the API server
// (an iptables DNAT rule; the bridge alone has route_localnet, so nothing
// else reaches loopback from it).
const (
	// RealNodeAPIPort is the port on the bridge's host address that the
	// kernel forwards (DNAT) to the API server on loopback, for pods that
	// are not hostNetwork.
	RealNodeAPIPort = 6443
	// PauseImage is the sandbox image of the real node, built by Up.
	PauseImage = "localhost/pause:local"

	// RealNodeContainerd and RealNodeKubelet name the real node's
	// processes (pid and log files).
	RealNodeContainerd = "containerd"
	RealNodeKubelet    = "kubelet"

	maxSlots     = 32
	bridgePrefix = "isrn"
	kubeletPort  = 10250
	healthzPort  = 10248
)

// RealNode describes the real node of a running cluster (State.RealNode).
type RealNode struct {
	// Name of the node, also its address (an IP in 127/8).
	Name string `json:"name"`
	// Slot is the node's number; it picks its addresses and bridge.
	Slot int `json:"slot"`
	// APIHost and APIPort reach the API server from a pod on the node's
	// bridge (KUBERNETES_SERVICE_HOST/PORT; the serving certificate names
	// APIHost). hostNetwork pods use 127.0.0.1 and the API server's port.
	APIHost string `json:"apiHost"`
	APIPort int    `json:"apiPort"`
	// Containerd is the socket of the node's containerd (namespace k8s.io),
	// for `ctr -a SOCKET -n k8s.io images import`.
	Containerd string `json:"containerd"`
}

// Probe of the real node's prerequisites, in the order they are checked.
var realNodeCommands = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip", "unshare", "mount", "umount", "go"}

// realNodeUnavailable says why this machine cannot run the real node, or ""
// when it can.
func realNodeUnavailable() string {
	if runtime.GOOS != "linux" {
		return "not Linux"
	}
	if os.Geteuid() != 0 {
		return "not root (the kubelet and containerd need root)"
	}
	var missing []string
	for _, c := range realNodeCommands {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "/usr/lib/cni/bridge")
	}
	if len(missing) > 0 {
		return "missing " + strings.Join(missing, ", ") + " (Debian: apt-get install containerd runc containernetworking-plugins iptables; `make tools` does it as root)"
	}
	return ""
}

// realNodeDirs are the paths of one real node, under the state directory.
type realNodeDirs struct {
	root, containerd, sock, cni, kubelet, etc string
}

func realNodePaths(stateDir string) realNodeDirs {
	root := filepath.Join(stateDir, "realnode")
	return realNodeDirs{
		root:       root,
		containerd: filepath.Join(root, "containerd"),
		sock:       filepath.Join(root, "ctrd.sock"), // short: unix socket paths (and its .ttrpc twin) must stay under 108 bytes
		cni:        filepath.Join(root, "cni"),
		kubelet:    filepath.Join(root, "kubelet"),
		etc:        filepath.Join(root, "etc"),
	}
}

func bridgeName(slot int) string { return bridgePrefix + strconv.Itoa(slot) }
func guardChain(slot int) string { return "ISRN" + strconv.Itoa(slot) + "-GUARD" }
func apiChain(slot int) string   { return "ISRN" + strconv.Itoa(slot) + "-API" }
func nodeIP(slot int) string     { return "127.0.3." + strconv.Itoa(slot) }
func gatewayIP(slot int) string  { return "10.88." + strconv.Itoa(slot) + ".1" }
func podCIDR(slot int) string    { return "10.88." + strconv.Itoa(slot) + ".0/24" }

// reserveRealNode takes a free slot by creating its bridge (creation fails
// when another cluster has it) and records it, so that Down undoes it even
// when Up fails later. It returns nil when the machine cannot run a real
// node, after saying why.
func (u *upper) reserveRealNode() (*RealNode, error) {
	if why := realNodeUnavailable(); why != "" {
		u.logf("real node: off: %s; only kwok's fake nodes run (pass --real-node=false to silence this)", why)
		return nil, nil
	}
	d := realNodePaths(u.dir)
	if n := len(d.sock + ".ttrpc"); n >= 108 {
		return nil, fmt.Errorf("real node: the state dir %s is too long: containerd's socket %s.ttrpc would be %d bytes, unix sockets take at most 107 (use a shorter --state-dir or TMPDIR)", u.dir, d.sock, n)
	}
	if err := os.MkdirAll(d.etc, 0o755); err != nil {
		return nil, fmt.Errorf("real node: %w", err)
	}
	for slot := 1; slot <= maxSlots; slot++ {
		if err := exec.Command("ip", "link", "add", bridgeName(slot), "type", "bridge").Run(); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(d.etc, "slot"), []byte(strconv.Itoa(slot)+"\n"), 0o644); err != nil {
			_ = exec.Command("ip", "link", "del", bridgeName(slot)).Run()
			return nil, fmt.Errorf("real node: record slot: %w", err)
		}
		return &RealNode{Name: nodeIP(slot), Slot: slot, APIHost: gatewayIP(slot), APIPort: RealNodeAPIPort, Containerd: d.sock}, nil
	}
	return nil, fmt.Errorf("real node: no free slot: bridges %s1..%s%d all exist (stop other clusters or pass --real-node=false)", bridgePrefix, bridgePrefix, maxSlots)
}

// realNodeSANs are the addresses the API server's certificate must name for
// the real node's pods.
func (u *upper) realNodeSANs() []net.IP {
	if u.real == nil {
		return nil
	}
	return []net.IP{net.ParseIP(u.real.APIHost)}
}

//go:embed realnode/pause.go
var pauseSource []byte

//go:embed realnode/containerd.toml
var containerdConfig string

//go:embed realnode/kubelet.yaml
var kubeletConfig string

//go:embed realnode/cni.conflist
var cniConfig string

// kubeletSysctls are the host settings the kubelet insists on (it writes
// them when they differ). It runs in a mount namespace of its own in which
// files with these values are bind-mounted over /proc/sys, so the host's
// settings stay as they are.
var kubeletSysctls = map[string]string{
	"vm.overcommit_memory":      "1",
	"vm.panic_on_oom":           "0",
	"kernel.panic":              "10",
	"kernel.panic_on_oops":      "1",
	"kernel.keys.root_maxkeys":  "1000000",
	"kernel.keys.root_maxbytes": "25000000",
}

// startRealNode sets up the bridge's guard and API forwarding, starts
// containerd with the pause image and the kubelet, and waits until the
// node is Ready.
func (u *upper) startRealNode(ctx context.Context) error {
	begin := time.Now()
	d := realNodePaths(u.dir)
	if err := u.writeRealNodeFiles(d); err != nil {
		return err
	}
	if err := u.guardBridge(); err != nil {
		return err
	}
	if err := u.startContainerd(ctx, d); err != nil {
		return err
	}
	// Before the node registers: no pod that did not ask for it may be
	// placed there.
	if err := u.keepProductsOffRealNode(ctx); err != nil {
		return err
	}
	return u.startKubelet(ctx, d, begin)
}

// writeRealNodeFiles creates the node's folders, marks the host paths
// this Up creates (Down removes them), and writes the configuration of
// containerd, CNI and the kubelet and the sysctl files the kubelet sees.
func (u *upper) writeRealNodeFiles(d realNodeDirs) error {
	rn := u.real
	for _, dir := range []string{d.containerd + "/certs.d/_default", d.cni + "/net.d", d.kubelet, d.etc + "/sysctl"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	// Host paths containerd, the CNI plugins and the kubelet create
	// whatever their flags say; Down removes them when this Up created them.
	for _, p := range append(slices.Clone(hostPaths), "/sys/fs/cgroup/memory/k8s.io") {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			marker := createdMarker(d, p)
			if strings.HasPrefix(p, "/sys/fs/cgroup/") {
				marker = createdMarker(d, "cgroups")
			}
			if err := os.WriteFile(marker, nil, 0o644); err != nil {
				return fmt.Errorf("real node: %w", err)
			}
		}
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	vars := map[string]any{
		"Root": d.containerd, "Sock": d.sock, "Runc": runc, "CNI": d.cni, "Bridge": bridgeName(rn.Slot),
		"PodCIDR": podCIDR(rn.Slot), "Gateway": rn.APIHost, "Node": rn.Name, "KubeletPort": kubeletPort,
		"HealthzPort": healthzPort, "Kubelet": d.kubelet, "Etc": d.etc, "Taint": metakeys.RealNodeTaint, "Pause": PauseImage,
	}
	files := map[string]string{
		filepath.Join(d.containerd, "config.toml"):                 containerdConfig,
		filepath.Join(d.containerd, "certs.d/_default/hosts.toml"): "server = \"http://127.0.0.1:9\"\n[host.\"http://127.0.0.1:9\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
		filepath.Join(d.cni, "net.d/10-realnode.conflist"):         cniConfig,
		filepath.Join(d.etc, "kubelet.yaml"):                       kubeletConfig,
		filepath.Join(d.etc, "resolv.conf"):                        "nameserver 127.0.0.1\noptions ndots:1 attempts:1 timeout:1\n",
	}
	for file, text := range files {
		if err := writeTemplate(file, text, vars); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	for k, v := range kubeletSysctls {
		if err := os.WriteFile(filepath.Join(d.etc, "sysctl", k), []byte(v+"\n"), 0o644); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	return nil
}

// startContainerd starts the node's containerd, waits until it answers
// and imports the pause image.
func (u *upper) startContainerd(ctx context.Context, d realNodeDirs) error {
	s := time.Now()
	ctrd, err := u.launchAt(RealNodeContainerd, "containerd", "--config", filepath.Join(d.containerd, "config.toml"))
	if err != nil {
		return err
	}
	if err := u.poll(ctx, ctrd, "containerd", func(ctx context.Context) (bool, string, error) {
		out, err := exec.CommandContext(ctx, "ctr", "-a", d.sock, "version").CombinedOutput()
		return err == nil, strings.TrimSpace(string(out)), nil
	}); err != nil {
		return err
	}
	u.logf("real node: containerd ready in %s", time.Since(s).Round(10*time.Millisecond))
	pause, err := pauseTarball()
	if err != nil {
		return err
	}
	if err := ImportImages(ctx, d.sock, pause); err != nil {
		return err
	}
	return nil
}

// startKubelet starts the kubelet in a mount namespace of its own and waits
// until the node is Ready; begin is when startRealNode began.
func (u *upper) startKubelet(ctx context.Context, d realNodeDirs, begin time.Time) error {
	rn := u.real
	if err := makeSharedMount(d.kubelet); err != nil {
		return err
	}
	kubelet := filepath.Join(u.opts.BinDir, RealNodeKubelet)
	// The shell runs in the kubelet's own mount namespace: it hides the
	// host's sysctls behind the files above, then becomes the kubelet.
	script := `set -e
mount --make-private /proc
for f in "$0"/*; do
	mount --bind -o ro "$f" "/proc/sys/$(basename "$f" | tr . /)"
done
exec "$@"`
	s := time.Now()
	kp, err := u.launchAt(RealNodeKubelet, "unshare", "-m", "--propagation", "unchanged", "--", "/bin/sh", "-c", script,
		filepath.Join(d.etc, "sysctl"), kubelet,
		"--config="+filepath.Join(d.etc, "kubelet.yaml"),
		"--kubeconfig="+u.files.admin,
		"--root-dir="+d.kubelet,
		"--cert-dir="+filepath.Join(d.kubelet, "pki"),
		"--hostname-override="+rn.Name,
		"--node-labels="+metakeys.RealNodeLabel+"=true",
	)
	if err != nil {
		return err
	}
	cs, err := clientFor(u.files.admin)
	if err != nil {
		return err
	}
	if err := u.poll(ctx, kp, "real node "+rn.Name+" Ready", func(ctx context.Context) (bool, string, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, rn.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not registered yet", nil
		}
		if err != nil {
			return false, "", err
		}
		why := nodeNotReady(n)
		return why == "", why, nil
	}); err != nil {
		return err
	}
	u.logf("real node %s Ready %s after the kubelet started (%s in all); pods that tolerate %s=true:NoSchedule and select %s=true land there",
		rn.Name, time.Since(s).Round(10*time.Millisecond), time.Since(begin).Round(10*time.Millisecond), metakeys.RealNodeTaint, metakeys.RealNodeLabel)
	return nil
}

// hostPaths are created by containerd, the CNI plugins and the kubelet
// whatever their configuration says.
var hostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/lib/cni", "/run/containerd"}

// launchAt starts a real-node process (a binary by path or on PATH) and
// remembers it like the control plane's.
func (u *upper) launchAt(name, bin string, args ...string) (*process, error) {
	p, err := start(u.dir, name, bin, args)
	if err != nil {
		return nil, fmt.Errorf("real node: %w", err)
	}
	u.procs[name] = p
	u.logf("started %s (pid %d), log %s", name, p.pid, p.logFile)
	return p, nil
}

func writeTemplate(file, text string, vars map[string]any) error {
	t, err := template.New(filepath.Base(file)).Option("missingkey=error").Parse(text)
	if err != nil {
		return fmt.Errorf("template %s: %w", file, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, vars); err != nil {
		return fmt.Errorf("template %s: %w", file, err)
	}
	return os.WriteFile(file, b.Bytes(), 0o644)
}

// guardBridge addresses the bridge's host end, makes sure nothing is
// forwarded into or out of it (pods talk to each other and to the host end,
// nothing else), and forwards RealNodeAPIPort of the host end to the API
// server.
func (u *upper) guardBridge() error {
	br, chain, api := bridgeName(u.real.Slot), guardChain(u.real.Slot), apiChain(u.real.Slot)
	// DNAT to 127.0.0.1 needs route_localnet on the interface the packet
	// comes in on; the setting goes with the bridge.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+br+"/route_localnet", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("real node: bridge %s: route_localnet: %w", br, err)
	}
	nat := [][]string{
		{"iptables", "-w", "-t", "nat", "-N", api},
		{"iptables", "-w", "-t", "nat", "-A", api, "-i", br, "-d", u.real.APIHost, "-p", "tcp", "--dport", strconv.Itoa(u.real.APIPort),
			"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(u.ports.apiserver)},
		{"iptables", "-w", "-t", "nat", "-I", "PREROUTING", "1", "-j", api},
	}
	removeChain("nat", api)
	for _, c := range nat {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("real node: api forwarding: %s: %w: %s", strings.Join(c, " "), err, bytes.TrimSpace(out))
		}
	}
	cmds := [][]string{
		{"iptables", "-w", "-N", chain},
		{"iptables", "-w", "-A", chain, "-i", br, "-o", br, "-j", "ACCEPT"},
		{"iptables", "-w", "-A", chain, "-i", br, "-j", "DROP"},
		{"iptables", "-w", "-A", chain, "-o", br, "-j", "DROP"},
		{"iptables", "-w", "-I", "FORWARD", "1", "-j", chain},
		{"ip", "addr", "replace", u.real.APIHost + "/24", "dev", br},
		{"ip", "link", "set", br, "up"},
	}
	if err := exec.Command("iptables", "-w", "-S", chain).Run(); err == nil {
		cmds[0] = []string{"iptables", "-w", "-F", chain}
		if exec.Command("iptables", "-w", "-C", "FORWARD", "-j", chain).Run() == nil {
			cmds = slices.Delete(cmds, 4, 5)
		}
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("real node: bridge guard: %s: %w: %s", strings.Join(c, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// removeChain removes an iptables chain of table and the jump to it from
// FORWARD (filter) or PREROUTING (nat); a missing chain is no error.
func removeChain(table, chain string) error {
	if exec.Command("iptables", "-w", "-t", table, "-S", chain).Run() != nil {
		return nil
	}
	from := "FORWARD"
	if table == "nat" {
		from = "PREROUTING"
	}
	for exec.Command("iptables", "-w", "-t", table, "-D", from, "-j", chain).Run() == nil {
	}
	_ = exec.Command("iptables", "-w", "-t", table, "-F", chain).Run()
	if out, err := exec.Command("iptables", "-w", "-t", table, "-X", chain).CombinedOutput(); err != nil {
		return fmt.Errorf("real node: remove iptables chain %s/%s: %w: %s", table, chain, err, bytes.TrimSpace(out))
	}
	return nil
}

// makeSharedMount makes dir a shared mount point of its own, so that the
// volumes the kubelet mounts there (in its own mount namespace) reach
// containerd.
func makeSharedMount(dir string) error {
	for _, c := range [][]string{{"mount", "--bind", dir, dir}, {"mount", "--make-rshared", dir}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("real node: %s: %w: %s", strings.Join(c, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// pauseTarball returns the sandbox image's tarball, built from pause.go
// with the go command on first use and cached by the source's and Go's
// version.
func pauseTarball() (string, error) {
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("real node: pause image: go env: %w", err)
	}
	h := sha256.Sum256(append(slices.Clone(pauseSource), goVersion...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "installstrategy", "realnode")
	tarFile := filepath.Join(dir, "pause-"+hex.EncodeToString(h[:8])+".tar")
	if _, err := os.Stat(tarFile); err == nil {
		return tarFile, nil
	}
	tmp, err := os.MkdirTemp("", "localcluster-pause-")
	if err != nil {
		return "", fmt.Errorf("real node: pause image: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "pause.go"), pauseSource, 0o644); err != nil {
		return "", fmt.Errorf("real node: pause image: %w", err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", "pause", "pause.go")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("real node: pause image: go build: %w: %s", err, bytes.TrimSpace(out))
	}
	img, err := ociimage.Build(ociimage.Spec{Binary: filepath.Join(tmp, "pause"), Path: "/pause", Arch: runtime.GOARCH})
	if err != nil {
		return "", fmt.Errorf("real node: pause image: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("real node: pause image: %w", err)
	}
	part := filepath.Join(tmp, "pause.tar")
	if err := ociimage.WriteTarball(part, img, PauseImage); err != nil {
		return "", fmt.Errorf("real node: pause image: %w", err)
	}
	data, err := os.ReadFile(part)
	if err != nil {
		return "", fmt.Errorf("real node: pause image: %w", err)
	}
	if err := os.WriteFile(tarFile+".part", data, 0o644); err != nil {
		return "", fmt.Errorf("real node: pause image: %w", err)
	}
	return tarFile, os.Rename(tarFile+".part", tarFile)
}

// ImportImages imports image tarballs into the containerd at sock (the
// real node's, State.RealNode.Containerd), where its pods find them with
// imagePullPolicy Never or IfNotPresent.
func ImportImages(ctx context.Context, sock string, tarballs ...string) error {
	for _, t := range tarballs {
		out, err := exec.CommandContext(ctx, "ctr", "-a", sock, "-n", "k8s.io", "images", "import", "--no-unpack=false", t).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import image %s into %s: %w: %s", t, sock, err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// createdMarker is the file that says Up created the host path p.
func createdMarker(d realNodeDirs, p string) string {
	return filepath.Join(d.etc, "created-"+strings.ReplaceAll(strings.Trim(p, "/"), "/", "_"))
}
