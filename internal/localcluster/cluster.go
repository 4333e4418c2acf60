// Package localcluster runs a real, local Kubernetes control plane for tests and
// demos: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok (which simulates the kubelets of fake nodes), all on free loopback
// ports, as daemons that outlive the caller, under one state directory.
//
// Up starts a cluster and waits until it is usable; Down stops every process
// that Up recorded and removes the state directory. The binaries come from
// hack/tools.sh (make tools).
//
// State directory layout:
//
//	.localcluster     marker: the directory belongs to this package
//	state.json        endpoints, kubeconfig path and pids (see State)
//	kubeconfig        admin kubeconfig (user in system:masters)
//	pids/<name>.pid   pid of each component, written as it starts
//	logs/<name>.log   stdout and stderr of each component
//	pki/              CA, serving and client certificates, service-account keys
//	etcd/             etcd data
//	kwok-stages.yaml  kwok pod stages (see Behaviour)
package localcluster

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Component names, in start order. They name the binaries in Options.BinDir,
// the pid files and the log files.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

// Components lists every component in start order; Down stops them in
// reverse order.
var Components = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok}

// Behaviour is a value of metakeys.TestBehaviourLabel.
type Behaviour string

// Test behaviours of kwok-simulated pods, selected with metakeys.TestBehaviourLabel.
const (
	// BehaviourFail: the containers start, then exit 1 about a second
	// later, and the pod ends in phase Failed.
	BehaviourFail Behaviour = "fail"
	// BehaviourCrashLoop: the pod is Running but not Ready, its containers
	// wait in CrashLoopBackOff and restartCount rises by one every ~2 s.
	BehaviourCrashLoop Behaviour = "crashloop"
	// BehaviourNeverReady: the pod is Running with running containers that
	// never become ready.
	BehaviourNeverReady Behaviour = "never-ready"
	// BehaviourFlapping: a container without a readiness probe that
	// crashes soon after each start. The pod is Running and Ready for
	// ~3 s, then its containers wait in CrashLoopBackOff after exiting 1
	// (not Ready, restartCount up by one) for ~5 s, then run and are Ready
	// again (lastState still the exit 1), and so on.
	BehaviourFlapping Behaviour = "flapping"
	// BehaviourAwaitResult: a Job's pod runs until it carries the
	// annotation metakeys.TestTerminationMessageAnnotation, then succeeds with that
	// annotation as its containers' termination message (what a real dump
	// Job container writes to /dev/termination-log).
	BehaviourAwaitResult Behaviour = "await-result"
)

// ControlPlaneLabel and ControlPlaneTaint mark the first node as a control
// plane node; the taint has effect NoSchedule and an empty value.
const (
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
	ControlPlaneTaint = "node-role.kubernetes.io/control-plane"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

const (
	markerFile = ".localcluster"
	stateFile  = "state.json"
)

// Options configure Up. The zero value of each field is documented.
type Options struct {
	// StateDir holds everything of the cluster; required. It is created if
	// missing; a directory left by an earlier Up is cleaned up first.
	StateDir string
	// BinDir holds the etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kwok binaries; required (see hack/tools.sh).
	BinDir string
	// Nodes is the number of fake nodes; 0 means 3. The first node is a
	// control-plane node (ControlPlaneLabel, NoSchedule ControlPlaneTaint);
	// the others are plain, untainted workers.
	Nodes int
	// Timeout bounds the start of each component and the wait for the
	// nodes; 0 means 2 minutes.
	Timeout time.Duration
	// Log receives progress messages; nil discards them.
	Log io.Writer
	// KeepOnFailure leaves the processes and state of a failed Up in place
	// for debugging; by default they are removed.
	KeepOnFailure bool
	// RealNode adds a real node (kubelet, containerd, runc; see
	// realnode.go) beside the fake ones when the machine can run it; when
	// it cannot, Up says why and goes on without it.
	RealNode bool
}

// State describes a running cluster; Up writes it to state.json.
type State struct {
	// StateDir is the absolute state directory.
	StateDir string `json:"stateDir"`
	// Kubeconfig is the admin kubeconfig (user in system:masters).
	Kubeconfig string `json:"kubeconfig"`
	// Server is the API server URL.
	Server string `json:"server"`
	// EtcdURL is the etcd client URL.
	EtcdURL string `json:"etcdURL"`
	// PIDs maps component names to process ids.
	PIDs map[string]int `json:"pids"`
	// Nodes lists the fake nodes' names; the first is the control plane.
	Nodes []string `json:"nodes"`
	// RealNode is the real node, nil when the cluster has none.
	RealNode *RealNode `json:"realNode,omitempty"`
}

// ErrNotRunning is returned by Load when the state directory holds no
// complete, running cluster.
var ErrNotRunning = errors.New("local cluster is not running")

// Load returns the state of the cluster in stateDir. It returns an error
// wrapping ErrNotRunning when there is none or any of its processes is gone.
func Load(stateDir string) (*State, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", stateDir, err)
	}
	data, err := os.ReadFile(filepath.Join(abs, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no %s in %s", ErrNotRunning, stateFile, abs)
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster state: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(abs, stateFile), err)
	}
	for _, name := range Components {
		pid, ok := s.PIDs[name]
		if !ok || !owned(pid, abs) {
			return nil, fmt.Errorf("%w: %s (pid %d) is gone; see %s", ErrNotRunning, name, pid,
				filepath.Join(abs, "logs", name+".log"))
		}
	}
	return &s, nil
}

