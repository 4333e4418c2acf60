package testenv

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/certs"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// AsVirtOperator returns the objects of a KubeVirt strategy as KubeVirt
// v1.9.0's virt-operator writes them for a KubeVirt CR with an empty spec
// (read from pkg/virt-operator/resource/apply at the v1.9.0 tag: reconcile.go
// injectOperatorMetadata, apps.go syncDeployment and syncDaemonSet,
// placement.InjectPlacementMetadata, patches.go, pkg/util/tls), with
// certificates issued by a CA of its own in the TLS Secrets and that CA as
// the bundle of the webhooks, APIServices and CA ConfigMaps:
//
//   - every object: labels app.kubernetes.io/managed-by=virt-operator and
//     app.kubernetes.io/component=kubevirt, annotations
//     kubevirt.io/install-strategy-{version,registry,identifier} and
//     kubevirt.io/generation; Deployments, DaemonSets, Services, webhooks,
//     APIServices and certificate Secrets also kubevirt.io/customizer-identifier;
//   - pod templates: the same labels and identity annotations (no
//     generation);
//   - Deployments: the default infra placement
//     (RequireControlPlanePreferNonWorker: nodeSelector kubernetes.io/os=linux,
//     a required control-plane node affinity, a preference for non-workers,
//     control-plane tolerations appended); the virt-template Deployments
//     get "--tls-min-version VersionTLS12" appended to their container's args;
//   - DaemonSets: nodeSelector kubernetes.io/os=linux; one labelled
//     kubevirt.io/supports-migration-cn-types=true (virt-handler) gets
//     "--migration-cn-types migration" appended and its
//     kubevirt-virt-handler-certs volume and mount removed, as at its creation.
//
// Unlike virt-operator with an empty KubeVirt spec, it writes every object
// of the strategy: the real one leaves out virt-synchronization-controller
// and the virt-launcher-pod-mutator webhook (a run of the real binary
// showed it), which a takeover then creates. s is not modified.
func AsVirtOperator(tb testing.TB, s *strategy.Strategy) []*unstructured.Unstructured {
	tb.Helper()
	now := time.Now()
	ca, err := certs.NewCA("kubevirt.io@"+fmt.Sprint(now.Unix()), now, 7*24*time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	bundle := base64.StdEncoding.EncodeToString(ca.Cert)
	id := s.Identity
	var out []*unstructured.Unstructured
	for _, o := range s.Objects {
		u := o.DeepCopy()
		kind := u.GetKind()
		customized := slices.Contains([]string{"Deployment", "DaemonSet", "Service", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService"}, kind) ||
			(kind == "Secret" && u.Object["type"] == "kubernetes.io/tls")
		injectVirtOperatorMetadata(u, nil, id, true, customized)
		switch kind {
		case "Deployment", "DaemonSet":
			injectVirtOperatorMetadata(u, []string{"spec", "template"}, id, false, false)
			pod, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
			if kind == "Deployment" {
				virtOperatorInfraPlacement(pod)
				if strings.HasPrefix(u.GetName(), "virt-template-") {
					appendArgs(pod, "--tls-min-version", "VersionTLS12")
				}
			} else {
				setDefault(pod, "nodeSelector", "kubernetes.io/os", "linux")
				if u.GetLabels()[metakeys.KubeVirtMigrationCNTypesLabel] == "true" {
					appendArgs(pod, "--migration-cn-types", "migration")
					unattachSecret(pod, "kubevirt-virt-handler-certs")
				}
			}
			_ = unstructured.SetNestedMap(u.Object, pod, "spec", "template", "spec")
		case "Secret":
			if u.Object["type"] != "kubernetes.io/tls" {
				break
			}
			pair := ca
			if !strings.HasSuffix(u.GetName(), "-ca") {
				name := strings.TrimSuffix(strings.TrimPrefix(u.GetName(), "kubevirt-"), "-certs")
				if u.GetName() == "kubevirt-operator-certs" {
					// virt-operator's own (components.VirtOperatorServiceName).
					name = "kubevirt-operator-webhook"
				}
				if pair, err = certs.NewServing(ca, certs.ServiceDNSNames(name, u.GetNamespace()), now, 24*time.Hour); err != nil {
					tb.Fatal(err)
				}
			}
			u.Object["data"] = map[string]any{
				certs.CertKey: base64.StdEncoding.EncodeToString(pair.Cert),
				certs.KeyKey:  base64.StdEncoding.EncodeToString(pair.Key),
			}
		case "ConfigMap":
			if strings.HasSuffix(u.GetName(), "-ca") {
				u.Object["data"] = map[string]any{"ca-bundle": string(ca.Cert)}
			}
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				_ = unstructured.SetNestedField(h.(map[string]any), bundle, "clientConfig", "caBundle")
			}
			_ = unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
		case "APIService":
			_ = unstructured.SetNestedField(u.Object, bundle, "spec", "caBundle")
		}
		out = append(out, u)
	}
	return out
}

// CreateAsVirtOperator creates the objects of AsVirtOperator with
// create (not server-side apply) under virt-operator's field manager, in
// the order virt-operator does (CRDs first, established before anything
// else; webhooks and APIServices last), skipping kinds the cluster does not
// serve, into the strategy's namespace (created when absent, as
// virt-operator's own manifest does), and waits until every Deployment and
// DaemonSet is rolled out.
// At the end of the test, what no installation took over is deleted
// (DeleteUnowned), before the cleanups registered earlier run.
func (e *Env) CreateAsVirtOperator(ctx context.Context, t testing.TB, s *strategy.Strategy) []*unstructured.Unstructured {
	t.Helper()
	objs := AsVirtOperator(t, s)
	var created []*unstructured.Unstructured
	t.Cleanup(func() { e.DeleteUnowned(context.WithoutCancel(ctx), t, created) })
	// The namespace comes with virt-operator's own manifest, before it runs.
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			break
		}
	}
	rank := func(u *unstructured.Unstructured) int {
		switch u.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService":
			return 3
		}
		return 2
	}
	for pass := 0; pass <= 3; pass++ {
		mapper, err := e.Mapper()
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if rank(u) != pass {
				continue
			}
			m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
			if meta.IsNoMatchError(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			ri := e.Dynamic.Resource(m.Resource)
			var res *unstructured.Unstructured
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				res, err = ri.Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{FieldManager: metakeys.KubeVirtFieldManager})
			} else {
				res, err = ri.Create(ctx, u, metav1.CreateOptions{FieldManager: metakeys.KubeVirtFieldManager})
			}
			if apierrors.IsAlreadyExists(err) && u.GetKind() == "ConfigMap" {
				continue // the CA ConfigMaps are in the strategy twice
			}
			if err != nil {
				t.Fatalf("create %s as virt-operator: %v", strategy.RefOf(u), err)
			}
			created = append(created, res)
			if u.GetKind() == "CustomResourceDefinition" {
				e.WaitCRDEstablished(ctx, t, u.GetName())
			}
		}
	}
	for _, u := range created {
		switch u.GetKind() {
		case "Deployment":
			e.WaitDeploymentRolledOut(ctx, t, u.GetNamespace(), u.GetName())
		case "DaemonSet":
			e.WaitDaemonSetRolledOut(ctx, t, u.GetNamespace(), u.GetName())
		}
	}
	return created
}

