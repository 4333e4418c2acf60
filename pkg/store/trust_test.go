package store_test

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// trustedBy returns a store Trusted function accepting signatures of the
// ring's keys.
func trustedBy(ring *trust.KeyRing) func(store.Entry) error {
	return func(e store.Entry) error {
		if _, err := ring.Verify(e.Digest, e.Signature, e.SignatureKey); err != nil {
			return err
		}
		_, err := ring.Verify(codec.IdentityDigest(e.Namespace, e.Identity, e.Digest), e.IdentitySignature, e.SignatureKey)
		return err
	}
}

// A store with a signer signs what it publishes, single and chunked (on
// the head); a store that trusts only that key skips an unsigned copy of
// the same identity, even a newer one, in Find, Load, Ensure (which
// publishes a fresh signed copy over it) and GC (which keeps the trusted
// one and deletes the other).
func TestSignedPublishAndTrustedLookup(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	signer, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ring := &trust.KeyRing{}
	if err := ring.Add("test", signer.Public()); err != nil {
		t.Fatal(err)
	}
	signing := newStore(t, env, store.Options{Signer: signer, Trusted: trustedBy(ring)})
	plain := newStore(t, env, store.Options{})

	s := sample(t, "v1.0.0")
	signed, err := signing.Publish(ctx, ns, s)
	if err != nil {
		t.Fatal(err)
	}
	if signed.Signature == "" || signed.SignatureKey != signer.KeyID() {
		t.Fatalf("published entry not signed: %+v", signed)
	}
	if _, err := ring.Verify(codec.Digest(serialize(t, s)), signed.Signature, signed.SignatureKey); err != nil {
		t.Errorf("signature over the text's digest: %v", err)
	}

	// A newer unsigned copy of the same identity (what a ConfigMap editor
	// could create), with other content.
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has 1 s resolution: make it newer
	forged := sample(t, "v1.1.0")
	forged.Identity = s.Identity
	unsigned, err := plain.Publish(ctx, ns, forged)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := plain.Find(ctx, ns, s.Identity); err != nil || e.Name != unsigned.Name {
		t.Fatalf("without a policy the newest copy wins: %v, %v", e.Name, err)
	}
	if e, err := signing.Find(ctx, ns, s.Identity); err != nil || e.Name != signed.Name {
		t.Errorf("with a policy Find = %s, %v; want the signed %s", e.Name, err, signed.Name)
	}
	l, err := signing.Load(ctx, ns, s.Identity)
	if err != nil || l.Entry.Name != signed.Name {
		t.Fatalf("Load: %v", err)
	}

	// Only the unsigned one: not found (and it says why).
	if err := signing.Delete(ctx, signed); err != nil {
		t.Fatal(err)
	}
	if _, err := signing.Find(ctx, ns, s.Identity); !errors.Is(err, store.ErrNotFound) || !errors.Is(err, trust.ErrUnsigned) {
		t.Errorf("only an unsigned copy: %v; want not found because unsigned", err)
	}
	// Ensure publishes a fresh signed copy; GC keeps it, deletes the other.
	ensured, published, err := signing.Ensure(ctx, ns, s)
	if err != nil || !published || ensured.Signature == "" {
		t.Fatalf("Ensure over an untrusted copy: %+v, published %v, %v", ensured, published, err)
	}
	res, err := signing.GC(ctx, ns, s.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kept == nil || res.Kept.Name != ensured.Name || len(res.Deleted) != 1 || res.Deleted[0].Name != unsigned.Name {
		t.Errorf("GC kept %+v, deleted %+v; want %s kept and %s deleted", res.Kept, res.Deleted, ensured.Name, unsigned.Name)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, unsigned.Name, metav1.GetOptions{}); err == nil {
		t.Error("the unsigned copy still exists")
	}

	// A signed strategy copied, annotations and all, under another
	// identifier: its text signature verifies, its identity signature does
	// not, so it is not the other identifier's strategy.
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, ensured.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := s.Identity
	other.Identifier, other.Version = "replayed-"+s.Identity.Identifier[:8], "v9.0.0"
	replayed := cm.DeepCopy()
	replayed.ObjectMeta = metav1.ObjectMeta{GenerateName: "installstrategy-", Namespace: ns, Labels: cm.Labels, Annotations: cm.Annotations}
	replayed.Annotations[metakeys.IdentifierAnnotation], replayed.Annotations[metakeys.VersionAnnotation] = other.Identifier, other.Version
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, replayed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Find(ctx, ns, other); err != nil {
		t.Fatalf("without a policy the replayed copy is found: %v", err)
	}
	if _, err := signing.Find(ctx, ns, other); !errors.Is(err, store.ErrNotFound) || !errors.Is(err, trust.ErrBadSignature) {
		t.Errorf("replayed under another identifier: %v; want not found, identity signature bad", err)
	}

	// Ensure of the same text is a no-op; of another text under the same
	// identity it publishes.
	if _, published, err := signing.Ensure(ctx, ns, s); err != nil || published {
		t.Errorf("Ensure of the stored text: published %v, %v", published, err)
	}
	if _, published, err := signing.Ensure(ctx, ns, forged); err != nil || !published {
		t.Errorf("Ensure of another text under the same identity: published %v, %v", published, err)
	}
}

// Sign signs an unsigned stored strategy in place, chunked ones on the
// head, and the result is trusted.
func TestSignStoredStrategy(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	signer, _ := trust.GenerateKey()
	ring := &trust.KeyRing{}
	_ = ring.Add("test", signer.Public())
	plain := newStore(t, env, store.Options{MaxObjectBytes: 64 << 10})
	signing := newStore(t, env, store.Options{Signer: signer, Trusted: trustedBy(ring), MaxObjectBytes: 64 << 10})
	s := big(t, 7, 4, 40<<10)
	e, err := plain.Publish(ctx, ns, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Chunks) < 2 {
		t.Fatalf("want a chunked strategy, got %d chunks", len(e.Chunks))
	}
	if _, err := signing.Load(ctx, ns, s.Identity); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unsigned chunked strategy loaded by a trusting store: %v", err)
	}
	signed, err := signing.Sign(ctx, e, store.SignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if signed.SignatureKey != signer.KeyID() {
		t.Errorf("signed entry %+v", signed)
	}
	l, err := signing.Load(ctx, ns, s.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if codec.Digest(l.Text) != codec.Digest(serialize(t, s)) {
		t.Error("loaded text differs")
	}
}
