package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Change lists how two strategies differ.
type Change struct {
	From      strategy.Identity    `json:"from"`
	To        strategy.Identity    `json:"to"`
	Added     []strategy.ObjectRef `json:"added"`
	Removed   []strategy.ObjectRef `json:"removed"`
	Changed   []strategy.ObjectRef `json:"changed"`
	Unchanged int                  `json:"unchanged"`
	// Summary is what matters first: restarts, images, CRD schemas,
	// RBAC widening, and the changes grouped.
	Summary *Summary `json:"summary,omitempty"`
	// diffs holds the unified diff of each changed object.
	diffs map[strategy.ObjectRef]string
}

// Empty reports whether the strategies hold the same objects.
func (c *Change) Empty() bool { return len(c.Added)+len(c.Removed)+len(c.Changed) == 0 }

// diffStrategies compares objects by reference, and changed objects by their
// canonical serialised form.
// Unless showSecrets, the values of Secrets' data and stringData are masked
// in the diff of a changed Secret (see maskSecretPair).
func diffStrategies(a, b *strategy.Strategy, nameA, nameB string, showSecrets bool) (*Change, error) {
	c := &Change{From: a.Identity, To: b.Identity, diffs: map[strategy.ObjectRef]string{},
		Added: []strategy.ObjectRef{}, Removed: []strategy.ObjectRef{}, Changed: []strategy.ObjectRef{}}
	ia, ib := a.Index(), b.Index()
	for ref, oa := range ia {
		ob, ok := ib[ref]
		if !ok {
			c.Removed = append(c.Removed, ref)
			continue
		}
		ya, err := strategy.MarshalObject(oa)
		if err != nil {
			return nil, fmt.Errorf("serialise %s: %w", ref, err)
		}
		yb, err := strategy.MarshalObject(ob)
		if err != nil {
			return nil, fmt.Errorf("serialise %s: %w", ref, err)
		}
		if bytes.Equal(ya, yb) {
			c.Unchanged++
			continue
		}
		c.Changed = append(c.Changed, ref)
		if plan.IsSecret(ref) && !showSecrets {
			ma, mb := maskSecretPair(oa, ob)
			if ya, err = strategy.MarshalObject(ma); err != nil {
				return nil, fmt.Errorf("serialise %s: %w", ref, err)
			}
			if yb, err = strategy.MarshalObject(mb); err != nil {
				return nil, fmt.Errorf("serialise %s: %w", ref, err)
			}
		}
		text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(ya)), B: difflib.SplitLines(string(yb)),
			FromFile: nameA + "/" + ref.String(), ToFile: nameB + "/" + ref.String(), Context: 3,
		})
		if err != nil {
			return nil, err
		}
		c.diffs[ref] = text
	}
	for ref := range ib {
		if _, ok := ia[ref]; !ok {
			c.Added = append(c.Added, ref)
		}
	}
	for _, l := range [][]strategy.ObjectRef{c.Added, c.Removed, c.Changed} {
		sort.Slice(l, func(i, j int) bool { return l[i].Less(l[j]) })
	}
	c.Summary = summarise(a, b, c, showSecrets)
	return c, nil
}

const diffLong = `Compare two strategies (files, standard input, or cm/NAME for a strategy
ConfigMap in the cluster, in any mix): objects are matched by kind, namespace and
name and compared in canonical form, so formatting and key order never count as
changes. When a file holds several strategy ConfigMaps (kubectl get cm -o yaml),
--from-name and --to-name pick them; one FILE with both compares two of its own.

With --live, compare one strategy with the objects in the cluster: what is
missing, which fields drifted (a field-level diff of what the strategy sets,
ignoring fields the server fills in), and which objects the installation
(--name, in -n) applied that the strategy no longer holds (extra: what apply
would prune; what it would keep, such as CRDs without --prune-crds, is shown
as kept and is not a difference). Nothing is written.

Secret values are never printed from the cluster: a drifted Secret key shows its
sizes ("(secret, 12 bytes)"). In the diff of two strategies, a changed Secret's
data and stringData values are masked ("***", "*** (before, 12 bytes)") unless
--show-secrets.

The text output leads with what matters: the workloads that will restart and
why (their pod template changes), image changes, CRD schema changes (versions
added or removed, schemas, served and storage) and RBAC widening (permissions a
role gains, subjects a binding gains); then every changed object, objects of a
kind with identical changes in one line ("65 VirtualMachineClusterInstancetype:
label ... v1.6.0 → v1.7.0"); then the objects added and removed, and (without
--summary) the diff of each changed object. --kind and --object narrow the
comparison to some objects.

With $KUBECTL_EXTERNAL_DIFF set (as for kubectl diff: a program and plain
flags, such as "colordiff -N -u" or "dyff between"), the diff of two strategies
is that program's: both strategies' objects are written, one file per object
named group.version.kind.namespace.name, into two temporary folders (FROM-...
and TO-...) that it is given; its exit status 0 or 1 is diff's, another is an
error (2).

The exit status is that of diff(1): 0 when the same, 1 when different, 2 on error.`

