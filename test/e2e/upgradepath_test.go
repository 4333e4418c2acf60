package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// publishWithUpgradeFrom pushes the sample product at version, declaring
// upgradeFrom (none when ""), to ref, signed by signer.
func publishWithUpgradeFrom(ctx context.Context, t *testing.T, c *oci.Client, ns, version, upgradeFrom string, signer *trust.Signer, ref string) {
	t.Helper()
	s, text := sampleText(t, ns, version)
	if upgradeFrom != "" {
		text = append(text, []byte("---\napiVersion: installstrategy.io/v1alpha1\nkind: Requirements\nmetadata:\n  name: requirements\nspec:\n  upgradeFrom: \""+upgradeFrom+"\"\n")...)
	}
	if _, err := c.Push(ctx, ref, text, oci.Meta{Product: "sample", Version: version, Registry: s.Identity.Registry, Identifier: s.Identity.Identifier}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sign(ctx, a, signer); err != nil {
		t.Fatal(err)
	}
}

// Issue 42 item 3: the sample product at v1.0.0, v2.0.0 (upgradeFrom
// >= 1.0.0) and v3.0.0 (upgradeFrom >= 2.0.0), signed, in a registry on
// loopback. From v1.0.0, v3.0.0 is refused before any write
// (spec.upgradePath Refuse, the default); with Walk, v2.0.0 is rolled out
// fully, then v3.0.0, and the history and status.upgradePath show
// v1.0.0 -> v2.0.0 -> v3.0.0. An unsigned v2.5.0 listed in the same
// repository is never walked through.
func TestUpgradePathWalk(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	reg, c, release := e.ociSetup(ctx, t)
	publishWithUpgradeFrom(ctx, t, c, e.ns, "v1.0.0", "", release, reg.Ref("acme/sample:v1.0.0"))
	publishWithUpgradeFrom(ctx, t, c, e.ns, "v2.0.0", ">= 1.0.0", release, reg.Ref("acme/sample:v2.0.0"))
	publishWithUpgradeFrom(ctx, t, c, e.ns, "v3.0.0", ">= 2.0.0", release, reg.Ref("acme/sample:v3.0.0"))
	// A tag mover's v2.5.0, admitted from v1 and admitting nothing else,
	// signed by no trusted key: the walk must skip it.
	stranger, _ := trust.GenerateKey()
	publishWithUpgradeFrom(ctx, t, c, e.ns, "v2.5.0", ">= 1.0.0", stranger, reg.Ref("acme/sample:v2.5.0"))

	spec := sampleSpec("")
	spec.Strategy = &v1alpha1.StrategySource{OCI: &v1alpha1.OCIStrategySource{Reference: reg.Ref("acme/sample:v1.0.0"), Interval: &metav1.Duration{Duration: time.Second}}}
	e.create(ctx, t, "sample", spec)
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.OCI.Reference = reg.Ref("acme/sample:v3.0.0")
	})
	var last *v1alpha1.Installation
	if err := pollInstallation(ctx, e, "sample", func(in *v1alpha1.Installation) bool {
		last = in
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, `upgradeFrom ">= 2.0.0": version v1.0.0 is installed`)
	}); err != nil {
		t.Fatalf("v3.0.0 over v1.0.0 not refused: %v; last %s, degraded %+v", err, describe(last), last.Condition(v1alpha1.ConditionDegraded))
	}
	if last.Status.ObservedVersion != "v1.0.0" || len(last.Status.UpgradePath) != 0 {
		t.Fatalf("refused without walking, yet %s, upgradePath %v", describe(last), last.Status.UpgradePath)
	}

	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.UpgradePath = v1alpha1.UpgradePathWalk })
	in := e.waitDeployed(ctx, t, "sample", "v3.0.0")
	if err := pollInstallation(ctx, e, "sample", func(got *v1alpha1.Installation) bool {
		in = got
		return len(got.Status.History) >= 3 && got.Status.History[0].Version == "v3.0.0"
	}); err != nil {
		t.Fatalf("history %+v: %v", in.Status.History, err)
	}
	var versions []string
	for _, h := range in.Status.History {
		versions = append(versions, h.Version)
	}
	if want := []string{"v3.0.0", "v2.0.0", "v1.0.0"}; !slices.Equal(versions, want) {
		t.Errorf("history %v, want %v (each hop fully rolled out and recorded)", versions, want)
	}
	if want := []string{"v1.0.0", "v2.0.0", "v3.0.0"}; !slices.Equal(in.Status.UpgradePath, want) {
		t.Errorf("status.upgradePath %v, want %v", in.Status.UpgradePath, want)
	}
	if !strings.Contains(in.Status.History[1].OCI, "acme/sample@") {
		t.Errorf("the intermediate revision %+v names no artifact", in.Status.History[1])
	}

	// The walk ended: its record stays while v3.0.0 is the target, and
	// goes once the target changes (here a rollback to v2.0.0).
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.OCI.Reference = reg.Ref("acme/sample:v2.0.0")
		in.Spec.AllowDowngrade = true
	})
	in = e.waitDeployed(ctx, t, "sample", "v2.0.0")
	if err := pollInstallation(ctx, e, "sample", func(got *v1alpha1.Installation) bool {
		in = got
		return len(got.Status.UpgradePath) == 0
	}); err != nil {
		t.Fatalf("after the rollback to v2.0.0, status.upgradePath is still %v: %v", in.Status.UpgradePath, err)
	}
}

