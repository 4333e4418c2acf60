package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestSetCondition(t *testing.T) {
	in := &Installation{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	if !in.SetCondition(ConditionProgressing, metav1.ConditionTrue, ReasonDeploymentInProgress, "applying") {
		t.Fatal("first SetCondition reported no change")
	}
	c := in.Condition(ConditionProgressing)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonDeploymentInProgress || c.ObservedGeneration != 3 || c.LastTransitionTime.IsZero() {
		t.Fatalf("condition = %+v", c)
	}
	first := c.LastTransitionTime
	if in.SetCondition(ConditionProgressing, metav1.ConditionTrue, ReasonDeploymentInProgress, "applying") {
		t.Error("identical SetCondition reported a change")
	}
	if !in.SetCondition(ConditionProgressing, metav1.ConditionTrue, ReasonUpdateInProgress, "updating") {
		t.Error("new reason reported no change")
	}
	if got := in.Condition(ConditionProgressing).LastTransitionTime; !got.Equal(&first) {
		t.Errorf("transition time moved without a status change: %v -> %v", first, got)
	}
	in.SetCondition(ConditionAvailable, metav1.ConditionFalse, ReasonDeploymentInProgress, "")
	if !in.IsConditionTrue(ConditionProgressing) || in.IsConditionTrue(ConditionAvailable) || in.IsConditionTrue(ConditionDegraded) {
		t.Errorf("IsConditionTrue wrong: %+v", in.Status.Conditions)
	}
	if len(in.Status.Conditions) != 2 {
		t.Errorf("conditions = %d, want 2", len(in.Status.Conditions))
	}
	if !in.RemoveCondition(ConditionAvailable) || in.RemoveCondition(ConditionAvailable) || in.Condition(ConditionAvailable) != nil {
		t.Error("RemoveCondition did not remove exactly once")
	}
}

func TestPhasePredicates(t *testing.T) {
	now := metav1.Now()
	for _, c := range []struct {
		name                       string
		generation                 int64
		status                     InstallationStatus
		deleting                   bool
		deployed, updating, active bool
	}{
		{name: "new", generation: 1, active: true},
		{name: "deploying", generation: 1, status: InstallationStatus{Phase: PhaseDeploying, ObservedGeneration: 1, TargetIdentifier: "b"}, active: true},
		{name: "deployed", generation: 2, status: InstallationStatus{Phase: PhaseDeployed, ObservedGeneration: 2, ObservedIdentifier: "a", TargetIdentifier: "a"}, deployed: true, active: true},
		{name: "deployed but spec changed", generation: 3, status: InstallationStatus{Phase: PhaseDeployed, ObservedGeneration: 2, ObservedIdentifier: "a", TargetIdentifier: "a"}, active: true},
		{name: "updating", generation: 2, status: InstallationStatus{Phase: PhaseDeploying, ObservedGeneration: 2, ObservedIdentifier: "a", TargetIdentifier: "b"}, updating: true, active: true},
		{name: "deployed phase with pending target", generation: 2, status: InstallationStatus{Phase: PhaseDeployed, ObservedGeneration: 2, ObservedIdentifier: "a", TargetIdentifier: "b"}, updating: true, active: true},
		{name: "failed", generation: 1, status: InstallationStatus{Phase: PhaseFailed, ObservedGeneration: 1}, active: true},
		{name: "being deleted", generation: 1, deleting: true, status: InstallationStatus{Phase: PhaseDeleting, ObservedGeneration: 1}},
		{name: "deleted", generation: 1, status: InstallationStatus{Phase: PhaseDeleted, ObservedGeneration: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := &Installation{ObjectMeta: metav1.ObjectMeta{Generation: c.generation}, Status: c.status}
			if c.deleting {
				in.DeletionTimestamp = &now
			}
			if got := in.IsDeployed(); got != c.deployed {
				t.Errorf("IsDeployed = %v, want %v", got, c.deployed)
			}
			if got := in.IsUpdating(); got != c.updating {
				t.Errorf("IsUpdating = %v, want %v", got, c.updating)
			}
			if got := in.IsActive(); got != c.active {
				t.Errorf("IsActive = %v, want %v", got, c.active)
			}
			if got := in.IsDeleting(); got != c.deleting {
				t.Errorf("IsDeleting = %v, want %v", got, c.deleting)
			}
		})
	}
}

func TestStrategySourceType(t *testing.T) {
	for _, c := range []struct {
		source *StrategySource
		want   StrategySourceType
	}{
		{nil, StrategySourceProduct},
		{&StrategySource{}, StrategySourceProduct},
		{&StrategySource{Product: &ProductStrategySource{}}, StrategySourceProduct},
		{&StrategySource{Image: "quay.io/x/op:v1"}, StrategySourceImage},
		{&StrategySource{ConfigMap: &ConfigMapStrategySource{Name: "s"}}, StrategySourceConfigMap},
	} {
		spec := InstallationSpec{Strategy: c.source}
		if got := spec.StrategySourceType(); got != c.want {
			t.Errorf("%+v: got %s, want %s", c.source, got, c.want)
		}
	}
}

func TestSpecDefaults(t *testing.T) {
	for _, c := range []struct {
		name   string
		canary *CanarySpec
		want   CanarySpec
	}{
		{"nil", nil, CanarySpec{InitialMaxUnavailable: 1, StepPercent: 10}},
		{"empty", &CanarySpec{}, CanarySpec{InitialMaxUnavailable: 1, StepPercent: 10}},
		{"set", &CanarySpec{InitialMaxUnavailable: 2, StepPercent: 25}, CanarySpec{InitialMaxUnavailable: 2, StepPercent: 25}},
		{"partial", &CanarySpec{StepPercent: 50}, CanarySpec{InitialMaxUnavailable: 1, StepPercent: 50}},
	} {
		spec := InstallationSpec{Canary: c.canary}
		if got := spec.CanaryOrDefault(); got != c.want {
			t.Errorf("canary %s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := (&InstallationSpec{}).UninstallStrategyOrDefault(); got != UninstallBlockIfWorkloadsExist {
		t.Errorf("default uninstall strategy = %s", got)
	}
	if got := (&InstallationSpec{UninstallStrategy: UninstallRemoveWorkloads}).UninstallStrategyOrDefault(); got != UninstallRemoveWorkloads {
		t.Errorf("uninstall strategy = %s", got)
	}
}

func TestCertificateLifetimes(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	def := func(dur, renew time.Duration) CertificateLifetime { return CertificateLifetime{dur, renew} }
	for _, c := range []struct {
		name       string
		rotation   *CertificateRotation
		ca, server CertificateLifetime
	}{
		{"nil", nil, def(168*time.Hour, 48*time.Hour), def(24*time.Hour, 8*time.Hour)},
		{"empty", &CertificateRotation{CA: &CertificateConfig{}}, def(168*time.Hour, 48*time.Hour), def(24*time.Hour, 8*time.Hour)},
		{"duration only: a fifth", &CertificateRotation{CA: &CertificateConfig{Duration: d(100 * time.Hour)}}, def(100*time.Hour, 20*time.Hour), def(24*time.Hour, 8*time.Hour)},
		{"both", &CertificateRotation{Server: &CertificateConfig{Duration: d(10 * time.Hour), RenewBefore: d(time.Hour)}}, def(168*time.Hour, 48*time.Hour), def(10*time.Hour, time.Hour)},
		{"renewBefore only", &CertificateRotation{Server: &CertificateConfig{RenewBefore: d(2 * time.Hour)}}, def(168*time.Hour, 48*time.Hour), def(24*time.Hour, 2*time.Hour)},
		{"renewBefore too long ignored", &CertificateRotation{Server: &CertificateConfig{Duration: d(time.Hour), RenewBefore: d(2 * time.Hour)}}, def(168*time.Hour, 48*time.Hour), def(time.Hour, 12*time.Minute)},
	} {
		ca, server := (&InstallationSpec{CertificateRotation: c.rotation}).CertificateLifetimes()
		if ca != c.ca || server != c.server {
			t.Errorf("%s: got ca %+v server %+v, want %+v %+v", c.name, ca, server, c.ca, c.server)
		}
	}
}

func TestCustomizeComponentsIdentifier(t *testing.T) {
	p1 := CustomizePatch{ResourceKind: "Deployment", ResourceName: "sample-api", Type: StrategicMergePatchType, Patch: `{"spec":{"replicas":3}}`}
	p2 := CustomizePatch{ResourceKind: "*", ResourceName: "*", Type: MergePatchType, Patch: `{"metadata":{"labels":{"a":"b"}}}`}
	if id := (*CustomizeComponents)(nil).Identifier(); id != "" {
		t.Errorf("nil: %q", id)
	}
	if id := (&CustomizeComponents{}).Identifier(); id != "" {
		t.Errorf("empty: %q", id)
	}
	a := (&CustomizeComponents{Patches: []CustomizePatch{p1, p2}}).Identifier()
	b := (&CustomizeComponents{Patches: []CustomizePatch{p2, p1}}).Identifier()
	again := (&CustomizeComponents{Patches: []CustomizePatch{p1, p2}}).Identifier()
	if len(a) != 64 || a == b || a != again {
		t.Errorf("identifiers: %q, reordered %q, again %q", a, b, again)
	}
	p1.Patch = `{"spec":{"replicas":4}}`
	if c := (&CustomizeComponents{Patches: []CustomizePatch{p1, p2}}).Identifier(); c == a {
		t.Error("a changed patch kept the identifier")
	}
}

func TestSchemeAndDeepCopy(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{&Installation{}, &InstallationList{}} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil || len(gvks) != 1 || gvks[0].GroupVersion() != GroupVersion {
			t.Errorf("%T: kinds %v, err %v", obj, gvks, err)
		}
	}
	in := &Installation{Spec: InstallationSpec{
		Strategy:            &StrategySource{ConfigMap: &ConfigMapStrategySource{Name: "s"}},
		CustomizeComponents: &CustomizeComponents{Patches: []CustomizePatch{{ResourceKind: "Deployment"}}},
		Infra:               &NodePlacement{NodeSelector: map[string]string{"a": "b"}},
	}}
	out := in.DeepCopy()
	out.Spec.Strategy.ConfigMap.Name = "t"
	out.Spec.CustomizeComponents.Patches[0].ResourceKind = "DaemonSet"
	out.Spec.Infra.NodeSelector["a"] = "c"
	if in.Spec.Strategy.ConfigMap.Name != "s" || in.Spec.CustomizeComponents.Patches[0].ResourceKind != "Deployment" || in.Spec.Infra.NodeSelector["a"] != "b" {
		t.Errorf("DeepCopy shares memory: %+v", in.Spec)
	}
	if Resource("installations").String() != "installations.installstrategy.io" {
		t.Errorf("Resource = %s", Resource("installations"))
	}
}

// TestRecordRevision: revisions count up newest first, the same strategy
// twice is one revision, and spec.historyLimit bounds the history.
func TestRecordRevision(t *testing.T) {
	in := &Installation{Spec: InstallationSpec{HistoryLimit: 2}}
	rev := func(v string) StrategyRevision {
		return StrategyRevision{Version: v, Digest: "sha256:" + v, ConfigMap: "cm-" + v}
	}
	for i, c := range []struct {
		version string
		changed bool
	}{{"v1", true}, {"v1", false}, {"v2", true}, {"v3", true}} {
		if got := in.RecordRevision(rev(c.version)); got != c.changed {
			t.Errorf("record %d (%s): changed %v, want %v", i, c.version, got, c.changed)
		}
	}
	h := in.Status.History
	if len(h) != 2 || h[0].Version != "v3" || h[0].Revision != 3 || h[1].Version != "v2" || h[1].Revision != 2 {
		t.Fatalf("history %+v, want v3 (3) and v2 (2)", h)
	}
	if (&InstallationSpec{}).HistoryLimitOrDefault() != DefaultHistoryLimit {
		t.Error("no historyLimit is not the default")
	}
}
