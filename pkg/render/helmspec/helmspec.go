// Package helmspec holds the inputs and outputs of a chart's render
// (Options, Result, Hook) and the Renderer interface, without Helm's
// template engine: a program that has charts rendered by another process
// (the operator, through pkg/render/helmexec) links this package and not
// the engine. Linking Go's text/template makes the linker keep every
// exported method of every type in the binary, which costs the operator
// about 14 MB of resident memory (docs/NOTES.md, "Linking Helm").
//
// pkg/render renders with Helm's engine and names these types
// render.HelmOptions, render.HelmResult and so on.
package helmspec

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Options are the inputs of a chart's rendering, named after the helm
// CLI's flags. The zero value renders the chart's default values as
// `helm template` does, with the release named after the chart in
// namespace "default".
type Options struct {
	// ValuesFiles are YAML files of values merged in order (--values); a
	// later file wins.
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// Set holds --set expressions (a.b=c,d=e), applied after the files.
	Set []string `json:"set,omitempty"`
	// StringValues (--set-string), FileValues (--set-file: key=path, the
	// file's text is the value), JSONValues (--set-json) and LiteralValues
	// (--set-literal: the value as it is, commas and all) are merged with
	// the files and Set in Helm's order: files, --set-json, --set,
	// --set-string, --set-file, --set-literal (helm's pkg/cli/values).
	StringValues  []string `json:"stringValues,omitempty"`
	FileValues    []string `json:"fileValues,omitempty"`
	JSONValues    []string `json:"jsonValues,omitempty"`
	LiteralValues []string `json:"literalValues,omitempty"`
	// ReleaseName is .Release.Name; empty means the chart's name (helm
	// template's "release-name" would name every object after it).
	ReleaseName string `json:"releaseName,omitempty"`
	// Namespace is .Release.Namespace; empty means "default".
	Namespace string `json:"namespace,omitempty"`
	// KubeVersion is .Capabilities.KubeVersion (v1.36.0); empty means
	// Helm's default, which is derived from the client-go version Helm was
	// built with (v1.20.0 inside a test binary).
	KubeVersion string `json:"kubeVersion,omitempty"`
	// APIVersions are added to .Capabilities.APIVersions.
	APIVersions []string `json:"apiVersions,omitempty"`
	// PlainHTTP talks plain HTTP to an oci:// registry.
	PlainHTTP bool `json:"plainHTTP,omitempty"`
	// ChartVersion is helm's --version: the chart's version or a semver
	// range, for a chart of a repository (REPO/CHART, --repo) or a tag of
	// an oci:// reference; empty means the newest (stable) version. A
	// chart folder, archive or URL must be of that version. Where the chart
	// is found is pkg/render/helmchart's; a render ignores it.
	ChartVersion string `json:"chartVersion,omitempty"`
	// RepoURL is helm's --repo: the chart is the name of a chart in the
	// repository at this URL (its index.yaml).
	RepoURL string `json:"repoURL,omitempty"`
	// DependencyUpdate is helm's --dependency-update: a chart folder whose
	// charts/ lacks a dependency Chart.yaml names gets them downloaded
	// (helm dependency update) before the render.
	DependencyUpdate bool `json:"dependencyUpdate,omitempty"`
	// Upgrade renders as helm upgrade does: .Release.IsUpgrade is true and
	// .Release.IsInstall false. False renders an install, as helm install
	// and helm template do.
	Upgrade bool `json:"upgrade,omitempty"`
	// Revision is .Release.Revision: 0 means 1 (an install's); an upgrade
	// is revision 2 or later (the installation's last revision plus one).
	Revision int `json:"revision,omitempty"`
	// SkipCRDs leaves the chart's crds/ folder out (helm install
	// --skip-crds); CRDs among its templates stay, as with Helm.
	SkipCRDs bool `json:"skipCRDs,omitempty"`
	// SkipSchemaValidation does not check the values against the chart's
	// values.schema.json (helm --skip-schema-validation).
	SkipSchemaValidation bool `json:"skipSchemaValidation,omitempty"`
	// PostRenderer, when set, is run on the rendered objects before they
	// are sorted into hooks and objects, as Helm 4's --post-renderer
	// (a postrenderer/v1 plugin; Helm's postrenderer.PostRenderer has this
	// method). It runs a program, so it does not travel to another
	// process: pkg/render/helmexec refuses a render that has one.
	PostRenderer PostRenderer `json:"-"`
	// Lookup, when set, is what Helm's lookup function sees, as helm
	// install and helm upgrade against a cluster do; nil means lookup
	// finds nothing, as in helm template.
	Lookup *Lookup `json:"lookup,omitempty"`
}

// Lookup is the part of a cluster a chart's lookup function sees: the
// live objects of the installation the chart is rendered for, in the
// release namespace (pkg/apply's Applier.OwnedObjects reads them). They
// are data: a template reads them, nothing in them is run, and they are
// read before the render, so the render itself sends nothing to a cluster
// and needs no credentials. Lookup answers from them alone: an object
// that is not among them (another namespace, a cluster-scoped kind,
// another installation's or nobody's object) is not found.
type Lookup struct {
	// Objects are the installation's live objects, each namespaced in the
	// release namespace.
	Objects []*unstructured.Unstructured `json:"objects,omitempty"`
}

// PostRenderer rewrites a render's objects (a stream of YAML documents),
// as Helm's postrenderer.PostRenderer does.
type PostRenderer interface {
	Run(renderedManifests *bytes.Buffer) (modifiedManifests *bytes.Buffer, err error)
}

