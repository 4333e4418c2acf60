package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// phaseResult is one measured phase of one side in one round.
type phaseResult struct {
	Side     string `json:"side"`
	Scenario string `json:"scenario"`
	Phase    string `json:"phase"` // "install v1.9.0", "upgrade v1.8.4 -> v1.9.0"
	Round    int    `json:"round"`
	Trigger  string `json:"trigger"` // what started the clock

	TriggerToDone float64 `json:"triggerToDoneSeconds"`
	StartToReady  float64 `json:"processStartToReadySeconds"`
	StartToDone   float64 `json:"processStartToDoneSeconds"`

	Own          counts `json:"ownRequests"`          // trigger -> done
	OwnFromStart counts `json:"ownRequestsFromStart"` // process start -> done
	APIServer    counts `json:"apiserverRequests"`    // trigger -> done, every client
	// APIServerTop is where the API server's requests of trigger -> done
	// went: verb, code, group, resource (every client).
	APIServerTop []string `json:"apiserverTop"`
	IdleOwn      counts   `json:"idleOwnRequests"` // done -> done + settle
	IdleAPI      counts   `json:"idleAPIServerRequests"`
	IdleSeconds  float64  `json:"idleSeconds"`
	// BareCluster10s is the API server's requests in 10 s before any
	// operator ran (controller-manager, scheduler, kwok, the harness).
	BareCluster10s float64 `json:"bareClusterRequestsPer10s,omitempty"`

	AtDone  procStat `json:"procAtDone"`
	Settled procStat `json:"procSettled"`

	// Objects is what a lookup of every strategy object found once idle;
	// the report compares the sides' missing objects.
	Objects   objectCheck `json:"objects"`
	LogErrors int         `json:"logErrors"` // error lines in the operator's log
	Status    string      `json:"status"`    // what the custom resource reported at done
	// CRStatus is the custom resource's .status after the idle window.
	CRStatus map[string]any `json:"crStatus,omitempty"`
	// Dumps is what the dump stand-in did for this phase, times from the
	// trigger.
	Dumps []string `json:"dumps,omitempty"`
	Load  string   `json:"loadAverageAtDone"`
	Log   string   `json:"log"`
}

// runAll runs every round, scenario and side, each on a fresh cluster.
func runAll(ctx context.Context, c *config) ([]phaseResult, error) {
	ports := []int{8444, voMetricsPort, oursMetricsPort, oursProbePort, exampleMetricsPort}
	if err := portsFree(ports...); err != nil {
		return nil, err
	}
	shipped := map[string]shippedStrategy{}
	for _, tag := range c.tags() {
		sh, err := readShipped(c.configMapFile(tag))
		if err != nil {
			return nil, err
		}
		shipped[tag] = sh
	}
	var results []phaseResult
	for round := 1; round <= c.rounds; round++ {
		for _, sc := range c.scenarios {
			for _, name := range rotate(c.sides, round-1) {
				fmt.Fprintf(os.Stderr, "== round %d, %s, %s (load average %s)\n", round, sc, name, loadAverage())
				rs, err := runSide(ctx, c, newSide(c, name), shipped, sc, round)
				results = append(results, rs...)
				if err != nil {
					return results, fmt.Errorf("round %d, %s, %s: %w", round, sc, name, err)
				}
				for _, r := range rs {
					fmt.Fprintf(os.Stderr, "   %s: %.2f s (%s), %.0f own requests, peak RSS %.0f MiB, %.2f CPU s\n",
						r.Phase, r.TriggerToDone, r.Trigger, r.Own.total(), mib(r.AtDone.PeakRSSKiB), r.AtDone.CPUSeconds)
				}
			}
		}
	}
	return results, nil
}

// rotate is sides turned left by n: each round another side goes first.
func rotate(sides []string, n int) []string {
	if len(sides) == 0 {
		return nil
	}
	n %= len(sides)
	return append(append([]string(nil), sides[n:]...), sides[:n]...)
}

