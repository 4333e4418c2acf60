package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/productdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// productInstall is one product of shared/testdata/products as a plugin
// installation: its encoded strategies and where it goes.
type productInstall struct {
	productdata.Product
	// ns is the -n namespace: the product's own Namespace object, else the
	// namespace its namespaced objects name, else a test namespace.
	ns string
	// encoded holds the strategy ConfigMap file of each version.
	encoded map[string]string
	// name is the installation name apply picks by default.
	name string
	// timings of the steps, for docs/PRODUCTS.md.
	timings []string
	// cleanup is set once the removal is registered.
	cleanup bool
	// installed and removed are set once it was installed, uninstalled.
	installed, removed bool
	// manifests is set for a product of shared/testdata ("" for the
	// sample product).
	manifests string
}

// remove uninstalls the product if its inventory is still there.
func (pi *productInstall) remove(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	code, out, errOut := run(t, nil, "uninstall", pi.name, "-n", pi.ns, "--wait", "--kubeconfig", kubeconfigPath())
	if code != 0 && !strings.Contains(errOut, "not found") {
		t.Errorf("%s: cleanup: uninstall: exit %d\n%s%s", pi.Name, code, tail(out), errOut)
	}
	_ = ctx
}

// encodeProduct encodes every version of a product with the plugin, as a
// user would: `encode FILE --version V`.
func encodeProduct(ctx context.Context, t *testing.T, env *testenv.Env, p productdata.Product) *productInstall {
	t.Helper()
	pi := &productInstall{Product: p, encoded: map[string]string{}, manifests: p.Path(p.Versions[0])}
	dir := t.TempDir()
	for _, v := range p.Versions {
		code, out, errOut := run(t, nil, "encode", p.Path(v), "--version", v)
		if code != 0 {
			t.Fatalf("%s %s: encode: exit %d: %s", p.Name, v, code, errOut)
		}
		f := filepath.Join(dir, p.Name+"-"+v+".yaml")
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		pi.encoded[v] = f
	}
	text, err := os.ReadFile(p.Path(p.Versions[0]))
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := strategy.Parse(text, strategy.ParseOptions{})
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	namespaces := map[string]bool{}
	var own []string
	for _, o := range s.Objects {
		if o.GetKind() == "Namespace" {
			own = append(own, o.GetName())
		}
		if o.GetNamespace() != "" {
			namespaces[o.GetNamespace()] = true
		}
	}
	switch {
	case len(own) == 1:
		pi.ns, pi.name = own[0], own[0]
	case len(namespaces) == 1:
		for ns := range namespaces {
			pi.ns, pi.name = ns, ns
		}
	default:
		pi.ns = env.Namespace(ctx, t)
		pi.name = pi.ns
	}
	return pi
}

func (pi *productInstall) owner() inventory.Owner {
	return inventory.Owner{Namespace: pi.ns, Name: pi.name, Kind: inventory.KindPlugin}
}

// step runs one plugin command of the product and checks its exit code.
func (pi *productInstall) step(t *testing.T, what string, wantCode int, args ...string) string {
	t.Helper()
	start := time.Now()
	code, out, errOut := run(t, nil, append(args, "-n", pi.ns, "--kubeconfig", kubeconfigPath())...)
	pi.timings = append(pi.timings, fmt.Sprintf("%s %.1fs", what, time.Since(start).Seconds()))
	if code != wantCode {
		t.Fatalf("%s: %s: %v: exit %d, want %d\n%s%s", pi.Name, what, args, code, wantCode, tail(out), errOut)
	}
	return out
}

func (pi *productInstall) apply(t *testing.T, v string) string {
	t.Helper()
	if !pi.cleanup {
		// Whatever happens, the product goes: some products' webhooks
		// (gatekeeper's guards every namespace) refuse requests of every
		// later test while they stay installed without a backend.
		pi.cleanup = true
		t.Cleanup(func() { pi.remove(t) })
	}
	return pi.step(t, "apply "+v, 0, "apply", pi.encoded[v], "--wait", "--timeout", "3m")
}

// clean checks that plan and diff --live of version v find nothing to do.
func (pi *productInstall) clean(t *testing.T, v string) {
	t.Helper()
	pi.step(t, "plan "+v, 0, "plan", "--strategy", pi.encoded[v])
	pi.step(t, "diff --live "+v, 0, "diff", "--live", pi.encoded[v])
}

// liveVersions returns the resourceVersion of every object of the
// installation's inventory, and of the inventory itself: a run that
// writes nothing changes none of them.
func liveVersions(ctx context.Context, t *testing.T, env *testenv.Env, owner inventory.Owner) map[strategy.ObjectRef]string {
	t.Helper()
	return inventoryObjects(ctx, t, env, owner, func(u *unstructured.Unstructured) string { return u.GetResourceVersion() })
}

