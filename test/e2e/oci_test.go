package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// publishSample pushes the sample product at version to every ref as
// product, signed by signer when set, and returns the artifact.
func publishSample(ctx context.Context, t *testing.T, c *oci.Client, ns, product, version string, signer *trust.Signer, refs ...string) *oci.Artifact {
	t.Helper()
	s, text := sampleText(t, ns, version)
	meta := oci.Meta{Product: product, Version: version, Registry: s.Identity.Registry, Identifier: s.Identity.Identifier}
	for _, ref := range refs {
		if _, err := c.Push(ctx, ref, text, meta); err != nil {
			t.Fatal(err)
		}
	}
	a, err := c.Pull(ctx, refs[0])
	if err != nil {
		t.Fatal(err)
	}
	if signer != nil {
		if _, err := c.Sign(ctx, a, signer); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// ociSetup starts a registry on loopback, a client of it, and a release
// key the operator trusts.
func (e *e2e) ociSetup(ctx context.Context, t *testing.T) (*ocitest.Registry, *oci.Client, *trust.Signer) {
	t.Helper()
	c, err := oci.New(oci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ocitest.New(t), c, e.trustReleaseKey(ctx, t)
}

// waitUntrusted waits until the Installation is Degraded with
// UntrustedStrategy and a message containing what.
func (e *e2e) waitUntrusted(ctx context.Context, t *testing.T, name, what string) *v1alpha1.Installation {
	t.Helper()
	var last *v1alpha1.Installation
	if err := pollInstallation(ctx, e, name, func(in *v1alpha1.Installation) bool {
		last = in
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonUntrustedStrategy && strings.Contains(c.Message, what)
	}); err != nil {
		t.Fatalf("%s refused (%s): %v; last %s, degraded %+v", name, what, err, describe(last), last.Condition(v1alpha1.ConditionDegraded))
	}
	return last
}

// An Installation with an OCI source installs the sample product from a
// signed artifact in a registry on loopback, follows its tag to the next
// release, and polls with one manifest HEAD (no layer, no signature read
// again) while the tag stays. What a tag mover can put under the tag is
// refused with UntrustedStrategy, the deployed version staying: the signed
// older release (a downgrade), a release signed for another product, an
// unsigned one, a changed text under a genuine signature. An explicit
// downgrade (spec.allowDowngrade) works, and a mirror made with Copy
// serves when the registry is gone.
func TestOCISource(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	reg, c, release := e.ociSetup(ctx, t)
	stable := reg.Ref("acme/sample:stable")
	v100 := publishSample(ctx, t, c, e.ns, "sample", "v1.0.0", release, reg.Ref("acme/sample:v1.0.0"), stable)

	spec := sampleSpec("")
	spec.Strategy = &v1alpha1.StrategySource{OCI: &v1alpha1.OCIStrategySource{Reference: stable, Interval: &metav1.Duration{Duration: time.Second}}}
	e.create(ctx, t, "sample", spec)
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	if st := in.Status.Strategy; st == nil || st.Source != v1alpha1.StrategySourceOCI || !strings.HasSuffix(st.OCI, "@"+v100.Digest) || !strings.Contains(st.VerifiedBy, "release.pub") {
		t.Fatalf("status.strategy %+v, want the artifact %s verified by release.pub", in.Status.Strategy, v100.Digest)
	}

	// Idle polls: one manifest HEAD each, nothing downloaded.
	reg.Take()
	var idle []string
	testenv.WaitFor(ctx, t, "three polls of the tag", func(context.Context) (bool, string, error) {
		idle = append(idle, reg.Take()...)
		heads := 0
		for _, r := range idle {
			if r == "HEAD /v2/acme/sample/manifests/stable" {
				heads++
			}
		}
		return heads >= 3, fmt.Sprintf("%d requests: %v", len(idle), idle), nil
	})
	for _, r := range idle {
		if r != "HEAD /v2/acme/sample/manifests/stable" {
			t.Errorf("an idle poll made %q; want manifest HEADs only", r)
		}
	}

	// The tag moves to the next signed release: upgrade.
	v110 := publishSample(ctx, t, c, e.ns, "sample", "v1.1.0", release, reg.Ref("acme/sample:v1.1.0"), stable)
	e.waitDeployed(ctx, t, "sample", "v1.1.0")
	// The history is recorded by the stage after the rollout's.
	if err := pollInstallation(ctx, e, "sample", func(in *v1alpha1.Installation) bool {
		return len(in.Status.History) > 0 && in.Status.History[0].OCI == in.Status.Strategy.OCI && in.Status.History[0].Version == "v1.1.0"
	}); err != nil {
		in, _ := e.get(ctx, "sample")
		t.Errorf("history %+v, want the artifact of v1.1.0 at its head: %v", in.Status.History, err)
	}

	before := testutil.ToFloat64(e.metrics.UntrustedStrategies.WithLabelValues("oci"))
	other, _ := trust.GenerateKey()
	// A changed text under v1.1.0's genuine signature.
	s, text := sampleText(t, e.ns, "v1.1.0")
	text = []byte(strings.Replace(string(text), "sample-api", "sample-apx", 1))
	tampered, err := c.Push(ctx, reg.Ref("acme/sample:tampered"), text, oci.Meta{Product: "sample", Version: "v1.1.0", Registry: s.Identity.Registry, Identifier: s.Identity.Identifier})
	if err != nil {
		t.Fatal(err)
	}
	genuine, err := c.Signatures(ctx, v110)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name, what string
		move       func()
	}{
		{"the signed older release", "downgrade refused: v1.0.0 is older than the deployed v1.1.0", func() {
			publishSample(ctx, t, c, e.ns, "sample", "v1.0.0", nil, stable)
		}},
		{"a release signed for another product", `product "other", want "sample"`, func() {
			publishSample(ctx, t, c, e.ns, "other", "v1.2.0", release, stable)
		}},
		{"an unsigned release", "not signed", func() {
			publishSample(ctx, t, c, e.ns, "sample", "v1.2.1", nil, stable)
		}},
		{"a release signed by an untrusted key", "signed by a key that is not trusted", func() {
			publishSample(ctx, t, c, e.ns, "sample", "v1.2.2", other, stable)
		}},
		{"a changed text under a genuine signature", "not " + tampered.Digest, func() {
			if _, err := c.Push(ctx, stable, text, oci.Meta{Product: "sample", Version: "v1.1.0", Registry: s.Identity.Registry, Identifier: s.Identity.Identifier}); err != nil {
				t.Fatal(err)
			}
			if err := c.AddSignatures(ctx, tamperedRepo(tampered), tampered.Digest, genuine); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Log(step.name)
		step.move()
		in := e.waitUntrusted(ctx, t, "sample", step.what)
		if in.Status.ObservedVersion != "v1.1.0" || in.Status.Phase != v1alpha1.PhaseDeployed || !strings.HasSuffix(in.Status.Strategy.OCI, "@"+v110.Digest) {
			t.Errorf("%s: the deployed version did not stay: %s, strategy %+v", step.name, describe(in), in.Status.Strategy)
		}
		if !e.exists(ctx, t, &corev1.Service{}, "sample-api") {
			t.Errorf("%s: the refused artifact changed the product", step.name)
		}
	}
	if n := testutil.ToFloat64(e.metrics.UntrustedStrategies.WithLabelValues("oci")); n < before+5 {
		t.Errorf("installstrategy_untrusted_strategies_total{source=oci} = %v, want at least %v", n, before+5)
	}

	// An explicit downgrade to the signed v1.0.0.
	publishSample(ctx, t, c, e.ns, "sample", "v1.0.0", release, stable)
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.AllowDowngrade = true })
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	// Air-gapped: the release copied to a mirror; the registry goes away.
	mirror := ocitest.New(t)
	if _, err := c.Copy(ctx, reg.Ref("acme/sample:v1.1.0"), mirror.Ref("mirror/sample")); err != nil {
		t.Fatal(err)
	}
	reg.Close()
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.OCI.Reference = reg.Ref("acme/sample:v1.1.0")
		in.Spec.Strategy.OCI.Mirrors = []string{mirror.Ref("mirror/sample:v1.1.0")}
	})
	in = e.waitDeployed(ctx, t, "sample", "v1.1.0")
	if !strings.HasPrefix(in.Status.Strategy.OCI, mirror.Host()+"/mirror/sample@"+v110.Digest) {
		t.Errorf("status.strategy.oci %s, want the mirror's copy of %s", in.Status.Strategy.OCI, v110.Digest)
	}

	// Events are written in the background.
	testenv.WaitFor(ctx, t, "StrategyPulled events", func(ctx context.Context) (bool, string, error) {
		events, err := e.env.Kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var pulled []string
		for _, ev := range events.Items {
			if ev.Reason == v1alpha1.ReasonStrategyPulled && strings.Contains(ev.Message, "release.pub") {
				pulled = append(pulled, ev.Message)
			}
		}
		return len(pulled) >= 2, fmt.Sprintf("%d StrategyPulled events: %v", len(pulled), pulled), nil
	})
}

