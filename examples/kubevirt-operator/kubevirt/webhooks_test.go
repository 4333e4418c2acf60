package kubevirt

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// fakeKubeVirt is a fake client holding objects of KubeVirt's kinds
// (pure logic of the handlers; the cluster test is
// TestKubeVirtOperatorREADME).
func fakeKubeVirt(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"KubeVirt", "VirtualMachineInstance", "VirtualMachine", "VirtualMachineInstanceReplicaSet"} {
		gv := schema.GroupVersion{Group: "kubevirt.io", Version: "v1"}
		scheme.AddKnownTypeWithName(gv.WithKind(k), &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gv.WithKind(k+"List"), &unstructured.UnstructuredList{})
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func obj(kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func deployedKV(uninstall, phase string) *unstructured.Unstructured {
	return obj("KubeVirt", "kubevirt", "kubevirt", map[string]any{"spec": map[string]any{"uninstallStrategy": uninstall}, "status": map[string]any{"phase": phase}})
}

func deleteReq(name string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Namespace: "kubevirt", Name: name}}
}

// TestDeleteValidator: virt-operator's deletion rule, case by case.
func TestDeleteValidator(t *testing.T) {
	vmi := obj("VirtualMachineInstance", "default", "vmi", nil)
	vm := obj("VirtualMachine", "other", "vm", nil)
	rs := obj("VirtualMachineInstanceReplicaSet", "other", "rs", nil)
	for _, tc := range []struct {
		name    string
		objs    []client.Object
		req     string
		allowed bool
		want    string
	}{
		{"block, deployed, a VMI", []client.Object{deployedKV("BlockUninstallIfWorkloadsExist", "Deployed"), vmi}, "kubevirt", false, "still Virtual Machine Instances present"},
		{"block, deployed, a VM", []client.Object{deployedKV("BlockUninstallIfWorkloadsExist", "Deployed"), vm}, "kubevirt", false, "still Virtual Machines present"},
		{"block, deployed, a replica set", []client.Object{deployedKV("BlockUninstallIfWorkloadsExist", "Deployed"), rs}, "kubevirt", false, "still Virtual Machine Instance Replica Sets present"},
		{"block, deployed, collection delete judged by the first", []client.Object{deployedKV("BlockUninstallIfWorkloadsExist", "Deployed"), vmi}, "", false, "Virtual Machine Instances"},
		{"block, deployed, no workloads", []client.Object{deployedKV("BlockUninstallIfWorkloadsExist", "Deployed")}, "kubevirt", true, ""},
		{"block, deploying", []client.Object{deployedKV("BlockUninstallIfWorkloadsExist", "Deploying"), vmi}, "kubevirt", true, ""},
		{"remove workloads", []client.Object{deployedKV("RemoveWorkloads", "Deployed"), vmi}, "kubevirt", true, ""},
		{"empty strategy passes, as in virt-operator", []client.Object{deployedKV("", "Deployed"), vmi}, "kubevirt", true, ""},
		{"collection delete of nothing", nil, "", true, ""},
		{"the KubeVirt cannot be read", nil, "kubevirt", false, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := DeleteValidator{Reader: fakeKubeVirt(t, tc.objs...)}.Handle(t.Context(), deleteReq(tc.req))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("message %q, want it to say %q", resp.Result.Message, tc.want)
			}
		})
	}
}

// TestCreateValidator: a second KubeVirt is refused, the first admitted.
func TestCreateValidator(t *testing.T) {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "other", Name: "second"}}
	if resp := (CreateValidator{Reader: fakeKubeVirt(t)}).Handle(t.Context(), req); !resp.Allowed {
		t.Errorf("the first KubeVirt refused: %+v", resp.Result)
	}
	resp := CreateValidator{Reader: fakeKubeVirt(t, deployedKV("", "Deployed"))}.Handle(t.Context(), req)
	if resp.Allowed || resp.Result.Message != "Kubevirt is already created" {
		t.Errorf("a second KubeVirt: allowed %v, %+v", resp.Allowed, resp.Result)
	}
}

func updateReq(t *testing.T, old, new map[string]any) admission.Request {
	t.Helper()
	raw := func(spec map[string]any) []byte {
		b, err := json.Marshal(map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": map[string]any{"name": "kubevirt", "namespace": "kubevirt"}, "spec": spec})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Namespace: "kubevirt", Name: "kubevirt",
		Kind: metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "KubeVirt"}, Object: runtime.RawExtension{Raw: raw(new)}, OldObject: runtime.RawExtension{Raw: raw(old)}}}
}

