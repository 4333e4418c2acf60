// Command installstrategy-operator is the installstrategy operator. By
// default it runs the manager: the Installation controller
// (pkg/operator) with leader election, health probes and Prometheus
// metrics. With --dump-install-strategy it reads the target configuration
// from TARGET_DEPLOYMENT_CONFIG, generates the strategy of its product (the
// built-in sample product) and publishes it in the configuration's
// namespace, as KubeVirt's virt-operator does in its dump Job (the logic is
// in internal/dump). This file wires flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/installstrategy/installstrategy/internal/buildinfo"
	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/internal/gctune"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/render/helmexec"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// stdout is where --version prints.
var stdout io.Writer = os.Stdout

// version is the operator's own version, stamped at build time with
// -ldflags "-X main.version=v1.2.0"; empty in development builds, which
// dump any version asked for.
var version = ""

func main() {
	gctune.Apply(os.Getenv, gctune.OperatorPercent)
	os.Exit(exitCode(stderrLogger, os.Args[1:]))
}

// stderrLogger logs to stderr; verbosity 1 adds the steps of rollouts.
func stderrLogger(verbosity int) logr.Logger {
	return funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, args) }, funcr.Options{Verbosity: verbosity})
}

// exitCode runs the operator and maps the outcome to the process's exit
// code: 0 on success and for --help, 1 on failure (logged).
func exitCode(newLog func(verbosity int) logr.Logger, args []string) int {
	err := run(newLog, args)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	default:
		newLog(0).Error(err, "installstrategy-operator failed")
		return 1
	}
}

// operatorFlags are the operator's command line.
type operatorFlags struct {
	dumpMode, metricsSecure, showVersion *bool
	kubeconfig, format                   *string
	verbosity                            *int
	mo                                   managerOptions
}

