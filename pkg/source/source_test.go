package source_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

const (
	goodText = "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: ns\n"
	// badText decodes but does not parse: a source that reports a
	// parse error for it has parsed it, one that refuses it at an
	// earlier step has not.
	badText = "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: [unclosed\n"
)

// stepOf is the step at which a load stopped: "ok", "trust" (an
// *trust.UntrustedError), or the *trust.RefusedError's step ("size",
// "decode", "parse"); anything else is "other".
func stepOf(err error) string {
	if err == nil {
		return "ok"
	}
	if _, ok := errors.AsType[*trust.UntrustedError](err); ok {
		return "trust"
	}
	if r, ok := errors.AsType[*trust.RefusedError](err); ok {
		return r.Step
	}
	if _, ok := errors.AsType[*source.VersionError](err); ok {
		return "version"
	}
	if _, ok := errors.AsType[*codec.DecodeError](err); ok {
		return "decode"
	}
	return "other: " + err.Error()
}

// keys are the release key (trusted) and another key (not trusted).
type keys struct {
	release, other *trust.Signer
	ring           *trust.KeyRing
}

func newKeys(t *testing.T) keys {
	t.Helper()
	release, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ring := &trust.KeyRing{}
	if err := ring.Add("release", release.Public()); err != nil {
		t.Fatal(err)
	}
	return keys{release: release, other: other, ring: ring}
}

// fakeReader serves one ConfigMap as the store does: the metadata is
// admitted before the data is handed out.
type fakeReader struct{ cm *corev1.ConfigMap }

func (f fakeReader) ReadConfigMap(_ context.Context, e store.Entry, admit func(*metav1.ObjectMeta) error) (*corev1.ConfigMap, error) {
	if admit != nil {
		if err := admit(&f.cm.ObjectMeta); err != nil {
			return nil, fmt.Errorf("read strategy %s: %w: %w", e, store.ErrUntrusted, err)
		}
	}
	return f.cm.DeepCopy(), nil
}

// configMap is a native strategy ConfigMap of text, signed by signer
// (nil: unsigned).
func configMap(t *testing.T, text string, signer *trust.Signer) *corev1.ConfigMap {
	t.Helper()
	cm, err := codec.EncodeText([]byte(text), codec.EncodeOptions{Format: codec.FormatNative, Namespace: "ns",
		Identity: strategy.Identity{Version: "v1", Identifier: "id1"}})
	if err != nil {
		t.Fatal(err)
	}
	cm.Name = "s"
	if signer != nil {
		if err := trust.Sign(cm.Annotations, codec.Digest([]byte(text)), signer); err != nil {
			t.Fatal(err)
		}
	}
	return cm
}

func cmSource(cm *corev1.ConfigMap, policy trust.Policy, max int) source.Source {
	return source.ConfigMap{Reader: fakeReader{cm}, Entry: store.Entry{Namespace: "ns", Name: "s"},
		Gate: trust.Gate{Policy: policy, MaxEncodedBytes: max}}
}

func unverifiedSource(cm *corev1.ConfigMap, max int) source.Source {
	return source.Unverified{Reader: fakeReader{cm}, Entry: store.Entry{Namespace: "ns", Name: "s"}, Why: "anyone", MaxEncodedBytes: max}
}

