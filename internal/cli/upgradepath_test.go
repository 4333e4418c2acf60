package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/history"
)

// walkStrategy is the small product at version, declaring upgradeFrom
// (none when "").
func walkStrategy(ns, version, upgradeFrom string) string {
	text := smallStrategy(ns, version)
	if upgradeFrom != "" {
		text += "---\napiVersion: installstrategy.io/v1alpha1\nkind: Requirements\nmetadata:\n  name: requirements\nspec:\n  upgradeFrom: \"" + upgradeFrom + "\"\n"
	}
	return text
}

// walkHistory is the versions of the installation's revisions, newest
// first, and their sources.
func walkHistory(t *testing.T, ns string) (versions, sources []string) {
	t.Helper()
	out := mustRun(t, nil, append([]string{"history", "small", "-o", "json"}, clusterArgs(ns)...)...)
	var h struct {
		Revisions []history.Revision `json:"revisions"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("history -o json: %v\n%s", err, out)
	}
	for _, r := range h.Revisions {
		versions = append(versions, r.Identity.Version)
		sources = append(sources, r.Source)
	}
	return versions, sources
}

// Issue 42 item 3, the plugin: the small product at v1.0.0, v2.0.0
// (upgradeFrom >= 1.0.0) and v3.0.0 (upgradeFrom >= 2.0.0), signed, on a
// loopback registry, with a v2.5.0 signed by another key. v3.0.0 over
// v1.0.0 is refused by apply, writing nothing; plan --walk-upgrade-path
// shows the walk (v2.5.0 skipped as untrusted); apply
// --walk-upgrade-path rolls out v2.0.0, then v3.0.0, each recorded in
// the history; a target no chain reaches is refused, naming what was
// looked at.
func TestApplyWalksUpgradePathFromRegistry(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	host := newRegistry(t)
	args := func(a ...string) []string { return append(append(a, "--name", "small"), clusterArgs(ns)...) }
	key, pub := keyPair(t, "vendor")
	strangerKey, _ := keyPair(t, "stranger")
	repo := "oci://" + host + "/acme/small"
	publish := func(version, upgradeFrom, key string) {
		t.Helper()
		f := writeFile(t, version+".yaml", walkStrategy(ns, version, upgradeFrom))
		mustRun(t, nil, "publish", f, repo+":"+version, "--version", version, "--registry", "example.com", "--key", key)
	}
	publish("v1.0.0", "", key)
	publish("v2.0.0", ">= 1.0.0", key)
	publish("v2.5.0", ">= 1.0.0", strangerKey)
	publish("v3.0.0", ">= 2.0.0", key)
	publish("v5.0.0", ">= 4.0.0", key)
	version := func() string {
		t.Helper()
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["version"]
	}

	mustRun(t, nil, args("apply", repo+":v1.0.0", "--key", pub, "--wait", "--timeout", "2m")...)
	code, out, errOut := run(t, nil, args("apply", repo+":v3.0.0", "--key", pub, "--wait", "--timeout", "2m")...)
	if code != 1 || !strings.Contains(errOut, `upgradeFrom ">= 2.0.0"`) || !strings.Contains(errOut, "--walk-upgrade-path (with --key") || version() != "v1.0.0" {
		t.Fatalf("v3.0.0 over v1.0.0 without --walk-upgrade-path: exit %d, config at %s; want 1, refused, v1.0.0\n%s%s", code, version(), out, errOut)
	}

	code, out, errOut = run(t, nil, args("plan", repo+":v3.0.0", "--walk-upgrade-path")...)
	if code != 2 || !strings.Contains(errOut, "--key") {
		t.Errorf("plan --walk-upgrade-path without --key: exit %d, want 2 asking for --key\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, args("plan", repo+":v3.0.0", "--walk-upgrade-path", "--key", pub)...)
	if code != 1 || !strings.Contains(out, "upgrade path: v1.0.0 -> v2.0.0 -> v3.0.0 (2 hops") ||
		!strings.Contains(out, "skipped v2.5.0: ") || !strings.Contains(out, "plan of hop 1/2, v1.0.0 -> v2.0.0") {
		t.Fatalf("plan --walk-upgrade-path: exit %d, want 1 and the walk\n%s%s", code, out, errOut)
	}

	code, out, errOut = run(t, nil, args("apply", repo+":v3.0.0", "--walk-upgrade-path", "--key", pub, "--wait", "--timeout", "2m")...)
	if code != 0 || !strings.Contains(out, "upgrade path: hop 1/2: v1.0.0 -> v2.0.0 ("+repo+":v2.0.0)") ||
		!strings.Contains(out, "upgrade path: hop 2/2: v2.0.0 -> v3.0.0") || strings.Count(out, "rolled over: true") != 2 || version() != "v3.0.0" {
		t.Fatalf("apply --walk-upgrade-path: exit %d, config at %s\n%s%s", code, version(), out, errOut)
	}
	versions, sources := walkHistory(t, ns)
	if want := []string{"v3.0.0", "v2.0.0", "v1.0.0"}; !slices.Equal(versions, want) {
		t.Fatalf("history %v (sources %v), want %v: each hop a revision", versions, sources, want)
	}
	if sources[1] != repo+":v2.0.0" {
		t.Errorf("the intermediate revision's source is %q, want %s", sources[1], repo+":v2.0.0")
	}

	code, out, errOut = run(t, nil, args("plan", repo+":v5.0.0", "--walk-upgrade-path", "--key", pub)...)
	if code != 1 || !strings.Contains(errOut, "apply --walk-upgrade-path would write nothing: no upgrade path from v3.0.0 to v5.0.0") {
		t.Errorf("plan --walk-upgrade-path with no chain: exit %d, want 1 and why\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, args("apply", repo+":v5.0.0", "--walk-upgrade-path", "--key", pub)...)
	if code != 1 || !strings.Contains(errOut, "apply would write nothing: no upgrade path from v3.0.0 to v5.0.0") || version() != "v3.0.0" {
		t.Errorf("apply --walk-upgrade-path with no chain: exit %d, config at %s\n%s%s", code, version(), out, errOut)
	}
}

// The same walk through the strategies stored in the namespace (cm/NAME):
// only those signed by --key count; an unsigned v2.5.0 stored beside
// them is skipped.
func TestApplyWalksUpgradePathFromStored(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	args := func(a ...string) []string { return append(append(a, "--name", "small"), clusterArgs(ns)...) }
	key, pub := keyPair(t, "vendor")
	publish := func(version, upgradeFrom string, extra ...string) string {
		t.Helper()
		f := writeFile(t, version+".yaml", walkStrategy(ns, version, upgradeFrom))
		out := mustRun(t, nil, append(append([]string{"publish", f, "--version", version, "--identifier", version}, extra...), clusterArgs(ns)...)...)
		return strings.TrimPrefix(strings.Fields(out)[0], "configmap/")
	}
	v1 := publish("v1.0.0", "", "--key", key)
	publish("v2.0.0", ">= 1.0.0", "--key", key)
	publish("v2.5.0", ">= 1.0.0")
	v3 := publish("v3.0.0", ">= 2.0.0", "--key", key)

	mustRun(t, nil, args("apply", "cm/"+v1, "--key", pub, "--wait", "--timeout", "2m")...)
	code, out, errOut := run(t, nil, args("apply", "cm/"+v3, "--walk-upgrade-path", "--key", pub, "--wait", "--timeout", "2m")...)
	if code != 0 || !strings.Contains(out, "upgrade path: v1.0.0 -> v2.0.0 -> v3.0.0") || !strings.Contains(out, "skipped v2.5.0: ") {
		t.Fatalf("apply cm/ --walk-upgrade-path: exit %d\n%s%s", code, out, errOut)
	}
	versions, _ := walkHistory(t, ns)
	if want := []string{"v3.0.0", "v2.0.0", "v1.0.0"}; !slices.Equal(versions, want) {
		t.Fatalf("history %v, want %v", versions, want)
	}
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "config", metav1.GetOptions{})
	if err != nil || cm.Data["version"] != "v3.0.0" {
		t.Fatalf("config after the walk: %v, %v", cm.Data, err)
	}
}

// The same walk through the installation's own revisions (revision/N,
// apply's --help example): v1.0.0, v2.0.0 and v3.0.0 applied from files,
// then a rollback to v1.0.0; revision/3 (v3.0.0) over it is refused
// without --walk-upgrade-path, and --key is refused (a revision's trust
// is the namespace's anchor). A revision whose ConfigMap a ConfigMap
// editor rewrote is skipped as TAMPERED, so no chain is left; put back,
// the walk rolls out revision 2, then revision 3, each recorded with its
// revision as the source.
func TestApplyWalksUpgradePathFromRevisions(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	args := func(a ...string) []string { return append(append(a, "--name", "small"), clusterArgs(ns)...) }
	_, pub := keyPair(t, "vendor")
	for _, v := range []struct{ version, upgradeFrom string }{{"v1.0.0", ""}, {"v2.0.0", ">= 1.0.0"}, {"v3.0.0", ">= 2.0.0"}} {
		f := writeFile(t, v.version+".yaml", walkStrategy(ns, v.version, v.upgradeFrom))
		mustRun(t, nil, args("apply", f, "--version", v.version, "--wait", "--timeout", "2m")...)
	}
	mustRun(t, nil, append([]string{"rollback", "small", "--to-revision", "1", "--yes", "--wait", "--timeout", "2m"}, clusterArgs(ns)...)...)
	version := func() string {
		t.Helper()
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["version"]
	}
	if v := version(); v != "v1.0.0" {
		t.Fatalf("after the rollback the config is at %s, want v1.0.0", v)
	}

	code, out, errOut := run(t, nil, args("apply", "revision/3", "--wait", "--timeout", "2m")...)
	if code != 1 || !strings.Contains(errOut, `upgradeFrom ">= 2.0.0"`) || !strings.Contains(errOut, "revision/N)") || version() != "v1.0.0" {
		t.Fatalf("revision/3 over v1.0.0 without --walk-upgrade-path: exit %d, config at %s; want 1, refused\n%s%s", code, version(), out, errOut)
	}
	code, out, errOut = run(t, nil, args("apply", "revision/3", "--walk-upgrade-path", "--key", pub)...)
	if code != 2 || !strings.Contains(errOut, "anchor") {
		t.Errorf("revision/3 with --key: exit %d, want 2 (a revision's trust is the anchor)\n%s%s", code, out, errOut)
	}

	// A ConfigMap editor rewrites revision 2: it no longer holds the
	// anchored text, so v2.0.0 is skipped and no chain is left.
	api := env.Kube.CoreV1().ConfigMaps(ns)
	rev2, err := api.Get(ctx, "installstrategy-revision-small-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged := storedStrategy(t, ns, rev2.Name, walkStrategy(ns, "v2.0.0", ">= 0.0.0")+"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: planted\n  namespace: "+ns+"\n")
	tampered := rev2.DeepCopy()
	tampered.Data = forged.Data
	for k, v := range forged.Annotations {
		tampered.Annotations[k] = v
	}
	if _, err := api.Update(ctx, tampered, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, nil, args("plan", "revision/3", "--walk-upgrade-path")...)
	if code != 1 || !strings.Contains(errOut, "no upgrade path from v1.0.0 to v3.0.0") || !strings.Contains(errOut, "TAMPERED") {
		t.Fatalf("plan revision/3 --walk-upgrade-path with revision 2 rewritten: exit %d, want 1, no path, v2.0.0 skipped as TAMPERED\n%s%s", code, out, errOut)
	}
	back, err := api.Get(ctx, rev2.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	back.Data, back.Annotations = rev2.Data, rev2.Annotations
	if _, err := api.Update(ctx, back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	code, out, errOut = run(t, nil, args("apply", "revision/3", "--walk-upgrade-path", "--wait", "--timeout", "2m")...)
	if code != 0 || !strings.Contains(out, "upgrade path: v1.0.0 -> v2.0.0 -> v3.0.0") ||
		!strings.Contains(out, "upgrade path: hop 1/2: v1.0.0 -> v2.0.0 (revision 2)") || version() != "v3.0.0" {
		t.Fatalf("apply revision/3 --walk-upgrade-path: exit %d, config at %s\n%s%s", code, version(), out, errOut)
	}
	versions, sources := walkHistory(t, ns)
	// Revisions 6 (v3.0.0) and 5 (v2.0.0) of the walk, the rollback's 4
	// and revisions 3 and 2: the newest 5 are kept.
	if want := []string{"v3.0.0", "v2.0.0", "v1.0.0", "v3.0.0", "v2.0.0"}; !slices.Equal(versions, want) {
		t.Fatalf("history %v (sources %v), want %v", versions, sources, want)
	}
	if sources[0] != "revision 3" || sources[1] != "revision 2" {
		t.Errorf("the walk's revisions' sources are %q, want revision 3 and revision 2", sources[:2])
	}
}
