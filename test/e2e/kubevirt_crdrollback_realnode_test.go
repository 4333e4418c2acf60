//go:build realdump

package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// kubeVirtMain is KubeVirt's main branch at commit d923fdb815cd (the
// newest of main in the local mirror, merged 2026-08-22), named as `git
// describe --tags` names it, a semantic version (v1.9.0-beta.0 and 1264
// commits; main branched off before v1.9.0), so that the example reads it
// as a 1.9 (its additional properties: virt-template deployed, as v1.9.0).
// build.sh builds it from a git directory in which this name is a tag of
// that commit (docs/UPGRADES.md, "CRD rollback").
const kubeVirtMain = "v1.9.0-beta.0-1264-gd923fdb815"

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// kubeVirtUserObject is a custom resource of a kind KubeVirt's users
// write, created by the test as a user would (kubectl create).
type kubeVirtUserObject struct {
	gvr  schema.GroupVersionResource
	name string
	yaml string
}

// TestKubeVirtCRDRollbackOnRealNode is issue 42's item 2 on KubeVirt:
// KubeVirt main, installed by the example operator from the real dump of
// main's virt-operator on the real node, holds custom resources its users
// wrote; the KubeVirt CR's imageTag then goes back to v1.7.4 (a real
// v1.7.4 dump). What KubeVirt's real CRDs imply (main against v1.7.4):
//
//   - virtualmachineexports.export.kubevirt.io stores at v1 on main and has
//     no v1 in v1.7.4 (v1alpha1, v1beta1 stored); the schemas of the two
//     differ only in status (status.links.*.backups). A VirtualMachineExport
//     written at v1 is migrated to v1beta1 and stays readable, and
//     status.storedVersions is [v1beta1] only after that;
//   - every other CRD both have keeps its versions; main adds fields v1.7.4
//     lacks (virtualmachines: rebootPolicy, serviceAccountName,
//     utilityVolumes, ...). A VirtualMachine that sets
//     .spec.template.spec.domain.rebootPolicy would lose the value: the
//     rollback is refused before any write, naming that CRD, field and
//     object at both versions the CRD serves (v1, v1alpha3), and nothing
//     else (the VirtualMachine without it, an instancetype and a preference
//     both releases define alike, the export);
//   - CRDs main has and v1.7.4 lacks (VirtualMachineBackup, Plugin,
//     virt-template's VirtualMachineTemplate, ...) are deleted by the
//     rollback's prune (the example's pruneCRDs, as virt-operator deletes
//     them): one that still stores a user's object, here the
//     VirtualMachineTemplate vm-template, refuses the rollback too
//     (crdPruned, naming it), the empty ones do not;
//   - once the user clears the field, the rollback is still refused, for
//     the template alone; once the CR's owner accepts that loss (the
//     example's allow-crd-change annotation), the next resync rolls back
//     to v1.7.4, prunes those CRDs (vm-template with its CRD), and every
//     other object reads back with its values and uid.
func TestKubeVirtCRDRollbackOnRealNode(t *testing.T) {
	testenv.Lock(t, testenv.KubeVirtLock)
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	d := setUpRealDumps(ctx, t, env, kubeVirtMain, "v1.7.4")
	k := startKubeVirtOperator(ctx, t, env, operator.Defaults{}, nil, d.options, func(o *operator.Options) { o.ResyncPeriod = 2 * time.Second })
	removeDumpAccount(ctx, t, env)

	before := d.seen()
	k.create(ctx, t, map[string]any{"imageTag": kubeVirtMain, "uninstallStrategy": "RemoveWorkloads"})
	start := time.Now()
	st := k.waitVersion(ctx, t, kubeVirtMain)
	t.Logf("main (%s) Available %s after the CR", kubeVirtMain, time.Since(start).Round(100*time.Millisecond))
	checkKubeVirtStatus(t, kubeVirtMain, st)
	d.checkRealDump(ctx, t, env, kubeVirtMain, st, before)
	const exportCRD = "virtualmachineexports.export.kubevirt.io"
	if got, want := crdVersionsOf(ctx, t, env, exportCRD), "v1beta1 served, v1 served storage; stored [v1]"; got != want {
		t.Fatalf("main's %s: %s, want %s", exportCRD, got, want)
	}
	mainCRDs := kubeVirtCRDNames(ctx, t, env)
	// virt-template's webhooks (failurePolicy Fail) have no pods under
	// kwok: a stand-in answers for them with the certificate the engine
	// issued, as for virt-api.
	env.ServeWebhookStandIn(ctx, t, k.ns, "virt-template-webhook-service", "kubevirt-virt-template-webhook-certs")

	// What users write, each kind at a version both releases define
	// alike except the export (v1, which v1.7.4 lacks) and the
	// VirtualMachine vm-reboot (a field v1.7.4 lacks).
	ns := env.Namespace(ctx, t)
	var (
		vms           = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
		exportsV1     = schema.GroupVersionResource{Group: "export.kubevirt.io", Version: "v1", Resource: "virtualmachineexports"}
		exportsBeta1  = schema.GroupVersionResource{Group: "export.kubevirt.io", Version: "v1beta1", Resource: "virtualmachineexports"}
		instancetypes = schema.GroupVersionResource{Group: "instancetype.kubevirt.io", Version: "v1beta1", Resource: "virtualmachineinstancetypes"}
		preferences   = schema.GroupVersionResource{Group: "instancetype.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinepreferences"}
		templates     = schema.GroupVersionResource{Group: "template.kubevirt.io", Version: "v1alpha1", Resource: "virtualmachinetemplates"}
	)
	objects := []kubeVirtUserObject{
		{instancetypes, "small", `
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata: {name: small}
spec:
  cpu: {guest: 2}
  memory: {guest: 256Mi}
`},
		{preferences, "virtio", `
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachinePreference
metadata: {name: virtio}
spec:
  devices: {preferredDiskBus: virtio, preferredInterfaceModel: virtio}
`},
		{vms, "vm-kept", `
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm-kept}
spec:
  runStrategy: Halted
  instancetype: {kind: VirtualMachineInstancetype, name: small}
  preference: {kind: VirtualMachinePreference, name: virtio}
  template:
    metadata:
      labels: {app: kept}
    spec:
      domain:
        devices:
          disks: [{name: root, disk: {}}]
      volumes:
      - name: root
        containerDisk: {image: quay.io/containerdisks/fedora:41}
`},
		{vms, "vm-reboot", `
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm-reboot}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        rebootPolicy: Terminate
        devices: {}
        memory: {guest: 128Mi}
`},
		{exportsV1, "export", `
apiVersion: export.kubevirt.io/v1
kind: VirtualMachineExport
metadata: {name: export}
spec:
  source: {apiGroup: kubevirt.io, kind: VirtualMachine, name: vm-kept}
  ttlDuration: 2h0m0s
`},
		// virt-template's webhook checks parameter references only (here
		// a stand-in admits it).
		{templates, "vm-template", `
apiVersion: template.kubevirt.io/v1alpha1
kind: VirtualMachineTemplate
metadata: {name: vm-template}
spec:
  virtualMachine:
    apiVersion: kubevirt.io/v1
    kind: VirtualMachine
    metadata: {name: from-template}
    spec:
      runStrategy: Halted
      template:
        spec:
          domain:
            devices: {}
            memory: {guest: 128Mi}
`},
	}
	written := map[string]*unstructured.Unstructured{}
	for _, o := range objects {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(o.yaml), &u.Object); err != nil {
			t.Fatal(err)
		}
		got, err := env.Dynamic.Resource(o.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s %s: %v", o.gvr.Resource, o.name, err)
		}
		written[o.name] = got
	}
	if got, _, _ := unstructured.NestedString(written["vm-reboot"].Object, "spec", "template", "spec", "domain", "rebootPolicy"); got != "Terminate" {
		t.Fatalf("main's schema did not keep vm-reboot's rebootPolicy: %q", got)
	}

	// The rollback: refused before any write, for vm-reboot's rebootPolicy
	// and the CRD of vm-template, which v1.7.4 lacks (the other CRDs it
	// lacks store nothing).
	before = d.seen()
	k.setImageTag(ctx, t, "v1.7.4")
	// The preflight reads the objects at every version both CRDs serve:
	// the field is refused at v1 and at v1alpha3 (the same object).
	finding := func(version string) string {
		return fmt.Sprintf("virtualmachines.kubevirt.io %s .spec.template.spec.domain.rebootPolicy: fieldRemoved "+
			"(field removed from the schema: the API server prunes its values); 1 stored objects affected, e.g. %s/vm-reboot", version, ns)
	}
	const templateCRD = "virtualmachinetemplates.template.kubevirt.io"
	pruned := templateCRD + ": crdPruned (the target strategy lacks the CRD and prune deletes it: every custom resource of it is deleted with it); " +
		"1 stored objects affected, e.g. " + ns + "/vm-template"
	want := "refused before any write: " + finding("v1") + "; " + finding("v1alpha3") + "; " + pruned + " (an override"
	var stalled map[string]any
	testenv.WaitFor(ctx, t, "the rollback to v1.7.4 refused", func(ctx context.Context) (bool, string, error) {
		u, err := k.res.Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		stalled = conditionMap(st, string(v1alpha1.ConditionStalled))
		return stalled["status"] == "True" && stalled["reason"] == v1alpha1.ReasonCRDChangeRefused, fmt.Sprint(stalled), nil
	})
	if msg, _ := stalled["message"].(string); !strings.Contains(msg, want) {
		t.Fatalf("Stalled message %q\nwant it to contain %q (that field and that CRD alone)", msg, want)
	}
	u, err := k.res.Get(ctx, "kubevirt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(u.Object, "status", "observedKubeVirtVersion"); v != kubeVirtMain {
		t.Errorf("the refused rollback changed what runs: observedKubeVirtVersion %s", v)
	}
	dep, err := env.Kube.AppsV1().Deployments(k.ns).Get(ctx, "virt-api", metav1.GetOptions{})
	if err != nil || !strings.HasSuffix(dep.Spec.Template.Spec.Containers[0].Image, ":"+kubeVirtMain) {
		t.Errorf("the refused rollback changed virt-api: %v, %v", dep, err)
	}
	if got, want := crdVersionsOf(ctx, t, env, exportCRD), "v1beta1 served, v1 served storage; stored [v1]"; got != want {
		t.Errorf("the refused rollback changed %s: %s, want %s", exportCRD, got, want)
	}
	if got := read(ctx, t, env, vms, ns, "vm-reboot"); !reflect.DeepEqual(got.Object["spec"], written["vm-reboot"].Object["spec"]) {
		t.Errorf("the refused rollback changed vm-reboot: %v", got.Object["spec"])
	}

	// Its user clears the field: the rollback is still refused, for the
	// template's CRD alone.
	patch := []byte(`[{"op":"remove","path":"/spec/template/spec/domain/rebootPolicy"}]`)
	cleared, err := env.Dynamic.Resource(vms).Namespace(ns).Patch(ctx, "vm-reboot", types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	written["vm-reboot"] = cleared
	want = "refused before any write: " + pruned + " (an override"
	testenv.WaitFor(ctx, t, "the rollback refused for "+templateCRD+" alone", func(ctx context.Context) (bool, string, error) {
		u, err := k.res.Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		stalled = conditionMap(st, string(v1alpha1.ConditionStalled))
		msg, _ := stalled["message"].(string)
		return stalled["status"] == "True" && strings.Contains(msg, want), fmt.Sprint(stalled), nil
	})
	if _, err := env.Dynamic.Resource(templates).Namespace(ns).Get(ctx, "vm-template", metav1.GetOptions{}); err != nil {
		t.Errorf("the refused rollback deleted vm-template: %v", err)
	}
	if now := kubeVirtCRDNames(ctx, t, env); !now[templateCRD] {
		t.Errorf("the refused rollback deleted %s", templateCRD)
	}

	// Its owner accepts the loss on the KubeVirt CR (the example's
	// allow-crd-change annotation, spec.crdSafety.allow's form): the
	// rollback goes through and prunes the CRD with vm-template.
	allow := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, metakeys.AllowCRDChangeAnnotation, templateCRD+"="+string(crdsafety.RuleCRDPruned))
	if _, err := k.res.Patch(ctx, "kubevirt", types.MergePatchType, []byte(allow), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	objects = slices.DeleteFunc(objects, func(o kubeVirtUserObject) bool { return o.gvr == templates })
	start = time.Now()
	st = k.waitVersion(ctx, t, "v1.7.4")
	t.Logf("v1.7.4 Available %s after the loss was accepted", time.Since(start).Round(100*time.Millisecond))
	checkKubeVirtStatus(t, "v1.7.4", st)
	d.checkRealDump(ctx, t, env, "v1.7.4", st, before)

	// The export's CRD is v1.7.4's, v1 gone, and storedVersions trimmed:
	// the export was rewritten at v1beta1 first, or it could not be read.
	if got, want := crdVersionsOf(ctx, t, env, exportCRD), "v1alpha1 served, v1beta1 served storage; stored [v1beta1]"; got != want {
		t.Errorf("after the rollback %s: %s, want %s", exportCRD, got, want)
	}
	if _, err := env.Dynamic.Resource(exportsV1).Namespace(ns).Get(ctx, "export", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the export at v1 after the rollback: %v; want NotFound (v1 is not served)", err)
	}
	// Every object reads back with its values, not recreated.
	for _, o := range objects {
		gvr := o.gvr
		if gvr == exportsV1 {
			gvr = exportsBeta1
		}
		got := read(ctx, t, env, gvr, ns, o.name)
		w := written[o.name]
		if got.GetUID() != w.GetUID() {
			t.Errorf("%s %s recreated: uid %s → %s", o.gvr.Resource, o.name, w.GetUID(), got.GetUID())
		}
		if !reflect.DeepEqual(got.Object["spec"], w.Object["spec"]) {
			t.Errorf("%s %s after the rollback: spec %v, want %v", o.gvr.Resource, o.name, got.Object["spec"], w.Object["spec"])
		}
	}
	// KubeVirt's CRDs are v1.7.4's: those main adds are pruned with the
	// rollback (the example's pruneCRDs, as virt-operator deletes CRDs its
	// target strategy lacks), none is new.
	testenv.WaitFor(ctx, t, "KubeVirt's CRDs those of v1.7.4", func(ctx context.Context) (bool, string, error) {
		now := kubeVirtCRDNames(ctx, t, env)
		var dropped, added []string
		for n := range mainCRDs {
			if !now[n] {
				dropped = append(dropped, n)
			}
		}
		for n := range now {
			if !mainCRDs[n] {
				added = append(added, n)
			}
		}
		sort.Strings(dropped)
		if len(added) > 0 {
			return false, "", fmt.Errorf("CRDs v1.7.4 has and main lacks: %v", added)
		}
		ok := slices.Contains(dropped, "virtualmachinebackups.backup.kubevirt.io") && slices.Contains(dropped, templateCRD)
		if ok {
			t.Logf("CRDs of main pruned with the rollback to v1.7.4: %v", dropped)
		}
		return ok, fmt.Sprintf("dropped so far %v", dropped), nil
	})
}