const diffExample = `  # What changed between two KubeVirt releases
  kubectl installstrategy diff kubevirt-v1.8.4.configmap.yaml kubevirt-v1.9.0.configmap.yaml --summary

  # A stored strategy against a file, machine-readable
  kubectl installstrategy diff --from cm/kubevirt-install-strategy-abcde --to new.yaml -n kubevirt -o json

  # Drift: the cluster against the strategy it should run
  kubectl installstrategy diff --live sample-v1.0.0.yaml -n sample`

// diffCmd holds the flags of diff.
type diffCmd struct {
	o                                  *options
	summary, live, showSecrets         bool
	output, from, to, fromName, toName string
	f                                  reconcileFlags
	filter                             objectFilter
	ct                                 *clusterTrust
}

func newDiffCommand(o *options) *cobra.Command {
	c := &diffCmd{o: o}
	cmd := &cobra.Command{
		Use:     "diff A B | --from A --to B | FILE --from-name X --to-name Y | --live STRATEGY",
		Short:   "Show the objects added, removed and changed between two strategies, or against the cluster",
		Long:    diffLong,
		Example: diffExample,
		Args:    cobra.MaximumNArgs(2),
		RunE:    c.run,
	}
	c.add(cmd)
	return cmd
}

// add registers diff's flags on cmd.
func (c *diffCmd) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&c.summary, "summary", false, "list the objects only, without the diff of each changed one")
	cmd.Flags().StringVarP(&c.output, "output", "o", "text", "output format: text or json (json lists objects only)")
	cmd.Flags().StringVar(&c.from, "from", "", "the old strategy (instead of A)")
	cmd.Flags().StringVar(&c.to, "to", "", "the new strategy (instead of B)")
	cmd.Flags().BoolVar(&c.live, "live", false, "compare one strategy with the cluster")
	cmd.Flags().StringVar(&c.fromName, "from-name", "", "the ConfigMap of the old strategy, when its file holds several")
	cmd.Flags().StringVar(&c.toName, "to-name", "", "the ConfigMap of the new strategy, when its file holds several")
	c.filter.add(cmd)
	cmd.Flags().BoolVar(&c.showSecrets, "show-secrets", false, "show the values of Secrets' data and stringData in the diff of two strategies (masked by default; live Secret values are never shown)")
	c.f.add(cmd)
	c.o.addRegistryFlag(cmd)
	c.ct = addOptionalClusterTrust(cmd)
}

func diffFail(err error) error { return &ExitError{Code: 2, Err: err} }

func (c *diffCmd) run(cmd *cobra.Command, args []string) error {
	o := c.o
	o.clusterTrust = c.ct // cm/NAME and oci:// by tag: --key checks them
	if c.output != "text" && c.output != "json" {
		return usageError(fmt.Errorf("--output %q: want text or json", c.output))
	}
	pal, err := o.palette(o.streams.Out)
	if err != nil {
		return err
	}
	if c.live {
		return c.runLive(cmd, args)
	}
	if c.from != "" || c.to != "" {
		args = append([]string{c.from, c.to}, args...)
	}
	if len(args) == 1 && c.fromName != "" && c.toName != "" {
		args = append(args, args[0])
	}
	if len(args) != 2 || args[0] == "" || args[1] == "" {
		return usageError(errors.New("give two strategies: A B, --from A --to B, or FILE --from-name X --to-name Y"))
	}
	la, err := o.loadStrategy(cmd.Context(), args[0], pick{name: c.fromName, flag: "--from-name"})
	if err != nil {
		return diffFail(err)
	}
	lb, err := o.loadStrategy(cmd.Context(), args[1], pick{name: c.toName, flag: "--to-name"})
	if err != nil {
		return diffFail(err)
	}
	sa, sb := c.filter.strategy(la.Strategy), c.filter.strategy(lb.Strategy)
	if prog := os.Getenv("KUBECTL_EXTERNAL_DIFF"); prog != "" && c.output == "text" && !c.summary {
		return externalDiff(cmd.Context(), o.streams, prog, sa, sb, c.showSecrets)
	}
	ch, err := diffStrategies(sa, sb, "a", "b", c.showSecrets)
	if err != nil {
		return diffFail(err)
	}
	if c.output == "json" {
		enc := json.NewEncoder(o.streams.Out)
		enc.SetIndent("", "  ")
		err = enc.Encode(ch)
	} else {
		err = printChange(o.streams.Out, ch, !c.summary, pal)
	}
	if err != nil {
		return diffFail(err)
	}
	if !ch.Empty() {
		return &ExitError{Code: 1}
	}
	return nil
}

