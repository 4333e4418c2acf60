package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/plan"
)

// PreflightError is the server-side preflight's refusal: before its first
// write, Run asked the API server to dry-run every object of the strategy
// it would create or update, and the API server (its validation and the
// admission webhooks that take dry runs) refused these. Nothing was
// written.
type PreflightError struct {
	Refused []*plan.DryRunError
}

func (e *PreflightError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server-side preflight: the API server refuses %d object(s) of the strategy in a dry run; nothing was written", len(e.Refused))
	for _, r := range e.Refused {
		b.WriteString("\n  ")
		b.WriteString(r.Error())
	}
	return b.String()
}

// Unwrap returns each refusal.
func (e *PreflightError) Unwrap() []error {
	out := make([]error, len(e.Refused))
	for i, r := range e.Refused {
		out[i] = r
	}
	return out
}

// PreflightMode says when Run dry-runs the strategy before its first write.
type PreflightMode string

// Preflight modes.
const (
	// PreflightChanges (the zero value) dry-runs when an installation is
	// moved from one version to another (an upgrade, a downgrade, a
	// rollback): the run a refusal midway would leave a running product
	// mixed. A fresh install (a refusal midway leaves a partial install
	// that uninstall removes) and a re-apply of the installed version
	// (it writes what the API server took before) cost no dry run: on an
	// installation without a cache, the preflight reads every object of
	// the strategy once more.
	PreflightChanges PreflightMode = ""
	// PreflightAlways dry-runs before every run's first write.
	PreflightAlways PreflightMode = "always"
	// PreflightNever does not: a refusal shows at the object's write,
	// after the steps before it were written.
	PreflightNever PreflightMode = "never"
)

// ParsePreflightMode reads a mode as the plugin's --server-preflight takes
// it: "changes" (or ""), "always" or "never".
func ParsePreflightMode(s string) (PreflightMode, error) {
	switch strings.ToLower(s) {
	case "", "changes":
		return PreflightChanges, nil
	case "always":
		return PreflightAlways, nil
	case "never":
		return PreflightNever, nil
	}
	return "", fmt.Errorf("unknown server preflight mode %q (changes, always or never)", s)
}

// runs says whether the mode dry-runs a run to version target of an
// installation that exists (at version installed) or not.
func (m PreflightMode) runs(exists bool, installed, target string) bool {
	switch m {
	case PreflightAlways:
		return true
	case PreflightNever:
		return false
	}
	return exists && installed != "" && installed != target
}

// serverPreflight dry-runs, before the run's first write, every object
// the run would create or update (plan.ObserveItems with the certificates
// the run would fill in) and refuses the whole run when the API server
// refuses any of them. It cannot check an object in a namespace the run
// has yet to create, nor a custom resource of a CRD the run has yet to
// establish; those are refused, if at all, at their write, as without a
// preflight.
func (r *run) serverPreflight(ctx context.Context) error {
	if !r.opts.ServerPreflight.runs(r.inv.Exists(), r.inv.Version, r.s.Identity.Version) {
		return nil
	}
	certs, err := newCertState(ctx, r, r.opts.Certificates, true)
	if err != nil {
		return fmt.Errorf("server-side preflight: %w", err)
	}
	p := plan.Build(r.s, plan.Options{Observed: r.opts.Observed, Roles: r.opts.Roles})
	// One list per resource and namespace rather than a read per object
	// (apply.Probe), shared by the dry runs.
	a := r.a.Probe(ctx, r.s.Objects)
	err = plan.ObserveItems(ctx, a, a.DryRunner(), p, r.s, plan.ObserveOptions{Parallelism: r.opts.Parallelism, Desired: certs.desired, Inventory: r.inv})
	if err == nil {
		return nil
	}
	refusal := &PreflightError{}
	var other []error
	for _, e := range flatten(err) {
		var d *plan.DryRunError
		if errors.As(e, &d) {
			refusal.Refused = append(refusal.Refused, d)
		} else {
			other = append(other, e)
		}
	}
	if len(other) > 0 {
		return fmt.Errorf("server-side preflight: %w", errors.Join(other...))
	}
	return refusal
}

// flatten lists the errors a joined error holds (itself when it is not).
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// RequirementsError is the refusal of a strategy whose declared
// requirements (strategy.Requirements) the cluster does not meet. Nothing
// was written.
type RequirementsError struct {
	Unmet []string
}

func (e *RequirementsError) Error() string {
	return "requirements of the strategy not met; nothing was written:\n  " + strings.Join(e.Unmet, "\n  ")
}

// declaredPreflight refuses the run when the cluster does not meet what the
// strategy declares it needs.
func (r *run) declaredPreflight(ctx context.Context) error {
	unmet, err := r.unmet(ctx)
	if err != nil {
		return err
	}
	if len(unmet) > 0 {
		return &RequirementsError{Unmet: unmet}
	}
	return nil
}

// unmet checks the strategy's declared requirements against the cluster:
// the API server's version and discovery, one node list per label set
// (at most one node read each).
func (r *run) unmet(ctx context.Context) ([]string, error) {
	if r.req == nil {
		return nil, nil
	}
	disc := r.kube.Discovery()
	info, err := disc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("requirements: server version: %w", err)
	}
	served := func(gv schema.GroupVersion, kind string) (bool, error) {
		list, err := disc.ServerResourcesForGroupVersion(gv.String())
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if kind == "" {
			return true, nil
		}
		for _, res := range list.APIResources {
			if res.Kind == kind && !strings.Contains(res.Name, "/") {
				return true, nil
			}
		}
		return false, nil
	}
	nodeWith := func(set map[string]string) (bool, error) {
		nodes, err := r.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set(set).String(), Limit: 1})
		if err != nil {
			return false, err
		}
		return len(nodes.Items) > 0, nil
	}
	unmet, err := r.req.Check(info.GitVersion, served, nodeWith, r.opts.Observed.Version, r.s.Identity.Version)
	if err != nil {
		return nil, fmt.Errorf("requirements: %w", err)
	}
	return unmet, nil
}
