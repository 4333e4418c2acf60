package engine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// DesiredFirst returns the object a plan of s applies for ref, prepared
// before any other object of s. A plan prepares its objects concurrently,
// so any of them may be the first; this makes the order a test can rely
// on.
func DesiredFirst(ctx context.Context, cfg *rest.Config, s *strategy.Strategy, opts Options, ref strategy.ObjectRef) (*unstructured.Unstructured, error) {
	rc, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r, err := rc.newRun(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	if r.certs, err = newCertState(ctx, r, r.opts.Certificates, true); err != nil {
		return nil, err
	}
	for _, o := range s.Objects {
		if strategy.RefOf(o) == ref {
			return r.certs.desired(ctx, o)
		}
	}
	return nil, fmt.Errorf("%s is not in the strategy", ref)
}

// ConfirmingGetter returns the getter a step's wait of a run of s uses
// around get (see run.confirming).
func ConfirmingGetter(ctx context.Context, rc *Reconciler, s *strategy.Strategy, opts Options, get health.Getter) (health.Getter, error) {
	r, err := rc.newRun(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	return r.confirming(plan.Step{Name: "test"}, get), nil
}

// WaitGetter returns the getter a step's wait of a run of s reads with,
// given the step's write results (see run.getter).
func WaitGetter(ctx context.Context, rc *Reconciler, s *strategy.Strategy, opts Options, results []apply.Result, readyResponsesOnly bool) (health.Getter, error) {
	r, err := rc.newRun(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	return r.getter(ctx, results, readyResponsesOnly), nil
}

// ClaimsAnswer reports whether c is taken as the claim check's answer for
// s and owner.
func ClaimsAnswer(c *Claims, s *strategy.Strategy, owner inventory.Owner) bool {
	return c.answers(s, owner)
}

// ServingDNSNames returns the DNS names the certificate of each empty TLS
// Secret (namespace/name) of s gets, with pods answering the lookups of
// pods behind Services that s's webhooks or APIServices dial and no
// workload of s backs.
func ServingDNSNames(ctx context.Context, s *strategy.Strategy, pods func(ctx context.Context, namespace, selector string, limit int64) ([]corev1.Pod, error)) (map[string][]string, error) {
	sc := scanCerts(s.Objects)
	served, err := servingServices(ctx, sc, pods)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, sec := range sc.secrets {
		key := sec.GetNamespace() + "/" + sec.GetName()
		out[key] = dnsNamesFor(sec, served[key])
	}
	return out, nil
}

// WaitStorage waits, within deadline, until the API server stores the
// custom resources of crd at storage (see run.waitStorage).
func WaitStorage(ctx context.Context, rc *Reconciler, crd *unstructured.Unstructured, storage string, deadline time.Duration) error {
	r := &run{kube: rc.kube, opts: Options{StageDeadline: deadline}}
	return r.waitStorage(ctx, crd, storage)
}
