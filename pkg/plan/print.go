package plan

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Print writes the plan as a table: one line per object with its step,
// action, reference and reason, the changed fields of updates indented
// below, then the prune list.
func (p *Plan) Print(w io.Writer) error {
	obs := p.Observed.Version
	if obs == "" {
		obs = "nothing"
	}
	if _, err := fmt.Fprintf(w, "target %s (registry %q, identifier %q), observed %s: %s path\n", p.Target.Version, p.Target.Registry, p.Target.Identifier, obs, p.Path); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tACTION\tOBJECT\tREASON")
	line := func(step string, it Item) {
		action := string(it.Action)
		if action == "" {
			action = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", step, action, it.Ref, it.Reason)
		for _, c := range it.Changes {
			fmt.Fprintf(tw, "\t\t  %s\t%s -> %s\n", c.Path, short(c.Live), short(c.Desired))
		}
	}
	for _, st := range p.Steps {
		for _, it := range st.Items {
			line(st.Name, it)
		}
	}
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