// injectVirtOperatorMetadata is virt-operator's injectOperatorMetadata on
// the metadata at path (nil: the object's own).
func injectVirtOperatorMetadata(u *unstructured.Unstructured, path []string, id strategy.Identity, generation, customized bool) {
	lp := append(slices.Clone(path), "metadata", "labels")
	labels, _, _ := unstructured.NestedStringMap(u.Object, lp...)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[metakeys.AppComponentLabel] = "kubevirt"
	labels[metakeys.ManagedByLabel] = metakeys.KubeVirtManagedBy
	_ = unstructured.SetNestedStringMap(u.Object, labels, lp...)
	ap := append(slices.Clone(path), "metadata", "annotations")
	ann, _, _ := unstructured.NestedStringMap(u.Object, ap...)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[metakeys.KubeVirtVersionAnnotation] = id.Version
	ann[metakeys.KubeVirtRegistryAnnotation] = id.Registry
	ann[metakeys.KubeVirtIdentifierAnnotation] = id.Identifier
	if generation {
		ann[metakeys.KubeVirtGenerationAnnotation] = "1"
	}
	if customized {
		// The hash of an empty customizeComponents.
		ann[metakeys.KubeVirtCustomizerAnnotation] = "bf21a9e8fbc5a3846fb05b4fa0859e0917b2202f"
	}
	_ = unstructured.SetNestedStringMap(u.Object, ann, ap...)
}

