package strategy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// requirementsGroupKind is the kind of a strategy's declared preflights: an
// object of the strategy's own text (so signed with it) that the engine
// reads before its first write and never applies. At most one per strategy.
//
//	apiVersion: installstrategy.io/v1alpha1
//	kind: Requirements
//	metadata: {name: requirements}
//	spec:
//	  kubernetesVersion: ">= 1.30.0-0"      # a semver constraint
//	  apis: ["cert-manager.io/v1", "monitoring.coreos.com/v1/ServiceMonitor"]
//	  nodes:                                # each matched by one node at least
//	  - {matchLabels: {kubernetes.io/os: linux}}
//	  upgradeFrom: ">= 1.8.0-0"             # versions an upgrade may start from
var requirementsGroupKind = schema.GroupKind{Group: "installstrategy.io", Kind: "Requirements"}

// Requirements is what a strategy declares the cluster must offer before
// it is applied.
type Requirements struct {
	// KubernetesVersion is a semver constraint the API server's version
	// must meet (Masterminds/semver syntax, as Helm's Chart.yaml
	// kubeVersion; "-0" admits pre-releases and provider suffixes).
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// APIs lists group/version (or group/version/Kind; "v1" for the core
	// group) that must be served.
	APIs []string `json:"apis,omitempty"`
	// Nodes lists label sets; each must be carried by one node at least.
	Nodes []NodeRequirement `json:"nodes,omitempty"`
	// UpgradeFrom is a semver constraint an installed version must meet
	// for an upgrade to this strategy (OLM's skipRange); a fresh install
	// is not bound by it.
	UpgradeFrom string `json:"upgradeFrom,omitempty"`
}

// NodeRequirement is a set of labels one node must carry.
type NodeRequirement struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// Requirements returns the strategy's declared preflights and the strategy
// without its documents that are not applied (what is applied): its
// Requirements object and its Notes (NotesGroupKind). A strategy without
// either returns nil and s itself.
func (s *Strategy) Requirements() (*Requirements, *Strategy, error) {
	var (
		found *unstructured.Unstructured
		rest  []*unstructured.Unstructured
		notes bool
	)
	for _, o := range s.Objects {
		if applied(o) {
			rest = append(rest, o)
			continue
		}
		if o.GroupVersionKind().GroupKind() == NotesGroupKind {
			notes = true
			continue
		}
		if found != nil {
			return nil, nil, fmt.Errorf("requirements: the strategy holds two (%s and %s); one at most", found.GetName(), o.GetName())
		}
		found = o
	}
	if found == nil {
		if notes {
			return nil, &Strategy{Identity: s.Identity, Objects: rest}, nil
		}
		return nil, s, nil
	}
	req, err := parseRequirements(found)
	if err != nil {
		return nil, nil, fmt.Errorf("requirements %s: %w", found.GetName(), err)
	}
	return req, &Strategy{Identity: s.Identity, Objects: rest}, nil
}

func parseRequirements(o *unstructured.Unstructured) (*Requirements, error) {
	if v := o.GroupVersionKind().Version; v != "v1alpha1" {
		return nil, fmt.Errorf("apiVersion %s: only installstrategy.io/v1alpha1 is known", o.GetAPIVersion())
	}
	spec, ok := o.Object["spec"]
	if !ok {
		return &Requirements{}, nil
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	var r Requirements
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	for name, c := range map[string]string{"kubernetesVersion": r.KubernetesVersion, "upgradeFrom": r.UpgradeFrom} {
		if c == "" {
			continue
		}
		if _, err := semver.NewConstraint(c); err != nil {
			return nil, fmt.Errorf("spec.%s %q: %w", name, c, err)
		}
	}
	for i, api := range r.APIs {
		if _, _, err := r.api(i); err != nil {
			return nil, fmt.Errorf("spec.apis[%d] %q: %w", i, api, err)
		}
	}
	for i, n := range r.Nodes {
		if len(n.MatchLabels) == 0 {
			return nil, fmt.Errorf("spec.nodes[%d]: matchLabels is empty", i)
		}
	}
	return &r, nil
}

// api splits APIs[i] into its group/version and kind ("" when it names none).
func (r *Requirements) api(i int) (schema.GroupVersion, string, error) {
	parts := strings.Split(r.APIs[i], "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return schema.GroupVersion{Version: parts[0]}, "", nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		if parts[0] == "v1" {
			return schema.GroupVersion{Version: "v1"}, parts[1], nil
		}
		return schema.GroupVersion{Group: parts[0], Version: parts[1]}, "", nil
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return schema.GroupVersion{Group: parts[0], Version: parts[1]}, parts[2], nil
	}
	return schema.GroupVersion{}, "", fmt.Errorf("want group/version or group/version/Kind")
}

// API returns the group/version and kind ("" for any) of APIs[i].
func (r *Requirements) API(i int) (schema.GroupVersion, string) {
	gv, kind, _ := r.api(i)
	return gv, kind
}

// Check returns what the cluster lacks: serverVersion is the API server's
// git version (v1.33.1, v1.30.2+k3s1…); served says whether a group/version
// (and kind, when not "") is served; nodeWith whether a node carries the
// labels; installed is the version installed now ("" on a fresh install)
// and target the strategy's (a re-apply of the installed version is not an
// upgrade).
// Each unmet requirement is one line; none means the strategy may go on.
func (r *Requirements) Check(serverVersion string, served func(gv schema.GroupVersion, kind string) (bool, error), nodeWith func(labels map[string]string) (bool, error), installed, target string) ([]string, error) {
	var unmet []string
	if r.KubernetesVersion != "" {
		unmet = appendUnmet(unmet, "kubernetesVersion", r.KubernetesVersion, serverVersion,
			"the API server's version %q is not a semantic version", "the API server is %s")
	}
	for i := range r.APIs {
		gv, kind := r.API(i)
		ok, err := served(gv, kind)
		if err != nil {
			return nil, fmt.Errorf("apis %s: %w", r.APIs[i], err)
		}
		if !ok {
			unmet = append(unmet, fmt.Sprintf("apis: %s is not served", r.APIs[i]))
		}
	}
	for _, n := range r.Nodes {
		ok, err := nodeWith(n.MatchLabels)
		if err != nil {
			return nil, fmt.Errorf("nodes %v: %w", n.MatchLabels, err)
		}
		if !ok {
			unmet = append(unmet, fmt.Sprintf("nodes: no node carries %s", labels.Set(n.MatchLabels).String()))
		}
	}
	if r.UpgradeFrom != "" && installed != "" && installed != target {
		unmet = appendUnmet(unmet, "upgradeFrom", r.UpgradeFrom, installed,
			"the installed version %q is not a semantic version", "version %s is installed; upgrade through a version this one may follow")
	}
	return unmet, nil
}

// appendUnmet adds a line to unmet when version does not meet constraint
// (parsed already by parseRequirements): notSemver or outside, each
// formatted with version, after the field and its constraint.
func appendUnmet(unmet []string, field, constraint, version, notSemver, outside string) []string {
	c, _ := semver.NewConstraint(constraint)
	v, err := semver.NewVersion(version)
	switch {
	case err != nil:
		return append(unmet, fmt.Sprintf("%s %q: "+notSemver, field, constraint, version))
	case !c.Check(v):
		return append(unmet, fmt.Sprintf("%s %q: "+outside, field, constraint, version))
	}
	return unmet
}