// Issue 42 item 3 with stored strategies: a configMap source walks
// through the strategy ConfigMaps of the namespace signed by a trusted
// key (v1.0.0 -> v2.0.0 -> v3.0.0); an unsigned v2.5.0 stored beside them,
// admitted from v1.0.0, is never walked through.
func TestUpgradePathWalkStoredStrategies(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	release := e.trustReleaseKey(ctx, t)
	store := func(name, version, upgradeFrom string, signer *trust.Signer) {
		t.Helper()
		s, text := sampleText(t, e.ns, version)
		if upgradeFrom != "" {
			text = append(text, []byte("---\napiVersion: installstrategy.io/v1alpha1\nkind: Requirements\nmetadata:\n  name: requirements\nspec:\n  upgradeFrom: \""+upgradeFrom+"\"\n")...)
		}
		cm := strategyConfigMap(t, e.ns, name, text, s.Identity, codec.FormatNative, signer)
		if _, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	store("sample-v1", "v1.0.0", "", release)
	store("sample-v2", "v2.0.0", ">= 1.0.0", release)
	store("sample-v2-5", "v2.5.0", ">= 1.0.0", nil)
	store("sample-v3", "v3.0.0", ">= 2.0.0", release)

	spec := sampleSpec("v1.0.0")
	spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "sample-v1"}}
	spec.UpgradePath = v1alpha1.UpgradePathWalk
	e.create(ctx, t, "sample", spec)
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Version = "v3.0.0"
		in.Spec.Strategy.ConfigMap.Name = "sample-v3"
	})
	in := e.waitDeployed(ctx, t, "sample", "v3.0.0")
	if err := pollInstallation(ctx, e, "sample", func(got *v1alpha1.Installation) bool {
		in = got
		return len(got.Status.History) >= 3 && got.Status.History[0].Version == "v3.0.0"
	}); err != nil {
		t.Fatalf("history %+v: %v", in.Status.History, err)
	}
	var versions []string
	for _, h := range in.Status.History {
		versions = append(versions, h.Version)
	}
	if want := []string{"v3.0.0", "v2.0.0", "v1.0.0"}; !slices.Equal(versions, want) {
		t.Errorf("history %v, want %v (v2.5.0 is not signed)", versions, want)
	}
	if want := []string{"v1.0.0", "v2.0.0", "v3.0.0"}; !slices.Equal(in.Status.UpgradePath, want) {
		t.Errorf("status.upgradePath %v, want %v", in.Status.UpgradePath, want)
	}
}

// walkChart packs a chart "small" at version holding a ServiceAccount
// and, when upgradeFrom is set, a Requirements document declaring it.
func walkChart(t *testing.T, version, upgradeFrom string) []byte {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", "apiVersion: v2\nname: small\nversion: "+version+"\n")
	write("templates/sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: small\n  labels:\n    version: \"{{ .Chart.Version }}\"\n")
	if upgradeFrom != "" {
		write("templates/requirements.yaml", "apiVersion: installstrategy.io/v1alpha1\nkind: Requirements\nmetadata:\n  name: requirements\nspec:\n  upgradeFrom: \""+upgradeFrom+"\"\n")
	}
	return ocitest.PackChart(t, dir)
}

// Issue 42 item 3 with a Helm source: the chart repository's tags list
// the versions; 1.0.0 -> 2.0.0 -> 3.0.0 is walked through charts signed
// by a trusted key, past a 2.5.0 signed by another.
func TestUpgradePathWalkHelmChart(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	reg, c, release := e.ociSetup(ctx, t)
	stranger, _ := trust.GenerateKey()
	for _, v := range []struct {
		version, upgradeFrom string
		signer               *trust.Signer
	}{{"1.0.0", "", release}, {"2.0.0", ">= 1.0.0", release}, {"2.5.0", ">= 1.0.0", stranger}, {"3.0.0", ">= 2.0.0", release}} {
		ref := reg.Ref("charts/small:" + v.version)
		ocitest.PushChart(t, walkChart(t, v.version, v.upgradeFrom), ref)
		signChart(ctx, t, c, ref, "small", v.version, v.signer)
	}
	src := &v1alpha1.HelmStrategySource{Chart: reg.Ref("charts/small:1.0.0"), Interval: &metav1.Duration{Duration: time.Second}}
	e.create(ctx, t, "small", v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Helm: src}, UpgradePath: v1alpha1.UpgradePathWalk})
	e.waitDeployed(ctx, t, "small", "1.0.0")

	e.update(ctx, t, "small", func(in *v1alpha1.Installation) { in.Spec.Strategy.Helm.Chart = reg.Ref("charts/small:3.0.0") })
	in := e.waitDeployed(ctx, t, "small", "3.0.0")
	if err := pollInstallation(ctx, e, "small", func(got *v1alpha1.Installation) bool {
		in = got
		return len(got.Status.History) >= 3 && got.Status.History[0].Version == "3.0.0"
	}); err != nil {
		t.Fatalf("history %+v: %v", in.Status.History, err)
	}
	var versions []string
	for _, h := range in.Status.History {
		versions = append(versions, h.Version)
	}
	if want := []string{"3.0.0", "2.0.0", "1.0.0"}; !slices.Equal(versions, want) {
		t.Errorf("history %v, want %v (2.5.0 is signed by an untrusted key)", versions, want)
	}
	if want := []string{"1.0.0", "2.0.0", "3.0.0"}; !slices.Equal(in.Status.UpgradePath, want) {
		t.Errorf("status.upgradePath %v, want %v", in.Status.UpgradePath, want)
	}
}
