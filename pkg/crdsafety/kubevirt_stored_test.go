package crdsafety_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// kubeVirtStrategy parses a real KubeVirt strategy: its CRDs by name, and
// every object by reference.
func kubeVirtStrategy(t *testing.T, version string) (map[string]*unstructured.Unstructured, map[strategy.ObjectRef]*unstructured.Unstructured) {
	t.Helper()
	s, _, err := strategy.Parse(kubevirtdata.Read(t, version, "manifests.yaml"), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crds := map[string]*unstructured.Unstructured{}
	for _, o := range s.Objects {
		if o.GetKind() == "CustomResourceDefinition" {
			crds[o.GetName()] = o
		}
	}
	return crds, s.Index()
}

// storedAs returns o as the API server stores it after an apply by
// manager: every field o sets is that manager's.
func storedAs(t *testing.T, o *unstructured.Unstructured, manager string) *unstructured.Unstructured {
	t.Helper()
	c := o.DeepCopy()
	raw, err := fieldpath.SetFromValue(value.NewValueInterface(c.Object)).ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	c.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: c.GetAPIVersion(), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}})
	return c
}

// TestKubeVirtUpgradeWithOwnObjectsStored is the preflight of KubeVirt's
// real upgrade v1.8.4 -> v1.9.0 and its rollback v1.9.0 -> v1.8.4 (the
// steps of TestExampleKubeVirtOperator), with every custom resource of the
// strategy installed before stored as its apply left it (the cluster
// instancetypes and preferences): no refusal. v1.9.0 adds
// .spec.devices.preferredVideoType to the cluster preferences and 9 of its
// own preferences set it, so the rollback to v1.8.4 drops a field they use;
// the same objects stored as users' data (nobody rewrites them) are
// refused, so the rule that tells the two apart is what passes.
func TestKubeVirtUpgradeWithOwnObjectsStored(t *testing.T) {
	const manager = "installstrategy"
	ours := func(e metav1.ManagedFieldsEntry) bool { return e.Manager == manager }
	for _, pair := range [][2]string{{"v1.8.4", "v1.9.0"}, {"v1.9.0", "v1.8.4"}} {
		from, to := pair[0], pair[1]
		t.Run(from+"->"+to, func(t *testing.T) {
			oldCRDs, oldObjs := kubeVirtStrategy(t, from)
			newCRDs, newObjs := kubeVirtStrategy(t, to)
			stored, asUsers := 0, 0
			var usersRefused []crdsafety.Finding
			for name, nu := range newCRDs {
				ou := oldCRDs[name]
				if ou == nil {
					continue
				}
				live, err := crdsafety.FromUnstructured(ou)
				if err != nil {
					t.Fatal(err)
				}
				desired, err := crdsafety.FromUnstructured(nu)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range live.Spec.Versions {
					if v.Storage {
						live.Status.StoredVersions = append(live.Status.StoredVersions, v.Name)
					}
				}
				found := crdsafety.Compare(live, desired)
				users := append([]crdsafety.Finding(nil), found...)
				for ref, o := range oldObjs {
					if ref.Group != desired.Spec.Group || ref.Kind != desired.Spec.Names.Kind {
						continue
					}
					stored++
					s := storedAs(t, o, manager)
					for i := range found {
						if found[i].Judge != crdsafety.Always {
							st := crdsafety.Stored{Object: s, Ours: ours}
							if d := newObjs[ref]; d != nil && crdsafety.SameFields(desired, d.GetAPIVersion(), found[i].ReadAt) {
								st.Desired = d
							}
							found[i].ObserveStored(st)
							users[i].Observe(s)
						}
					}
				}
				if refused := crdsafety.Judge(found, nil, nil); len(refused) > 0 {
					t.Errorf("%s refused with the strategy's own objects stored: %v", name, refused)
				}
				usersRefused = append(usersRefused, crdsafety.Judge(users, nil, nil)...)
			}
			for _, f := range usersRefused {
				asUsers += f.Objects
				t.Logf("refused were they users' objects: %s", f)
			}
			if stored < 100 {
				t.Errorf("only %d custom resources of %s stored", stored, from)
			}
			if from == "v1.9.0" && !refusedAt(usersRefused, "virtualmachineclusterpreferences.instancetype.kubevirt.io", ".spec.devices.preferredVideoType") {
				t.Errorf("the same objects as users' data: %v, want preferredVideoType refused", usersRefused)
			}
			t.Logf("%d custom resources stored; %d would count as users' data", stored, asUsers)
		})
	}
}

func refusedAt(fs []crdsafety.Finding, crd, path string) bool {
	for _, f := range fs {
		if f.CRD == crd && f.Path == path && f.Rule == crdsafety.RuleFieldRemoved && f.Objects > 0 {
			return true
		}
	}
	return false
}
