package cli

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/internal/confine"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// objectFilter is --kind and --object: which objects a diff or a plan
// looks at. The zero value keeps every object.
type objectFilter struct {
	kinds   []string
	objects []string
}

func (f *objectFilter) add(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.kinds, "kind", nil, "only objects of these kinds (Kind or Kind.group, any case; repeat or separate with commas)")
	cmd.Flags().StringSliceVar(&f.objects, "object", nil, "only objects whose name matches one of these shell patterns (NAME, or NAMESPACE/NAME; repeat or separate with commas)")
}

// keeps says whether the filter keeps ref.
func (f *objectFilter) keeps(ref strategy.ObjectRef) bool {
	if len(f.kinds) > 0 {
		ok := false
		for _, k := range f.kinds {
			ok = ok || strings.EqualFold(k, ref.Kind) || strings.EqualFold(k, ref.GroupKind().String())
		}
		if !ok {
			return false
		}
	}
	if len(f.objects) == 0 {
		return true
	}
	for _, p := range f.objects {
		name := ref.Name
		if strings.Contains(p, "/") {
			name = ref.Namespace + "/" + ref.Name
		}
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func (f *objectFilter) empty() bool { return len(f.kinds) == 0 && len(f.objects) == 0 }

// strategy returns s with only the objects the filter keeps.
func (f *objectFilter) strategy(s *strategy.Strategy) *strategy.Strategy {
	if f.empty() {
		return s
	}
	out := &strategy.Strategy{Identity: s.Identity}
	for _, o := range s.Objects {
		if f.keeps(strategy.RefOf(o)) {
			out.Objects = append(out.Objects, o)
		}
	}
	return out
}

// plan drops from p the items the filter does not keep (after it was
// observed whole, so prune still sees every object).
func (f *objectFilter) plan(p *plan.Plan) {
	if f.empty() || p == nil {
		return
	}
	keep := func(items []plan.Item) []plan.Item {
		out := items[:0]
		for _, it := range items {
			if f.keeps(it.Ref) {
				out = append(out, it)
			}
		}
		return out
	}
	steps := p.Steps[:0]
	for _, st := range p.Steps {
		if st.Items = keep(st.Items); len(st.Items) > 0 {
			steps = append(steps, st)
		}
	}
	p.Steps = steps
	p.Prune = keep(p.Prune)
}

// externalArg is what kubectl accepts as a flag of $KUBECTL_EXTERNAL_DIFF.
var externalArg = regexp.MustCompile(`^[a-zA-Z0-9-=]+$`)

// externalDiff runs $KUBECTL_EXTERNAL_DIFF as kubectl diff does: the
// objects of a and b in two folders, one file per object; its exit status
// 0 or 1 is the diff's, another is an error.
func externalDiff(ctx context.Context, streams Streams, prog string, a, b *strategy.Strategy, showSecrets bool) error {
	fields := strings.Fields(prog)
	for _, arg := range fields[1:] {
		if !externalArg.MatchString(arg) {
			return &ExitError{Code: 2, Err: fmt.Errorf("$KUBECTL_EXTERNAL_DIFF %q: argument %q: only letters, digits, - and = are allowed, as in kubectl", prog, arg)}
		}
	}
	dirs := make([]string, 2)
	for i, side := range []struct {
		prefix string
		s      *strategy.Strategy
		other  *strategy.Strategy
	}{{"FROM-", a, b}, {"TO-", b, a}} {
		dir, err := confine.Temp(side.prefix)
		if err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("external diff: %w", err)}
		}
		defer dir.Close()
		dirs[i] = dir.Path()
		other := side.other.Index()
		var names confine.Names
		for _, obj := range side.s.Objects {
			ref := strategy.RefOf(obj)
			if plan.IsSecret(ref) && !showSecrets {
				// Masked whether or not the other side holds it: a
				// Secret on one side only is shown whole by diff -N.
				if i == 0 {
					obj, _ = maskSecretPair(obj, other[ref])
				} else {
					_, obj = maskSecretPair(other[ref], obj)
				}
			}
			text, err := strategy.MarshalObject(obj)
			if err != nil {
				return &ExitError{Code: 2, Err: fmt.Errorf("external diff: serialise %s: %w", ref, err)}
			}
			gvk := obj.GroupVersionKind()
			parts := []string{gvk.Group, gvk.Version, gvk.Kind, ref.Namespace, ref.Name}
			if gvk.Group == "" {
				parts = parts[1:]
			}
			name := confine.Name(".", "", parts...)
			if err := names.Add(name, ref.String()); err != nil {
				return &ExitError{Code: 2, Err: fmt.Errorf("external diff: %w", err)}
			}
			if err := dir.WriteFile(name, text, 0o600); err != nil {
				return &ExitError{Code: 2, Err: fmt.Errorf("external diff: %w", err)}
			}
		}
	}
	cmd := exec.CommandContext(ctx, fields[0], append(fields[1:], dirs...)...)
	cmd.Stdout, cmd.Stderr = streams.Out, streams.ErrOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return &ExitError{Code: 1}
	}
	return &ExitError{Code: 2, Err: fmt.Errorf("$KUBECTL_EXTERNAL_DIFF %q: %w", prog, err)}
}
