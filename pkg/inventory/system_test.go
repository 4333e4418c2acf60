package inventory

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func liveObject(labels map[string]string, managers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetLabels(labels)
	var fields []metav1.ManagedFieldsEntry
	for _, m := range managers {
		fields = append(fields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate})
	}
	u.SetManagedFields(fields)
	return u
}

// TestSystemObject: the one rule of what is Kubernetes' own, and where a
// location alone makes an object so (a takeover listed by a Helm release
// Secret) and where it does not (a product's own strategy).
func TestSystemObject(t *testing.T) {
	crb := func(name string) strategy.ObjectRef {
		return strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding", Name: name}
	}
	boot := map[string]string{metakeys.BootstrappingLabel: "rbac-defaults"}
	inKubeSystem := strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding", Namespace: "kube-system", Name: "virt-template-apiserver-auth-reader"}
	cases := []struct {
		name           string
		ref            strategy.ObjectRef
		live           *unstructured.Unstructured
		system, strict bool
	}{
		{"api server's binding", crb("cluster-admin"), liveObject(boot, metakeys.APIServerFieldManager), true, true},
		{"bootstrapping label, nobody recorded", crb("cluster-admin"), liveObject(boot), true, true},
		{"api server status only", crb("x"), func() *unstructured.Unstructured {
			u := liveObject(boot)
			u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: metakeys.APIServerFieldManager, Subresource: "status"}, {Manager: "virt-operator"}})
			return u
		}(), false, false},
		{"a product's bootstrapping label", crb("kubevirt.io:default"), liveObject(boot, "virt-operator", "installstrategy"), false, false},
		{"system: name", strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:aggregate-to-edit"}, liveObject(nil, "someone"), true, true},
		{"system namespace itself", strategy.ObjectRef{Kind: "Namespace", Name: "kube-node-lease"}, nil, true, true},
		{"in kube-system", inKubeSystem, liveObject(nil, "virt-operator"), false, true},
		{"in kube-public", strategy.ObjectRef{Kind: "ConfigMap", Namespace: "kube-public", Name: "cluster-info"}, nil, false, true},
		{"ordinary", strategy.ObjectRef{Kind: "ConfigMap", Namespace: "app", Name: "system-config"}, liveObject(nil, "helm"), false, false},
		{"ordinary cluster-scoped", crb("app-admin"), liveObject(nil, "helm"), false, false},
	}
	for _, c := range cases {
		if got := systemObject(c.ref, c.live) != ""; got != c.system {
			t.Errorf("%s: SystemObject = %v, want %v", c.name, got, c.system)
		}
		if got := AdoptionNeedsConsent(c.ref, c.live, nil) != ""; got != c.system {
			t.Errorf("%s: AdoptionNeedsConsent = %v, want %v", c.name, got, c.system)
		}
		if got := TakeoverNeedsConsent(c.ref, c.live, nil); (got != "") != c.strict || (got != "" && !strings.Contains(got, consentName(c.ref))) {
			t.Errorf("%s: TakeoverNeedsConsent = %q, want needed %v, naming %s", c.name, got, c.strict, consentName(c.ref))
		}
		consent, err := ParseSystemConsent([]string{consentName(c.ref)})
		if err != nil {
			t.Fatal(err)
		}
		if why := TakeoverNeedsConsent(c.ref, c.live, consent); why != "" {
			t.Errorf("%s: named by its ConsentName, still refused: %s", c.name, why)
		}
	}
}

// TestDeletionNeedsConsent: a system object the installation created is
// deleted; one it adopted is not unless named; one of the API server's is
// not, whatever the inventory (a ConfigMap editor's) says.
func TestDeletionNeedsConsent(t *testing.T) {
	role := strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:metrics-server"}
	admin := strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding", Name: "cluster-admin"}
	named, _ := ParseSystemConsent([]string{"clusterrole/system:metrics-server", "ClusterRoleBinding.rbac.authorization.k8s.io/cluster-admin"})
	for _, c := range []struct {
		name    string
		e       Entry
		live    *unstructured.Unstructured
		consent SystemConsent
		kept    bool
	}{
		{"created system: role", Entry{ObjectRef: role}, liveObject(nil, "installstrategy"), nil, false},
		{"adopted system: role", Entry{ObjectRef: role, Adopted: true}, liveObject(nil, "installstrategy"), nil, true},
		{"adopted system: role, named", Entry{ObjectRef: role, Adopted: true}, liveObject(nil, "installstrategy"), named, false},
		{"api server's, inventory says created", Entry{ObjectRef: admin}, liveObject(map[string]string{metakeys.BootstrappingLabel: "rbac-defaults"}, metakeys.APIServerFieldManager, "installstrategy"), nil, true},
		{"api server's, named", Entry{ObjectRef: admin, Adopted: true}, liveObject(map[string]string{metakeys.BootstrappingLabel: "rbac-defaults"}, metakeys.APIServerFieldManager), named, false},
		{"adopted system: role, the inventory's mark cleared", Entry{ObjectRef: role}, marked(liveObject(nil, "installstrategy")), nil, true},
		{"adopted system: role, the inventory's mark cleared, named", Entry{ObjectRef: role}, marked(liveObject(nil, "installstrategy")), named, false},
		{"adopted ordinary", Entry{ObjectRef: strategy.ObjectRef{Kind: "ConfigMap", Namespace: "a", Name: "b"}, Adopted: true}, liveObject(nil), nil, false},
	} {
		if got := DeletionNeedsConsent(c.e, c.live, c.consent) != ""; got != c.kept {
			t.Errorf("%s: kept %v, want %v", c.name, got, c.kept)
		}
	}
}

// marked gives live the adoption mark MarkAdoption asks for.
func marked(live *unstructured.Unstructured) *unstructured.Unstructured {
	live.SetAnnotations(map[string]string{metakeys.AdoptedAnnotation: "ns/name"})
	return live
}

// TestMarkAdoption: the live mark is asked for system objects only.
func TestMarkAdoption(t *testing.T) {
	role := strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:metrics-server"}
	cm := strategy.ObjectRef{Kind: "ConfigMap", Namespace: "kube-system", Name: "agent"}
	if !MarkAdoption(role, liveObject(nil, "someone")) || MarkAdoption(cm, liveObject(nil, "someone")) {
		t.Error("MarkAdoption: want the system: role marked, an ordinary ConfigMap not")
	}
}

func TestParseObjectName(t *testing.T) {
	for _, bad := range []string{"", "x", "ClusterRole/", "/x", "ClusterRole//x", "ClusterRole./x", "a/b/c/d"} {
		if _, err := parseObjectName(bad); err == nil {
			t.Errorf("ParseObjectName(%q) accepted", bad)
		}
	}
	n, err := parseObjectName("RoleBinding.rbac.authorization.k8s.io/kube-system/x")
	if err != nil || n.Group != "rbac.authorization.k8s.io" || n.Kind != "RoleBinding" || n.Namespace != "kube-system" || n.Name != "x" || n.AnyGroup {
		t.Errorf("got %+v, %v", n, err)
	}
	rb := strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding", Namespace: "kube-system", Name: "x"}
	if !n.Matches(rb) || n.Matches(strategy.ObjectRef{Group: "other.io", Kind: "RoleBinding", Namespace: "kube-system", Name: "x"}) {
		t.Error("group not compared")
	}
	any, _ := parseObjectName("rolebinding/kube-system/x")
	if !any.Matches(rb) || any.Matches(strategy.ObjectRef{Kind: "RoleBinding", Name: "x"}) {
		t.Error("kind without group, or namespace, compared wrongly")
	}
}
