package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/productdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestProductThroughOperator: an upstream product (the first of
// shared/testdata/products whose webhooks do not guard namespaces, which
// under kwok would refuse every namespace write) installed by an
// Installation reading its strategy ConfigMap, upgraded and rolled back by
// pointing the Installation at the other version's ConfigMap, and removed
// with the Installation: everything it applied is gone, and its inventory
// goes with the Installation.
func TestProductThroughOperator(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	var p productdata.Product
	for _, c := range productdata.All(t) {
		if len(c.Versions) > 1 && !c.GuardsNamespaces(t) {
			p = c
			break
		}
	}
	if p.Name == "" {
		t.Fatal("no product of shared/testdata/products with two versions and no namespace-guarding webhook")
	}
	st, err := store.NewForConfig(e.env.Config, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Each version is published just before the Installation names it:
	// the operator garbage-collects stored strategies it does not use.
	spec := func(v string) v1alpha1.InstallationSpec {
		text, err := os.ReadFile(p.Path(v))
		if err != nil {
			t.Fatal(err)
		}
		entry, err := st.PublishText(ctx, e.ns, text, strategy.Identity{Version: v})
		if err != nil {
			t.Fatalf("%s %s: %v", p.Name, v, err)
		}
		s := sampleSpec(v)
		s.Strategy = &v1alpha1.StrategySource{ConfigMap: configMapSource(entry)}
		s.PruneCRDs = true
		return s
	}
	first, last := p.Versions[0], p.Versions[len(p.Versions)-1]
	e.create(ctx, t, p.Name, spec(first))
	in := e.waitDeployed(ctx, t, p.Name, first)
	owner := operator.Owner(in)
	inv, err := inventory.NewStore(e.env.Kube).Get(ctx, owner)
	if err != nil || !inv.Exists() || len(inv.Entries) == 0 {
		t.Fatalf("inventory of %s: %v %+v", owner, err, inv)
	}
	for _, v := range []string{last, first} {
		e.update(ctx, t, p.Name, func(in *v1alpha1.Installation) { in.Spec = spec(v) })
		e.waitDeployed(ctx, t, p.Name, v)
	}
	inv, err = inventory.NewStore(e.env.Kube).Get(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	refs := inv.Refs()

	in, err = e.get(ctx, p.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, in); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, p.Name+" uninstalled", func(ctx context.Context) (bool, string, error) {
		_, err := e.get(ctx, p.Name)
		return apierrors.IsNotFound(err), "", nil
	})
	left, err := e.env.Survivors(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range left {
		t.Errorf("%s outlived the Installation", ref)
	}
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Get(ctx, inventory.ConfigMapName(owner), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("inventory after uninstall: %v", err)
	}
}

// publish stores s in the test's namespace, unsigned (Installations pin
// it by digest, see configMapSource).
func (e *e2e) publish(ctx context.Context, t *testing.T, s *strategy.Strategy) store.Entry {
	t.Helper()
	st, err := store.NewForConfig(e.env.Config, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := st.Publish(ctx, e.ns, s)
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// publishSample generates the sample product at version for the test's
// namespace, as the operator would, and publishes it unsigned.
func (e *e2e) publishSample(ctx context.Context, t *testing.T, version string) (*strategy.Strategy, store.Entry) {
	t.Helper()
	_, cfg := expectedIdentity(t, e.ns, version, nil)
	s, err := generate.Sample(cfg, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, e.publish(ctx, t, s)
}

// configMapSource names a stored strategy for an Installation, pinned by
// its digest (the trust policy applies a named ConfigMap only when it is
// signed by a trusted key or its digest is pinned).
func configMapSource(e store.Entry) *v1alpha1.ConfigMapStrategySource {
	return &v1alpha1.ConfigMapStrategySource{Name: e.Name, Digest: e.Digest}
}
