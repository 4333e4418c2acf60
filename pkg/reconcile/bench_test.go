package reconcile_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/reconcile"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// BenchmarkApplyKubeVirt applies the real KubeVirt v1.9.0 strategy to an
// empty cluster (no rollout waits) with `kubectl apply --server-side` of the
// decoded text (the baseline) and with reconcile.Run, in the same run
// against the same cluster, and reports the objects each applied and the
// API requests each made. It needs kubectl on PATH and the test cluster.
//
//	go test -run '^$' -bench ApplyKubeVirt -benchtime 1x ./pkg/reconcile
func BenchmarkApplyKubeVirt(b *testing.B) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		b.Skip("kubectl not on PATH")
	}
	env := testenv.New(b)
	testenv.Lock(b, testenv.KubeVirtLock)
	ctx := b.Context()
	path := kubevirtdata.Path(b, "v1.9.0", "manifests.yaml")
	kubeconfig := os.Getenv(testenv.KubeconfigEnv)
	s := kubevirtStrategy(b, "v1.9.0")

	clean := func() {
		b.Helper()
		cctx := context.WithoutCancel(ctx)
		_ = exec.CommandContext(cctx, kubectl, "--kubeconfig", kubeconfig, "delete", "-f", path, "--ignore-not-found", "--wait=true").Run()
		if _, err := reconcile.Uninstall(cctx, env.Config, reconcile.UninstallOptions{Owner: kubevirtOwner, Wait: true}); err != nil {
			b.Fatal(err)
		}
		_ = env.Kube.CoreV1().Namespaces().Delete(cctx, "kubevirt", metav1.DeleteOptions{})
		if err := testenv.Poll(cctx, "namespace kubevirt gone", func(ctx context.Context) (bool, string, error) {
			_, err := env.Kube.CoreV1().Namespaces().Get(ctx, "kubevirt", metav1.GetOptions{})
			return err != nil && strings.Contains(err.Error(), "not found"), "", nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	clean()
	b.Cleanup(clean)

	// kubectlApplied holds "kind.group/name" of what kubectl applied.
	kubectlApplied := map[string]bool{}
	b.Run("kubectl", func(b *testing.B) {
		var applied, requests int
		for range b.N {
			b.StopTimer()
			clean()
			// kubectl cannot create the namespace (it is not in the text).
			if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			cache := b.TempDir()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "--cache-dir", cache, "-v=6", "apply", "--server-side", "-f", path)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			b.StartTimer()
			_ = cmd.Run() // fails for the objects it cannot apply
			b.StopTimer()
			applied = strings.Count(stdout.String(), " serverside-applied")
			for _, line := range strings.Split(stdout.String(), "\n") {
				if ref, ok := strings.CutSuffix(line, " serverside-applied"); ok {
					kubectlApplied[ref] = true
				}
			}
			requests = strings.Count(stderr.String(), "round_trippers.go")
		}
		b.ReportMetric(float64(applied), "objects")
		b.ReportMetric(float64(requests), "requests/op")
	})

	common := &strategy.Strategy{Identity: s.Identity}
	for _, o := range s.Objects {
		ref := strings.ToLower(o.GetKind())
		if g := o.GroupVersionKind().Group; g != "" {
			ref += "." + g
		}
		if kubectlApplied[ref+"/"+o.GetName()] {
			common.Objects = append(common.Objects, o)
		}
	}
	for _, bc := range []struct {
		name string
		s    *strategy.Strategy
	}{{"installstrategy", s}, {"installstrategy-common", common}} {
		b.Run(bc.name, func(b *testing.B) {
			var applied, skipped int
			var requests atomic.Int64
			cfg := rest.CopyConfig(env.Config)
			cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
				return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
					requests.Add(1)
					return rt.RoundTrip(r)
				})
			}
			var perOp int64
			for range b.N {
				b.StopTimer()
				clean()
				requests.Store(0)
				b.StartTimer()
				start := time.Now()
				res, err := reconcile.Run(ctx, cfg, bc.s, reconcile.Options{Owner: kubevirtOwner, NoWait: true, Interval: 100 * time.Millisecond, StageDeadline: 2 * time.Minute,
					OnEvent: func(e reconcile.Event) {
						if e.Type == reconcile.EventStepReady || e.Type == reconcile.EventStepStarted {
							b.Logf("%6dms %s %s", time.Since(start).Milliseconds(), e.Type, e.Step)
						}
					}})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				perOp = requests.Load()
				applied = len(res.Applied) - res.Count(apply.ActionSkip)
				skipped = res.Count(apply.ActionSkip)
			}
			b.ReportMetric(float64(applied), "objects")
			b.ReportMetric(float64(skipped), "skipped")
			b.ReportMetric(float64(perOp), "requests/op")
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
