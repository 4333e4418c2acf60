package e2e

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// signedFor is a native strategy ConfigMap of text, annotated as product
// (none when "") and signed by signer, as `kubectl installstrategy sign`
// signs one.
func signedFor(t *testing.T, ns, name string, text []byte, id strategy.Identity, product string, signer *trust.Signer) *corev1.ConfigMap {
	t.Helper()
	cm := strategyConfigMap(t, ns, name, text, id, codec.FormatNative, nil)
	if product != "" {
		cm.Annotations[metakeys.ProductAnnotation] = product
	}
	if err := trust.Sign(cm.Annotations, codec.Digest(text), signer); err != nil {
		t.Fatal(err)
	}
	return cm
}

// otherProduct is the text of another product: one ConfigMap of its own.
func otherProduct(ns string) []byte {
	return []byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other-product-config\n  namespace: " + ns + "\ndata:\n  a: b\n")
}

// Issue 39, finding 2: a configMap source did not bind the product. A
// namespace ConfigMap editor swaps in a strategy of another product signed
// by the same trusted release key (with its product named, with none), or
// replays a strategy the operator stored and signed itself: each is
// refused with UntrustedStrategy, the deployed product is not pruned and
// the other product's objects never appear. A statement signed for
// another identity than the ConfigMap claims is refused too. The product
// changes only when the Installation's author names it
// (spec.strategy.configMap.product).
func TestConfigMapSourceIsBoundToItsProduct(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	mallory := e.configMapEditor(ctx, t, "mallory")
	release := e.trustReleaseKey(ctx, t)

	s100, text100 := sampleText(t, e.ns, "v1.0.0")
	good := signedFor(t, e.ns, "strategy", text100, s100.Identity, "sample", release)
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Create(ctx, good, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := sampleSpec("")
	spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "strategy"}}
	e.create(ctx, t, "sample", spec)
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	if st := in.Status.Strategy; st == nil || st.Product == nil || *st.Product != "sample" {
		t.Fatalf("status.strategy %+v: want the signed product sample recorded", in.Status.Strategy)
	}

	otherText := otherProduct(e.ns)
	otherID := strategy.Identity{Version: "v2.0.0"}
	key, err := trust.EnsureOperatorKey(ctx, e.env.Kube, e.keyNS)
	if err != nil {
		t.Fatal(err)
	}
	// What the operator's store writes for another Installation: the
	// next sample release, signed by the operator's own key.
	operatorStore, err := store.New(e.env.Kube, store.Options{Signer: key.Signer})
	if err != nil {
		t.Fatal(err)
	}
	s110, _ := sampleText(t, e.ns, "v1.1.0")
	stored, err := operatorStore.Publish(ctx, e.ns, s110)
	if err != nil {
		t.Fatal(err)
	}
	replay, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Get(ctx, stored.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replay = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "strategy", Namespace: e.ns, Labels: replay.Labels, Annotations: replay.Annotations}, Data: replay.Data}
	// A genuine statement of the same product, for another identifier
	// than the ConfigMap claims.
	renamed := signedFor(t, e.ns, "strategy", text100, s100.Identity, "sample", release)
	renamed.Annotations[metakeys.IdentifierAnnotation] = "another-identifier"

	for _, step := range []struct {
		name, what string
		cm         *corev1.ConfigMap
	}{
		{"another product signed by the release key", `product "other", want "sample"`, signedFor(t, e.ns, "strategy", otherText, otherID, "other", release)},
		{"another product, its statement naming none", `product "", want "sample"`, signedFor(t, e.ns, "strategy", otherText, otherID, "", release)},
		{"the operator's own stored strategy replayed", trust.ErrUnknownKey.Error(), replay},
		{"a statement for another identity", "the configmap claims", renamed},
	} {
		t.Log(step.name)
		replace(ctx, t, mallory, step.cm)
		in := e.waitRefused(ctx, t, "sample", "strategy", step.what)
		if in.Status.ObservedVersion != "v1.0.0" || in.Status.Phase != v1alpha1.PhaseDeployed {
			t.Errorf("%s: the deployed product did not stay: %s", step.name, describe(in))
		}
		if !e.exists(ctx, t, &appsv1.Deployment{}, "sample-api") {
			t.Errorf("%s: the deployed product was pruned", step.name)
		}
		if e.exists(ctx, t, &corev1.ConfigMap{}, "other-product-config") {
			t.Errorf("%s: the other product was applied", step.name)
		}
	}

	// The author changes the product: then, and only then, it is taken.
	replace(ctx, t, mallory, signedFor(t, e.ns, "strategy", otherText, otherID, "other", release))
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Strategy.ConfigMap.Product = "other" })
	in = e.waitDeployed(ctx, t, "sample", "v2.0.0")
	if st := in.Status.Strategy; st == nil || st.Product == nil || *st.Product != "other" {
		t.Errorf("status.strategy %+v: want product other", in.Status.Strategy)
	}
	if !e.exists(ctx, t, &corev1.ConfigMap{}, "other-product-config") {
		t.Error("the product the author named was not applied")
	}
}

// Per-source keys (spec.strategy.configMap.verify.keysConfigMap): only
// the keys of the named ConfigMap in the key namespace vouch for the
// source. A strategy of the same product signed by another vendor's key,
// trusted operator-wide, is refused; so is anything while the named keys
// ConfigMap does not exist.
func TestPerSourceKeysAloneVouch(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	mallory := e.configMapEditor(ctx, t, "mallory")
	otherVendor := e.trustReleaseKey(ctx, t)
	vendor, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.keyNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "sample-vendor", Namespace: e.keyNS},
		Data:       map[string]string{"vendor.pub": string(vendor.PublicPEM())},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, text := sampleText(t, e.ns, "v1.0.0")
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Create(ctx, signedFor(t, e.ns, "strategy", text, s.Identity, "sample", vendor), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := sampleSpec("")
	spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "strategy",
		Verify: &v1alpha1.VerifySource{KeysConfigMap: "sample-vendor"}}}
	e.create(ctx, t, "sample", spec)
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	if st := in.Status.Strategy; st == nil || st.VerifiedBy != "signed by "+e.keyNS+"/sample-vendor/vendor.pub" {
		t.Errorf("status.strategy %+v: want it verified by the source's own key", in.Status.Strategy)
	}

	evil, binding := escalation(t, e.ns, "v1.0.0", "mallory")
	evilText, err := evil.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	replace(ctx, t, mallory, signedFor(t, e.ns, "strategy", evilText, s.Identity, "sample", otherVendor))
	e.waitRefused(ctx, t, "sample", "strategy", trust.ErrUnknownKey.Error())
	e.assertNotEscalated(ctx, t, binding, "mallory")

	// The source names keys that do not exist: nothing vouches, not even
	// the operator-wide trusted keys.
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.ConfigMap.Verify = &v1alpha1.VerifySource{KeysConfigMap: "missing"}
	})
	e.waitRefused(ctx, t, "sample", "strategy", "verify.keysConfigMap "+e.keyNS+"/missing does not exist")
	e.assertNotEscalated(ctx, t, binding, "mallory")
}