// artifact is a strategy artifact of text in ghcr.io/acme/shop claiming
// version v1, with a cosign signature by signer (nil: none) whose
// statement names product.
func artifact(t *testing.T, text, product string, signer *trust.Signer) (*oci.Artifact, []oci.Signature) {
	t.Helper()
	a := &oci.Artifact{Repository: "ghcr.io/acme/shop", Digest: "sha256:" + strings.Repeat("ab", 32), Text: []byte(text),
		Meta: oci.Meta{Product: "shop", Version: "v1", Digest: codec.Digest([]byte(text))}}
	a.Reference = a.Repository + "@" + a.Digest
	if signer == nil {
		return a, nil
	}
	st := oci.StatementOf(a)
	st.Product = product
	body, err := oci.Payload(a.Repository, a.Digest, st)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	sig, _, err := signer.SignDigest("sha256:" + hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	return a, []oci.Signature{{Payload: body, Signature: sig}}
}

func pullOf(a *oci.Artifact, sigs []oci.Signature) source.Pull {
	return func(context.Context) (*oci.Artifact, []oci.Signature, error) { return a, sigs, nil }
}

func ociSource(t *testing.T, text string, signer *trust.Signer, k keys, product string, pinned bool, max int) source.Source {
	a, sigs := artifact(t, text, product, signer)
	return source.OCI{Remote: source.Remote{Pull: pullOf(a, sigs), Pinned: pinned, Keys: k.ring,
		Expect: trust.Expect{Product: "shop"}, MaxTextBytes: max}}
}

// helmSource is a chart source whose render returns rendered; renders
// counts the renders.
func helmSource(t *testing.T, signer *trust.Signer, k keys, pinned bool, version string, rendered string, renders *int) source.Source {
	a, sigs := artifact(t, "chart archive bytes", "shop", signer)
	// A chart's signature names the product, the chart's version and the
	// archive's digest, nothing else.
	if signer != nil {
		body, _ := oci.Payload(a.Repository, a.Digest, trust.Statement{Product: "shop", Version: "v1", Digest: codec.Digest(a.Text)})
		sum := sha256.Sum256(body)
		sig, _, _ := signer.SignDigest("sha256:" + hex.EncodeToString(sum[:]))
		sigs = []oci.Signature{{Payload: body, Signature: sig}}
	}
	return source.Helm{Remote: source.Remote{Pull: pullOf(a, sigs), Pinned: pinned, Keys: k.ring, Expect: trust.Expect{Product: "shop", Version: version}},
		Product: "shop", Identifier: func(*oci.Artifact) string { return "helm-1" },
		Render: func(context.Context, *oci.Artifact) (*helmspec.Result, error) {
			*renders++
			return &helmspec.Result{Manifests: []byte(rendered), Chart: helmspec.Chart{Name: "shop", Version: "v1"}}, nil
		}}
}

func revisionSource(text string, anchored *history.Anchored, recorded *history.Revision, t *testing.T) source.Source {
	cm := configMap(t, text, nil)
	return source.Revision{Get: func(context.Context) (*corev1.ConfigMap, error) { return cm, nil }, Anchored: anchored, Recorded: recorded}
}

func writeFile(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every source refuses an untrusted or oversized input before it parses
// it — the refusal is at the trust or size step even for a text that
// would not parse — and parses a trusted one (the same unparseable text,
// trusted, fails at the parse step).
func TestSourcesDecideTrustBeforeParsing(t *testing.T) {
	k := newKeys(t)
	signedPolicy := trust.Policy{Keys: k.ring}
	good, bad := []byte(goodText), []byte(badText)
	id := strategy.Identity{Version: "v1", Identifier: "id1"}
	lying := configMap(t, goodText, nil) // records goodText's digest, holds badText
	lying.Data = configMap(t, badText, nil).Data
	var renders int
	for _, tc := range []struct {
		name string
		src  source.Source
		want string // stepOf the error
		// by is the expected VerifiedBy of a load that succeeds.
		by string
		// renders is the chart renders expected (Helm only).
		renders int
	}{
		{name: "configmap signed by a trusted key", src: cmSource(configMap(t, goodText, k.release), signedPolicy, 0), want: "ok", by: "signed by release"},
		{name: "configmap signed by another key", src: cmSource(configMap(t, badText, k.other), signedPolicy, 0), want: "trust"},
		{name: "configmap unsigned", src: cmSource(configMap(t, badText, nil), signedPolicy, 0), want: "trust"},
		{name: "configmap of another digest than the pinned", src: cmSource(configMap(t, badText, nil), trust.Policy{Pinned: codec.Digest(good)}, 0), want: "trust"},
		{name: "configmap that lies about its digest", src: cmSource(lying, trust.Policy{Pinned: codec.Digest(good)}, 0), want: "decode"},
		{name: "configmap above the size bound", src: cmSource(configMap(t, badText, k.release), signedPolicy, 16), want: "size"},
		{name: "configmap pinned", src: cmSource(configMap(t, goodText, nil), trust.Policy{Pinned: codec.Digest(good)}, 0), want: "ok", by: "pinned digest"},
		{name: "configmap trusted that does not parse", src: cmSource(configMap(t, badText, k.release), signedPolicy, 0), want: "parse"},

		{name: "oci signed for the product", src: ociSource(t, goodText, k.release, k, "shop", false, 0), want: "ok", by: "signed by release"},
		{name: "oci unsigned", src: ociSource(t, badText, nil, k, "shop", false, 0), want: "trust"},
		{name: "oci signed by another key", src: ociSource(t, badText, k.other, k, "shop", false, 0), want: "trust"},
		{name: "oci signed for another product", src: ociSource(t, badText, k.release, k, "tools", false, 0), want: "trust"},
		{name: "oci above the size bound", src: ociSource(t, badText, k.release, k, "shop", false, 16), want: "size"},
		{name: "oci pinned", src: ociSource(t, goodText, nil, k, "shop", true, 0), want: "ok", by: "pinned digest"},
		{name: "oci trusted that does not parse", src: ociSource(t, badText, nil, k, "shop", true, 0), want: "parse"},

		{name: "helm signed", src: helmSource(t, k.release, k, false, "", goodText, &renders), want: "ok", by: "signed by release", renders: 1},
		{name: "helm unsigned", src: helmSource(t, nil, k, false, "", badText, &renders), want: "trust"},
		{name: "helm signed by another key", src: helmSource(t, k.other, k, false, "", badText, &renders), want: "trust"},
		{name: "helm pinned of another version than asked", src: helmSource(t, nil, k, true, "v2", badText, &renders), want: "version"},
		{name: "helm signed for another version than asked", src: helmSource(t, k.release, k, false, "v2", badText, &renders), want: "trust"},
		{name: "helm pinned", src: helmSource(t, nil, k, true, "", goodText, &renders), want: "ok", by: "pinned digest", renders: 1},
		{name: "helm trusted whose render does not parse", src: helmSource(t, k.release, k, false, "", badText, &renders), want: "parse", renders: 1},

		{name: "revision anchored", src: revisionSource(goodText, &history.Anchored{Revision: 1, Identity: id, Digest: codec.Digest(good)}, nil, t), want: "ok", by: "pinned digest"},
		{name: "revision anchored that does not parse", src: revisionSource(badText, &history.Anchored{Revision: 1, Identity: id, Digest: codec.Digest(bad)}, nil, t), want: "parse"},
		{name: "revision of another digest than recorded", src: revisionSource(badText, nil, &history.Revision{Revision: 1, Identity: id, Digest: codec.Digest(good)}, t), want: "trust"},
		{name: "revision recorded", src: revisionSource(goodText, nil, &history.Revision{Revision: 1, Identity: id, Digest: codec.Digest(good)}, t), want: "ok", by: "pinned digest"},

		{name: "unverified configmap", src: unverifiedSource(configMap(t, goodText, nil), 0), want: "ok", by: source.NotVerified + ": anyone"},
		{name: "unverified configmap above the size bound", src: unverifiedSource(configMap(t, badText, nil), 16), want: "size"},
		{name: "unverified configmap that lies about its digest", src: unverifiedSource(lying, 0), want: "decode"},
		{name: "unverified configmap that does not parse", src: unverifiedSource(configMap(t, badText, nil), 0), want: "parse"},
		{name: "oci unverified", src: source.OCI{Remote: source.Remote{Pull: pullOf(artifact(t, goodText, "shop", nil)), Unverified: true, Why: "anyone"}}, want: "ok", by: source.NotVerified + ": anyone"},
		{name: "oci unverified above the size bound", src: source.OCI{Remote: source.Remote{Pull: pullOf(artifact(t, badText, "shop", nil)), Unverified: true, MaxTextBytes: 16}}, want: "size"},

		{name: "file", src: source.File{Path: writeFile(t, goodText)}, want: "ok", by: source.GivenByUser},
		{name: "file above the size bound", src: source.File{Path: writeFile(t, badText), MaxBytes: 16}, want: "size"},

		{name: "kustomization", src: source.Kustomize{Dir: "d", Build: func(string) ([]byte, error) { return good, nil }}, want: "ok", by: source.GivenByUser},
		{name: "kustomization above the size bound", src: source.Kustomize{Dir: "d", MaxBytes: 16, Build: func(string) ([]byte, error) { return bad, nil }}, want: "size"},
		{name: "kustomization that does not parse", src: source.Kustomize{Dir: "d", Build: func(string) ([]byte, error) { return bad, nil }}, want: "parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			renders = 0
			l, err := tc.src.Load(t.Context())
			if got := stepOf(err); got != tc.want {
				t.Fatalf("stopped at %q, want %q", got, tc.want)
			}
			if renders != tc.renders {
				t.Errorf("rendered the chart %d times, want %d", renders, tc.renders)
			}
			if err != nil {
				return
			}
			if l.VerifiedBy != tc.by {
				t.Errorf("verified by %q, want %q", l.VerifiedBy, tc.by)
			}
			if len(l.Strategy.Objects) != 1 || l.Digest != codec.Digest(l.Text) || l.From == "" {
				t.Errorf("loaded %d objects, digest %s of %d bytes, from %q", len(l.Strategy.Objects), l.Digest, len(l.Text), l.From)
			}
		})
	}
}

// A ConfigMap that decodes but does not parse was vouched for: it is
// reported as the store reports a corrupt strategy, naming the ConfigMap.
func TestConfigMapCorruptNamesTheConfigMap(t *testing.T) {
	k := newKeys(t)
	_, err := cmSource(configMap(t, badText, k.release), trust.Policy{Keys: k.ring}, 0).Load(t.Context())
	corrupt, ok := errors.AsType[*store.CorruptError](err)
	if !ok || corrupt.ConfigMap != "ns/s" {
		t.Fatalf("error %v, want a *store.CorruptError of ns/s", err)
	}
}

// What Unverified loads says so (Verified is false), its refusals name
// the ConfigMap, and Remote.Trusted never hears of an unverified
// artifact: nothing unverified is cached.
func TestUnverifiedSaysSoAndIsNeverTrusted(t *testing.T) {
	k := newKeys(t)
	l, err := unverifiedSource(configMap(t, goodText, k.release), 0).Load(t.Context())
	if err != nil || l.Verified() || !strings.HasPrefix(l.VerifiedBy, source.NotVerified) || l.ConfigMap != "ns/s" {
		t.Fatalf("loaded %+v, %v: want a strategy not verified, even when signed, of ns/s", l, err)
	}
	signed, err := cmSource(configMap(t, goodText, k.release), trust.Policy{Keys: k.ring}, 0).Load(t.Context())
	if err != nil || !signed.Verified() {
		t.Fatalf("a signed ConfigMap through the gate: %v, verified %v", err, signed.Verified())
	}
	_, err = unverifiedSource(configMap(t, goodText, nil), 16).Load(t.Context())
	if corrupt, ok := errors.AsType[*store.CorruptError](err); !ok || corrupt.ConfigMap != "ns/s" || !errors.Is(err, trust.ErrTooLarge) {
		t.Errorf("oversized: %v, want a *store.CorruptError of ns/s wrapping trust.ErrTooLarge", err)
	}
	a, sigs := artifact(t, goodText, "shop", k.release)
	told := 0
	l, err = source.OCI{Remote: source.Remote{Pull: pullOf(a, sigs), Unverified: true, Keys: k.ring,
		Trusted: func(*oci.Artifact) { told++ }}}.Load(t.Context())
	if err != nil || l.Verified() || told != 0 {
		t.Errorf("unverified artifact: %v, verified %v, Trusted told %d times", err, l.Verified(), told)
	}
}

type fakeEnsurer struct{ ensured []*strategy.Strategy }

func (f *fakeEnsurer) Ensure(_ context.Context, namespace string, st *strategy.Strategy) (store.Entry, bool, error) {
	f.ensured = append(f.ensured, st)
	return store.Entry{Namespace: namespace, Name: "product-v1", Digest: "sha256:00"}, true, nil
}

// The built-in product is generated, stored and vouched for by the
// program itself; without one, the error says that no source is named.
func TestProductIsGeneratedAndStored(t *testing.T) {
	cfg := &identity.Config{Namespace: "ns", Version: "v1"}
	ens := &fakeEnsurer{}
	gen := func(*identity.Config) (*strategy.Strategy, error) {
		s, _, err := strategy.Parse([]byte(goodText), strategy.ParseOptions{})
		return s, err
	}
	l, err := source.Product{Generate: gen, Config: cfg, Store: ens}.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.VerifiedBy != source.BuiltIn || l.From != "configmap ns/product-v1" || len(ens.ensured) != 1 || ens.ensured[0] != l.Strategy {
		t.Errorf("loaded %+v, ensured %d", l, len(ens.ensured))
	}
	if _, err := (source.Product{Config: cfg, Store: ens}).Load(t.Context()); err == nil || !strings.Contains(err.Error(), "no strategy source") {
		t.Errorf("without a product: %v", err)
	}
}

// Remote.Trusted (where the operator caches artifacts) hears of an
// artifact only once its trust is decided, never of a refused one.
func TestRemoteTrustedHearsOnlyOfTrustedArtifacts(t *testing.T) {
	k := newKeys(t)
	for _, tc := range []struct {
		name   string
		signer *trust.Signer
		want   int
	}{{"unsigned", nil, 0}, {"signed by another key", k.other, 0}, {"signed by a trusted key", k.release, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			a, sigs := artifact(t, goodText, "shop", tc.signer)
			told := 0
			src := source.OCI{Remote: source.Remote{Pull: pullOf(a, sigs), Keys: k.ring, Expect: trust.Expect{Product: "shop"},
				Trusted: func(*oci.Artifact) { told++ }}}
			_, err := src.Load(t.Context())
			if told != tc.want || (err == nil) != (tc.want == 1) {
				t.Errorf("told %d times (want %d), error %v", told, tc.want, err)
			}
		})
	}
}

