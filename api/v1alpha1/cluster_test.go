package v1alpha1_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

const crdFile = "../../config/crd/bases/installstrategy.io_installations.yaml"

// installCRD installs the committed, generated CRD in the test cluster
// (testenv's InstallCRDFile: parsed strictly, created or brought up to
// date, Established) and returns a client that knows the Installation
// types once they are served.
func installCRD(ctx context.Context, t *testing.T, env *testenv.Env) client.Client {
	t.Helper()
	env.InstallCRDFile(ctx, t, crdFile)

	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	// Established can come a moment before discovery serves the resource.
	testenv.WaitFor(ctx, t, "installations served", func(ctx context.Context) (bool, string, error) {
		err := c.List(ctx, &v1alpha1.InstallationList{}, client.InNamespace("default"))
		return err == nil, "", err
	})
	return c
}

func TestInstallationCRDInCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	c := installCRD(ctx, t, env)
	ns := env.Namespace(ctx, t)

	t.Run("server applies defaults", func(t *testing.T) {
		in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}}
		if err := c.Create(ctx, in); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.Installation{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(in), got); err != nil {
			t.Fatal(err)
		}
		s := got.Spec
		if s.Strategy == nil || s.Strategy.Product == nil || s.Strategy.Image != "" || s.Strategy.ConfigMap != nil {
			t.Errorf("strategy = %+v, want {product: {}}", s.Strategy)
		}
		if s.Canary == nil || *s.Canary != (v1alpha1.CanarySpec{InitialMaxUnavailable: 1, StepPercent: 10}) {
			t.Errorf("canary = %+v, want {1, 10}", s.Canary)
		}
		if s.UninstallStrategy != v1alpha1.UninstallBlockIfWorkloadsExist {
			t.Errorf("uninstallStrategy = %q", s.UninstallStrategy)
		}
		if s.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("imagePullPolicy = %q", s.ImagePullPolicy)
		}
		if s.PruneCRDs {
			t.Error("pruneCRDs defaulted to true")
		}
		cr := s.CertificateRotation
		if cr == nil || cr.CA == nil || cr.Server == nil ||
			cr.CA.Duration.Duration != 168*time.Hour || cr.CA.RenewBefore.Duration != 48*time.Hour ||
			cr.Server.Duration.Duration != 24*time.Hour || cr.Server.RenewBefore.Duration != 8*time.Hour {
			t.Errorf("certificateRotation = %s", mustJSON(t, cr))
		}
		// What the server stored agrees with the Go defaults.
		if got.Spec.CanaryOrDefault() != (&v1alpha1.InstallationSpec{}).CanaryOrDefault() {
			t.Error("server canary defaults differ from CanaryOrDefault")
		}
		ca, server := got.Spec.CertificateLifetimes()
		wantCA, wantServer := (&v1alpha1.InstallationSpec{}).CertificateLifetimes()
		if ca != wantCA || server != wantServer {
			t.Errorf("server certificate defaults %+v %+v differ from Go's %+v %+v", ca, server, wantCA, wantServer)
		}
	})

	t.Run("a user's partial settings keep their other defaults", func(t *testing.T) {
		in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partial"}, Spec: v1alpha1.InstallationSpec{
			Version:  "v1.2.0",
			Strategy: &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "installstrategy-abcde"}},
			Canary:   &v1alpha1.CanarySpec{StepPercent: 25},
		}}
		if err := c.Create(ctx, in); err != nil {
			t.Fatal(err)
		}
		if in.Spec.Canary.InitialMaxUnavailable != 1 || in.Spec.Canary.StepPercent != 25 {
			t.Errorf("canary = %+v, want {1, 25}", in.Spec.Canary)
		}
		if in.Spec.Strategy.Product != nil || in.Spec.StrategySourceType() != v1alpha1.StrategySourceConfigMap {
			t.Errorf("strategy = %s", mustJSON(t, in.Spec.Strategy))
		}
	})

	t.Run("validation rejects", func(t *testing.T) {
		dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
		for _, tc := range []struct {
			name string
			spec v1alpha1.InstallationSpec
			raw  string // a raw spec, for values Go's types cannot express
			want string
		}{
			{name: "two strategy sources", spec: v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Image: "quay.io/x/op:v1", ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "s"}}}, want: "exactly one of product, image, configMap, oci or helm must be set"},
			{name: "empty strategy", spec: v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{}}, want: "exactly one of product, image, configMap, oci or helm must be set"},
			{name: "product and image", spec: v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Product: &v1alpha1.ProductStrategySource{}, Image: "x"}}, want: "exactly one of"},
			{name: "unknown uninstallStrategy", spec: v1alpha1.InstallationSpec{UninstallStrategy: "DeleteEverything"}, want: `spec.uninstallStrategy: Unsupported value: "DeleteEverything"`},
			{name: "unknown patch type", spec: v1alpha1.InstallationSpec{CustomizeComponents: &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{ResourceKind: "Deployment", ResourceName: "a", Type: "xml", Patch: "{}"}}}}, want: "spec.customizeComponents.patches[0].type: Unsupported value"},
			{name: "patch without kind", spec: v1alpha1.InstallationSpec{CustomizeComponents: &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{ResourceName: "a", Type: v1alpha1.JSONPatchType, Patch: "[]"}}}}, want: "spec.customizeComponents.patches[0].resourceKind"},
			{name: "patch kind not a Kind", spec: v1alpha1.InstallationSpec{CustomizeComponents: &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{ResourceKind: "deployments", ResourceName: "a", Type: v1alpha1.JSONPatchType, Patch: "[]"}}}}, want: "spec.customizeComponents.patches[0].resourceKind: Invalid value"},
			{name: "stepPercent over 100", spec: v1alpha1.InstallationSpec{Canary: &v1alpha1.CanarySpec{StepPercent: 101}}, want: "spec.canary.stepPercent: Invalid value: 101"},
			{name: "negative initialMaxUnavailable", spec: v1alpha1.InstallationSpec{Canary: &v1alpha1.CanarySpec{InitialMaxUnavailable: -1}}, want: "spec.canary.initialMaxUnavailable: Invalid value: -1"},
			{name: "unknown pull policy", spec: v1alpha1.InstallationSpec{ImagePullPolicy: "Sometimes"}, want: "spec.imagePullPolicy: Unsupported value"},
			{name: "bad version", spec: v1alpha1.InstallationSpec{Version: "v1.2.0/../x"}, want: "spec.version: Invalid value"},
			{name: "bad configMap name", spec: v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "Not_A_Name"}}}, want: "spec.strategy.configMap.name: Invalid value"},
			{name: "renewBefore not shorter than duration", spec: v1alpha1.InstallationSpec{CertificateRotation: &v1alpha1.CertificateRotation{CA: &v1alpha1.CertificateConfig{Duration: dur(time.Hour), RenewBefore: dur(time.Hour)}}}, want: "renewBefore must be shorter than duration"},
			{name: "server outlives CA", spec: v1alpha1.InstallationSpec{CertificateRotation: &v1alpha1.CertificateRotation{Server: &v1alpha1.CertificateConfig{Duration: dur(1000 * time.Hour), RenewBefore: dur(time.Hour)}}}, want: "server.duration must not exceed ca.duration"},
			{name: "zero duration", spec: v1alpha1.InstallationSpec{CertificateRotation: &v1alpha1.CertificateRotation{Server: &v1alpha1.CertificateConfig{Duration: dur(0)}}}, want: "duration must be positive"},
			{name: "duration in days", raw: `{"certificateRotation": {"ca": {"duration": "7d"}}}`, want: "spec.certificateRotation.ca.duration: Invalid value"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invalid"}, Spec: tc.spec}
				if tc.raw != "" {
					in.Spec = v1alpha1.InstallationSpec{}
					if err := json.Unmarshal([]byte(tc.raw), &in.Spec); err == nil {
						t.Fatalf("raw spec %s parsed in Go; use spec instead", tc.raw)
					}
					err := createRaw(ctx, env, ns, "invalid", tc.raw)
					assertInvalid(t, err, tc.want)
					return
				}
				assertInvalid(t, c.Create(ctx, in), tc.want)
			})
		}
	})

	t.Run("status subresource", func(t *testing.T) {
		in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "status"}, Spec: v1alpha1.InstallationSpec{Version: "v1.0.0"}}
		if err := c.Create(ctx, in); err != nil {
			t.Fatal(err)
		}
		gen := in.Generation

		// Status written through the main resource is dropped.
		in.Status.Phase = v1alpha1.PhaseFailed
		if err := c.Update(ctx, in); err != nil {
			t.Fatal(err)
		}
		if in.Status.Phase != "" || in.Generation != gen {
			t.Errorf("update of the main resource: phase %q generation %d, want no status and generation %d", in.Status.Phase, in.Generation, gen)
		}

		// Status written through /status is kept and does not bump the
		// generation.
		in.Status = v1alpha1.InstallationStatus{
			Phase: v1alpha1.PhaseDeployed, ObservedGeneration: in.Generation,
			ObservedVersion: "v1.0.0", ObservedIdentifier: "abc", TargetVersion: "v1.0.0", TargetIdentifier: "abc",
			Strategy:   &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceProduct, ConfigMap: "installstrategy-xyz", Digest: "sha256:00"},
			Components: []v1alpha1.ComponentStatus{{Name: "sample-api", Kind: "Deployment", Role: "api", Desired: 2, Updated: 2, Ready: 2, RolledOver: true}},
		}
		in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady, "all ready")
		in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady, "")
		in.SetStatusConditions()
		if err := c.Status().Update(ctx, in); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.Installation{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(in), got); err != nil {
			t.Fatal(err)
		}
		if got.Generation != gen || !got.IsDeployed() || !got.IsConditionTrue(v1alpha1.ConditionAvailable) ||
			len(got.Status.Components) != 1 || !got.Status.Components[0].RolledOver || got.Status.Strategy.Digest != "sha256:00" {
			t.Errorf("after status update: generation %d (want %d), status %s", got.Generation, gen, mustJSON(t, got.Status))
		}

		// A spec change bumps the generation, so the installation no longer
		// counts as deployed until the status catches up.
		got.Spec.Version = "v1.1.0"
		if err := c.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		if got.Generation != gen+1 || got.IsDeployed() || got.Status.Phase != v1alpha1.PhaseDeployed {
			t.Errorf("after spec update: generation %d, deployed %v, phase %q", got.Generation, got.IsDeployed(), got.Status.Phase)
		}

		// Printer columns, as kubectl get shows them.
		cols, row := table(ctx, t, env, ns, "status")
		want := []string{"Name", "Version", "Phase", "Ready", "Available", "Progressing", "Age"}
		if !slices.Equal(cols, want) {
			t.Errorf("columns = %v, want %v", cols, want)
		}
		if len(row) != len(want) || row[0] != "status" || row[1] != "v1.0.0" || row[2] != "Deployed" || row[3] != "True" || row[4] != "True" || row[5] != "False" {
			t.Errorf("row = %v", row)
		}
	})
}

