package kinds

import "k8s.io/apimachinery/pkg/runtime/schema"

// Role is the part a workload plays in its product; the reconciler rolls
// workloads out in waves by role (pkg/plan) and placement gives the handler
// role the per-node placement (pkg/placement).
type Role string

// Roles of workloads.
const (
	// RoleAPI serves the product's API or webhooks (KubeVirt: virt-api).
	RoleAPI Role = "api"
	// RoleController runs the product's controllers (virt-controller).
	RoleController Role = "controller"
	// RoleHandler runs on every node (virt-handler).
	RoleHandler Role = "handler"
)

// KubeVirtRoles is a preset of workload names and their roles for
// strategies whose workloads carry no metakeys.RoleAnnotation: KubeVirt's
// components. The engine builds in no names; callers that install KubeVirt
// pass it (plan.Options.Roles, engine.Options.Roles,
// placement.Spec.Roles). It returns a new map on each call.
func KubeVirtRoles() map[string]Role {
	return map[string]Role{
		"virt-api":                        RoleAPI,
		"virt-controller":                 RoleController,
		"virt-operator":                   RoleController,
		"virt-exportproxy":                RoleController,
		"virt-synchronization-controller": RoleController,
		"virt-template-apiserver":         RoleController,
		"virt-template-controller":        RoleController,
		"virt-handler":                    RoleHandler,
	}
}

// RoleOf returns the role of a workload of kind gk named name: annotated
// (the value of its metakeys.RoleAnnotation) when set, else its name in
// names, else the kind's Role, else RoleController.
func RoleOf(gk schema.GroupKind, name, annotated string, names map[string]Role) Role {
	if annotated != "" {
		return Role(annotated)
	}
	if r, ok := names[name]; ok {
		return r
	}
	if info, _ := Lookup(gk); info.Role != "" {
		return info.Role
	}
	return RoleController
}

// Dials is where a kind names the Services it is served by.
type Dials struct {
	// Each is the path of the list whose every element names a Service
	// ("webhooks"); nil when the object itself names one.
	Each []string
	// Service is the path, in the element (or object), of the Service
	// reference: a map with "namespace" and "name".
	Service []string
	// CABundle is the path, in the element (or object), of the base64 CA
	// bundle that verifies the Service's serving certificate.
	CABundle []string
	// SkipVerify is the path, in the element (or object), of a flag that
	// turns verification off (no bundle is used then); nil if none.
	SkipVerify []string
}

// ServiceCall is one place of an object that dials a Service.
type ServiceCall struct {
	// Namespace and Name identify the Service.
	Namespace, Name string
	// At is the element (or the object) that names it; CABundle of the
	// kind's Dials is relative to it.
	At map[string]any
	// SkipVerify is set when the element turns verification off.
	SkipVerify bool
}

// EachServiceCall calls fn for every place of obj that dials a Service
// (a webhook with clientConfig.url, or an element that is not a map, is
// skipped); nothing for a kind that dials none. fn may change At.
func (i Info) EachServiceCall(obj map[string]any, fn func(ServiceCall)) {
	d := i.Dials
	if d == nil {
		return
	}
	at := []map[string]any{obj}
	if d.Each != nil {
		at = nil
		list, _ := nestedValue(obj, d.Each).([]any)
		for _, el := range list {
			if m, ok := el.(map[string]any); ok {
				at = append(at, m)
			}
		}
	}
	for _, m := range at {
		ref, _ := nestedValue(m, d.Service).(map[string]any)
		name, _ := ref["name"].(string)
		ns, _ := ref["namespace"].(string)
		if name == "" {
			continue
		}
		skip := false
		if d.SkipVerify != nil {
			skip, _ = nestedValue(m, d.SkipVerify).(bool)
		}
		fn(ServiceCall{Namespace: ns, Name: name, At: m, SkipVerify: skip})
	}
}

// nestedValue returns the value at path in m, nil when a step is missing
// or not a map.
func nestedValue(m map[string]any, path []string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