// crdVersionsOf describes CRD name's versions and stored versions, e.g.
// "v1beta1 served, v1 served storage; stored [v1]".
func crdVersionsOf(ctx context.Context, t *testing.T, env *testenv.Env, name string) string {
	t.Helper()
	crd, err := env.Dynamic.Resource(crdsGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var parts []string
	for _, v := range versions {
		m, _ := v.(map[string]any)
		s, _ := m["name"].(string)
		if m["served"] == true {
			s += " served"
		}
		if m["storage"] == true {
			s += " storage"
		}
		parts = append(parts, s)
	}
	stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	return fmt.Sprintf("%s; stored %v", strings.Join(parts, ", "), stored)
}

// kubeVirtCRDNames are the CRDs of KubeVirt's API groups (*kubevirt.io)
// in the cluster, but for the KubeVirt CR's own (the operator's, not the
// strategy's).
func kubeVirtCRDNames(ctx context.Context, t *testing.T, env *testenv.Env) map[string]bool {
	t.Helper()
	list, err := env.Dynamic.Resource(crdsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, c := range list.Items {
		group, _, _ := unstructured.NestedString(c.Object, "spec", "group")
		if (group == "kubevirt.io" || strings.HasSuffix(group, ".kubevirt.io")) && c.GetName() != "kubevirts.kubevirt.io" && c.GetDeletionTimestamp() == nil {
			out[c.GetName()] = true
		}
	}
	return out
}

// read gets ns/name of gvr.
func read(ctx context.Context, t *testing.T, env *testenv.Env, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read %s %s/%s: %v", gvr, ns, name, err)
	}
	return u
}

// conditionMap is the condition typ of a KubeVirt status, or nil.
func conditionMap(status map[string]any, typ string) map[string]any {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}
