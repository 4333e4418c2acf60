package crdsafety_test

import (
	"fmt"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/crdsafety"
)

// TestPruned: a CRD the run deletes is refused (crdPruned) when it stores
// at least one object the prune does not delete itself, naming the count
// and up to five of them; one that stores none is safe; one whose objects
// are all the installation's own, pruned anyway, is safe; a read stopped
// at the limit (or a CRD serving no version) is refused even with no
// object given; the override accepts it; ParseAllow takes the rule.
func TestPruned(t *testing.T) {
	crd := func(versions ...apiextv1.CustomResourceDefinitionVersion) *apiextv1.CustomResourceDefinition {
		c := &apiextv1.CustomResourceDefinition{}
		c.Name = "backups.example.com"
		c.Spec.Versions = versions
		return c
	}
	v := func(name string, served, storage bool) apiextv1.CustomResourceDefinitionVersion {
		return apiextv1.CustomResourceDefinitionVersion{Name: name, Served: served, Storage: storage}
	}
	for _, tc := range []struct {
		versions []apiextv1.CustomResourceDefinitionVersion
		readAt   string
	}{
		{[]apiextv1.CustomResourceDefinitionVersion{v("v1alpha1", true, false), v("v1", true, true)}, "v1"},
		{[]apiextv1.CustomResourceDefinitionVersion{v("v1alpha1", true, false), v("v1", false, true)}, "v1alpha1"},
		{[]apiextv1.CustomResourceDefinitionVersion{v("v1", false, true)}, ""},
	} {
		if got := crdsafety.Pruned(crd(tc.versions...)).ReadAt; got != tc.readAt {
			t.Errorf("%v: read at %q, want %q", tc.versions, got, tc.readAt)
		}
	}

	c := crd(v("v1", true, true))
	named := func(name string) *unstructured.Unstructured {
		o := thing(`{}`)
		o.SetName(name)
		return o
	}
	judge := func(stored []crdsafety.Stored, truncated bool) []crdsafety.Finding {
		f := crdsafety.Pruned(c)
		for _, st := range stored {
			f.ObserveStored(st)
		}
		return crdsafety.Judge([]crdsafety.Finding{f}, nil, map[string]bool{f.ReadAt: truncated})
	}

	// No object: safe.
	if got := judge(nil, false); len(got) != 0 {
		t.Errorf("no object stored: %v, want nothing refused", got)
	}
	// Only the installation's own objects, which the prune deletes too.
	if got := judge([]crdsafety.Stored{{Object: named("own"), Pruned: true}}, false); len(got) != 0 {
		t.Errorf("only pruned objects stored: %v, want nothing refused", got)
	}
	// Seven users' objects: refused, seven counted, five named.
	var stored []crdsafety.Stored
	for i := range 7 {
		stored = append(stored, crdsafety.Stored{Object: named(fmt.Sprintf("b%d", i))})
	}
	stored = append(stored, crdsafety.Stored{Object: named("own"), Pruned: true})
	got := judge(stored, false)
	if len(got) != 1 || got[0].Rule != crdsafety.RuleCRDPruned || got[0].CRD != c.Name || got[0].Objects != 7 ||
		strings.Join(got[0].Examples, ",") != "ns/b0,ns/b1,ns/b2,ns/b3,ns/b4" || got[0].Truncated {
		t.Fatalf("seven users' objects: %+v", got)
	}
	want := "backups.example.com: crdPruned (the target strategy lacks the CRD and prune deletes it: every custom resource of it is deleted with it); 7 stored objects affected, e.g. ns/b0"
	if s := got[0].String(); !strings.HasPrefix(s, want) {
		t.Errorf("String %q, want it to start with %q", s, want)
	}
	if refused := crdsafety.Refused(got); len(refused) != 1 {
		t.Errorf("refused %v", refused)
	}
	crdsafety.Permit(got, []crdsafety.Allow{{CRD: c.Name, Rule: crdsafety.RuleFieldRemoved}, {CRD: "other.example.com", Rule: crdsafety.RuleCRDPruned}})
	if refused := crdsafety.Refused(got); len(refused) != 1 {
		t.Errorf("an override of another rule or CRD accepted it: %v", got)
	}
	allow, err := crdsafety.ParseAllow(c.Name + "=crdPruned")
	if err != nil {
		t.Fatal(err)
	}
	crdsafety.Permit(got, []crdsafety.Allow{allow})
	if refused := crdsafety.Refused(got); len(refused) != 0 || !got[0].Allowed {
		t.Errorf("the override did not accept it: %v", got)
	}

	// The read stopped at the limit: refused without an object, and the
	// count of one that was read says more were not.
	if got := judge(nil, true); len(got) != 1 || !got[0].Truncated || !strings.Contains(got[0].String(), "not every stored object could be read") {
		t.Errorf("truncated read, no object: %v", got)
	}
	f := crdsafety.Pruned(c)
	f.Observe(named("b0"))
	f.Truncated = true
	if s := f.String(); !strings.Contains(s, "1 stored objects affected (more were not read), e.g. ns/b0") {
		t.Errorf("truncated read with an object: %q", s)
	}
}
