package plan

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// Print writes the plan as a table: one line per object with its step,
// action, reference and reason, the changed fields of updates below it in
// the reason column (the reconciler's own annotations folded into one
// "identity annotations" line), then the prune list.
func (p *Plan) Print(w io.Writer) error {
	obs := p.Observed.Version
	if obs == "" {
		obs = "nothing"
	}
	if _, err := fmt.Fprintf(w, "target %s (registry %q, identifier %q), observed %s: %s path\n", p.Target.Version, p.Target.Registry, p.Target.Identifier, obs, p.Path); err != nil {
		return err
	}
	if p.Blocked != "" {
		if _, err := fmt.Fprintf(w, "blocked: %s\n", p.Blocked); err != nil {
			return err
		}
	}
	for _, f := range p.CRDSafety {
		verdict := "refused"
		if f.Allowed {
			verdict = "allowed"
		}
		if _, err := fmt.Fprintf(w, "crd change %s: %s\n", verdict, f); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tACTION\tOBJECT\tREASON")
	line := func(step string, it Item) {
		action := string(it.Action)
		if action == "" {
			action = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", step, action, it.Ref, it.Reason)
		var identity []apply.Change
		fields := 0
		for _, c := range it.Changes {
			if _, ok := bookkeeping(c.Path); ok {
				identity = append(identity, c)
				continue
			}
			fields++
			fmt.Fprintf(tw, "\t\t\t  %s: %s -> %s\n", c.Path, short(c.Live), short(c.Desired))
		}
		if len(identity) > 0 {
			fmt.Fprintf(tw, "\t\t\t  identity annotations: %s\n", identitySummary(identity, fields > 0))
		}
	}
	hooks := func(post bool) {
		for _, hp := range p.Hooks {
			if hp.Post != post {
				continue
			}
			for _, it := range hp.Hooks {
				if hp.Skipped != "" {
					it.Action, it.Reason = "-", it.Reason+"; "+hp.Skipped
				} else {
					it.Action = "run"
				}
				line("hook "+string(hp.Phase), it)
			}
		}
	}
	hooks(false)
	for _, st := range p.Steps {
		for _, it := range st.Items {
			line(st.Name, it)
		}
	}
	hooks(true)
	for _, it := range p.Prune {
		line(PruneStep, it)
	}
	return tw.Flush()
}

// Counts returns how many items (prune included) have each action.
func (p *Plan) Counts() map[string]int {
	out := map[string]int{}
	for _, st := range p.Steps {
		for _, it := range st.Items {
			out[string(it.Action)]++
		}
	}
	for _, it := range p.Prune {
		out[string(it.Action)]++
	}
	return out
}

// bookkeeping reports whether a change is of one of the reconciler's own
// annotations (the target identity, the applied hash, the kept pod
// template), on the object or on its pod template, and returns the
// annotation key. The table shows those as one line; the JSON and YAML
// forms keep every change.
func bookkeeping(path string) (string, bool) {
	i := strings.LastIndex(path, ".annotations.")
	if i < 0 {
		return "", false
	}
	switch key := path[i+len(".annotations."):]; key {
	case metakeys.InstallStrategyVersionAnnotation, metakeys.InstallStrategyRegistryAnnotation, metakeys.InstallStrategyIdentifierAnnotation, metakeys.AppliedHashAnnotation, metakeys.KeptTemplateAnnotation:
		return key, true
	}
	return "", false
}

// IsBookkeeping says whether a change's path is one of the reconciler's
// own annotations (the target identity, the applied hash) rather than a
// field of the strategy.
func IsBookkeeping(path string) bool {
	_, ok := bookkeeping(path)
	return ok
}

// identitySummary says in one line what the bookkeeping changes amount to:
// the identity fields that change, else the applied hash. withFields says
// whether field changes were listed beside them.
func identitySummary(changes []apply.Change, withFields bool) string {
	names := []struct{ key, name string }{
		{metakeys.InstallStrategyVersionAnnotation, "version"},
		{metakeys.InstallStrategyRegistryAnnotation, "registry"},
		{metakeys.InstallStrategyIdentifierAnnotation, "identifier"},
	}
	var parts []string
	for _, n := range names {
		for _, c := range changes {
			if key, _ := bookkeeping(c.Path); key == n.key {
				parts = append(parts, fmt.Sprintf("%s %s -> %s", n.name, short(c.Live), short(c.Desired)))
				break
			}
		}
	}
	switch {
	case len(parts) > 0:
	case withFields:
		return "applied hash"
	default:
		// What the strategy sets is a subset of the live object, yet it
		// changed: a field it set before is gone (server-side apply
		// removes it), which a subset comparison cannot show.
		return "applied hash only (a field set before is no longer set)"
	}
	return strings.Join(parts, ", ")
}

// short renders a value on one line, at most 60 characters.
func short(v any) string {
	if v == nil {
		return "<absent>"
	}
	b, err := yaml.Marshal(v)
	s := strings.TrimSpace(string(b))
	if err != nil {
		s = fmt.Sprint(v)
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
