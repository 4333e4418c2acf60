package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// configMapEditor returns a client acting as a user who may do anything
// with ConfigMaps of the install namespace, and nothing else (the
// Installation, Secrets, RBAC, the operator's namespace are out of reach).
func (e *e2e) configMapEditor(ctx context.Context, t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	kube := e.env.Kube
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configmap-editor", Namespace: e.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}}
	if _, err := kube.RbacV1().Roles(e.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "configmap-editor", Namespace: e.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := kube.RbacV1().RoleBindings(e.ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(e.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// isClusterAdmin asks the API server whether user may do everything.
func (e *e2e) isClusterAdmin(ctx context.Context, t *testing.T, user string) bool {
	t.Helper()
	sar, err := e.env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// escalation returns the sample product at version with one object more: a
// ClusterRoleBinding of cluster-admin to user.
func escalation(t *testing.T, ns, version, user string) (*strategy.Strategy, string) {
	t.Helper()
	_, cfg := expectedIdentity(t, ns, version, nil)
	s, err := generate.Sample(cfg, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	name := "escalate-" + ns
	s.Objects = append(s.Objects, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": name},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	}})
	s.Sort()
	return s, name
}

func sampleText(t *testing.T, ns, version string) (*strategy.Strategy, []byte) {
	t.Helper()
	_, cfg := expectedIdentity(t, ns, version, nil)
	s, err := generate.Sample(cfg, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	text, err := s.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s, text
}

// trustReleaseKey makes a release key and has a cluster admin trust it:
// its public key is "release.pub" of the trusted keys ConfigMap in the
// operator's namespace.
func (e *e2e) trustReleaseKey(ctx context.Context, t *testing.T) *trust.Signer {
	t.Helper()
	release, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.keyNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: trust.TrustedKeysConfigMap, Namespace: e.keyNS},
		Data:       map[string]string{"release.pub": string(release.PublicPEM())},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return release
}

// strategyConfigMap is a strategy ConfigMap named name of the text, in the
// given form, signed when signer is set.
func strategyConfigMap(t *testing.T, ns, name string, text []byte, id strategy.Identity, f codec.Format, signer *trust.Signer) *corev1.ConfigMap {
	t.Helper()
	cm, err := codec.EncodeText(text, codec.EncodeOptions{Format: f, Namespace: ns, Name: name, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	if signer != nil {
		if err := trust.Sign(cm.Annotations, codec.Digest(text), signer); err != nil {
			t.Fatal(err)
		}
	}
	return cm
}

// replace writes cm over the ConfigMap of the same name, as client, the
// way kubectl replace does: without a resourceVersion, so a write of the
// operator in between is no conflict.
func replace(ctx context.Context, t *testing.T, c kubernetes.Interface, cm *corev1.ConfigMap) {
	t.Helper()
	next := cm.DeepCopy()
	next.ResourceVersion = ""
	if _, err := c.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("replace configmap %s: %v", cm.Name, err)
	}
}

// waitRefused waits until the Installation is Degraded with
// UntrustedStrategy and a message naming the ConfigMap and containing what.
func (e *e2e) waitRefused(ctx context.Context, t *testing.T, name, configMap, what string) *v1alpha1.Installation {
	t.Helper()
	var last *v1alpha1.Installation
	if err := pollInstallation(ctx, e, name, func(in *v1alpha1.Installation) bool {
		last = in
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonUntrustedStrategy &&
			strings.Contains(c.Message, e.ns+"/"+configMap) && strings.Contains(c.Message, what)
	}); err != nil {
		c := last.Condition(v1alpha1.ConditionDegraded)
		t.Fatalf("%s refused (%s): %v; last %s, degraded %+v", name, what, err, describe(last), c)
	}
	return last
}

// assertNotEscalated checks that the escalation's ClusterRoleBinding does
// not exist, the user is not cluster-admin, and the product still runs.
func (e *e2e) assertNotEscalated(ctx context.Context, t *testing.T, binding, user string) {
	t.Helper()
	_, err := e.env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, binding, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("clusterrolebinding %s: %v; want it never created", binding, err)
	}
	if e.isClusterAdmin(ctx, t, user) {
		t.Errorf("user %s is cluster-admin", user)
	}
	if !e.exists(ctx, t, &appsv1.Deployment{}, "sample-api") {
		t.Error("the refused strategy removed sample-api")
	}
}

// waitRefusals waits until the running operator has refused more
// strategy ConfigMaps than before.
func (e *e2e) waitRefusals(ctx context.Context, t *testing.T, before float64) {
	t.Helper()
	testenv.WaitFor(ctx, t, "the operator refuses the strategy", func(context.Context) (bool, string, error) {
		n := testutil.ToFloat64(e.metrics.UntrustedStrategies.WithLabelValues("configmap"))
		return n > before, fmt.Sprintf("%v refusals", n), nil
	})
}

// The escalation of issue 12: a user who may only edit ConfigMaps of the
// install namespace replaces the strategy ConfigMap an Installation names
// with the same product plus a ClusterRoleBinding of cluster-admin to
// themselves — in the native form with the digest recomputed (keeping the
// old signature, unsigned, signed by their own key) and in KubeVirt's form.
// Every time: Degraded with UntrustedStrategy naming the ConfigMap and
// what failed, an Event, the metric, the binding never exists, the user is
// not cluster-admin, the deployed version stays; also after an operator
// restart. A strategy signed by a key of the trusted keys ConfigMap is
// applied, and a KubeVirt-form ConfigMap is applied when its digest is
// pinned.
func TestConfigMapEditorCannotEscalate(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	const user = "mallory"
	mallory := e.configMapEditor(ctx, t, user)
	if e.isClusterAdmin(ctx, t, user) {
		t.Fatal("mallory is cluster-admin before the test")
	}

	// A cluster admin trusts a release key (in the operator's namespace).
	release := e.trustReleaseKey(ctx, t)
	s, text := sampleText(t, e.ns, "v1.0.0")
	good := strategyConfigMap(t, e.ns, "strategy", text, s.Identity, codec.FormatNative, release)
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Create(ctx, good, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := sampleSpec("v1.0.0")
	spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "strategy"}}
	e.create(ctx, t, "sample", spec)
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	evil, binding := escalation(t, e.ns, "v1.0.0", user)
	evilText, err := evil.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	own, _ := trust.GenerateKey()
	for _, step := range []struct {
		name, what string
		cm         *corev1.ConfigMap
	}{
		{"native, digest recomputed, old signature kept", "signature does not verify", func() *corev1.ConfigMap {
			cm := strategyConfigMap(t, e.ns, "strategy", evilText, s.Identity, codec.FormatNative, nil)
			cm.Annotations[metakeys.SignatureAnnotation] = good.Annotations[metakeys.SignatureAnnotation]
			cm.Annotations[metakeys.SignatureKeyAnnotation] = good.Annotations[metakeys.SignatureKeyAnnotation]
			return cm
		}()},
		{"native, signed by the user's own key", "signed by a key that is not trusted", strategyConfigMap(t, e.ns, "strategy", evilText, s.Identity, codec.FormatNative, own)},
		{"native, unsigned", "not signed", strategyConfigMap(t, e.ns, "strategy", evilText, s.Identity, codec.FormatNative, nil)},
		{"KubeVirt form", "not signed", strategyConfigMap(t, e.ns, "strategy", evilText, s.Identity, codec.FormatKubeVirt, nil)},
		// Issue 39: 60 MiB of "---\nkind: A\n" in 120 KB was decoded and
		// parsed before its trust was decided (5 GB of heap, a status
		// write too large to say why); refused now before it is decoded.
		{"KubeVirt form, 60 MiB of empty documents", "not signed", strategyConfigMap(t, e.ns, "strategy", bytes.Repeat([]byte("---\nkind: A\n"), 60<<20/12), s.Identity, codec.FormatKubeVirt, nil)},
		{"native, 60 MiB of empty documents", "not signed", strategyConfigMap(t, e.ns, "strategy", bytes.Repeat([]byte("---\nkind: A\n"), 60<<20/12), s.Identity, codec.FormatNative, nil)},
	} {
		t.Log(step.name)
		before := testutil.ToFloat64(e.metrics.UntrustedStrategies.WithLabelValues("configmap"))
		replace(ctx, t, mallory, step.cm)
		e.waitRefusals(ctx, t, before)
		in := e.waitRefused(ctx, t, "sample", "strategy", step.what)
		if in.Status.ObservedVersion != "v1.0.0" || in.Status.Phase != v1alpha1.PhaseDeployed {
			t.Errorf("%s: the deployed version did not stay: %s", step.name, describe(in))
		}
		e.assertNotEscalated(ctx, t, binding, user)
	}
	if n := testutil.ToFloat64(e.metrics.UntrustedStrategies.WithLabelValues("configmap")); n < 4 {
		t.Errorf("installstrategy_untrusted_strategies_total{source=configmap} = %v, want at least 4", n)
	}
	events, err := e.env.Kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events.Items {
		found = found || (ev.Reason == v1alpha1.ReasonUntrustedStrategy && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, e.ns+"/strategy"))
	}
	if !found {
		t.Error("no UntrustedStrategy Warning event")
	}

	// An operator restart changes nothing: the new one refuses too.
	e.stopManager()
	e.startManager(t)
	e.waitRefusals(ctx, t, 0)
	e.waitRefused(ctx, t, "sample", "strategy", "not signed")
	e.assertNotEscalated(ctx, t, binding, user)

	// KubeVirt's form has no signature: an admin pins its digest in the
	// Installation, and it is applied.
	// Its text is not in the form installstrategy serialises (a comment
	// leads): the status reports the digest of the text as stored, the
	// one pinned.
	kvText := append([]byte("# written by another tool\n"), text...)
	kv := strategyConfigMap(t, e.ns, "kubevirt-form", kvText, s.Identity, codec.FormatKubeVirt, nil)
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Create(ctx, kv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.ConfigMap = &v1alpha1.ConfigMapStrategySource{Name: "kubevirt-form", Digest: codec.Digest(kvText)}
	})
	testenv.WaitFor(ctx, t, "the pinned KubeVirt-form strategy accepted", func(ctx context.Context) (bool, string, error) {
		in, err := e.get(ctx, "sample")
		if err != nil {
			return false, "", err
		}
		c := in.Condition(v1alpha1.ConditionDegraded)
		return in.IsDeployed() && c != nil && c.Status == metav1.ConditionFalse && in.Status.Strategy != nil &&
			in.Status.Strategy.ConfigMap == e.ns+"/kubevirt-form" && in.Status.Strategy.Digest == codec.Digest(kvText), describe(in), nil
	})
	// The user replaces it: the digest no longer matches the pinned one.
	before := testutil.ToFloat64(e.metrics.UntrustedStrategies.WithLabelValues("configmap"))
	replace(ctx, t, mallory, strategyConfigMap(t, e.ns, "kubevirt-form", evilText, s.Identity, codec.FormatKubeVirt, nil))
	e.waitRefusals(ctx, t, before)
	e.waitRefused(ctx, t, "sample", "kubevirt-form", "does not match the pinned digest")
	e.assertNotEscalated(ctx, t, binding, user)
	e.stopManager()
	e.startManager(t)
	e.waitRefusals(ctx, t, 0)
	e.waitRefused(ctx, t, "sample", "kubevirt-form", "does not match the pinned digest")
	e.assertNotEscalated(ctx, t, binding, user)
}

// storedStrategies lists the stored strategies of the namespace.
func (e *e2e) storedStrategies(ctx context.Context, t *testing.T) []store.Entry {
	t.Helper()
	st, err := store.New(e.env.Kube, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := st.List(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// The built-in product the operator stores is signed with its own key (a
// Secret it created in its namespace). A ConfigMap editor who replaces the
// stored copy (recomputed digest, old signature) does not change what is
// applied: the copy is refused and the operator stores a fresh signed one;
// the edited copy is garbage-collected. After a key rotation (no restart:
// the operator watches its key Secret), the strategy signed with the old
// key is still trusted (not replaced), and the next one is signed with the
// new key.
func TestStoredProductTamperedAndKeyRotation(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	const user = "eve"
	eve := e.configMapEditor(ctx, t, user)
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	key, err := trust.EnsureOperatorKey(ctx, e.env.Kube, e.keyNS)
	if err != nil {
		t.Fatal(err)
	}
	_, text := sampleText(t, e.ns, "v1.0.0")
	stored := e.storedStrategies(ctx, t)
	if len(stored) != 1 || stored[0].SignatureKey != key.Signer.KeyID() || stored[0].Digest != codec.Digest(text) {
		t.Fatalf("stored product %+v; want one, signed by the operator's key %s", stored, key.Signer.KeyID())
	}
	if _, err := key.Keys.Verify(stored[0].Digest, stored[0].Signature, stored[0].SignatureKey); err != nil {
		t.Fatalf("stored product's signature: %v", err)
	}

	evil, binding := escalation(t, e.ns, "v1.0.0", user)
	evilText, _ := evil.Serialize()
	tampered := strategyConfigMap(t, e.ns, stored[0].Name, evilText, stored[0].Identity, codec.FormatNative, nil)
	tampered.Annotations[metakeys.SignatureAnnotation] = stored[0].Signature
	tampered.Annotations[metakeys.SignatureKeyAnnotation] = stored[0].SignatureKey
	replace(ctx, t, eve, tampered)
	testenv.WaitFor(ctx, t, "the tampered copy replaced by a fresh signed one", func(ctx context.Context) (bool, string, error) {
		entries := e.storedStrategies(ctx, t)
		if len(entries) != 1 || entries[0].Name == stored[0].Name {
			return false, fmt.Sprintf("%d stored", len(entries)), nil
		}
		_, err := key.Keys.Verify(entries[0].Digest, entries[0].Signature, entries[0].SignatureKey)
		return err == nil && entries[0].Digest == codec.Digest(text), fmt.Sprintf("%+v", entries[0]), nil
	})
	e.assertNotEscalated(ctx, t, binding, user)
	fresh := e.storedStrategies(ctx, t)[0]

	// Rotate the key, without restarting the operator: the key Secret's
	// watch reconciles the Installation at once (the resync is a minute
	// away), and the new key signs what is stored from then on.
	loads := testutil.ToFloat64(e.metrics.StrategyLoads.WithLabelValues("product"))
	rotated, err := trust.RotateOperatorKey(ctx, e.env.Kube, e.keyNS)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Signer.KeyID() == key.Signer.KeyID() || rotated.Keys.Len() != 2 {
		t.Fatalf("rotation: key %s, %d trusted", rotated.Signer.KeyID(), rotated.Keys.Len())
	}
	testenv.WaitFor(ctx, t, "the operator reloads the product after the rotation", func(context.Context) (bool, string, error) {
		n := testutil.ToFloat64(e.metrics.StrategyLoads.WithLabelValues("product"))
		return n > loads, fmt.Sprintf("%v loads", n), nil
	})
	if entries := e.storedStrategies(ctx, t); len(entries) != 1 || entries[0].Name != fresh.Name {
		t.Errorf("after rotation the strategy signed with the old key was replaced: %+v", entries)
	}
	in, _ := e.get(ctx, "sample")
	if c := in.Condition(v1alpha1.ConditionDegraded); !in.IsDeployed() || c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("after rotation: %s", describe(in))
	}
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = "v1.1.0" })
	e.waitDeployed(ctx, t, "sample", "v1.1.0")
	_, next := sampleText(t, e.ns, "v1.1.0")
	var signedNew bool
	for _, en := range e.storedStrategies(ctx, t) {
		signedNew = signedNew || (en.Digest == codec.Digest(next) && en.SignatureKey == rotated.Signer.KeyID())
	}
	if !signedNew {
		t.Errorf("v1.1.0 not stored signed with the rotated key %s: %+v", rotated.Signer.KeyID(), e.storedStrategies(ctx, t))
	}
}

// A dump Job's result is bound to the Job: its pod reports the digest of
// what it wrote (termination message), and the operator adopts only the
// stored strategy with that digest — not a newer one a ConfigMap editor
// created for the same identifier — and signs it with its key.
func TestDumpJobResultIsBoundToTheJob(t *testing.T) {
	e := setup(t, withOptions(func(o *operator.Options) { o.DumpPodLabels = testenv.BehaviourLabels(testenv.BehaviourAwaitResult) }))
	ctx := t.Context()
	const user = "trudy"
	trudy := e.configMapEditor(ctx, t, user)
	spec := sampleSpec("v1.0.0")
	spec.Strategy = &v1alpha1.StrategySource{Image: "registry.example/sample/sample-operator:v1.0.0"}
	e.create(ctx, t, "sample", spec)
	job, cfgJSON := e.env.WaitDumpJob(ctx, t, e.ns)
	st, err := store.New(e.env.Kube, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := dump.Run(ctx, dump.Options{ConfigJSON: []byte(cfgJSON), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	// The editor's strategy for the same identifier, newer than the Job's.
	evil, binding := escalation(t, e.ns, "v1.0.0", user)
	evilText, _ := evil.Serialize()
	forged := strategyConfigMap(t, e.ns, "", evilText, res.Identity, codec.FormatNative, nil)
	forged.GenerateName = "installstrategy-"
	forged.Name = ""
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has 1 s resolution: make it the newer
	if _, err := trudy.CoreV1().ConfigMaps(e.ns).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.env.FinishDumpJob(ctx, t, e.ns, job.Name, res.Digest)
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	if in.Status.Strategy == nil || in.Status.Strategy.Digest != res.Digest {
		t.Errorf("deployed %+v, want the Job's digest %s", in.Status.Strategy, res.Digest)
	}
	e.assertNotEscalated(ctx, t, binding, user)
	key, err := trust.EnsureOperatorKey(ctx, e.env.Kube, e.keyNS)
	if err != nil {
		t.Fatal(err)
	}
	var adopted store.Entry
	for _, en := range e.storedStrategies(ctx, t) {
		_, verr := key.Keys.Verify(en.Digest, en.Signature, en.SignatureKey)
		switch en.Digest {
		case res.Digest:
			adopted = en
			if verr != nil {
				t.Errorf("the Job's strategy %s is not signed by the operator: %v", en, verr)
			}
		default:
			if verr == nil {
				t.Errorf("the operator signed %s, which the Job did not report", en)
			}
		}
	}

	// The editor copies the adopted, signed v1.0.0 strategy (annotations
	// and all) under the identifier of v1.1.0, before the upgrade asks for
	// it: the identity signature does not verify, so the operator dumps
	// v1.1.0 instead of installing the replayed v1.0.0.
	if adopted.Name == "" {
		t.Fatal("no adopted strategy")
	}
	next, _ := expectedIdentity(t, e.ns, "v1.1.0", nil)
	cm, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Get(ctx, adopted.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replayed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "installstrategy-", Namespace: e.ns, Labels: cm.Labels, Annotations: cm.Annotations}, Data: cm.Data}
	replayed.Annotations[metakeys.IdentifierAnnotation], replayed.Annotations[metakeys.VersionAnnotation] = next, "v1.1.0"
	if _, err := trudy.CoreV1().ConfigMaps(e.ns).Create(ctx, replayed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Version = "v1.1.0"
		in.Spec.Strategy = &v1alpha1.StrategySource{Image: "registry.example/sample/sample-operator:v1.1.0"}
	})
	jobName := loader.JobNamePrefix + next[:loader.JobNameIDLength]
	testenv.WaitFor(ctx, t, "a dump Job for v1.1.0 (the replayed copy refused)", func(ctx context.Context) (bool, string, error) {
		_, err := e.env.Kube.BatchV1().Jobs(e.ns).Get(ctx, jobName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			in, _ := e.get(ctx, "sample")
			return false, describe(in), nil
		}
		return err == nil, "", err
	})
	if in, _ := e.get(ctx, "sample"); in.Status.ObservedVersion != "v1.0.0" {
		t.Errorf("the replayed strategy was deployed: %s", describe(in))
	}
	e.env.RunDumpJob(ctx, t, e.ns)
	in = e.waitDeployed(ctx, t, "sample", "v1.1.0")
	if _, text := sampleText(t, e.ns, "v1.1.0"); in.Status.Strategy == nil || in.Status.Strategy.Digest != codec.Digest(text) {
		t.Errorf("v1.1.0 deployed from %+v, want the dumped v1.1.0 (%s)", in.Status.Strategy, codec.Digest(text))
	}
}

// Without a usable signing key (here: its Secret holds no key) the
// operator trusts nothing and applies nothing: Degraded StrategyLoadFailed
// naming the key's Secret.
func TestNoSigningKeyNothingApplied(t *testing.T) {
	// A key Secret the operator cannot read (a missing key namespace is
	// created with a new key, see pkg/trust).
	env := testenv.New(t)
	keyNS := env.Namespace(t.Context(), t)
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: trust.OperatorKeySecret, Namespace: keyNS}, Data: map[string][]byte{trust.PrivateKeyKey: []byte("not a key")}}
	if _, err := env.Kube.CoreV1().Secrets(keyNS).Create(t.Context(), bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := setup(t, withOptions(func(o *operator.Options) { o.KeyNamespace = keyNS }))
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	in := e.waitDegraded(ctx, t, "sample", v1alpha1.ReasonStrategyLoadFailed)
	if msg := in.Condition(v1alpha1.ConditionDegraded).Message; !strings.Contains(msg, keyNS+"/"+trust.OperatorKeySecret) {
		t.Errorf("degraded message %q does not name the key's Secret", msg)
	}
	if e.exists(ctx, t, &appsv1.Deployment{}, "sample-api") {
		t.Error("sample-api applied without a signing key")
	}
}