// Env returns the shell lines that point clients at the cluster:
// INSTALLSTRATEGY_TEST_KUBECONFIG for the tests, and KUBECONFIG last.
func (s *State) Env() string {
	return fmt.Sprintf("export INSTALLSTRATEGY_TEST_KUBECONFIG=%s\nexport KUBECONFIG=%s\n", s.Kubeconfig, s.Kubeconfig)
}

// Down stops every process recorded in stateDir (SIGTERM to its process
// group, SIGKILL after a grace period) and removes the directory. It does
// nothing when stateDir does not exist, and refuses a directory that Up did
// not create.
func Down(ctx context.Context, stateDir string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return fmt.Errorf("state dir %s: %w", stateDir, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(filepath.Join(abs, markerFile)); err != nil {
		if empty, _ := isEmpty(abs); empty {
			return os.Remove(abs)
		}
		return fmt.Errorf("refusing to remove %s: it has no %s marker, so it is not a local cluster state directory", abs, markerFile)
	}
	pids, err := readPIDs(abs)
	if err != nil {
		return err
	}
	var errs []error
	// The real node first: its pods are deleted through the API server.
	if err := downRealNode(ctx, abs, pids, log); err != nil {
		errs = append(errs, err)
	}
	for _, name := range slices.Backward(Components) {
		pid, ok := pids[name]
		if !ok {
			continue
		}
		if owned(pid, abs) {
			fmt.Fprintf(log, "stopping %s (pid %d)\n", name, pid)
		}
		if err := stop(ctx, pid, abs, 10*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.RemoveAll(abs); err != nil {
		return fmt.Errorf("remove state dir: %w", err)
	}
	return nil
}

func isEmpty(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	return len(entries) == 0, err
}

// Up starts a cluster in opts.StateDir and returns once the API server is
// ready, every node is Ready and schedulable and the controllers work. The
// processes keep running after Up returns (and after its caller exits) until
// Down. When a healthy cluster already runs in StateDir, Up returns its
// state; a stale or crashed one is cleaned up first. When Up fails it
// includes the last lines of the failing component's log in the error and
// stops what it started, unless opts.KeepOnFailure.
func Up(ctx context.Context, opts Options) (*State, error) {
	if opts.StateDir == "" {
		return nil, errors.New("state dir is required")
	}
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Nodes < 0 {
		return nil, fmt.Errorf("nodes: %d is negative", opts.Nodes)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", opts.StateDir, err)
	}
	if opts.BinDir == "" {
		return nil, errors.New("bin dir is required (build the binaries with `make tools`)")
	}
	for _, name := range Components {
		bin := filepath.Join(opts.BinDir, name)
		if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("binary %s is missing or not executable (build it with `make tools`)", bin)
		}
	}

	if s, err := Load(stateDir); err == nil {
		if err := checkReady(ctx, s.Kubeconfig); err == nil {
			fmt.Fprintf(opts.Log, "local cluster already running in %s\n", stateDir)
			return s, nil
		}
	}
	if _, err := os.Stat(stateDir); err == nil {
		fmt.Fprintf(opts.Log, "cleaning up an earlier cluster in %s\n", stateDir)
		if err := Down(ctx, stateDir, opts.Log); err != nil {
			return nil, fmt.Errorf("clean up earlier cluster: %w", err)
		}
	}

	u := &upper{opts: opts, dir: stateDir, procs: map[string]*process{}}
	s, err := u.up(ctx)
	if err != nil && !opts.KeepOnFailure {
		// Clean up with a context of its own: ctx may be the reason Up failed.
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := Down(cleanCtx, stateDir, opts.Log); derr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after failed start: %w", derr))
		}
	}
	return s, err
}

// upper carries the state of one Up call.
type upper struct {
	opts  Options
	dir   string
	procs map[string]*process
	ports ports
	files files
	real  *RealNode
}

// ports are the loopback ports of one cluster.
type ports struct {
	etcdClient, etcdPeer, apiserver, controllerManager, scheduler, kwok int
}

// files are the paths Up generates.
type files struct {
	caCert, caKey, servingCert, servingKey, saKey, saPub string
	frontProxyCA, proxyClientCert, proxyClientKey        string
	admin, controllerManager, scheduler, kwok            string // kubeconfigs
	kwokStages                                           string
}

func (u *upper) logf(format string, args ...any) {
	fmt.Fprintf(u.opts.Log, format+"\n", args...)
}

func (u *upper) up(ctx context.Context) (*State, error) {
	begin := time.Now()
	for _, d := range []string{"", "logs", "pids", "pki", "etcd"} {
		if err := os.MkdirAll(filepath.Join(u.dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("create state dir: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(u.dir, markerFile), []byte("state directory of hack/localcluster; remove with `localcluster down`\n"), 0o644); err != nil {
		return nil, fmt.Errorf("write marker: %w", err)
	}
	p, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	u.ports = ports{etcdClient: p[0], etcdPeer: p[1], apiserver: p[2], controllerManager: p[3], scheduler: p[4], kwok: p[5]}
	if u.opts.RealNode {
		if u.real, err = u.reserveRealNode(); err != nil {
			return nil, err
		}
	}
	if err := u.writeFiles(); err != nil {
		return nil, err
	}

	if err := u.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := u.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := u.startControllers(ctx); err != nil {
		return nil, err
	}
	nodes, err := u.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	if u.real != nil {
		if err := u.startRealNode(ctx); err != nil {
			return nil, err
		}
	}

	s := &State{
		StateDir:   u.dir,
		Kubeconfig: u.files.admin,
		Server:     u.server(),
		EtcdURL:    u.etcdURL(),
		PIDs:       map[string]int{},
		Nodes:      nodes,
		RealNode:   u.real,
	}
	for name, p := range u.procs {
		s.PIDs[name] = p.pid
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode cluster state: %w", err)
	}
	if err := os.WriteFile(filepath.Join(u.dir, stateFile), append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write cluster state: %w", err)
	}
	real := ""
	if u.real != nil {
		real = " and real node " + u.real.Name
	}
	u.logf("local cluster ready in %s: %s, %d fake nodes%s, state in %s", time.Since(begin).Round(100*time.Millisecond), s.Server, len(nodes), real, u.dir)
	return s, nil
}

func (u *upper) server() string  { return "https://127.0.0.1:" + strconv.Itoa(u.ports.apiserver) }
func (u *upper) etcdURL() string { return "http://127.0.0.1:" + strconv.Itoa(u.ports.etcdClient) }

// launch starts a component and remembers it.
func (u *upper) launch(name string, args ...string) (*process, error) {
	p, err := start(u.dir, name, filepath.Join(u.opts.BinDir, name), args)
	if err != nil {
		return nil, err
	}
	u.procs[name] = p
	u.logf("started %s (pid %d), log %s", name, p.pid, p.logFile)
	return p, nil
}

// startFailure describes a component that did not become ready, with the end
// of its log.
func startFailure(p *process, err error) error {
	return fmt.Errorf("%s did not become ready: %w\n--- last lines of %s ---\n%s\n---", p.name, err, p.logFile, tail(p.logFile, 40))
}

// freePorts returns n distinct free loopback ports. It holds all listeners
// until it has them all, so the ports differ from each other.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