// createRaw creates an Installation from a raw JSON spec through the
// dynamic client, for values the Go types cannot hold.
func createRaw(ctx context.Context, env *testenv.Env, ns, name, spec string) error {
	body := `{"apiVersion":"installstrategy.io/v1alpha1","kind":"Installation","metadata":{"name":"` + name + `","namespace":"` + ns + `"},"spec":` + spec + `}`
	return env.Kube.Discovery().RESTClient().Post().
		AbsPath("/apis/installstrategy.io/v1alpha1/namespaces", ns, "installations").
		SetHeader("Content-Type", "application/json").
		Body([]byte(body)).Do(ctx).Error()
}

func assertInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("created, want rejected with %q", want)
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want Invalid containing %q", err, want)
	}
}

// table reads one Installation in the Table form kubectl get prints and
// returns the column names and the row's cells.
func table(ctx context.Context, t *testing.T, env *testenv.Env, ns, name string) ([]string, []string) {
	t.Helper()
	raw, err := env.Kube.Discovery().RESTClient().Get().
		AbsPath("/apis/installstrategy.io/v1alpha1/namespaces", ns, "installations", name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatalf("get table: %v", err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatalf("table: %v", err)
	}
	var cols, cells []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("table has %d rows, want 1", len(tbl.Rows))
	}
	for _, cell := range tbl.Rows[0].Cells {
		s, _ := cell.(string)
		cells = append(cells, s)
	}
	return cols, cells
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