// TestUpdateValidator: each of virt-operator's update rules the example
// keeps refuses its bad case and admits a good one; placements are judged
// by a dry-run create that only runs when they change.
func TestUpdateValidator(t *testing.T) {
	placement := map[string]any{"nodePlacement": map[string]any{"nodeSelector": map[string]any{"a": "b"}}}
	for _, tc := range []struct {
		name     string
		old, new map[string]any
		dryRun   error
		want     string // "" allowed
		dryRuns  int
	}{
		{"unchanged empty spec", map[string]any{}, map[string]any{}, nil, "", 0},
		{"image tag changed", map[string]any{"imageTag": "v1.8.4"}, map[string]any{"imageTag": "v1.9.0"}, nil, "", 0},
		{"patch not JSON", nil, map[string]any{"customizeComponents": map[string]any{"patches": []any{map[string]any{"patch": "{nope"}}}}, nil, `patch "{nope" is not valid JSON`, 0},
		{"patch JSON", nil, map[string]any{"customizeComponents": map[string]any{"patches": []any{map[string]any{"patch": `{"a":1}`}}}}, nil, "", 0},
		{"infra replicas 0", nil, map[string]any{"infra": map[string]any{"replicas": 0}}, nil, "infra replica count can't be 0", 0},
		{"server cert longer than CA", nil, map[string]any{"certificateRotateStrategy": map[string]any{"selfSigned": map[string]any{"server": map[string]any{"duration": "200h"}}}}, nil, "Certificate duration cannot exceed CA", 0},
		{"CA renew beyond duration", nil, map[string]any{"certificateRotateStrategy": map[string]any{"selfSigned": map[string]any{"ca": map[string]any{"duration": "48h", "renewBefore": "49h"}}}}, nil, "CA RenewBefore cannot exceed Duration", 0},
		{"deprecated and current rotation", nil, map[string]any{"certificateRotateStrategy": map[string]any{"selfSigned": map[string]any{"caRotateInterval": "48h", "server": map[string]any{"duration": "24h"}}}}, nil, "are deprecated and conflict", 0},
		{"cert rotation consistent", nil, map[string]any{"certificateRotateStrategy": map[string]any{"selfSigned": map[string]any{"server": map[string]any{"duration": "48h"}}}}, nil, "", 0},
		{"ciphers with TLS 1.3", nil, map[string]any{"configuration": map[string]any{"tlsConfiguration": map[string]any{"minTLSVersion": "VersionTLS13", "ciphers": []any{"TLS_AES_128_GCM_SHA256"}}}}, nil, "You cannot specify ciphers", 0},
		{"unknown cipher", nil, map[string]any{"configuration": map[string]any{"tlsConfiguration": map[string]any{"minTLSVersion": "VersionTLS12", "ciphers": []any{"TLS_NOPE"}}}}, nil, "TLS_NOPE is not a valid cipher", 0},
		{"known cipher", nil, map[string]any{"configuration": map[string]any{"tlsConfiguration": map[string]any{"minTLSVersion": "VersionTLS12", "ciphers": []any{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}}}}, nil, "", 0},
		{"seccomp without custom profile", nil, map[string]any{"configuration": map[string]any{"seccompConfiguration": map[string]any{"virtualMachineInstanceProfile": map[string]any{}}}}, nil, "customProfile needs to be set", 0},
		{"seccomp both profiles", nil, map[string]any{"configuration": map[string]any{"seccompConfiguration": map[string]any{"virtualMachineInstanceProfile": map[string]any{"customProfile": map[string]any{"localhostProfile": "x", "runtimeDefaultProfile": true}}}}}, nil, "cannot be set when", 0},
		{"memory ratio below 1", nil, map[string]any{"configuration": map[string]any{"additionalGuestMemoryOverheadRatio": "0.5"}}, nil, "cannot be smaller than 1.0", 0},
		{"feature gate enabled and disabled", nil, map[string]any{"configuration": map[string]any{"developerConfiguration": map[string]any{"featureGates": []any{"Snapshot"}, "disabledFeatureGates": []any{"Snapshot"}}}}, nil, `feature gate "Snapshot" exists on both`, 0},
		{"infra placement changed, dry run refuses", nil, map[string]any{"infra": placement}, errDryRun, "dry run refused", 1},
		{"workloads placement changed, dry run admits", nil, map[string]any{"workloads": placement}, nil, "", 1},
		{"placement unchanged: no dry run", map[string]any{"infra": placement}, map[string]any{"infra": placement}, errDryRun, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			c := interceptor.NewClient(fakeKubeVirt(t), interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
				runs++
				co := (&client.CreateOptions{}).ApplyOptions(opts)
				if len(co.DryRun) == 0 {
					t.Errorf("a create that is not a dry run: %T", o)
				}
				return tc.dryRun
			}})
			resp := UpdateValidator{Client: c}.Handle(t.Context(), updateReq(t, tc.old, tc.new))
			if tc.want == "" && !resp.Allowed {
				t.Errorf("refused: %+v", resp.Result)
			}
			if tc.want != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tc.want)) {
				t.Errorf("allowed %v, %+v; want refused with %q", resp.Allowed, resp.Result, tc.want)
			}
			if runs != tc.dryRuns {
				t.Errorf("%d dry runs, want %d", runs, tc.dryRuns)
			}
		})
	}
}

var errDryRun = &dryRunError{}

type dryRunError struct{}

func (*dryRunError) Error() string { return "dry run refused" }