// ReleaseRevision is .Release.Revision as rendered: Revision, or 1.
func (o Options) ReleaseRevision() int {
	if o.Revision == 0 {
		return 1
	}
	return o.Revision
}

// Validate checks the inputs that need no chart and no file: the --set,
// --set-string, --set-json, --set-literal and --set-file expressions (their
// syntax; files are read when the values are merged) and the Kubernetes
// version. Helm calls it too.
func (o Options) Validate() error {
	for _, s := range o.Set {
		if _, err := strvals.Parse(s); err != nil {
			return fmt.Errorf("--set %q: %w", s, err)
		}
	}
	for _, s := range o.StringValues {
		if _, err := strvals.ParseString(s); err != nil {
			return fmt.Errorf("--set-string %q: %w", s, err)
		}
	}
	for _, s := range o.LiteralValues {
		if _, err := strvals.ParseLiteral(s); err != nil {
			return fmt.Errorf("--set-literal %q: %w", s, err)
		}
	}
	for _, s := range o.JSONValues {
		if t := strings.TrimSpace(s); t != "" && t[0] == '{' {
			var m map[string]any
			if err := json.Unmarshal([]byte(t), &m); err != nil {
				return fmt.Errorf("--set-json %q: a JSON object: %w", s, err)
			}
		} else if err := strvals.ParseJSON(s, map[string]any{}); err != nil {
			return fmt.Errorf("--set-json %q: %w", s, err)
		}
	}
	for _, s := range o.FileValues {
		noRead := func([]rune) (any, error) { return "", nil }
		if err := strvals.ParseIntoFile(s, map[string]any{}, noRead); err != nil {
			return fmt.Errorf("--set-file %q: %w", s, err)
		}
	}
	if o.KubeVersion != "" {
		if _, err := chartcommon.ParseKubeVersion(o.KubeVersion); err != nil {
			return fmt.Errorf("kube version %q: %w", o.KubeVersion, err)
		}
	}
	if o.Revision < 0 {
		return fmt.Errorf("release revision %d: want 1 or more", o.Revision)
	}
	if o.Upgrade && o.Revision < 2 {
		return fmt.Errorf("release revision %d of an upgrade: want 2 or more (an install is revision 1)", o.ReleaseRevision())
	}
	if !o.Upgrade && o.ReleaseRevision() != 1 {
		return fmt.Errorf("release revision %d of an install: an install is revision 1", o.Revision)
	}
	return nil
}

// Chart names the chart that was rendered.
type Chart struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion,omitempty"`
}

// Annotations returns the annotations naming the chart.
func (c Chart) Annotations() map[string]string {
	out := map[string]string{metakeys.HelmChartAnnotation: c.Name, metakeys.HelmChartVersionAnnotation: c.Version}
	if c.AppVersion != "" {
		out[metakeys.HelmAppVersionAnnotation] = c.AppVersion
	}
	return out
}

// HookAction is what became of a chart hook in the strategy.
type HookAction string

const (
	// HookKept: the hook's object is in the strategy with its Helm hook
	// annotations, which the reconciler runs in the hook's phases.
	HookKept HookAction = "kept"
	// HookDropped: the hook's object is not in the strategy.
	HookDropped HookAction = "dropped"
)

// Hook reports one hook of the chart and what became of it.
type Hook struct {
	// Kind and Name of the hook's object.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Path is the chart-relative template it came from.
	Path string `json:"path"`
	// Events are the hook's helm.sh/hook events.
	Events []string   `json:"events,omitempty"`
	Action HookAction `json:"action"`
	// Reason says why, for people.
	Reason string `json:"reason"`
}

func (h Hook) String() string {
	return fmt.Sprintf("hook %s/%s (%s, %s): %s: %s", h.Kind, h.Name, strings.Join(h.Events, ","), h.Path, h.Action, h.Reason)
}

// Result is a rendered chart.
type Result struct {
	// Manifests is the text helm template --include-crds prints for the
	// same inputs, less the dropped hooks: the chart's CRDs, its objects,
	// then the kept hooks, each document introduced by a --- line and a
	// "# Source:" comment.
	Manifests []byte `json:"manifests"`
	// Chart is the rendered chart's name and versions.
	Chart Chart `json:"chart"`
	// Hooks lists every hook of the chart, in Helm's order, with what was
	// done with it.
	Hooks []Hook `json:"hooks,omitempty"`
	// Notes is the chart's templates/NOTES.txt rendered, as helm install
	// prints it after NOTES: (a subchart's are left out); not part of
	// Manifests.
	Notes string `json:"notes,omitempty"`
}

// Renderer renders a packaged chart (.tgz bytes) client-only, as
// `helm template --include-crds` does, with vals on top of the chart's
// own values. name names the chart in errors; the render stops at ctx's
// deadline. pkg/render's InProcess renders in the calling process,
// pkg/render/helmexec's Renderer in a helper process.
type Renderer interface {
	RenderArchive(ctx context.Context, name string, archive []byte, vals map[string]any, opts Options) (*Result, error)
}

// RendererError is a failure of the renderer, not of the chart (its
// helper process missing, killed or answering nonsense): unlike a chart's
// render error it says nothing about the chart, so a caller that keeps
// render errors by chart retries after one of these.
type RendererError struct{ Err error }

func (e *RendererError) Error() string { return e.Err.Error() }

func (e *RendererError) Unwrap() error { return e.Err }
