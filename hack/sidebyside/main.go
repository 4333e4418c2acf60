// Command sidebyside measures KubeVirt's own virt-operator, the
// installstrategy operator (issue #13 b) and the example operator
// examples/kubevirt-operator (issue #26: the SDK inside someone else's
// operator) side by side: each runs as a local process against a local
// cluster started for the run (real etcd, kube-apiserver,
// controller-manager and scheduler, kwok nodes), from the same KubeVirt
// strategy, and the run prints one table per phase with every side and
// its ratio to virt-operator (the baseline), then the KubeVirt CR status
// of virt-operator and of the example compared field by field.
//
//	sidebyside [--rounds N] [--scenarios install,upgrade] [--sides virt-operator,installstrategy,example] ...
//	sidebyside --report results.json
//
// Scenarios, each on a fresh cluster per side and round:
//
//   - install: the strategy of --to is made available, the operator
//     started; measured from the creation of the custom resource until it
//     reports done. virt-operator: KubeVirt kubevirt/kubevirt, spec {},
//     the strategy ConfigMap stored, done at condition Available=True at
//     the version. installstrategy: Installation kubevirt/kubevirt naming
//     the ConfigMap and its digest, done at phase Deployed, Available=True,
//     observedVersion the target. example: the same KubeVirt and done as
//     virt-operator; no ConfigMap stored: the harness does the work of its
//     dump Job (dumpStandIn: the shipped strategy of the version the Job
//     asks for, unsigned, its digest as the pod's termination message).
//   - upgrade: --from installed as above (measured too), then the operator
//     stopped, the --to strategy made available (virt-operator: its KubeVirt
//     CRD applied and ConfigMap stored; ours: the ConfigMap stored and the
//     Installation's spec pointed at it; example: the CRD applied), a new
//     operator process started (virt-operator --to's binary; ours the same
//     binary; the example the same binary with --version --to); measured
//     from that process start until done at --to.
//
// Per phase: wall time, the operator's own API requests (its client
// counter from its /metrics: kubevirt_rest_client_requests_total or
// rest_client_requests_total), the API server's apiserver_request_total
// delta (every client: the operator, controller-manager, scheduler, kwok
// and this harness's watches and stand-ins), peak RSS (VmHWM) and CPU
// seconds (utime+stime) of the process, and the same counters over
// --settle after done (idle). Every object of the strategy is then looked
// up (every side must have created the same objects) and the custom
// resource read.
//
// The sides share the cluster set-up: namespace kubevirt (labels of
// KubeVirt's release manifest), the PriorityClass and KubeVirt CRD from
// the tag's manifests/generated, and an allow-all stand-in for virt-api's
// admission webhooks on virt-api's ClusterIP:443 with the certificate the
// operator put into kubevirt-virt-api-certs (kwok runs no containers; the
// webhooks are failurePolicy Fail). virt-operator also gets a TCP bridge
// from its own webhook Service's ClusterIP:443 to its process's :8444.
// Each local cluster has its own loopback service CIDR (by a hash of its
// state directory); should another helper still hold the same
// ClusterIP:443, the failed bind stops the run with a message saying so.
//
// Prerequisite: the virt-operator binaries, built by
// ../shared/tools/virtoperator/build.sh (make virt-operator-build). See
// docs/PERFORMANCE.md, "Side by side with virt-operator", and
// docs/EMBEDDING.md, "Compared with virt-operator".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/installstrategy/installstrategy/internal/cmdmain"
)

// config is what the flags say.
type config struct {
	rounds      int
	scenarios   []string
	sides       []string
	from, to    string
	voBin       string // virt-operator-TAG binaries
	kvSrc       string // prefix of KubeVirt source trees PREFIX-TAG
	testdata    string // kubevirt-TAG.configmap.yaml
	stateDir    string
	binDir      string
	nodes       int
	out         string
	operatorBin string   // ours; built from ./cmd/installstrategy-operator when empty
	exampleBin  string   // examples/kubevirt-operator; built when empty
	extraFlags  []string // more flags of ours (diagnostics, e.g. --log-verbosity=1)
	settle      time.Duration
	timeout     time.Duration
	reportFrom  string // print the report of this results.json, run nothing
}

func main() { cmdmain.Run("sidebyside", run) }

