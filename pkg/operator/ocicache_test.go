package operator

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

const cacheTestText = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n"

// Issue 39, finding 10: an OCI artifact was cached (64 entries of up to
// 64 MiB) before its trust was decided, so a tag mover filled the
// operator's memory with unsigned artifacts. Pulled from a registry on
// loopback with the trusted keys read from a real cluster: an unsigned
// artifact, one signed by a key nobody trusts, and one signed by a trusted
// key for another product are refused and never cached; a trusted one is,
// and counts its bytes.
func TestUntrustedArtifactIsNeverCached(t *testing.T) {
	ctx := t.Context()
	env := testenv.New(t)
	keyNS := env.Namespace(ctx, t)
	release, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(keyNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: trust.TrustedKeysConfigMap, Namespace: keyNS},
		Data:       map[string]string{"release.pub": string(release.PublicPEM())},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stranger, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	reg := ocitest.New(t)
	c, err := oci.New(oci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	push := func(tag, product, version string, signer *trust.Signer) string {
		ref := reg.Ref("acme/sample:" + tag)
		if _, err := c.Push(ctx, ref, []byte(cacheTestText+"# "+tag+"\n"), oci.Meta{Product: product, Version: version}); err != nil {
			t.Fatal(err)
		}
		if signer != nil {
			a, err := c.Pull(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Sign(ctx, a, signer); err != nil {
				t.Fatal(err)
			}
		}
		return ref
	}
	r := &Reconciler{kube: env.Kube, opts: Options{KeyNamespace: keyNS}}
	load := func(ref string) error {
		in := installation(v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{OCI: &v1alpha1.OCIStrategySource{Reference: ref}}})
		in.Namespace = "ns"
		sl, err := r.ociSource(ctx, in)
		if err == nil {
			_, err = sl.load(ctx)
		}
		return err
	}
	for _, ref := range []string{
		push("unsigned", "sample", "v1.0.0", nil),
		push("stranger", "sample", "v1.0.0", stranger),
		push("other-product", "other", "v1.0.0", release),
	} {
		for range 2 { // a second poll pulls again: nothing was kept
			if err := load(ref); !errors.As(err, new(*trust.UntrustedError)) {
				t.Fatalf("%s: %v, want an untrusted strategy", ref, err)
			}
			if n := len(r.oci.artifacts); n != 0 {
				t.Fatalf("%s: %d artifacts cached after a refusal", ref, n)
			}
		}
	}
	good := push("good", "sample", "v1.0.0", release)
	if err := load(good); err != nil {
		t.Fatal(err)
	}
	if n, b := r.oci.cached(); n != 1 || b != int64(len(cacheTestText+"# good\n")) {
		t.Errorf("trusted artifact: %d cached, %d bytes", n, b)
	}
}
