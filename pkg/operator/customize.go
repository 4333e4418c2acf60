package operator

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/placement"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// builtinKinds are the kinds a strategic merge patch may patch: client-go's
// built-in kinds, in a scheme of our own. client-go's global scheme is not
// used: a library may add to it (Helm's SDK adds CustomResourceDefinitions
// in an init function), and what a patch may do must not depend on which
// packages are linked.
var builtinKinds = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // client-go's own types: cannot fail
	}
	return s
}()

// Prepare turns a loaded strategy, whatever its source (the built-in
// product, a dump Job, a stored ConfigMap), into the one an Installation
// deploys, in place: first the placement of spec.infra and
// spec.workloads (ConfigFor's; a Configurer's configuration may leave it
// out, as KubeVirt's does) and the spec's pull secrets are put on
// every pod template (pkg/placement), then the customizeComponents patches
// are applied. Patches come last so a patch can override anything,
// placement included (KubeVirt places after patching; see docs/NOTES.md).
func Prepare(s *strategy.Strategy, in *v1alpha1.Installation) error {
	spec := placement.Spec{Placement: placementOf(&in.Spec), ImagePullSecrets: pullSecretNames(&in.Spec), Roles: kinds.KubeVirtRoles()}
	if err := placement.Apply(s, spec); err != nil {
		return err
	}
	return Customize(s, in.Spec.CustomizeComponents)
}

// Customize applies the patches of customizeComponents, in order, to every
// object of s they match (by kind and name, "*" matching any). A patch may
// be JSON or YAML. A strategic merge patch needs a kind the client-go scheme
// knows. s is changed in place.
func Customize(s *strategy.Strategy, cc *v1alpha1.CustomizeComponents) error {
	if cc == nil {
		return nil
	}
	for i, p := range cc.Patches {
		patch, err := yaml.YAMLToJSON([]byte(p.Patch))
		if err != nil {
			return fmt.Errorf("customize patch %d: %w", i, err)
		}
		for j, obj := range s.Objects {
			if (p.ResourceKind != "*" && p.ResourceKind != obj.GetKind()) || (p.ResourceName != "*" && p.ResourceName != obj.GetName()) {
				continue
			}
			patched, err := patchObject(obj, p.Type, patch)
			if err != nil {
				return fmt.Errorf("customize patch %d (%s) of %s: %w", i, p.Type, strategy.RefOf(obj), err)
			}
			s.Objects[j] = patched
		}
	}
	return nil
}

func patchObject(obj *unstructured.Unstructured, typ v1alpha1.PatchType, patch []byte) (*unstructured.Unstructured, error) {
	doc, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	var out []byte
	switch typ {
	case v1alpha1.JSONPatchType:
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, err
		}
		out, err = ops.Apply(doc)
		if err != nil {
			return nil, err
		}
	case v1alpha1.MergePatchType:
		out, err = jsonpatch.MergePatch(doc, patch)
		if err != nil {
			return nil, err
		}
	case v1alpha1.StrategicMergePatchType:
		typed, err := builtinKinds.New(obj.GroupVersionKind())
		if err != nil {
			return nil, fmt.Errorf("strategic merge patch needs a built-in kind: %w", err)
		}
		out, err = strategicpatch.StrategicMergePatch(doc, patch, typed)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown patch type %q", typ)
	}
	res := &unstructured.Unstructured{}
	if err := json.Unmarshal(out, &res.Object); err != nil {
		return nil, err
	}
	if res.GetKind() != obj.GetKind() || res.GetName() != obj.GetName() || res.GetNamespace() != obj.GetNamespace() {
		return nil, fmt.Errorf("a patch may not change kind, name or namespace")
	}
	return res, nil
}