// tamperedRepo is the repository of a pushed artifact's reference.
func tamperedRepo(p oci.Pushed) string { return p.Reference[:strings.IndexByte(p.Reference, '@')] }

// staticKeychain answers every registry with one user and password.
type staticKeychain struct{ user, password string }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return authn.FromConfig(authn.AuthConfig{Username: k.user, Password: k.password}), nil
}

// A private registry: the operator reads the credentials of
// spec.strategy.oci.secretRef (a kubernetes.io/dockerconfigjson Secret of
// the install namespace, as kubelet reads imagePullSecrets); without them
// the load fails with the registry's answer, naming the reference.
func TestOCISourcePullSecret(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	reg := ocitest.New(t, ocitest.BasicAuth("fleet", "s3cret"))
	c, err := oci.New(oci.Options{Keychain: staticKeychain{"fleet", "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	a := publishSample(ctx, t, c, e.ns, "sample", "v1.0.0", nil, reg.Ref("acme/sample:v1.0.0"))
	ref := reg.Ref("acme/sample:v1.0.0")
	spec := sampleSpec("")
	spec.Strategy = &v1alpha1.StrategySource{OCI: &v1alpha1.OCIStrategySource{Reference: ref, Digest: a.Digest}}
	e.create(ctx, t, "sample", spec)
	if err := pollInstallation(ctx, e, "sample", func(in *v1alpha1.Installation) bool {
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Reason == v1alpha1.ReasonStrategyLoadFailed && strings.Contains(c.Message, ref) && strings.Contains(c.Message, "UNAUTHORIZED")
	}); err != nil {
		in, _ := e.get(ctx, "sample")
		t.Fatalf("without credentials: %v; %s", err, describe(in))
	}
	auth := fmt.Sprintf(`{"auths":{%q:{"username":"fleet","password":"s3cret"}}}`, reg.Host())
	if _, err := e.env.Kube.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "registry", Namespace: e.ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(auth)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.OCI.SecretRef = &corev1.LocalObjectReference{Name: "registry"}
	})
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	if in.Status.Strategy.VerifiedBy != "pinned digest" {
		t.Errorf("verifiedBy %q, want pinned digest", in.Status.Strategy.VerifiedBy)
	}
}

// Installations that track one tag share its download: reconciles that
// want one digest at once make one pull and one signature read (and one
// StrategyPulled event), so N Installations cost the registry one layer
// and one signature per release, not N (BenchmarkOCIFleet measures it at
// scale).
func TestOCISourcesShareOneDownload(t *testing.T) {
	const n = 6
	e := setup(t, withNamespaces(n))
	ctx := t.Context()
	reg, c, release := e.ociSetup(ctx, t)
	text, meta := fleetText(t, "v1.0.0")
	stable := reg.Ref("acme/sample:stable")
	if _, err := c.Push(ctx, stable, text, meta); err != nil {
		t.Fatal(err)
	}
	a, err := c.Pull(ctx, stable)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sign(ctx, a, release); err != nil {
		t.Fatal(err)
	}
	reg.Take()
	g, gctx := errgroup.WithContext(ctx)
	for _, ns := range e.namespaces() {
		g.Go(func() error {
			return e.c.Create(gctx, &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Name: syntheticName, Namespace: ns},
				Spec: v1alpha1.InstallationSpec{Registry: meta.Registry, UninstallStrategy: v1alpha1.UninstallRemoveWorkloads,
					Strategy: &v1alpha1.StrategySource{OCI: &v1alpha1.OCIStrategySource{Reference: stable}}}})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	waitAllDeployed(ctx, t, e.c, e.namespaces(), "v1.0.0")
	reqs := reg.Take()
	layer := "/blobs/" + layerDigest(t, a)
	if got := ocitest.Count(reqs, "GET", layer); got != 1 {
		t.Errorf("%d Installations downloaded the layer %d times, want once: %v", n, got, reqs)
	}
	if got := ocitest.Count(reqs, "GET", "/manifests/"+oci.SignatureTag(a.Digest)); got != 1 {
		t.Errorf("the signatures were read %d times, want once: %v", got, reqs)
	}
}

// layerDigest is the digest of the artifact's one layer.
func layerDigest(t *testing.T, a *oci.Artifact) string {
	t.Helper()
	gz, err := codec.Gzip(a.Text)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(gz)
	return "sha256:" + hex.EncodeToString(sum[:])
}
