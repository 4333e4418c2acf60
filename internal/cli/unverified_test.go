package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// storedStrategy is a native strategy ConfigMap NAME of text in ns, as a
// ConfigMap editor of the namespace could write it (digest included).
func storedStrategy(t *testing.T, ns, name, text string) *corev1.ConfigMap {
	t.Helper()
	cm, err := codec.EncodeText([]byte(text), codec.EncodeOptions{Format: codec.FormatNative, Namespace: ns, Name: name,
		Identity: strategy.Identity{Version: "v1.0.0", Identifier: name}})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func objectText(ns, name string, size int) string {
	return fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  a: %q\n", name, ns, strings.Repeat("a", size))
}

// The display verbs (inspect, get, decode) read a strategy of the cluster
// through pkg/source's Unverified: they show it and say it is not
// verified and who may have written it (also a ConfigMap rewritten, text
// and digest, by a ConfigMap editor), and one whose text is above
// --max-decoded-size is refused with an error naming it, before it is
// parsed.
func TestClusterDisplayVerbsSayUnverified(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	api := env.Kube.CoreV1().ConfigMaps(ns)
	if _, err := api.Create(ctx, storedStrategy(t, ns, "shop-v1", objectText(ns, "app", 1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	note := "note: configmap " + ns + "/shop-v1 is not verified: any ConfigMap editor of namespace " + ns
	for _, args := range [][]string{{"inspect", "cm/shop-v1"}, {"get", "shop-v1"}, {"decode", "cm/shop-v1"}} {
		code, out, errOut := run(t, nil, append(args, clusterArgs(ns)...)...)
		if code != 0 || !strings.Contains(errOut, note) || !strings.Contains(out, "app") {
			t.Fatalf("%v: exit %d, want the strategy shown and %q on standard error:\n%s\n%s", args, code, note, out, errOut)
		}
	}
	code, out, _ := run(t, nil, append([]string{"inspect", "cm/shop-v1"}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(out, "Trust:         not verified: any ConfigMap editor of namespace "+ns) {
		t.Fatalf("inspect: exit %d, no Trust: not verified line:\n%s", code, out)
	}

	// A ConfigMap editor rewrites it, text and digest: inspect shows
	// what it holds now, still as not verified.
	cm, err := api.Get(ctx, "shop-v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged := storedStrategy(t, ns, "shop-v1", objectText(ns, "forged", 1))
	cm.Data, cm.Annotations = forged.Data, forged.Annotations
	if _, err := api.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, append([]string{"inspect", "cm/shop-v1", "-o", "json"}, clusterArgs(ns)...)...)
	var r Report
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("inspect of the rewritten ConfigMap: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.HasPrefix(r.Trust, "not verified: ") || len(r.Objects) != 1 || r.Objects[0].Name != "forged" {
		t.Errorf("rewritten: trust %q, objects %+v: want the forged object, not verified", r.Trust, r.Objects)
	}

	// Above the decode bound: refused, naming the ConfigMap, nothing shown.
	if _, err := api.Create(ctx, storedStrategy(t, ns, "big", objectText(ns, "big", 64<<10)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, nil, append([]string{"inspect", "cm/big", "--max-decoded-size", "16Ki"}, clusterArgs(ns)...)...)
	if code == 0 || out != "" || !strings.Contains(errOut, ns+"/big") || !strings.Contains(errOut, "refused at decode") || !strings.Contains(errOut, "exceeds the limit") {
		t.Fatalf("inspect above --max-decoded-size: exit %d, want a refusal naming %s/big at the decode limit:\n%s\n%s", code, ns, out, errOut)
	}
}

// What a display read loaded (not verified) is never applied, unless the
// user took it as it is with --allow-unsigned; a strategy someone vouched
// for, or the user's own file, is.
func TestApplyRefusesWhatIsNotVerified(t *testing.T) {
	for _, tc := range []struct {
		by      string
		ct      *clusterTrust
		refused bool
	}{
		{"not verified: any ConfigMap editor of namespace ns (digest included) may have written it", nil, true},
		{"not verified: anyone who may push to r/x or move its tag may have written it", &clusterTrust{optional: true}, true},
		{"not verified: any ConfigMap editor of namespace ns (digest included) may have written it", &clusterTrust{allowUnsigned: true}, false},
		{"signed by vendor", nil, false},
		{"given by the user", nil, false},
		{"pinned digest", nil, false},
	} {
		o := &options{clusterTrust: tc.ct}
		err := o.mayAct(&codec.Loaded{VerifiedBy: tc.by})
		if (err != nil) != tc.refused {
			t.Errorf("%q (trust %+v): %v, want refused %v", tc.by, tc.ct, err, tc.refused)
		}
	}
	// runApply asks first, before it touches the cluster (nil here).
	o := &options{}
	if err := o.runApply(t.Context(), nil, &codec.Loaded{VerifiedBy: "not verified: anyone"}, &reconcileFlags{}, applyFlags{}, "cm/x"); err == nil || !strings.Contains(err.Error(), "refusing to act") {
		t.Errorf("runApply of an unverified strategy: %v", err)
	}
}
