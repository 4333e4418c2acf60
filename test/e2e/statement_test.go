package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// A release key's signature on a configMap source is bound to what the
// strategy is: its signed statement (written by every signer) must name
// the text read, and a version no older than the deployed one. A
// ConfigMap editor who puts the authentic, signed older release under the
// named ConfigMap, strips the statement, or pairs a genuine statement with
// another text is refused with UntrustedStrategy, the deployed version
// staying; the Installation author can allow the downgrade.
func TestSignedConfigMapIsBoundToItsIdentity(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	const user = "mallory"
	mallory := e.configMapEditor(ctx, t, user)
	release := e.trustReleaseKey(ctx, t)

	s110, text110 := sampleText(t, e.ns, "v1.1.0")
	cur := strategyConfigMap(t, e.ns, "strategy", text110, s110.Identity, codec.FormatNative, release)
	if cur.Annotations[metakeys.StatementAnnotation] == "" {
		t.Fatal("a signed strategy carries no statement")
	}
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Create(ctx, cur, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := sampleSpec("")
	spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "strategy"}}
	e.create(ctx, t, "sample", spec)
	e.waitDeployed(ctx, t, "sample", "v1.1.0")

	s100, text100 := sampleText(t, e.ns, "v1.0.0")
	older := strategyConfigMap(t, e.ns, "strategy", text100, s100.Identity, codec.FormatNative, release)
	noStatement := cur.DeepCopy()
	delete(noStatement.Annotations, metakeys.StatementAnnotation)
	delete(noStatement.Annotations, metakeys.StatementSignatureAnnotation)
	// The older text with its own signature, but the current release's
	// genuine statement.
	mixed := older.DeepCopy()
	mixed.Annotations[metakeys.StatementAnnotation] = cur.Annotations[metakeys.StatementAnnotation]
	mixed.Annotations[metakeys.StatementSignatureAnnotation] = cur.Annotations[metakeys.StatementSignatureAnnotation]
	for _, step := range []struct {
		name, what string
		cm         *corev1.ConfigMap
	}{
		{"the signed older release", "downgrade refused: v1.0.0 is older than the deployed v1.1.0", older},
		{"the statement removed", "signed without a statement of its product and version", noStatement},
		{"another release's statement", "the text read hashes to " + codec.Digest(text100), mixed},
	} {
		t.Log(step.name)
		replace(ctx, t, mallory, step.cm)
		in := e.waitRefused(ctx, t, "sample", "strategy", step.what)
		if in.Status.ObservedVersion != "v1.1.0" || in.Status.Phase != v1alpha1.PhaseDeployed {
			t.Errorf("%s: the deployed version did not stay: %s", step.name, describe(in))
		}
	}

	// The author allows the rollback.
	replace(ctx, t, mallory, older)
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.AllowDowngrade = true })
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	// A cluster admin revokes the release key: the strategy it signed is
	// refused at once (the trusted keys ConfigMap is watched; the resync
	// is a minute away), without an operator restart.
	cm, err := e.env.Kube.CoreV1().ConfigMaps(e.keyNS).Get(ctx, trust.TrustedKeysConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{}
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.keyNS).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	soon, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e.waitRefused(soon, t, "sample", "strategy", "signed by a key that is not trusted")
}
