package engine

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The claim check (checkClaims) over fakes of what it reads (plan.Discovery,
// metadataReader, holders): which installation holds the strategy's
// cluster-scoped objects, what is released, what is absent. The cluster
// tests of claim_test.go show the same against a real API server.

// fakeScopes answers discovery: namespaced where the object names a
// namespace, not served for the kinds in notServed.
type fakeScopes struct{ notServed map[string]bool }

func (d fakeScopes) Mapping(ref strategy.ObjectRef, _ string) (*meta.RESTMapping, error) {
	if d.notServed[ref.Kind] {
		return nil, &apply.NotServedError{Ref: ref}
	}
	if ref.Namespace != "" {
		return &meta.RESTMapping{Scope: meta.RESTScopeNamespace}, nil
	}
	return &meta.RESTMapping{Scope: meta.RESTScopeRoot}, nil
}

// fakeMetadata holds live objects by ref.
type fakeMetadata map[string]*unstructured.Unstructured

func (m fakeMetadata) GetMetadata(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return m[strategy.RefOf(obj).String()], nil
}

// fakeHolders says which installations' inventories exist.
type fakeHolders struct {
	alive map[string]bool
	err   error
}

func (h fakeHolders) Holder(_ context.Context, labels map[string]string) (inventory.Owner, bool, error) {
	o := inventory.Owner{Namespace: "ops", Name: inventory.OtherOwner(labels)[len("ops/"):], Kind: inventory.KindInstallation}
	return o, h.alive[o.Name], h.err
}

func TestCheckClaimsWithFakes(t *testing.T) {
	owner := inventory.Owner{Namespace: "app", Name: "demo", Kind: inventory.KindInstallation}
	other := func(name string) map[string]string {
		return inventory.Owner{Namespace: "ops", Name: name, Kind: inventory.KindInstallation}.Labels()
	}
	crd := defining("example.com", "Widget", "widgets")
	reader, ours, legacy, gone := obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader"), obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "ours"),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "legacy"), obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "gone")
	deploy, gadget := obj("apps/v1", "Deployment", "app", "web"), obj("example.com/v1", "Gadget", "", "g")
	objs := []*unstructured.Unstructured{crd, reader, ours, legacy, gone, deploy, gadget}
	live := func(o *unstructured.Unstructured, labels map[string]string) *unstructured.Unstructured {
		l := o.DeepCopy()
		l.SetLabels(labels)
		return l
	}
	base := fakeMetadata{}
	for o, labels := range map[*unstructured.Unstructured]map[string]string{
		reader: other("left"), ours: owner.Labels(), legacy: {metakeys.ManagedByLabel: inventory.LegacyManagedBy("ops", "old")},
		deploy: other("alive"), gadget: other("alive"),
	} {
		base[strategy.RefOf(o).String()] = live(o, labels)
	}
	claimedCRD := maps.Clone(base)
	claimedCRD[strategy.RefOf(crd).String()] = live(crd, other("alive"))
	for _, tc := range []struct {
		name     string
		live     fakeMetadata
		holders  fakeHolders
		released map[strategy.ObjectRef]string
		absent   []*unstructured.Unstructured
		claimed  *ClaimedError
		wantErr  bool
	}{{
		name:     "objects of an installation that is gone are released; ours, legacy, namespaced and unserved ones are not; absent ones are noted",
		live:     base,
		holders:  fakeHolders{alive: map[string]bool{"alive": true}},
		released: map[strategy.ObjectRef]string{strategy.RefOf(reader): "ops/left"},
		absent:   []*unstructured.Unstructured{crd, gone},
	}, {
		name:    "a cluster-scoped object of a live installation claims the strategy",
		live:    claimedCRD,
		holders: fakeHolders{alive: map[string]bool{"alive": true}},
		claimed: &ClaimedError{Holder: inventory.Owner{Namespace: "ops", Name: "alive", Kind: inventory.KindInstallation}, Refs: []strategy.ObjectRef{strategy.RefOf(crd)}},
	}, {
		name:    "an inventory that cannot be read fails the check",
		live:    base,
		holders: fakeHolders{err: errors.New("forbidden")},
		wantErr: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var probed []string
			c := claimClients{
				Discovery: fakeScopes{notServed: map[string]bool{"Gadget": true}},
				Probe: func(_ context.Context, objs []*unstructured.Unstructured) metadataReader {
					for _, o := range objs {
						probed = append(probed, strategy.RefOf(o).String())
					}
					return tc.live
				},
				Holders: tc.holders,
			}
			released, absent, err := checkClaims(t.Context(), c, owner, objs)
			var claimed *ClaimedError
			switch {
			case tc.claimed != nil:
				if !errors.As(err, &claimed) || !reflect.DeepEqual(claimed, tc.claimed) {
					t.Fatalf("error %v, want %v", err, tc.claimed)
				}
				return
			case tc.wantErr:
				if err == nil {
					t.Fatal("no error")
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			wantProbed := []string{strategy.RefOf(crd).String(), strategy.RefOf(reader).String(), strategy.RefOf(ours).String(), strategy.RefOf(legacy).String(), strategy.RefOf(gone).String()}
			if !slices.Equal(probed, wantProbed) {
				t.Errorf("probed %v, want the cluster-scoped objects of served kinds %v", probed, wantProbed)
			}
			if !reflect.DeepEqual(released, tc.released) {
				t.Errorf("released %v, want %v", released, tc.released)
			}
			want := map[strategy.ObjectRef]bool{}
			for _, o := range tc.absent {
				want[strategy.RefOf(o)] = true
			}
			if !reflect.DeepEqual(absent, want) {
				t.Errorf("absent %v, want %v", absent, want)
			}
		})
	}
}