// runSide runs one scenario for one side on a cluster of its own, which it
// always tears down.
func runSide(ctx context.Context, c *config, s side, shipped map[string]shippedStrategy, sc string, round int) (results []phaseResult, err error) {
	dir := filepath.Join(c.out, fmt.Sprintf("round%d-%s-%s", round, sc, s.name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	clog, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		return nil, err
	}
	defer clog.Close()
	st, err := localcluster.Up(ctx, localcluster.Options{StateDir: c.stateDir, BinDir: c.binDir, Nodes: c.nodes, Log: clog})
	if err != nil {
		return nil, fmt.Errorf("cluster up (log %s): %w", clog.Name(), err)
	}
	defer func() {
		// Down also after Ctrl-C: a context of its own.
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if derr := localcluster.Down(dctx, c.stateDir, clog); derr != nil {
			err = errors.Join(err, fmt.Errorf("cluster down: %w", derr))
		}
	}()
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// Set-up and the object check are not measured; client-go's default
	// 5 requests/s would make the check of 245 objects take a minute.
	cfg.QPS, cfg.Burst = 100, 200
	k, err := newKube(cfg)
	if err != nil {
		return nil, err
	}
	first := c.to
	if sc == scenarioUpgrade {
		first = c.from
	}
	// The shared set-up: namespace as in KubeVirt's release manifest, the
	// PriorityClass and KubeVirt CRD of the first version.
	if err := k.namespace(ctx, kubevirtNamespace, map[string]string{metakeys.KubeVirtLabel: "", "pod-security.kubernetes.io/enforce": "privileged"}); err != nil {
		return nil, err
	}
	for _, f := range []string{"kubevirt-priority-class.yaml", "kv-resource.yaml"} {
		if err := k.applyFile(ctx, c.generated(first, f)); err != nil {
			return nil, err
		}
	}
	if err := s.prepare(ctx, k); err != nil {
		return nil, fmt.Errorf("prepare %s: %w", s.name(), err)
	}
	stored, err := storeFor(ctx, k, s, shipped[first])
	if err != nil {
		return nil, err
	}
	hlog, err := os.Create(filepath.Join(dir, "helpers.log"))
	if err != nil {
		return nil, err
	}
	defer hlog.Close()
	var dumps *dumpStandIn
	if s.playsDump() {
		if dumps, err = newDumpStandIn(k.cs, shipped); err != nil {
			return nil, err
		}
	}
	h := startHelpers(ctx, k.cs, s.bridgesWebhook(), dumps, hlog)
	defer h.stop()
	sc2 := newScraper(k.cs, dir)
	m := &measurer{c: c, k: k, s: s, h: h, dumps: dumps, scr: sc2, dir: dir, kubeconfig: st.Kubeconfig}

	// 10 s of the bare cluster, for scale.
	idle0, err := sc2.take(ctx, "bare0", nil)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	idle1, err := sc2.take(ctx, "bare1", nil)
	if err != nil {
		return nil, err
	}
	bare := idle1.APIServer.minus(idle0.APIServer).total()

	// Install the first version.
	op, err := m.start(first, "install-"+first)
	if err != nil {
		return nil, err
	}
	defer func() { op.stop() }()
	pre, err := sc2.take(ctx, "install-pre", op)
	if err != nil {
		return nil, err
	}
	trigger := time.Now()
	if err := s.create(ctx, k, first, stored); err != nil {
		return nil, fmt.Errorf("create the custom resource: %w", err)
	}
	r, err := m.measure(ctx, op, "install", first, trigger, "custom resource created", pre, stored.text)
	if err != nil {
		return results, err // a failed phase is not reported as measured
	}
	r.Scenario, r.Round, r.Phase, r.BareCluster10s = sc, round, "install "+first, bare
	results = append(results, r)
	if sc != scenarioUpgrade {
		return results, nil
	}

	// Upgrade: the old process goes, the new target is put in place, a
	// new process starts; the clock starts with it.
	op.stop()
	if err := s.beforeStore(ctx, k, c.to); err != nil {
		return results, err
	}
	next, err := storeFor(ctx, k, s, shipped[c.to])
	if err != nil {
		return results, err
	}
	if err := s.afterStore(ctx, k, c.to, next); err != nil {
		return results, err
	}
	pre, err = sc2.take(ctx, "upgrade-pre", nil)
	if err != nil {
		return results, err
	}
	pre.Own = counts{} // a new process: its counter starts at 0
	op, err = m.start(c.to, "upgrade-"+c.to)
	if err != nil {
		return results, err
	}
	r, err = m.measure(ctx, op, "upgrade", c.to, op.started, "new operator process started", pre, next.text)
	if err != nil {
		return results, err
	}
	r.Scenario, r.Round, r.Phase = sc, round, fmt.Sprintf("upgrade %s -> %s", c.from, c.to)
	return append(results, r), nil
}

// storeFor stores the shipped strategy for a side, unless the side gets it
// from the dump stand-in; either way its text is what the object check
// looks for.
func storeFor(ctx context.Context, k *kube, s side, sh shippedStrategy) (storedStrategy, error) {
	if s.playsDump() {
		return storedStrategy{digest: codec.Digest(sh.text), text: sh.text}, nil
	}
	return k.storeConfigMap(ctx, sh)
}

// measurer measures phases of one side on one cluster.
type measurer struct {
	c          *config
	k          *kube
	s          side
	h          *helpers
	dumps      *dumpStandIn // nil unless the side plays dumps
	scr        *scraper
	dir        string
	kubeconfig string
}

func (m *measurer) start(tag, name string) (*operatorProcess, error) {
	return startProcess(context.Background(), m.s.process(tag, m.kubeconfig, filepath.Join(m.dir, name+".log")), 2*time.Minute)
}

// measure waits until the custom resource reports tag done, reads the
// counters and the process, keeps reading through the idle window, and
// checks that every object of the strategy exists.
func (m *measurer) measure(ctx context.Context, op *operatorProcess, name, tag string, trigger time.Time, what string, pre sample, text []byte) (phaseResult, error) {
	r := phaseResult{Side: m.s.name(), Trigger: what, Log: op.logPath, StartToReady: op.ready.Sub(op.started).Seconds()}
	wctx, cancel := context.WithTimeout(ctx, m.c.timeout)
	defer cancel()
	go func() {
		// A helper that fails or an operator that exits ends the wait.
		select {
		case <-m.h.failed:
		case <-op.exited:
		case <-wctx.Done():
		}
		cancel()
	}()
	var last string
	err := m.k.untilCR(wctx, m.s.resource(), func(u *unstructured.Unstructured) (bool, string) {
		ok, st := m.s.done(u, tag)
		last = st
		return ok, st
	})
	end := time.Now()
	if ferr := errors.Join(m.h.failure(), op.alive()); ferr != nil {
		return r, ferr
	}
	if err != nil {
		return r, err
	}
	r.Status, r.Load = last, loadAverage()
	r.TriggerToDone, r.StartToDone = end.Sub(trigger).Seconds(), end.Sub(op.started).Seconds()
	at, err := m.scr.take(ctx, name+"-done", op)
	if err != nil {
		return r, err
	}
	r.Own, r.OwnFromStart, r.APIServer = at.Own.minus(pre.Own), at.Own, at.APIServer.minus(pre.APIServer)
	r.APIServerTop = at.APIServerBy.minus(pre.APIServerBy).top(20)
	r.AtDone = *at.Proc
	if err := sleep(ctx, m.c.settle); err != nil {
		return r, err
	}
	if ferr := errors.Join(m.h.failure(), op.alive()); ferr != nil {
		return r, ferr
	}
	settled, err := m.scr.take(ctx, name+"-settled", op)
	if err != nil {
		return r, err
	}
	r.IdleOwn, r.IdleAPI = settled.Own.minus(at.Own), settled.APIServer.minus(at.APIServer)
	r.IdleSeconds = settled.At.Sub(at.At).Seconds()
	r.Settled = *settled.Proc
	cr, err := m.k.cr(ctx, m.s.resource())
	if err != nil {
		return r, err
	}
	r.CRStatus, _, _ = unstructured.NestedMap(cr.Object, "status")
	// The whole object: metadata (generation, managedFields) says who
	// wrote what.
	if err := writeYAML(filepath.Join(m.dir, name+"-"+tag+".cr.yaml"), cr.Object); err != nil {
		return r, err
	}
	if m.dumps != nil {
		for _, d := range m.dumps.dumps() {
			if d.Seen.After(trigger) {
				r.Dumps = append(r.Dumps, fmt.Sprintf("job %s seen +%.2f s, strategy stored +%.2f s, pod ended +%.2f s",
					d.Job, d.Seen.Sub(trigger).Seconds(), d.Stored.Sub(trigger).Seconds(), d.Ended.Sub(trigger).Seconds()))
			}
		}
	}
	if r.Objects, err = m.k.checkObjects(ctx, text); err != nil {
		return r, fmt.Errorf("check the strategy's objects: %w", err)
	}
	r.LogErrors = countErrors(op.logPath, op.errorMarker)
	return r, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func absPath(dir, name string) (string, error) {
	return filepath.Abs(filepath.Join(dir, name))
}

// writeResults writes results.json: the machine, the settings and every
// phase.
func writeResults(c *config, results []phaseResult) error {
	host, _ := os.Hostname()
	doc := map[string]any{
		"machine":  map[string]any{"host": host, "cpus": runtime.NumCPU(), "cpu": cpuModel(), "go": runtime.Version()},
		"settings": map[string]any{"rounds": c.rounds, "scenarios": c.scenarios, "from": c.from, "to": c.to, "settleSeconds": c.settle.Seconds(), "nodes": c.nodes},
		"phases":   results,
	}
	data, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.out, "results.json"), data, 0o644)
}

// countErrors counts the lines of a log that hold marker.
func countErrors(path, marker string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, marker) {
			n++
		}
	}
	return n
}