func run(ctx context.Context, args []string) error {
	c, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.reportFrom != "" {
		return reprint(os.Stdout, c.reportFrom)
	}
	if err := c.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	for _, b := range []struct {
		side, pkg string
		bin       *string
	}{{sideOurs, "./cmd/installstrategy-operator", &c.operatorBin}, {sideExample, "./examples/kubevirt-operator", &c.exampleBin}} {
		if *b.bin != "" || !c.has(b.side) {
			continue
		}
		if *b.bin, err = buildBinary(ctx, c.out, b.pkg); err != nil {
			return err
		}
	}
	results, err := runAll(ctx, c)
	// Whatever was measured is reported, also after a failure.
	if len(results) > 0 {
		if werr := writeResults(c, results); werr != nil {
			err = errors.Join(err, werr)
		}
		printReport(os.Stdout, c, results)
	}
	return err
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	c := &config{}
	var scenarios, sides string
	fs.IntVar(&c.rounds, "rounds", 2, "rounds of every scenario and side (the sides alternate which goes first)")
	fs.StringVar(&scenarios, "scenarios", "install,upgrade", "scenarios to run: install (of --to), upgrade (--from, then --to)")
	fs.StringVar(&sides, "sides", strings.Join(allSides, ","), "sides to run: "+strings.Join(allSides, ", ")+" (examples/kubevirt-operator)")
	fs.StringVar(&c.from, "from", "v1.8.4", "KubeVirt version the upgrade starts from")
	fs.StringVar(&c.to, "to", "v1.9.0", "KubeVirt version installed, and upgraded to")
	fs.StringVar(&c.voBin, "vo-bin", "/tmp/vo-bin", "folder of the virt-operator-TAG binaries (../shared/tools/virtoperator/build.sh)")
	fs.StringVar(&c.kvSrc, "kubevirt-src", "/tmp/vo", "prefix of the KubeVirt source trees PREFIX-TAG (build.sh's worktrees): their manifests/generated hold the KubeVirt CRD and PriorityClass")
	fs.StringVar(&c.testdata, "testdata", "../shared/testdata/kubevirt", "folder of kubevirt-TAG.configmap.yaml")
	fs.StringVar(&c.stateDir, "state-dir", "_output/sidebyside-cluster", "state directory of the local cluster (one at a time, started and stopped per side)")
	fs.StringVar(&c.binDir, "bin-dir", os.Getenv("TOOLS_DIR"), "control-plane binaries (make tools; default $TOOLS_DIR)")
	fs.IntVar(&c.nodes, "nodes", 3, "kwok nodes of the cluster")
	fs.StringVar(&c.out, "out", "_output/sidebyside", "folder for results.json, operator logs and metrics snapshots")
	fs.StringVar(&c.operatorBin, "operator", "", "our operator binary; empty builds ./cmd/installstrategy-operator")
	fs.StringVar(&c.exampleBin, "example", "", "the example operator's binary; empty builds ./examples/kubevirt-operator")
	fs.Func("operator-flag", "one more flag of our operator (repeatable), e.g. --log-verbosity=1 to see its steps; figures of the report are with none", func(v string) error {
		c.extraFlags = append(c.extraFlags, v)
		return nil
	})
	fs.DurationVar(&c.settle, "settle", 30*time.Second, "idle window measured after done")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "how long a phase may take to reach done")
	fs.StringVar(&c.reportFrom, "report", "", "print the report of an earlier run's results.json (e.g. after changing the status reasons) and run nothing")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.scenarios = splitList(scenarios)
	c.sides = splitList(sides)
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// check fails early and clearly on missing inputs.
func (c *config) check() error {
	var errs []error
	if c.rounds < 1 {
		errs = append(errs, fmt.Errorf("--rounds %d: at least 1", c.rounds))
	}
	if c.binDir == "" {
		errs = append(errs, errors.New("--bin-dir (or $TOOLS_DIR) is empty: set TOOLS_DIR=$(hack/tools.sh dir)"))
	}
	for _, s := range c.scenarios {
		if s != scenarioInstall && s != scenarioUpgrade {
			errs = append(errs, fmt.Errorf("--scenarios: unknown %q (install, upgrade)", s))
		}
	}
	for _, s := range c.sides {
		if !slices.Contains(allSides, s) {
			errs = append(errs, fmt.Errorf("--sides: unknown %q (%s)", s, strings.Join(allSides, ", ")))
		}
	}
	for _, tag := range c.tags() {
		for _, f := range []string{c.configMapFile(tag), c.generated(tag, "kv-resource.yaml"), c.generated(tag, "kubevirt-priority-class.yaml")} {
			if _, err := os.Stat(f); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f, err))
			}
		}
		if c.has(sideVirtOperator) {
			if _, err := os.Stat(c.voBinary(tag)); err != nil {
				errs = append(errs, fmt.Errorf("virt-operator %s: %w (build it: KV_MIRROR=DIR ../shared/tools/virtoperator/build.sh %s, or make virt-operator-build)", tag, err, tag))
			}
		}
	}
	return errors.Join(errs...)
}

// allSides are the sides in report order; virt-operator is the baseline.
var allSides = []string{sideVirtOperator, sideOurs, sideExample}

func (c *config) has(side string) bool { return slices.Contains(c.sides, side) }

// tags are the KubeVirt versions the scenarios need.
func (c *config) tags() []string {
	tags := []string{c.to}
	for _, s := range c.scenarios {
		if s == scenarioUpgrade {
			tags = append(tags, c.from)
		}
	}
	return tags
}

func (c *config) configMapFile(tag string) string {
	return filepath.Join(c.testdata, "kubevirt-"+tag+".configmap.yaml")
}

func (c *config) generated(tag, file string) string {
	return filepath.Join(c.kvSrc+"-"+tag, "manifests", "generated", file)
}

func (c *config) voBinary(tag string) string {
	return filepath.Join(c.voBin, "virt-operator-"+tag)
}
