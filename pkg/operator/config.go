package operator

import (
	"strings"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Additional properties of the deployment configuration that the controller
// copies from an Installation's spec (besides generate.ImagePullPolicyProperty).
const (
	// ImagePullSecretsProperty holds the spec's pull secret names, comma
	// separated, in order.
	ImagePullSecretsProperty = "ImagePullSecrets"
	// CustomizeComponentsProperty holds the digest of the spec's
	// customizeComponents patches (v1alpha1.CustomizeComponents.Identifier).
	CustomizeComponentsProperty = "CustomizeComponents"
)

// Defaults are what an Installation gets for the fields it leaves empty.
type Defaults struct {
	// Version is the operator's own version; "" means the newest sample
	// version.
	Version string
	// Registry is the operator's own registry; "" means DefaultRegistry.
	Registry string
}

// DefaultRegistry is the registry of an Installation that names none, when
// the operator was not told its own.
const DefaultRegistry = "quay.io/installstrategy"

func (d Defaults) version() string {
	if d.Version != "" {
		return d.Version
	}
	return generate.SampleVersions[len(generate.SampleVersions)-1]
}

func (d Defaults) registry() string {
	if d.Registry != "" {
		return d.Registry
	}
	return DefaultRegistry
}

// ConfigFor maps an Installation's spec onto the deployment configuration
// of its product: the install namespace is the Installation's namespace;
// pull policy and secrets and the customizeComponents digest are additional
// properties; infra and workloads node selectors, tolerations and
// affinities are the placement.
func ConfigFor(in *v1alpha1.Installation, d Defaults) (*identity.Config, error) {
	spec := &in.Spec
	cfg := &identity.Config{
		Namespace:   in.Namespace,
		Registry:    spec.Registry,
		ImagePrefix: spec.ImagePrefix,
		Version:     spec.Version,
	}
	if cfg.Registry == "" {
		cfg.Registry = d.registry()
	}
	if cfg.Version == "" {
		cfg.Version = d.version()
	}
	props := map[string]string{}
	if p := spec.ImagePullPolicy; p != "" {
		props[generate.ImagePullPolicyProperty] = string(p)
	}
	if names := pullSecretNames(spec); len(names) > 0 {
		props[ImagePullSecretsProperty] = strings.Join(names, ",")
	}
	if id := spec.CustomizeComponents.Identifier(); id != "" {
		props[CustomizeComponentsProperty] = id
	}
	if len(props) > 0 {
		cfg.AdditionalProperties = props
	}
	cfg.Placement = placementOf(spec)
	return cfg, nil
}

// pullSecretNames returns the names of the spec's pull secrets, in order.
func pullSecretNames(spec *v1alpha1.InstallationSpec) []string {
	names := make([]string, 0, len(spec.ImagePullSecrets))
	for _, s := range spec.ImagePullSecrets {
		names = append(names, s.Name)
	}
	return names
}

// placementOf is the spec's infra and workloads placement, nil when it
// has none.
func placementOf(spec *v1alpha1.InstallationSpec) *identity.Placement {
	p := &identity.Placement{Infra: nodePlacement(spec.Infra), Workloads: nodePlacement(spec.Workloads)}
	if p.IsZero() {
		return nil
	}
	return p
}

func nodePlacement(p *v1alpha1.NodePlacement) *identity.NodePlacement {
	if p == nil {
		return nil
	}
	np := &identity.NodePlacement{NodeSelector: p.NodeSelector, Tolerations: p.Tolerations, Affinity: p.Affinity}
	if np.IsZero() {
		return nil
	}
	return np
}

// Owner returns the installation identity of an Installation: its labels
// mark the objects it applies, its inventory lists them.
func Owner(in *v1alpha1.Installation) inventory.Owner {
	return inventory.Owner{Namespace: in.Namespace, Name: in.Name, Kind: inventory.KindInstallation}
}

// observedIdentity is the identity an Installation's status says is
// deployed.
func observedIdentity(in *v1alpha1.Installation) strategy.Identity {
	return strategy.Identity{Version: in.Status.ObservedVersion, Registry: in.Status.ObservedRegistry, Identifier: in.Status.ObservedIdentifier}
}

// targetIdentity is the identity an Installation's status says is being
// deployed.
func targetIdentity(in *v1alpha1.Installation) strategy.Identity {
	return strategy.Identity{Version: in.Status.TargetVersion, Registry: in.Status.TargetRegistry, Identifier: in.Status.TargetIdentifier}
}
