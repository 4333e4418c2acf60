// Package placement owns putting an installation's node placement and image
// pull secrets on the pod templates of a strategy, whatever produced the
// strategy (a generator, a dump Job, a stored ConfigMap such as a real
// KubeVirt strategy).
//
// Which objects have pods comes from the kind table (kinds.Info.PodTemplate);
// which placement a workload gets comes from its role (kinds.RoleOf): the
// per-node role (kinds.RoleHandler, e.g. KubeVirt's virt-handler
// DaemonSet) gets the Workloads placement, every other workload the Infra
// placement. KubeVirt does the same when it deploys its strategy.
//
// Apply is idempotent: applying a Spec to its own result changes nothing.
package placement

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Spec is what Apply puts on the pod templates of a strategy. The zero value
// changes nothing.
type Spec struct {
	// Placement places the pods by role: Workloads for the handler role,
	// Infra for every other role. nil (or a nil member) places nothing.
	Placement *identity.Placement
	// ImagePullSecrets names Secrets added to every pod template, in
	// order, after the ones it already has (a name already present is not
	// added again).
	ImagePullSecrets []string
	// Roles maps workload names to roles for workloads without a
	// metakeys.RoleAnnotation (see kinds.RoleOf; kinds.KubeVirtRoles() for
	// KubeVirt's); a workload in neither has its kind's role.
	Roles map[string]kinds.Role
}

// IsZero reports whether the spec changes nothing.
func (s Spec) IsZero() bool {
	return s.Placement.IsZero() && len(s.ImagePullSecrets) == 0
}

// For returns the node placement of a workload: Workloads for the handler
// role, Infra for the others; nil when that placement is not set.
func (s Spec) For(obj *unstructured.Unstructured) *identity.NodePlacement {
	if s.Placement == nil {
		return nil
	}
	role := kinds.RoleOf(obj.GroupVersionKind().GroupKind(), obj.GetName(), obj.GetAnnotations()[metakeys.RoleAnnotation], s.Roles)
	if role == kinds.RoleHandler {
		return s.Placement.Workloads
	}
	return s.Placement.Infra
}

// Apply puts the spec on every object of s whose kind has a pod template in
// the kind table, in place:
//
//   - imagePullSecrets: the spec's names are appended, skipping names
//     already present (duplicates by name are removed, the first kept);
//   - nodeSelector: the placement's keys are merged in, its values win;
//   - tolerations: each of the placement's is appended unless an equal one
//     is there;
//   - affinity: the placement's is added to the pod's own (see
//     mergeAffinity): required node terms must both hold, other terms
//     are added once.
//
// It fails on a workload without a pod template at the table's path.
func Apply(s *strategy.Strategy, spec Spec) error {
	if spec.IsZero() {
		return nil
	}
	for _, obj := range s.Objects {
		if err := ApplyObject(obj, spec); err != nil {
			return err
		}
	}
	return nil
}

// ApplyObject is Apply for one object; objects of kinds without a pod
// template are left alone.
func ApplyObject(obj *unstructured.Unstructured, spec Spec) error {
	info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind())
	if info.PodTemplate == nil || spec.IsZero() {
		return nil
	}
	path := append(slices.Clone(info.PodTemplate), "spec")
	pod, found, err := unstructured.NestedMap(obj.Object, path...)
	if err != nil || !found {
		return fmt.Errorf("place %s: no pod spec at %v", strategy.RefOf(obj), path)
	}
	if err := place(pod, spec.For(obj), spec.ImagePullSecrets); err != nil {
		return fmt.Errorf("place %s: %w", strategy.RefOf(obj), err)
	}
	return unstructured.SetNestedMap(obj.Object, pod, path...)
}

// place changes one pod spec (unstructured).
func place(pod map[string]any, np *identity.NodePlacement, pullSecrets []string) error {
	if len(pullSecrets) > 0 {
		if err := addPullSecrets(pod, pullSecrets); err != nil {
			return err
		}
	}
	if np == nil {
		return nil
	}
	if len(np.NodeSelector) > 0 {
		sel, _ := pod["nodeSelector"].(map[string]any)
		if v, ok := pod["nodeSelector"]; ok && v != nil && sel == nil {
			return fmt.Errorf("nodeSelector is a %T, not a map", v)
		}
		if sel == nil {
			sel = map[string]any{}
		}
		for k, v := range np.NodeSelector {
			sel[k] = v
		}
		pod["nodeSelector"] = sel
	}
	if len(np.Tolerations) > 0 {
		if err := addTolerations(pod, np.Tolerations); err != nil {
			return err
		}
	}
	if np.Affinity != nil {
		var have corev1.Affinity
		if m, ok := pod["affinity"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &have); err != nil {
				return fmt.Errorf("affinity: %w", err)
			}
		} else if v, ok := pod["affinity"]; ok && v != nil {
			return fmt.Errorf("affinity is a %T, not an object", v)
		}
		a, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mergeAffinity(&have, np.Affinity))
		if err != nil {
			return fmt.Errorf("affinity: %w", err)
		}
		pod["affinity"] = a
	}
	return nil
}