// runLive is diff --live: one strategy against the cluster.
func (c *diffCmd) runLive(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError(errors.New("--live takes one strategy"))
	}
	p, _, err := c.o.observePlan(cmd.Context(), args[0], &c.f)
	if err != nil {
		return diffFail(err)
	}
	c.filter.plan(p)
	n, err := printLiveDiff(c.o.streams.Out, p)
	if err != nil {
		return diffFail(err)
	}
	if n > 0 {
		return &ExitError{Code: 1}
	}
	return nil
}

func identityString(id strategy.Identity) string {
	s := orNone(id.Version)
	if id.Registry != "" {
		s += " " + id.Registry
	}
	if id.Identifier != "" {
		s += " " + id.Identifier
	}
	return s
}

func printChange(w io.Writer, c *Change, details bool, pal palette) error {
	if c.From != c.To {
		fmt.Fprintf(w, "identity: %s -> %s\n", identityString(c.From), identityString(c.To))
	}
	fmt.Fprintf(w, "added %d, removed %d, changed %d, unchanged %d\n", len(c.Added), len(c.Removed), len(c.Changed), c.Unchanged)
	if c.Summary != nil {
		printSummary(w, c.Summary, pal)
	}
	for _, sec := range []struct {
		title string
		mark  string
		refs  []strategy.ObjectRef
	}{{"Added", pal.add("+"), c.Added}, {"Removed", pal.remove("-"), c.Removed}} {
		if len(sec.refs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (%d):\n", pal.bold(sec.title), len(sec.refs))
		for _, ref := range sec.refs {
			fmt.Fprintf(w, "  %s %s\n", sec.mark, ref)
		}
	}
	if details {
		for _, ref := range c.Changed {
			if _, err := io.WriteString(w, "\n"+pal.colorDiff(c.diffs[ref])); err != nil {
				return err
			}
		}
	}
	return nil
}

// maskSecretPair returns copies of two versions of a Secret whose data and
// stringData values are masked as kubectl diff does: "***" for a value
// both hold, "*** (before, N bytes)" and "*** (after, N bytes)" for one
// that changed, was added or removed (N is the decoded size for data).
//
// Either may be nil (a Secret on one side only): the other's values are all
// masked. A data or stringData that is not a map of values is masked whole.
func maskSecretPair(a, b *unstructured.Unstructured) (*unstructured.Unstructured, *unstructured.Unstructured) {
	ma, mb := a.DeepCopy(), b.DeepCopy()
	for _, m := range []*unstructured.Unstructured{ma, mb} {
		if m == nil {
			continue
		}
		for _, field := range []string{"data", "stringData"} {
			if v, has := m.Object[field]; has && v != nil {
				if _, isMap := v.(map[string]any); !isMap {
					m.Object[field] = "***"
				}
			}
		}
	}
	size := func(field string, v any) int {
		m := plan.MaskSecretValue(v, field)
		var n int
		if s, ok := m.(string); ok {
			fmt.Sscanf(s, "(secret, %d bytes)", &n)
		}
		return n
	}
	for _, field := range []string{"data", "stringData"} {
		var da, db map[string]any
		if ma != nil {
			da, _, _ = unstructured.NestedMap(ma.Object, field)
		}
		if mb != nil {
			db, _, _ = unstructured.NestedMap(mb.Object, field)
		}
		for k, va := range da {
			vb, ok := db[k]
			if ok && fmt.Sprint(va) == fmt.Sprint(vb) {
				da[k], db[k] = "***", "***"
				continue
			}
			da[k] = fmt.Sprintf("*** (before, %d bytes)", size(field, va))
		}
		for k, vb := range db {
			if s, ok := vb.(string); ok && s == "***" {
				continue
			}
			db[k] = fmt.Sprintf("*** (after, %d bytes)", size(field, vb))
		}
		if da != nil {
			_ = unstructured.SetNestedMap(ma.Object, da, field)
		}
		if db != nil && mb != nil {
			_ = unstructured.SetNestedMap(mb.Object, db, field)
		}
	}
	return ma, mb
}
