package cli

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// TestApplyClusterStrategyNeedsTrust: apply cm/NAME reads a ConfigMap any
// ConfigMap editor of the namespace may have written, digest included. It
// is refused unless signed by a key of --key (judged before decoding) or
// taken with --allow-unsigned; an editor's text under the signed
// ConfigMap's name is refused with the key, whether its digest is
// recomputed or left as signed; nothing is created by a refusal.
func TestApplyClusterStrategyNeedsTrust(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	signer, _ := trust.GenerateKey()
	key := writeFile(t, "release.key", string(signer.PrivatePEM()))
	pub := writeFile(t, "release.pub", string(signer.PublicPEM()))
	other, _ := trust.GenerateKey()
	otherPub := writeFile(t, "other.pub", string(other.PublicPEM()))
	sa := func(name string) string {
		return "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n"
	}
	publish := func(text, version string, extra ...string) string {
		t.Helper()
		code, out, errOut := run(t, nil, append(append([]string{"publish", writeFile(t, version+".yaml", text), "--version", version, "--identifier", version}, extra...), clusterArgs(ns)...)...)
		if code != 0 {
			t.Fatalf("publish %s: exit %d %s", version, code, errOut)
		}
		return strings.TrimPrefix(strings.Fields(out)[0], "configmap/")
	}
	signed := publish(sa("genuine"), "v1", "--key", key)
	unsigned := publish(sa("unsigned"), "v2")
	exists := func(name string) bool {
		t.Helper()
		_, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	apply := func(args ...string) (int, string) {
		t.Helper()
		code, out, errOut := run(t, nil, append(append([]string{"apply", "--name", "trusted"}, args...), clusterArgs(ns)...)...)
		return code, out + errOut
	}

	// No trust decision given: refused, naming both ways out.
	for _, name := range []string{signed, unsigned} {
		if code, out := apply("cm/" + name); code == 0 || !strings.Contains(out, "--key") || !strings.Contains(out, "--allow-unsigned") {
			t.Errorf("apply cm/%s without --key: exit %d\n%s", name, code, out)
		}
	}
	if code, out := apply("cm/"+unsigned, "--key", pub); code == 0 || !strings.Contains(out, "untrusted") {
		t.Errorf("apply of an unsigned strategy --key: exit %d\n%s", code, out)
	}
	if code, out := apply("cm/"+signed, "--key", otherPub); code == 0 || !strings.Contains(out, "untrusted") {
		t.Errorf("apply of a strategy signed by another key: exit %d\n%s", code, out)
	}
	if code, out := apply("cm/"+signed, "--key", pub, "--allow-unsigned"); code == 0 {
		t.Errorf("--key with --allow-unsigned: exit %d\n%s", code, out)
	}

	// plan and diff read a strategy unverified without --key, and say so.
	theirs := writeFile(t, "theirs.yaml", sa("theirs"))
	for _, verb := range [][]string{{"plan", "cm/" + signed}, {"diff", "cm/" + signed, theirs}} {
		code, out, errOut := run(t, nil, append(verb, clusterArgs(ns)...)...)
		if code != 1 || !strings.Contains(errOut, "not verified") || !strings.Contains(errOut, "--key") {
			t.Errorf("%s without --key: exit %d, want 1 (changes) and a note that it is not verified\n%s%s", verb[0], code, out, errOut)
		}
		code, out, errOut = run(t, nil, append(append(verb, "--key", pub), clusterArgs(ns)...)...)
		if code != 1 || !strings.Contains(errOut, "signed by") {
			t.Errorf("%s --key of the signed strategy: exit %d, want 1 (changes)\n%s%s", verb[0], code, out, errOut)
		}
	}

	// A ConfigMap editor rewrites the signed strategy.
	editor, _ := configMapEditor(ctx, t, env, ns, "mallory")
	genuine, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, signed, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := codec.EncodeText([]byte(sa("forged")), codec.EncodeOptions{Namespace: ns, Name: signed, Identity: codec.DescribeConfigMap(genuine).Identity})
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(cm *metav1.ObjectMeta, data map[string]string){
		"digest recomputed": func(m *metav1.ObjectMeta, data map[string]string) {
			m.Annotations[metakeys.DigestAnnotation] = forged.Annotations[metakeys.DigestAnnotation]
			data[codec.ManifestsKey] = forged.Data[codec.ManifestsKey]
		},
		"signed digest kept": func(_ *metav1.ObjectMeta, data map[string]string) {
			data[codec.ManifestsKey] = forged.Data[codec.ManifestsKey]
		},
		"signature removed": func(m *metav1.ObjectMeta, data map[string]string) {
			delete(m.Annotations, metakeys.SignatureAnnotation)
			m.Annotations[metakeys.DigestAnnotation] = forged.Annotations[metakeys.DigestAnnotation]
			data[codec.ManifestsKey] = forged.Data[codec.ManifestsKey]
		},
	} {
		cm, err := editor.CoreV1().ConfigMaps(ns).Get(ctx, signed, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edit(&cm.ObjectMeta, cm.Data)
		if _, err := editor.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s: the ConfigMap editor rewrites %s: %v", name, signed, err)
		}
		if code, out := apply("cm/"+signed, "--key", pub); code == 0 || !strings.Contains(out, signed) {
			t.Errorf("%s: apply --key of the editor's text: exit %d\n%s", name, code, out)
		}
		// The verbs that write nothing check the same with --key.
		for _, verb := range [][]string{{"plan", "cm/" + signed}, {"diff", "cm/" + signed, theirs}} {
			code, out, errOut := run(t, nil, append(append(verb, "--key", pub), clusterArgs(ns)...)...)
			if code != 2 || !strings.Contains(errOut, signed) {
				t.Errorf("%s: %s --key of the editor's text: exit %d, want 2\n%s%s", name, verb[0], code, out, errOut)
			}
		}
		cm, _ = env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, signed, metav1.GetOptions{})
		cm.Annotations, cm.Data = genuine.Annotations, genuine.Data
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if exists("forged") || exists("genuine") || exists("unsigned") {
		t.Fatal("a refused apply created objects")
	}

	// The author's signed strategy applies with the key; an unsigned one
	// with --allow-unsigned, said on standard error.
	if code, out := apply("cm/"+signed, "--key", pub); code != 0 || !strings.Contains(out, "signed by") || !exists("genuine") {
		t.Fatalf("apply --key of the signed strategy: exit %d\n%s", code, out)
	}
	if code, out := apply("cm/"+unsigned, "--allow-unsigned", "--replace"); code != 0 || !strings.Contains(out, "without a signature") || !exists("unsigned") {
		t.Fatalf("apply --allow-unsigned: exit %d\n%s", code, out)
	}
}