// parseFlags reads the operator's command line.
func parseFlags(args []string) (*operatorFlags, error) {
	fs := flag.NewFlagSet("installstrategy-operator", flag.ContinueOnError)
	fl := &operatorFlags{}
	fl.dumpMode = fs.Bool("dump-install-strategy", false, "generate the strategy for the configuration in $"+identity.EnvVar+", publish it in its namespace, and exit")
	fl.kubeconfig = fs.String("kubeconfig", "", "kubeconfig file; empty means the in-cluster configuration")
	fl.format = fs.String("strategy-format", string(codec.FormatNative), "form of the published strategy ConfigMap: native or kubevirt")
	fl.metricsSecure = addManagerFlags(fs, &fl.mo)
	addDumpPodFlags(fs, &fl.mo)
	fl.verbosity = fs.Int("log-verbosity", 0, "log detail: 0 logs rollouts and errors, 1 adds every step of a rollout, 2 adds every request to the API server (method, path, status, duration)")
	fs.DurationVar(&fl.mo.stageDeadline, "stage-deadline", engine.DefaultStageDeadline, "how long one step of a rollout (a wave of workloads, the canary) may take before the Installation is Degraded")
	fl.showVersion = fs.Bool("version", false, "print the version, commit and build date, and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fl.mo.metricsInsecure = !*fl.metricsSecure
	if *fl.showVersion {
		return fl, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return fl, nil
}

// addManagerFlags registers the flags of the manager's options on fs and
// returns --metrics-secure.
func addManagerFlags(fs *flag.FlagSet, mo *managerOptions) *bool {
	fs.BoolVar(&mo.leaderElect, "leader-elect", false, "elect a leader, so that only one replica reconciles")
	fs.StringVar(&mo.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease; empty means the pod's namespace in a cluster, else --namespace or "+defaultLeaderElectionNamespace)
	fs.StringVar(&mo.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints; \"0\" disables them")
	fs.StringVar(&mo.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof/ profiles (heap, CPU, goroutines), e.g. 127.0.0.1:8082 (keep it on loopback: a heap profile shows what the operator holds, Secrets included); \"0\" disables them")
	fs.StringVar(&mo.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus /metrics endpoint; \"0\" disables it")
	metricsSecure := fs.Bool("metrics-secure", true, "serve /metrics over HTTPS, only to callers the API server authenticates and authorizes for GET on /metrics (e.g. a ServiceAccount bound to the installstrategy-metrics-reader ClusterRole); false serves plain HTTP to anyone (keep it on loopback)")
	fs.StringVar(&mo.metricsCertDir, "metrics-cert-path", "", "directory holding the metrics server's certificate tls.crt and key tls.key (reloaded when they change); empty means a self-signed certificate made at start")
	fs.BoolVar(&mo.enableHTTP2, "enable-http2", false, "let the metrics server speak HTTP/2 (off: its rapid stream resets, CVE-2023-44487)")
	fs.StringVar(&mo.namespace, "namespace", "", "watch Installations of this namespace only; empty means every namespace")
	fs.StringVar(&mo.keyNamespace, "key-namespace", "", "the operator's own namespace, writable only by cluster administrators: its signing key Secret ("+trust.OperatorKeySecret+") and trusted keys ConfigMap ("+trust.TrustedKeysConfigMap+"); empty means --leader-election-namespace, else the pod's namespace, else "+operator.DefaultKeyNamespace+" (never --namespace)")
	fs.StringVar(&mo.image, "operator-image", os.Getenv("OPERATOR_IMAGE"), "the operator's own image, which dumps the built-in product for versions other than its own (default $OPERATOR_IMAGE)")
	fs.StringVar(&mo.registry, "registry", "", "registry of Installations that name none; empty means "+operator.DefaultRegistry)
	fs.Float64Var(&mo.qps, "kube-api-qps", 100, "queries per second to the API server (a rollout reads and writes many objects)")
	fs.StringVar(&mo.helmRenderer, "helm-renderer", "", "the chart renderer the operator runs for each chart of a Helm source ("+helmexec.HelperName+", shipped with it); empty means the one beside the operator's binary, else in $PATH")
	fs.IntVar(&mo.burst, "kube-api-burst", 200, "burst of queries to the API server")
	fs.IntVar(&mo.maxReconciles, "max-concurrent-reconciles", 0, "Installations reconciled at once (a rollout holds one while it waits for its workloads); 0 means 4")
	fs.DurationVar(&mo.resync, "resync-period", operator.DefaultResyncPeriod, "how often a deployed Installation is reconciled again to repair drift")
	fs.DurationVar(&mo.servedCheck, "served-certificate-check", operator.DefaultServedCertificateCheck, "how often, at most, resyncs dial the Services of generated certificates to check what they present (condition CertificatesServed; also after every rollout); negative: never")
	return metricsSecure
}

// addDumpPodFlags registers the flags that shape dump Job pods on fs.
func addDumpPodFlags(fs *flag.FlagSet, mo *managerOptions) {
	fs.Func("dump-pod-labels", "labels k=v[,k=v] put on dump Job pods (a test hook: the local cluster's simulated kubelet selects behaviours with them)", func(v string) (err error) {
		mo.dumpPodLabels, err = keyValues(v)
		return err
	})
	fs.Func("dump-pod-env", "environment NAME=VALUE[,NAME=VALUE] of dump Job containers, e.g. KUBERNETES_SERVICE_HOST and _PORT where pods cannot reach the kubernetes Service", func(v string) error {
		env, err := keyValues(v)
		for _, k := range slices.Sorted(maps.Keys(env)) {
			mo.dumpPodEnv = append(mo.dumpPodEnv, corev1.EnvVar{Name: k, Value: env[k]})
		}
		return err
	})
	fs.Func("dump-pod-node-selector", "node selector k=v[,k=v] added to dump Job pods", func(v string) error {
		sel, err := keyValues(v)
		placement(mo).NodeSelector = sel
		return err
	})
	fs.Func("dump-pod-tolerations", "tolerations key=value:Effect[,key:Effect] added to dump Job pods", func(v string) error {
		for _, item := range strings.Split(v, ",") {
			kv, effect, ok := strings.Cut(item, ":")
			k, val, hasValue := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("%q is not key[=value]:Effect", item)
			}
			tl := corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(effect)}
			if hasValue {
				tl.Operator, tl.Value = corev1.TolerationOpEqual, val
			}
			placement(mo).Tolerations = append(placement(mo).Tolerations, tl)
		}
		return nil
	})
}

// checkManagerOptions checks and completes the options the flags gave.
func checkManagerOptions(mo *managerOptions) error {
	if mo.stageDeadline <= 0 {
		return fmt.Errorf("--stage-deadline %s: must be positive", mo.stageDeadline)
	}
	if mo.maxReconciles < 0 {
		return fmt.Errorf("--max-concurrent-reconciles %d: must not be negative", mo.maxReconciles)
	}
	if mo.helmRenderer != "" {
		// Absolute: a bare name would be checked here and looked up in
		// $PATH when run.
		abs, err := filepath.Abs(mo.helmRenderer)
		if err == nil {
			err = executableFile(abs)
		}
		if err != nil {
			return fmt.Errorf("--helm-renderer %s: %w", mo.helmRenderer, err)
		}
		mo.helmRenderer = abs
	}
	if mo.metricsCertDir != "" {
		// controller-runtime would fall back to a self-signed certificate
		// without a word.
		for _, name := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(mo.metricsCertDir, name)); err != nil {
				return fmt.Errorf("--metrics-cert-path %s: %w", mo.metricsCertDir, err)
			}
		}
	}
	return nil
}

