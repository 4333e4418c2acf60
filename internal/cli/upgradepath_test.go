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
