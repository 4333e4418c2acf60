package localcluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The real node is only for pods that ask for it. Its taint keeps most pods
// away, but a pod that tolerates every taint (`operator: Exists` without a
// key: node-exporter, CNI and monitoring agents) would land there and fail
// with ErrImagePull, since nothing is pulled on the real node — a failure
// no real cluster has. A DaemonSet's pods are placed by the DaemonSet
// controller from the pod template alone (node selector, required node
// affinity, taints), so the node has to be left out by the template:
// two MutatingAdmissionPolicies give every DaemonSet template (created or
// updated) and every Pod (created) that tolerates the real node's taint
// without choosing its node the node selector metakeys.FakeNodeLabel=true, which
// every kwok node carries and the real node does not. See
// docs/NOTES.md, "Product pods stay off the real node".

// RealNodePolicyDaemonSets and RealNodePolicyPods name the two
// MutatingAdmissionPolicies (and their bindings) of a cluster with a real
// node.
const (
	RealNodePolicyDaemonSets = "installstrategy-real-node-daemonsets"
	RealNodePolicyPods       = "installstrategy-real-node-pods"
)

// realNodeConditions are the CEL conditions under which a policy changes
// the pod spec SPEC: it tolerates the real node's taint (a toleration of
// every taint included) and chooses no node itself (no node name, no node
// selector or required node affinity on metakeys.RealNodeLabel or metakeys.FakeNodeLabel).
var realNodeConditions = []admissionregistrationv1.MatchCondition{
	{Name: "tolerates-the-real-node", Expression: `has(SPEC.tolerations) && SPEC.tolerations.exists(t,
  (!has(t.effect) || t.effect == "" || t.effect == "NoSchedule") &&
  ((!has(t.key) || t.key == "") ?
    (has(t.operator) && t.operator == "Exists") :
    (t.key == "REALTAINT" && ((has(t.operator) && t.operator == "Exists") || (has(t.value) && t.value == "true")))))`},
	{Name: "chooses-no-node", Expression: `!(has(SPEC.nodeName) && SPEC.nodeName != "") &&
!(has(SPEC.nodeSelector) && ("REALLABEL" in SPEC.nodeSelector || "FAKELABEL" in SPEC.nodeSelector)) &&
!(has(SPEC.affinity) && has(SPEC.affinity.nodeAffinity) && has(SPEC.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) &&
  SPEC.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.exists(term,
    has(term.matchExpressions) && term.matchExpressions.exists(e, e.key == "REALLABEL" || e.key == "FAKELABEL")))`},
}

// realNodeMutation adds metakeys.FakeNodeLabel=true to the node selector at PATH of
// SPEC. The node selector is an atomic map, so a JSON patch adds the one
// key (an apply configuration would replace the whole map).
const realNodeMutation = `has(SPEC.nodeSelector) ?
  [JSONPatch{op: "add", path: "PATH/nodeSelector/" + jsonpatch.escapeKey("FAKELABEL"), value: "true"}] :
  [JSONPatch{op: "add", path: "PATH/nodeSelector", value: {"FAKELABEL": "true"}}]`

// realNodePolicies returns the two policies and their bindings.
func realNodePolicies() ([]*admissionregistrationv1.MutatingAdmissionPolicy, []*admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	policy := func(name, spec, path, resource string, ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MutatingAdmissionPolicy {
		r := strings.NewReplacer("SPEC", spec, "PATH", path, "REALTAINT", metakeys.RealNodeTaint, "REALLABEL", metakeys.RealNodeLabel, "FAKELABEL", metakeys.FakeNodeLabel)
		var conds []admissionregistrationv1.MatchCondition
		for _, c := range realNodeConditions {
			conds = append(conds, admissionregistrationv1.MatchCondition{Name: c.Name, Expression: r.Replace(c.Expression)})
		}
		group := ""
		if resource == "daemonsets" {
			group = "apps"
		}
		return &admissionregistrationv1.MutatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: ops,
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}},
					}}},
				},
				MatchConditions:    conds,
				FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{
					PatchType: admissionregistrationv1.PatchTypeJSONPatch,
					JSONPatch: &admissionregistrationv1.JSONPatch{Expression: r.Replace(realNodeMutation)},
				}},
			},
		}
	}
	policies := []*admissionregistrationv1.MutatingAdmissionPolicy{
		policy(RealNodePolicyDaemonSets, "object.spec.template.spec", "/spec/template/spec", "daemonsets",
			admissionregistrationv1.Create, admissionregistrationv1.Update),
		policy(RealNodePolicyPods, "object.spec", "/spec", "pods", admissionregistrationv1.Create),
	}
	var bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	for _, p := range policies {
		bindings = append(bindings, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name},
		})
	}
	return policies, bindings
}

// keepProductsOffRealNode creates the policies and waits until the API
// server applies them: a dry-run DaemonSet and Pod that tolerate every
// taint come back with metakeys.FakeNodeLabel in their node selector.
func (u *upper) keepProductsOffRealNode(ctx context.Context) error {
	cs, err := clientFor(u.files.admin)
	if err != nil {
		return err
	}
	policies, bindings := realNodePolicies()
	for _, p := range policies {
		if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("real node: create MutatingAdmissionPolicy %s: %w", p.Name, err)
		}
	}
	for _, b := range bindings {
		if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("real node: create MutatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
	}
	err = u.poll(ctx, u.procs[KubeAPIServer], "real node: admission policies in force", func(ctx context.Context) (bool, string, error) {
		why := realNodePoliciesMissing(ctx, cs)
		return why == "", why, nil
	})
	if err != nil {
		return err
	}
	u.logf("real node: DaemonSets and pods that tolerate its taint without choosing their node get the node selector %s=true (MutatingAdmissionPolicies %s, %s)",
		metakeys.FakeNodeLabel, RealNodePolicyDaemonSets, RealNodePolicyPods)
	return nil
}

// realNodePoliciesMissing says which policy the API server does not apply
// yet ("" when both are in force), by dry-run creates.
func realNodePoliciesMissing(ctx context.Context, cs kubernetes.Interface) string {
	spec := corev1.PodSpec{
		Containers:  []corev1.Container{{Name: "probe", Image: PauseImage}},
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	labels := map[string]string{"app": "real-node-policy-probe"}
	ds, err := cs.AppsV1().DaemonSets("default").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "real-node-policy-probe"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}, dry)
	switch {
	case err != nil:
		return "dry-run DaemonSet: " + err.Error()
	case ds.Spec.Template.Spec.NodeSelector[metakeys.FakeNodeLabel] != "true":
		return "a DaemonSet that tolerates every taint is not given " + metakeys.FakeNodeLabel + "=true yet"
	}
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "real-node-policy-probe"}, Spec: spec}, dry)
	switch {
	case err != nil:
		return "dry-run Pod: " + err.Error()
	case pod.Spec.NodeSelector[metakeys.FakeNodeLabel] != "true":
		return "a Pod that tolerates every taint is not given " + metakeys.FakeNodeLabel + "=true yet"
	}
	return ""
}