func run(newLog func(verbosity int) logr.Logger, args []string) error {
	fl, err := parseFlags(args)
	if err != nil {
		return err
	}
	if *fl.showVersion {
		_, err := fmt.Fprintf(stdout, "installstrategy-operator %s\n", buildinfo.Get())
		return err
	}
	mo := fl.mo
	if err := checkManagerOptions(&mo); err != nil {
		return err
	}
	log := newLog(*fl.verbosity)
	if !*fl.dumpMode {
		cfg, err := managerRestConfig(*fl.kubeconfig)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		mo.version = version
		return runManager(ctx, log, cfg, mo)
	}
	return runDump(log, *fl.kubeconfig, *fl.format)
}

// runDump is --dump-install-strategy: generate the strategy of
// $TARGET_DEPLOYMENT_CONFIG (identity.EnvVar), publish it, and report its
// digest.
func runDump(log logr.Logger, kubeconfig, format string) error {
	f, err := codec.ParseFormat(format)
	if err != nil {
		return err
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	st, err := store.NewForConfig(cfg, store.Options{Format: f})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := dump.Run(ctx, dump.Options{ConfigJSON: []byte(os.Getenv(identity.EnvVar)), Store: st, OwnVersion: version})
	if err != nil {
		return err
	}
	// The operator accepts only the strategy whose digest the container
	// reports in its termination message (where the kubelet mounts it).
	if _, err := os.Stat(dump.TerminationLog); err == nil {
		if err := os.WriteFile(dump.TerminationLog, []byte(res.Digest), 0o644); err != nil {
			return fmt.Errorf("dump strategy: report the digest: %w", err)
		}
	}
	kv := []any{"configmap", res.Entry.String(), "version", res.Identity.Version, "identifier", res.Identity.Identifier, "digest", res.Digest, "objects", res.Objects, "chunks", len(res.Entry.Chunks)}
	if res.Published {
		log.Info("strategy published", kv...)
	} else {
		log.Info("strategy already stored", kv...)
	}
	return nil
}

// restConfig loads the kubeconfig file when one is given, else the
// in-cluster configuration.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
	}
	return cfg, nil
}

// keyValues parses k=v[,k=v].
func keyValues(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not k=v", kv)
		}
		out[k] = val
	}
	return out, nil
}

// placement returns the dump pods' extra placement, creating it.
func placement(mo *managerOptions) *identity.NodePlacement {
	if mo.dumpPodPlacement == nil {
		mo.dumpPodPlacement = &identity.NodePlacement{}
	}
	return mo.dumpPodPlacement
}
