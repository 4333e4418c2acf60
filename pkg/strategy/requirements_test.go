package strategy_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func requirementsObject(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "installstrategy.io/v1alpha1", "kind": "Requirements",
		"metadata": map[string]any{"name": "requirements"}, "spec": spec}}
}

func configMap(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "ns"}}}
}

// The declaration leaves the strategy that is applied, and is read as
// written; a malformed one is an error naming the field.
func TestRequirementsParse(t *testing.T) {
	s := &strategy.Strategy{Objects: []*unstructured.Unstructured{configMap("a"), requirementsObject(map[string]any{
		"kubernetesVersion": ">= 1.30.0-0", "apis": []any{"v1", "apps/v1/Deployment", "cert-manager.io/v1"},
		"nodes": []any{map[string]any{"matchLabels": map[string]any{"kubernetes.io/os": "linux"}}}, "upgradeFrom": ">= 1.8.0"})}}
	req, rest, err := s.Requirements()
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Objects) != 1 || rest.Objects[0].GetName() != "a" || len(s.Objects) != 2 {
		t.Errorf("applied objects %d, the caller's %d", len(rest.Objects), len(s.Objects))
	}
	want := &strategy.Requirements{KubernetesVersion: ">= 1.30.0-0", APIs: []string{"v1", "apps/v1/Deployment", "cert-manager.io/v1"},
		Nodes: []strategy.NodeRequirement{{MatchLabels: map[string]string{"kubernetes.io/os": "linux"}}}, UpgradeFrom: ">= 1.8.0"}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("got %+v, want %+v", req, want)
	}
	apis := []struct {
		gv   schema.GroupVersion
		kind string
	}{{schema.GroupVersion{Version: "v1"}, ""}, {schema.GroupVersion{Group: "apps", Version: "v1"}, "Deployment"}, {schema.GroupVersion{Group: "cert-manager.io", Version: "v1"}, ""}}
	for i, w := range apis {
		if gv, kind := req.API(i); gv != w.gv || kind != w.kind {
			t.Errorf("apis[%d]: %v %q, want %v %q", i, gv, kind, w.gv, w.kind)
		}
	}

	none := &strategy.Strategy{Objects: []*unstructured.Unstructured{configMap("a")}}
	if req, rest, err := none.Requirements(); req != nil || rest != none || err != nil {
		t.Errorf("a strategy without requirements: %v %v %v", req, rest, err)
	}

	for name, tc := range map[string]struct {
		objects []*unstructured.Unstructured
		want    string
	}{
		"unknown field":  {[]*unstructured.Unstructured{requirementsObject(map[string]any{"kubeVersion": ">=1"})}, `unknown field "kubeVersion"`},
		"bad constraint": {[]*unstructured.Unstructured{requirementsObject(map[string]any{"upgradeFrom": ">=> 1"})}, "spec.upgradeFrom"},
		"bad api":        {[]*unstructured.Unstructured{requirementsObject(map[string]any{"apis": []any{"a/b/c/d"}})}, "spec.apis[0]"},
		"empty node":     {[]*unstructured.Unstructured{requirementsObject(map[string]any{"nodes": []any{map[string]any{}}})}, "spec.nodes[0]"},
		"two":            {[]*unstructured.Unstructured{requirementsObject(nil), requirementsObject(nil)}, "two"},
		"unknown version": {[]*unstructured.Unstructured{func() *unstructured.Unstructured {
			o := requirementsObject(nil)
			o.SetAPIVersion("installstrategy.io/v2")
			return o
		}()}, "installstrategy.io/v2"},
	} {
		_, _, err := (&strategy.Strategy{Objects: tc.objects}).Requirements()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// Check says each requirement the cluster misses, one line each; a fresh
// install and a re-apply of the installed version are not upgrades.
func TestRequirementsCheck(t *testing.T) {
	req := &strategy.Requirements{KubernetesVersion: ">= 1.30.0-0", APIs: []string{"v1", "apps/v1/Deployment", "cert-manager.io/v1"},
		Nodes: []strategy.NodeRequirement{{MatchLabels: map[string]string{"gpu": "yes"}}}, UpgradeFrom: ">= 1.8.0, < 2.0.0"}
	served := func(have map[string]bool) func(schema.GroupVersion, string) (bool, error) {
		return func(gv schema.GroupVersion, kind string) (bool, error) { return have[gv.String()+"/"+kind], nil }
	}
	all := served(map[string]bool{"v1/": true, "apps/v1/Deployment": true, "cert-manager.io/v1/": true})
	nodes := func(ok bool) func(map[string]string) (bool, error) {
		return func(map[string]string) (bool, error) { return ok, nil }
	}
	for name, tc := range map[string]struct {
		version         string
		served          func(schema.GroupVersion, string) (bool, error)
		node            bool
		installed, next string
		want            []string
	}{
		"met":               {"v1.36.3", all, true, "v1.9.0", "v2.0.0", nil},
		"provider suffix":   {"v1.31.2+k3s1", all, true, "", "v2.0.0", nil},
		"fresh install":     {"v1.36.3", all, true, "", "v2.0.0", nil},
		"re-apply":          {"v1.36.3", all, true, "v2.1.0", "v2.1.0", nil},
		"old kubernetes":    {"v1.29.9", all, true, "", "v2.0.0", []string{`kubernetesVersion ">= 1.30.0-0": the API server is v1.29.9`}},
		"missing api":       {"v1.36.3", served(map[string]bool{"v1/": true, "cert-manager.io/v1/": true}), true, "", "v2.0.0", []string{"apis: apps/v1/Deployment is not served"}},
		"no node":           {"v1.36.3", all, false, "", "v2.0.0", []string{"nodes: no node carries gpu=yes"}},
		"too old to follow": {"v1.36.3", all, true, "v1.7.4", "v2.0.0", []string{`upgradeFrom ">= 1.8.0, < 2.0.0": version v1.7.4 is installed; upgrade through a version this one may follow`}},
		"not semver":        {"v1.36.3", all, true, "latest", "v2.0.0", []string{`upgradeFrom ">= 1.8.0, < 2.0.0": the installed version "latest" is not a semantic version`}},
	} {
		got, err := req.Check(tc.version, tc.served, nodes(tc.node), tc.installed, tc.next)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
	boom := errors.New("boom")
	if _, err := req.Check("v1.36.3", func(schema.GroupVersion, string) (bool, error) { return false, boom }, nodes(true), "", "v2"); !errors.Is(err, boom) {
		t.Errorf("a discovery error: %v", err)
	}
}