// mergeAffinity adds a placement's affinity to a pod's, keeping the pod's
// own rules (a product's anti-affinity between its replicas, say): a node
// must satisfy both required node affinities (each of the pod's selector
// terms is combined with each of the placement's, and a term that only
// narrows another is dropped, so merging twice is merging once); every
// other term — preferred node terms, pod affinity and anti-affinity, all of
// which already add up — is added unless an equal one is there.
func mergeAffinity(pod, add *corev1.Affinity) *corev1.Affinity {
	out := pod.DeepCopy()
	if na := add.NodeAffinity; na != nil {
		if out.NodeAffinity == nil {
			out.NodeAffinity = &corev1.NodeAffinity{}
		}
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil && len(req.NodeSelectorTerms) > 0 {
			out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = andSelectors(out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, req)
		}
		out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = addOnce(out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, na.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pa := add.PodAffinity; pa != nil {
		if out.PodAffinity == nil {
			out.PodAffinity = &corev1.PodAffinity{}
		}
		out.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = addOnce(out.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, pa.RequiredDuringSchedulingIgnoredDuringExecution)
		out.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = addOnce(out.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pa := add.PodAntiAffinity; pa != nil {
		if out.PodAntiAffinity == nil {
			out.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		out.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = addOnce(out.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, pa.RequiredDuringSchedulingIgnoredDuringExecution)
		out.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = addOnce(out.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return out
}

// andSelectors returns a node selector that a node matches when it matches
// both a and b (the terms of one selector are ORed, a term's requirements
// ANDed).
func andSelectors(a, b *corev1.NodeSelector) *corev1.NodeSelector {
	if a == nil || len(a.NodeSelectorTerms) == 0 {
		return b.DeepCopy()
	}
	var terms []corev1.NodeSelectorTerm
	for _, x := range a.NodeSelectorTerms {
		for _, y := range b.NodeSelectorTerms {
			terms = append(terms, corev1.NodeSelectorTerm{
				MatchExpressions: addOnce(slices.Clone(x.MatchExpressions), y.MatchExpressions),
				MatchFields:      addOnce(slices.Clone(x.MatchFields), y.MatchFields),
			})
		}
	}
	// (X) or (X and Y) is X: drop terms that only narrow another one.
	var kept []corev1.NodeSelectorTerm
	for i, t := range terms {
		narrower := false
		for j, u := range terms {
			if i != j && covers(t, u) && (!covers(u, t) || j < i) {
				narrower = true
				break
			}
		}
		if !narrower {
			kept = append(kept, t)
		}
	}
	return &corev1.NodeSelector{NodeSelectorTerms: kept}
}

// covers reports whether term t holds every requirement of term u.
func covers(t, u corev1.NodeSelectorTerm) bool {
	has := func(list []corev1.NodeSelectorRequirement, r corev1.NodeSelectorRequirement) bool {
		return slices.ContainsFunc(list, func(x corev1.NodeSelectorRequirement) bool { return equality.Semantic.DeepEqual(x, r) })
	}
	for _, r := range u.MatchExpressions {
		if !has(t.MatchExpressions, r) {
			return false
		}
	}
	for _, r := range u.MatchFields {
		if !has(t.MatchFields, r) {
			return false
		}
	}
	return true
}

// addOnce appends the elements of add that list does not hold yet.
func addOnce[T any](list, add []T) []T {
	for _, x := range add {
		if !slices.ContainsFunc(list, func(y T) bool { return equality.Semantic.DeepEqual(x, y) }) {
			list = append(list, x)
		}
	}
	return list
}

func addPullSecrets(pod map[string]any, names []string) error {
	have, _ := pod["imagePullSecrets"].([]any)
	if v, ok := pod["imagePullSecrets"]; ok && v != nil && have == nil {
		return fmt.Errorf("imagePullSecrets is a %T, not a list", v)
	}
	seen := map[string]bool{}
	out := make([]any, 0, len(have)+len(names))
	for _, ref := range have {
		m, _ := ref.(map[string]any)
		name, _ := m["name"].(string)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, ref)
	}
	for _, name := range names {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, map[string]any{"name": name})
	}
	pod["imagePullSecrets"] = out
	return nil
}

func addTolerations(pod map[string]any, add []corev1.Toleration) error {
	have, _ := pod["tolerations"].([]any)
	if v, ok := pod["tolerations"]; ok && v != nil && have == nil {
		return fmt.Errorf("tolerations is a %T, not a list", v)
	}
	existing := make([]corev1.Toleration, 0, len(have))
	for i, t := range have {
		m, ok := t.(map[string]any)
		if !ok {
			return fmt.Errorf("toleration %d is a %T, not an object", i, t)
		}
		var tol corev1.Toleration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &tol); err != nil {
			return fmt.Errorf("toleration %d: %w", i, err)
		}
		existing = append(existing, tol)
	}
	out := slices.Clone(have)
	for _, t := range add {
		if slices.ContainsFunc(existing, func(e corev1.Toleration) bool { return equality.Semantic.DeepEqual(e, t) }) {
			continue
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&t)
		if err != nil {
			return fmt.Errorf("toleration %s: %w", t.Key, err)
		}
		out = append(out, m)
		existing = append(existing, t)
	}
	pod["tolerations"] = out
	return nil
}