// A dump's stored strategy is read only when the operator's store policy
// vouches for it: one signed by another key is never read (nor parsed),
// and without an image to dump it the load says it is not stored; one
// signed by the operator's key is loaded from the store.
func TestDumpReadsOnlyWhatTheStoreVouchesFor(t *testing.T) {
	k := newKeys(t)
	cfg := &identity.Config{Namespace: "ns", Version: "v1"}
	id, err := cfg.Identity(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		signer *trust.Signer
		text   string
		want   string
	}{{"signed by another key", k.other, badText, "not stored"}, {"signed by the operator's key", k.release, goodText, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			cm, err := codec.EncodeText([]byte(tc.text), codec.EncodeOptions{Format: codec.FormatNative, Namespace: "ns", Identity: id})
			if err != nil {
				t.Fatal(err)
			}
			cm.Name = "stored"
			if err := trust.Sign(cm.Annotations, codec.Digest([]byte(tc.text)), tc.signer); err != nil {
				t.Fatal(err)
			}
			if _, err := kube.CoreV1().ConfigMaps("ns").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			st, err := store.New(kube, store.Options{Trusted: func(e store.Entry) error {
				_, err := k.ring.Verify(e.Digest, e.Signature, e.SignatureKey)
				return err
			}})
			if err != nil {
				t.Fatal(err)
			}
			ld, err := loader.New(loader.Options{Store: st, Kube: kube})
			if err != nil {
				t.Fatal(err)
			}
			l, err := source.Dump{Loader: ld, Request: loader.Request{Config: cfg}}.Load(t.Context())
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || stepOf(err) == "parse" {
					t.Fatalf("error %v, want one saying %q before any parse", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.VerifiedBy != source.FromOperatorStore || l.From != "store" || l.Digest != codec.Digest([]byte(goodText)) || len(l.Strategy.Objects) != 1 {
				t.Errorf("loaded %+v", l)
			}
		})
	}
}

// endless is an input that never ends; read counts what was read of it.
type endless struct{ read int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.read += len(p)
	return len(p), nil
}

// A file above its bound is refused having read no more than the bound
// (and a byte): refusing it costs the bound, not the file.
func TestFileRefusalCostsTheBound(t *testing.T) {
	in := &endless{}
	_, err := source.File{Path: "-", Stdin: in, MaxBytes: 1 << 10}.Load(t.Context())
	if stepOf(err) != "size" || !strings.Contains(err.Error(), "standard input") {
		t.Fatalf("error %v, want a refusal at the size step naming standard input", err)
	}
	if in.read > 1<<10+512 {
		t.Errorf("read %d bytes of an endless input to refuse it; the bound is %d", in.read, 1<<10)
	}
}