// writtenBy returns, for every object of the installation's inventory,
// what only a writer of the object changes: its generation (its
// resourceVersion for kinds without one), applied hash and labels. A
// controller's status update changes none of them.
func writtenBy(ctx context.Context, t *testing.T, env *testenv.Env, owner inventory.Owner) map[strategy.ObjectRef]string {
	t.Helper()
	return inventoryObjects(ctx, t, env, owner, func(u *unstructured.Unstructured) string {
		gen := fmt.Sprint(u.GetGeneration())
		if u.GetGeneration() == 0 {
			gen = "rv " + u.GetResourceVersion()
		}
		return fmt.Sprintf("%s hash %s labels %v", gen, u.GetAnnotations()[metakeys.AppliedHashAnnotation], u.GetLabels())
	})
}

func inventoryObjects(ctx context.Context, t *testing.T, env *testenv.Env, owner inventory.Owner, key func(*unstructured.Unstructured) string) map[strategy.ObjectRef]string {
	t.Helper()
	inv, err := inventory.NewStore(env.Kube).Get(ctx, owner)
	if err != nil || !inv.Exists() {
		t.Fatalf("inventory of %s: %v (exists %v)", owner, err, inv != nil && inv.Exists())
	}
	mapper, err := env.Mapper()
	if err != nil {
		t.Fatal(err)
	}
	out := map[strategy.ObjectRef]string{}
	cm, err := env.Kube.CoreV1().ConfigMaps(owner.Namespace).Get(ctx, inventory.ConfigMapName(owner), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out[strategy.ObjectRef{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name}] = "rv " + cm.ResourceVersion
	for _, ref := range inv.Refs() {
		if inv.Entries[ref].Hash != "" {
			continue // a completed Job, removed by its TTL
		}
		live, err := env.Live(ctx, mapper, ref)
		if err != nil || live == nil {
			t.Fatalf("%s of the inventory of %s: %v (gone: %v)", ref, owner, err, live == nil)
		}
		if !owner.Owns(live.GetLabels()) {
			t.Errorf("%s is in the inventory of %s but carries labels %v", ref, owner, live.GetLabels())
		}
		out[ref] = key(live)
	}
	return out
}

func sameVersions(t *testing.T, what string, before, after map[strategy.ObjectRef]string) {
	t.Helper()
	var changed []string
	for ref, rv := range before {
		if after[ref] != rv {
			changed = append(changed, fmt.Sprintf("%s %s -> %s", ref, rv, orGone(after[ref])))
		}
	}
	for ref := range after {
		if _, ok := before[ref]; !ok {
			changed = append(changed, ref.String()+" added")
		}
	}
	sort.Strings(changed)
	if len(changed) > 0 {
		t.Errorf("%s changed %d objects:\n  %s", what, len(changed), strings.Join(changed, "\n  "))
	}
}

func orGone(rv string) string {
	if rv == "" {
		return "gone"
	}
	return rv
}

// uninstallProduct removes a plugin installation with the plugin and checks
// that its inventory's objects are gone (Namespaces it made included).
func uninstallProduct(ctx context.Context, t *testing.T, env *testenv.Env, pi *productInstall) {
	t.Helper()
	before := liveVersions(ctx, t, env, pi.owner())
	pi.step(t, "uninstall", 0, "uninstall", pi.name, "--wait")
	refs := make([]strategy.ObjectRef, 0, len(before))
	for ref := range before {
		refs = append(refs, ref)
	}
	left, err := env.Survivors(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range left {
		t.Errorf("%s: %s survived the uninstall", pi.Name, ref)
	}
}

// TestClusterProducts: every product of shared/testdata/products, with the
// plugin's default flags apart from -n: apply --wait, re-apply (no write at
// all), plan and diff --live clean, upgrade to each later version and back
// to the first, clean after each, then uninstall.
func TestClusterProducts(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	var report []string
	for _, p := range productdata.All(t) {
		t.Run(p.Name, func(t *testing.T) {
			pi := encodeProduct(ctx, t, env, p)
			pi.lifecycle(ctx, t, env)
			report = append(report, fmt.Sprintf("| %s | %s | %s |", p.Name, strings.Join(p.Versions, ", "), strings.Join(pi.timings, "; ")))
		})
	}
	t.Logf("product timings:\n%s", strings.Join(report, "\n"))
}

// lifecycle installs the first version with apply --wait, re-applies it
// (no write at all), upgrades to each later version and rolls back to the
// first, with plan and diff --live clean after each, then uninstalls.
func (pi *productInstall) lifecycle(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	first := pi.Versions[0]
	out := pi.apply(t, first)
	if !strings.Contains(out, "installation "+pi.owner().String()) {
		t.Errorf("apply does not name its installation %s:\n%s", pi.owner(), tail(out))
	}
	pi.clean(t, first)

	before := liveVersions(ctx, t, env, pi.owner())
	out = pi.apply(t, first)
	sum := summaryCounts(t, out)
	if sum["created"]+sum["updated"]+sum["recreated"]+sum["pruned"] != 0 || sum["conflicts"] != 0 {
		t.Errorf("re-apply of %s: %v\n%s", first, sum, tail(out))
	}
	sameVersions(t, "re-apply of "+first, before, liveVersions(ctx, t, env, pi.owner()))

	for _, v := range pi.Versions[1:] {
		pi.apply(t, v)
		pi.clean(t, v)
	}
	if len(pi.Versions) > 1 {
		pi.apply(t, first) // roll back
		pi.clean(t, first)
	}
	uninstallProduct(ctx, t, env, pi)
}

// sampleInstall is the sample product (v1.0.0 and v1.1.0) as a plugin
// installation in a test namespace.
func sampleInstall(ctx context.Context, t *testing.T, env *testenv.Env) *productInstall {
	t.Helper()
	ns := env.Namespace(ctx, t)
	pi := &productInstall{Product: productdata.Product{Name: "sample", Versions: []string{"v1.0.0", "v1.1.0"}}, ns: ns, name: ns, encoded: map[string]string{}}
	for _, v := range pi.Versions {
		s, err := generate.Sample(&identity.Config{Namespace: ns, Registry: "registry.example/sample", Version: v}, generate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := codec.Encode(s, codec.EncodeOptions{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		y, err := codec.MarshalYAML(cm)
		if err != nil {
			t.Fatal(err)
		}
		pi.encoded[v] = writeFile(t, "sample-"+v+".yaml", string(y))
	}
	return pi
}

func guardsNamespaces(t *testing.T, pi *productInstall) bool {
	return pi.manifests != "" && pi.GuardsNamespaces(t)
}

// TestClusterProductsSideBySide: every product and the sample product
// installed in one cluster with default flags; each one's upgrade, rollback
// and uninstall leaves every other installation's objects as they were.
func TestClusterProductsSideBySide(t *testing.T) {
	testenv.Lock(t, testenv.SampleProductLock)
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	all := []*productInstall{sampleInstall(ctx, t, env)}
	for _, p := range productdata.All(t) {
		all = append(all, encodeProduct(ctx, t, env, p))
	}
	// Products that guard namespaces go last and leave first: under kwok
	// their webhooks have no backend, so while one is installed every
	// namespace write fails — and an upgrade writes each product's
	// Namespace (its identity annotations change). In a real cluster the
	// webhook answers; here the others upgrade and roll back before the
	// guards arrive, and the guards then upgrade beside all of them.
	sort.SliceStable(all, func(i, j int) bool {
		return !guardsNamespaces(t, all[i]) && guardsNamespaces(t, all[j])
	})
	others := func(pi *productInstall) map[string]map[strategy.ObjectRef]string {
		out := map[string]map[strategy.ObjectRef]string{}
		for _, o := range all {
			if o != pi && o.installed && !o.removed {
				out[o.Name] = writtenBy(ctx, t, env, o.owner())
			}
		}
		return out
	}
	untouched := func(what string, before map[string]map[strategy.ObjectRef]string) {
		t.Helper()
		for name, objs := range before {
			for _, o := range all {
				if o.Name == name {
					sameVersions(t, what+": installation "+o.owner().String()+" ("+name+")", objs, writtenBy(ctx, t, env, o.owner()))
				}
			}
		}
	}
	upgradeAndBack := func(pi *productInstall) {
		t.Helper()
		if len(pi.Versions) < 2 {
			return
		}
		last := pi.Versions[len(pi.Versions)-1]
		before := others(pi)
		pi.apply(t, last)
		untouched(pi.Name+" upgrade to "+last, before)
		pi.apply(t, pi.Versions[0])
		pi.clean(t, pi.Versions[0])
		untouched(pi.Name+" rollback to "+pi.Versions[0], before)
	}
	guards := 0
	for _, pi := range all {
		if guardsNamespaces(t, pi) {
			guards++
			continue
		}
		before := others(pi)
		pi.apply(t, pi.Versions[0])
		pi.installed = true
		untouched(pi.Name+" install", before)
	}
	for _, pi := range all[:len(all)-guards] {
		upgradeAndBack(pi)
	}
	for _, pi := range all[len(all)-guards:] {
		before := others(pi)
		pi.apply(t, pi.Versions[0])
		pi.installed = true
		untouched(pi.Name+" install", before)
		upgradeAndBack(pi)
	}
	for i := len(all) - 1; i >= 0; i-- {
		pi := all[i]
		before := others(pi)
		uninstallProduct(ctx, t, env, pi)
		pi.removed = true
		untouched(pi.Name+" uninstall", before)
	}
}
