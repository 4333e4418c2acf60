// Command benchhelm installs a chart with the Helm 4 SDK the way `helm
// install` does (the CLI's settings, server-side apply, no --wait), and
// prints on its last line of standard error the API requests it made. It is
// the Helm side of BenchmarkApply in pkg/engine, built by that benchmark
// into a cache folder; a module of its own so that Helm's dependencies stay
// out of the project's go.mod.
//
//	benchhelm --kubeconfig FILE --namespace NS --release NAME CHART_DIR
//
// HELM_QPS and HELM_BURST_LIMIT set the client's rate limits as they do for
// the helm CLI.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	namespace := flag.String("namespace", "default", "namespace of the release")
	release := flag.String("release", "", "release name")
	driver := flag.String("driver", "secret", "release storage: secret, configmap or memory")
	timeout := flag.Duration("timeout", 300*time.Second, "the CLI's --timeout")
	flag.Parse()
	if flag.NArg() != 1 || *release == "" {
		fmt.Fprintln(os.Stderr, "usage: benchhelm --kubeconfig FILE --namespace NS --release NAME CHART_DIR")
		os.Exit(2)
	}
	var requests atomic.Int64
	err := install(*kubeconfig, *namespace, *release, *driver, *timeout, flag.Arg(0), &requests)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
	}
	fmt.Fprintf(os.Stderr, "requests %d\n", requests.Load())
	if err != nil {
		os.Exit(1)
	}
}

func install(kubeconfig, namespace, release, driver string, timeout time.Duration, dir string, requests *atomic.Int64) error {
	settings := cli.New()
	settings.KubeConfig = kubeconfig
	settings.SetNamespace(namespace)
	getter, ok := settings.RESTClientGetter().(*genericclioptions.ConfigFlags)
	if !ok {
		return fmt.Errorf("helm's REST client getter is a %T, not *genericclioptions.ConfigFlags", settings.RESTClientGetter())
	}
	helmWrap := getter.WrapConfigFn
	getter.WrapConfigFn = func(c *rest.Config) *rest.Config {
		if helmWrap != nil {
			c = helmWrap(c)
		}
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				requests.Add(1)
				return rt.RoundTrip(r)
			})
		})
		return c
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := cfg.Init(getter, namespace, driver); err != nil {
		return err
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		return err
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName = release
	inst.Namespace = namespace
	inst.WaitStrategy = kube.HookOnlyStrategy // the CLI's default: no --wait
	inst.Timeout = timeout
	_, err = inst.RunWithContext(context.Background(), chrt, nil)
	return err
}