// virtOperatorInfraPlacement is InjectPlacementMetadata with
// RequireControlPlanePreferNonWorker and no NodePlacement in the CR.
func virtOperatorInfraPlacement(pod map[string]any) {
	setDefault(pod, "nodeSelector", "kubernetes.io/os", "linux")
	exists := func(key string) map[string]any {
		return map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": "Exists"}}}
	}
	required := []any{exists("node-role.kubernetes.io/control-plane"), exists("node-role.kubernetes.io/master")}
	preferred := []any{map[string]any{"weight": int64(100), "preference": map[string]any{
		"matchExpressions": []any{map[string]any{"key": "node-role.kubernetes.io/worker", "operator": "DoesNotExist"}},
	}}}
	aff, _ := pod["affinity"].(map[string]any)
	if aff == nil {
		aff = map[string]any{}
	}
	na, _ := aff["nodeAffinity"].(map[string]any)
	if na == nil {
		na = map[string]any{}
	}
	req, _ := na["requiredDuringSchedulingIgnoredDuringExecution"].(map[string]any)
	if req == nil {
		req = map[string]any{}
	}
	terms, _ := req["nodeSelectorTerms"].([]any)
	req["nodeSelectorTerms"] = append(terms, required...)
	na["requiredDuringSchedulingIgnoredDuringExecution"] = req
	pref, _ := na["preferredDuringSchedulingIgnoredDuringExecution"].([]any)
	na["preferredDuringSchedulingIgnoredDuringExecution"] = append(pref, preferred...)
	aff["nodeAffinity"] = na
	pod["affinity"] = aff
	tols, _ := pod["tolerations"].([]any)
	for _, key := range []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"} {
		tols = append(tols, map[string]any{"key": key, "operator": "Exists", "effect": "NoSchedule"})
	}
	pod["tolerations"] = tols
}

func setDefault(pod map[string]any, field, key, value string) {
	m, _ := pod[field].(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	if _, ok := m[key]; !ok {
		m[key] = value
	}
	pod[field] = m
}

func appendArgs(pod map[string]any, args ...string) {
	containers, _ := pod["containers"].([]any)
	c := containers[0].(map[string]any)
	have, _ := c["args"].([]any)
	for _, a := range args {
		have = append(have, a)
	}
	c["args"] = have
}

// unattachSecret is virt-operator's unattachCertificateSecret: the volume
// and the first container's mount of it go.
func unattachSecret(pod map[string]any, name string) {
	vols, _ := pod["volumes"].([]any)
	pod["volumes"] = slices.DeleteFunc(slices.Clone(vols), func(v any) bool { return v.(map[string]any)["name"] == name })
	containers, _ := pod["containers"].([]any)
	c := containers[0].(map[string]any)
	mounts, _ := c["volumeMounts"].([]any)
	c["volumeMounts"] = slices.DeleteFunc(slices.Clone(mounts), func(v any) bool { return v.(map[string]any)["name"] == name })
}

// DeleteUnowned deletes the objects of created (as CreateAsVirtOperator
// returned them) that still exist with the same UID and still carry
// virt-operator's managed-by label: what no installation took over.
func (e *Env) DeleteUnowned(ctx context.Context, t testing.TB, created []*unstructured.Unstructured) {
	t.Helper()
	mapper, err := e.Mapper()
	if err != nil {
		t.Error(err)
		return
	}
	for _, u := range created {
		live, err := e.Live(ctx, mapper, strategy.RefOf(u))
		if err != nil {
			t.Error(err)
			continue
		}
		if live == nil || live.GetUID() != u.GetUID() || live.GetLabels()[metakeys.ManagedByLabel] != metakeys.KubeVirtManagedBy {
			continue
		}
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Error(err)
			continue
		}
		uid := u.GetUID()
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
		ri := e.Dynamic.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			err = ri.Namespace(u.GetNamespace()).Delete(ctx, u.GetName(), opts)
		} else {
			err = ri.Delete(ctx, u.GetName(), opts)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", strategy.RefOf(u), err)
		}
	}
}
