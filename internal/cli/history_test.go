package cli

import (
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
)

// TestClusterHistoryRollback: each apply of a plugin installation is a
// revision; rollback returns to the one before (objects of the later one
// pruned, those of the earlier one back) and is a revision itself;
// --to-revision picks one; --history-limit keeps the newest revisions and
// their ConfigMaps only; uninstall removes the history and its revisions.
func TestClusterHistoryRollback(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	v1 := writeFile(t, "v1.yaml", smallStrategy(ns, "v1"))
	v2 := writeFile(t, "v2.yaml", smallStrategy(ns, "v2"))
	args := func(a ...string) []string { return append(a, clusterArgs(ns)...) }
	apply := func(path, version string, extra ...string) {
		t.Helper()
		code, out, errOut := run(t, nil, args(append([]string{"apply", path, "--name", "small", "--wait", "--timeout", "2m", "--version", version, "--registry", "example.com"}, extra...)...)...)
		if code != 0 {
			t.Fatalf("apply %s: exit %d\n%s\n%s", version, code, out, errOut)
		}
	}
	image := func() string {
		t.Helper()
		d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "small-controller", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	exists := func(name string) bool {
		t.Helper()
		_, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	revisions := func() []history.Revision {
		t.Helper()
		code, out, errOut := run(t, nil, args("history", "small", "-o", "json")...)
		if code != 0 {
			t.Fatalf("history: exit %d %s", code, errOut)
		}
		var h struct {
			Kind      string             `json:"kind"`
			Revisions []history.Revision `json:"revisions"`
		}
		if err := json.Unmarshal([]byte(out), &h); err != nil || h.Kind != "History" {
			t.Fatalf("history -o json: kind %q, %v\n%s", h.Kind, err, out)
		}
		return h.Revisions
	}

	apply(v1, "v1")
	apply(v1, "v1") // a re-apply is no new revision
	apply(v2, "v2")
	revs := revisions()
	if len(revs) != 2 || revs[0].Revision != 2 || revs[0].Identity.Version != "v2" || revs[1].Identity.Version != "v1" || revs[0].Source != v2 {
		t.Fatalf("history after v1, v1, v2: %+v", revs)
	}
	// A revision keeps its strategy compact: one line of JSON per object.
	owner := inventory.Owner{Namespace: ns, Name: "small"}
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, revisionName(owner, 2), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := codec.Decode(cm, codec.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(strings.TrimPrefix(string(text), "---\n"), "---\n") {
		if !strings.HasPrefix(doc, "{") || strings.Count(doc, "\n") != 1 {
			t.Fatalf("revision 2 holds a document that is not a line of JSON:\n%s", doc)
		}
	}
	code, out, _ := run(t, nil, args("history", "small")...)
	if code != 0 || !strings.HasPrefix(out, "REVISION") || !strings.Contains(out, "2 (current)  v2") {
		t.Fatalf("history table: exit %d\n%s", code, out)
	}

	code, out, errOut := run(t, nil, args("rollback", "small", "--wait", "--timeout", "2m", "--yes")...)
	if code != 0 || !strings.Contains(out, "rolling back installation "+ns+"/small to revision 1 (v1 example.com)") {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, errOut)
	}
	if img := image(); img != "example.com/small-controller:v1" || !exists("dropped") || exists("added") {
		t.Fatalf("after rollback: image %s, dropped %v, added %v; want v1's", img, exists("dropped"), exists("added"))
	}
	revs = revisions()
	if len(revs) != 3 || revs[0].Identity.Version != "v1" || revs[0].Source != "rollback to revision 1" {
		t.Fatalf("history after rollback: %+v", revs)
	}
	code, _, errOut = run(t, nil, args("rollback", "small", "--to-revision", "2", "--wait", "--timeout", "2m", "--history-limit", "2", "--yes")...)
	if code != 0 || image() != "example.com/small-controller:v2" {
		t.Fatalf("rollback --to-revision 2: exit %d, image %s: %s", code, image(), errOut)
	}
	revs = revisions()
	if len(revs) != 2 || revs[0].Revision != 4 || revs[1].Revision != 3 {
		t.Fatalf("history with --history-limit 2: %+v", revs)
	}
	for n := 1; n <= 4; n++ {
		if want := n >= 3; exists(revisionName(owner, n)) != want {
			t.Errorf("revision %d ConfigMap exists: %v, want %v", n, !want, want)
		}
	}
	code, _, errOut = run(t, nil, args("rollback", "small", "--to-revision", "1", "--yes")...)
	if code == 0 || !strings.Contains(errOut, "has no revision 1") {
		t.Fatalf("rollback to a dropped revision: exit %d %s", code, errOut)
	}
	code, _, errOut = run(t, nil, args("uninstall", "small", "--wait")...)
	if code != 0 {
		t.Fatalf("uninstall: exit %d %s", code, errOut)
	}
	if exists(history.ConfigMapName(owner)) || exists(revisionName(owner, 4)) {
		t.Fatal("uninstall left the history or a revision")
	}
}
