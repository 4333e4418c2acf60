// Command kubevirt-operator installs and upgrades KubeVirt from its own
// KubeVirt custom resource with the installstrategy engine (pkg/operator):
// a small operator author's operator, the tutorial of docs/EMBEDDING.md.
//
//	go run ./examples/kubevirt-operator --kubeconfig ~/.kube/config
//
// It reconciles every kubevirt.io/v1 KubeVirt: the strategy of the spec's
// imageTag and imageRegistry comes from a dump Job of that release's
// virt-operator image (as virt-operator gets it), is applied in the
// engine's order with its rollout checks, canary and pruning, and the
// KubeVirt's status is written as virt-operator writes it. It answers
// virt-operator's own webhooks of the strategy (virt-operator-validator:
// create, update and delete of KubeVirt) on --webhook-port, with the
// certificate the engine issues into kubevirt-operator-certs; run it as
// config/operator.yaml's Deployment, whose pods the strategy's Service
// selects (README.md is the tutorial).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr/funcr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/installstrategy/installstrategy/examples/kubevirt-operator/kubevirt"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

func main() {
	var (
		version, registry, keyNamespace, metricsAddr string
		hooks                                        webhookFlags
	)
	flag.StringVar(&version, "version", "v1.9.0", "KubeVirt version of a KubeVirt whose spec.imageTag is empty")
	flag.StringVar(&registry, "registry", kubevirt.DefaultRegistry, "registry of a KubeVirt whose spec.imageRegistry is empty")
	flag.StringVar(&keyNamespace, "key-namespace", "kubevirt-installstrategy", "namespace of the operator's signing key and trusted keys (only cluster administrators may write it; not KubeVirt's namespace)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "address of the metrics endpoint (0: none)")
	flag.StringVar(&hooks.namespace, "namespace", "kubevirt", "KubeVirt's install namespace, where the operator's pods run: the Service and certificate of virt-operator-validator are there")
	flag.StringVar(&hooks.host, "webhook-host", "", "address the webhook server of virt-operator-validator listens on (empty: every address)")
	flag.IntVar(&hooks.port, "webhook-port", kubevirt.WebhookPort, "port of that server: the operator pod's container port \"webhooks\", which the strategy's Service kubevirt-operator-webhook targets")
	verbosity := flag.Int("v", 0, "log verbosity (1: every rollout step)")
	dumpPodLabels := map[string]string{}
	flag.Func("dump-pod-label", "KEY=VALUE label on the dump Jobs' pods (repeatable; e.g. what a cluster's policy selects on)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		dumpPodLabels[k] = val
		return nil
	})
	flag.Parse()
	ctrl.SetLogger(funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, args) }, funcr.Options{Verbosity: *verbosity}))
	if err := run(version, registry, keyNamespace, metricsAddr, dumpPodLabels, hooks); err != nil {
		fmt.Fprintln(os.Stderr, "kubevirt-operator:", err)
		os.Exit(1)
	}
}

// webhookFlags say where virt-operator-validator is served.
type webhookFlags struct {
	namespace, host string
	port            int
}

func run(version, registry, keyNamespace, metricsAddr string, dumpPodLabels map[string]string, hooks webhookFlags) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// As docs/EMBEDDING.md recommends: cache only strategy ConfigMaps,
	// and of them only what the watch reads (others are read directly),
	// without managed fields.
	strategies, err := operator.StrategyConfigMapsCache()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: metricsAddr},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: strategies},
			DefaultTransform: cache.TransformStripManagedFields()}})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	defaults := operator.Defaults{Version: version, Registry: registry}
	r, err := operator.New(mgr, operator.Options{
		Resource:      kubevirt.Resource{Defaults: defaults},
		Defaults:      defaults,
		KeyNamespace:  keyNamespace,
		DumpPodLabels: dumpPodLabels,
		// virt-operator's image is the dump image: see kubevirt.DumpImageEnv.
		ForeignDumps: true, DumpImageEnv: kubevirt.DumpImageEnv, DumpClusterRules: kubevirt.DumpClusterRules,
	})
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	// A KubeVirt virt-operator installed keeps virt-operator's finalizer:
	// removed, as virt-operator does, once the engine has uninstalled it.
	if err := (kubevirt.FinalizerRelease{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	// virt-operator's own webhooks (virt-operator-validator) are in
	// KubeVirt's strategy, failurePolicy Fail: this process answers them,
	// as virt-operator does, on the certificate the engine issues.
	w := kubevirt.Webhooks(mgr.GetClient(), mgr.GetAPIReader(), hooks.namespace)
	w.Host, w.Port = hooks.host, hooks.port
	if _, err := operator.ServeWebhooks(mgr, w); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
