package engine_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// workload is what a takeover must leave alone: a Deployment's or
// DaemonSet's generation, pod template and pods.
type workload struct {
	generation int64
	template   corev1.PodTemplateSpec
	pods       []string
}

// workloads returns the Deployments and DaemonSets of a namespace by
// "Kind/name", with the UIDs of their pods (sorted).
func workloads(ctx context.Context, t *testing.T, env *testenv.Env, ns string) map[string]workload {
	t.Helper()
	out := map[string]workload{}
	pods := func(sel *metav1.LabelSelector) []string {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
		if err != nil {
			t.Fatal(err)
		}
		var uids []string
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				uids = append(uids, string(p.UID))
			}
		}
		slices.Sort(uids)
		return uids
	}
	ds, err := env.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		out["Deployment/"+d.Name] = workload{d.Generation, d.Spec.Template, pods(d.Spec.Selector)}
	}
	dss, err := env.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dss.Items {
		out["DaemonSet/"+d.Name] = workload{d.Generation, d.Spec.Template, pods(d.Spec.Selector)}
	}
	return out
}

// TestKubeVirtAdoptsVirtOperatorInstall: a KubeVirt v1.9.0 written as
// virt-operator writes it (testenv.CreateAsVirtOperator: its identity
// annotations and placement on the pod templates, its certificates, create
// under its field manager) is taken over with Adopt without replacing a
// pod: every Deployment keeps its generation, the run rolls over, and a
// plan after it changes nothing. virt-handler is the one written reason:
// virt-operator removed a volume of the strategy's template (see the
// reason checked below). Then an upgrade to a newer strategy and the
// rollback converge, and the upgrade drops what virt-operator injected.
func TestKubeVirtAdoptsVirtOperatorInstall(t *testing.T) {
	ke := newKubeVirtEnv(t)
	ctx := t.Context()
	env := ke.env
	s := kubevirtStrategy(t, "v1.9.0")
	env.CreateAsVirtOperator(ctx, t, s)
	before := workloads(ctx, t, env, "kubevirt")
	cert, err := env.Kube.CoreV1().Secrets("kubevirt").Get(ctx, "kubevirt-virt-api-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	res, err := ke.run(s, strategy.Identity{}, engine.Options{Adopt: apply.AdoptAll})
	if err != nil {
		for _, r := range res.Applied {
			if r.Ref.Kind == "Deployment" || r.Ref.Kind == "DaemonSet" {
				t.Logf("%s: %s %s", r.Ref, r.Action, r.Reason)
			}
		}
		t.Fatalf("adopt: %v", err)
	}
	if !res.RolledOver {
		t.Error("adoption not rolled over")
	}
	if n := res.Count(apply.ActionConflict); n != 0 {
		t.Errorf("%d conflicts", n)
	}
	after := workloads(ctx, t, env, "kubevirt")
	for _, r := range res.Applied {
		if r.Ref.Kind != "Deployment" && r.Ref.Kind != "DaemonSet" {
			continue
		}
		key := r.Ref.Kind + "/" + r.Ref.Name
		b, a := before[key], after[key]
		if !r.Adopted {
			t.Errorf("%s not adopted: %s %s", key, r.Action, r.Reason)
		}
		if r.Ref.Name == "virt-handler" {
			// virt-operator removed the strategy's kubevirt-virt-handler-certs
			// volume and its mount when it created virt-handler: the live
			// template does not hold the strategy's, so the strategy's is
			// written, and the reason says so.
			if a.generation == b.generation || !strings.Contains(r.Reason, "pod template written") || !strings.Contains(r.Reason, ".spec.template.spec.") {
				t.Errorf("%s: generation %d → %d, reason %q; want the strategy's template written, saying why", key, b.generation, a.generation, r.Reason)
			}
			continue
		}
		// The pods are the same, of the same template. A Deployment's
		// generation also counts changes of its annotations (the API
		// server bumps it since the controller copies them to the
		// ReplicaSets), and the takeover writes the installation's there:
		// one more, no new ReplicaSet. A DaemonSet's does not move.
		if !strings.Contains(r.Reason, "pod template kept") || !equality.Semantic.DeepEqual(a.template, b.template) || !slices.Equal(a.pods, b.pods) {
			t.Errorf("%s: template or pods replaced (%s %s)", key, r.Action, r.Reason)
		}
		if want := b.generation + map[string]int64{"Deployment": 1, "DaemonSet": 0}[r.Ref.Kind]; a.generation != want {
			t.Errorf("%s: generation %d → %d, want %d", key, b.generation, a.generation, want)
		}
	}
	// virt-operator's certificates are kept, and its CA is in the bundle.
	if now, err := env.Kube.CoreV1().Secrets("kubevirt").Get(ctx, "kubevirt-virt-api-certs", metav1.GetOptions{}); err != nil || !bytes.Equal(now.Data["tls.crt"], cert.Data["tls.crt"]) || now.Annotations[metakeys.KeptCertificateAnnotation] == "" {
		t.Errorf("virt-api's certificate was replaced at the takeover: %v", err)
	}
	// virt-operator's fields are the installation's now.
	d, err := env.Kube.AppsV1().Deployments("kubevirt").Get(ctx, "virt-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range d.ManagedFields {
		if f.Manager == metakeys.KubeVirtFieldManager {
			t.Errorf("virt-controller still has fields of %s (%s)", f.Manager, f.Operation)
		}
	}

	p, err := engine.Plan(ctx, env.Config, s, engine.Options{Observed: s.Identity, Owner: kubevirtOwner, Roles: kinds.KubeVirtRoles()})
	if err != nil {
		t.Fatalf("plan after adoption: %v", err)
	}
	for _, st := range p.Steps {
		for _, it := range st.Items {
			if it.Action != apply.ActionUnchanged && it.Action != apply.ActionSkip {
				t.Errorf("plan after adoption: %s %s %s %v", it.Ref, it.Action, it.Reason, it.Changes)
			}
		}
	}

	// Whichever object a plan prepares first, a workload that mounts only
	// kept certificates gets no certificate hash (a workload prepared
	// before its Secrets once did, and the plan wrote its template).
	for _, o := range s.Objects {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		d, err := engine.DesiredFirst(ctx, env.Config, s, engine.Options{Observed: s.Identity, Owner: kubevirtOwner, Roles: kinds.KubeVirtRoles()}, strategy.RefOf(o))
		if err != nil {
			t.Fatal(err)
		}
		if h, ok, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "annotations", metakeys.CertificateHashAnnotation); ok {
			t.Errorf("%s prepared first: certificate hash %s, though it mounts only kept certificates", strategy.RefOf(o), h)
		}
	}

	// Upgrade to a newer strategy: the templates are the strategy's, and
	// what virt-operator injected goes.
	next := kubevirtStrategy(t, "v1.9.0")
	next.Identity = strategy.Identity{Version: "v1.9.1", Registry: s.Identity.Registry, Identifier: "next-" + s.Identity.Identifier}
	for _, o := range next.Objects {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			m := c.(map[string]any)
			m["image"] = strings.ReplaceAll(m["image"].(string), ":v1.9.0", ":v1.9.1")
		}
		_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
	}
	if _, err := ke.run(next, s.Identity, engine.Options{}); err != nil {
		t.Fatalf("upgrade after adoption: %v", err)
	}
	d, err = env.Kube.AppsV1().Deployments("kubevirt").Get(ctx, "virt-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := d.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		t.Errorf("virt-controller keeps virt-operator's node affinity after the upgrade: %v", a.NodeAffinity)
	}
	if _, ok := d.Spec.Template.Annotations["kubevirt.io/install-strategy-version"]; ok || d.Annotations[metakeys.KeptTemplateAnnotation] != "" {
		t.Errorf("virt-controller's template after the upgrade: annotations %v, object annotations %v", d.Spec.Template.Annotations, d.Annotations)
	}
	if _, err := ke.run(s, next.Identity, engine.Options{}); err != nil {
		t.Fatalf("rollback after adoption: %v", err)
	}
}
