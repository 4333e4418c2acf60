package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// revisionName is the ConfigMap of revision n of a plugin installation.
func revisionName(o inventory.Owner, n int) string {
	name := fmt.Sprintf("installstrategy-revision-%s-%d", o.Name, n)
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(o.Name))
	return fmt.Sprintf("installstrategy-revision-%s-%d", hex.EncodeToString(sum[:])[:40], n)
}

// recordRevision keeps the strategy a plugin apply ran (as rolled out:
// placed and namespaced) in a revision ConfigMap and records it in the
// installation's history, keeping the newest limit revisions and deleting
// the ConfigMaps of those dropped. A strategy too large for one ConfigMap
// is recorded without its text (rollback cannot return to it; said on
// standard error).
func (c *cluster) recordRevision(ctx context.Context, errOut io.Writer, owner inventory.Owner, s *strategy.Strategy, source string, limit int) (*history.Revision, error) {
	hs := history.NewStore(c.kube)
	h, err := hs.Get(ctx, owner)
	if err = ignoreCorrupt(errOut, err); err != nil {
		return nil, err
	}
	anchor, anchorErr := hs.Anchor(ctx, owner)
	next, floor := 1, 0
	if cur := h.Current(); cur != nil {
		next = cur.Revision + 1
	}
	if ac := anchor.Current(); ac != nil && (h.Current() == nil || !ac.Matches(*h.Current())) {
		// The history ConfigMap does not end where the anchor does (edited,
		// replaced or deleted): number past both, never reusing one.
		next = max(next, ac.Revision+1)
		floor = next
	}
	rev := history.Revision{Identity: s.Identity, Source: source, Revision: floor}
	// Compact: a revision is read back only by rollback, and KubeVirt's
	// block YAML would cost the plugin more time and memory than the rest
	// of a KubeVirt install's client side (docs/NOTES.md).
	cm, err := codec.Encode(s, codec.EncodeOptions{Namespace: owner.Namespace, Name: revisionName(owner, next), Compact: true})
	if err != nil {
		return nil, fmt.Errorf("keep revision %d of %s: %w", next, owner, err)
	}
	labels := owner.Labels()
	labels[metakeys.RevisionOfLabel] = owner.NameValue()
	cm.Labels = labels
	digest := cm.Annotations[metakeys.DigestAnnotation]
	switch size := len(cm.Data[codec.ManifestsKey]); {
	case size > codec.ObjectSizeLimit*9/10:
		fmt.Fprintf(errOut, "warning: the strategy (%s encoded) is too large to keep for rollback; revision %d of %s is recorded without it\n", bytesString(size), next, owner)
	default:
		if err := c.createRevision(ctx, owner, cm); err != nil {
			return nil, fmt.Errorf("keep revision %d of %s: %w", next, owner, err)
		}
		rev.ConfigMap = cm.Name
	}
	// A revision too large to keep is recorded and anchored by its digest
	// all the same: history tells it from a forged one.
	rev.Digest = digest
	h, dropped, err := hs.RecordOn(ctx, h, owner, rev, limit)
	if err != nil {
		return nil, err
	}
	cur := h.Current()
	if cur.ConfigMap != rev.ConfigMap && rev.ConfigMap != "" {
		// The newest revision already ran this strategy (a re-apply):
		// no new revision, so no second copy.
		_ = c.kube.CoreV1().ConfigMaps(owner.Namespace).Delete(ctx, rev.ConfigMap, metav1.DeleteOptions{})
	}
	for _, d := range dropped {
		if d.ConfigMap == "" {
			continue
		}
		if err := c.kube.CoreV1().ConfigMaps(owner.Namespace).Delete(ctx, d.ConfigMap, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("drop revision %d of %s: delete configmap %s/%s: %w", d.Revision, owner, owner.Namespace, d.ConfigMap, err)
		}
	}
	// Anchor what was applied: its digest, under the number the history
	// gives it (the newest revision runs this very text).
	if anchorErr == nil && cur.Digest == digest && cur.Identity == s.Identity {
		_, anchorErr = hs.RecordAnchor(ctx, owner, *cur, limit)
	}
	if anchorErr != nil {
		if !errors.Is(anchorErr, history.ErrAnchorUnreadable) && !apierrors.IsForbidden(anchorErr) {
			return nil, anchorErr
		}
		fmt.Fprintf(errOut, "warning: revision %d of %s is not anchored (%v): a rollback to it needs --allow-unanchored\n", cur.Revision, owner, anchorErr)
	}
	return cur, nil
}

// createRevision creates a revision ConfigMap; one already there under
// its name is no revision this installation anchored (numbers are never
// reused), so it is replaced.
func (c *cluster) createRevision(ctx context.Context, owner inventory.Owner, cm *corev1.ConfigMap) error {
	api := c.kube.CoreV1().ConfigMaps(owner.Namespace)
	_, err := api.Create(ctx, cm, metav1.CreateOptions{FieldManager: metakeys.ManagedBy})
	if apierrors.IsAlreadyExists(err) {
		if err = api.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
			_, err = api.Create(ctx, cm, metav1.CreateOptions{FieldManager: metakeys.ManagedBy})
		}
	}
	if err != nil {
		return fmt.Errorf("create configmap %s/%s: %w", owner.Namespace, cm.Name, err)
	}
	return nil
}

// historyOwner is the installation NAME of namespace -n: an Installation
// when one of that name exists, else a plugin installation.
func (c *cluster) historyOwner(ctx context.Context, name string) (inventory.Owner, *unstructured.Unstructured, error) {
	o := inventory.Owner{Namespace: c.namespace, Name: name, Kind: inventory.KindPlugin}
	in, err := c.dynamic.Resource(installationsGVR).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		o.Kind = inventory.KindInstallation
		return o, in, nil
	case apierrors.IsNotFound(err):
		return o, nil, o.Validate()
	}
	return o, nil, fmt.Errorf("read installation %s/%s: %w", c.namespace, name, err)
}

// installationHistory reads the history of the installation NAME (see
// historyOwner); in is its Installation, nil for a plugin installation.
// What is wrong with a plugin installation's history ConfigMap is said on
// warn (see ignoreCorrupt).
func (c *cluster) installationHistory(ctx context.Context, warn io.Writer, name string) (inventory.Owner, *unstructured.Unstructured, *history.History, error) {
	owner, in, err := c.historyOwner(ctx, name)
	if err != nil {
		return owner, nil, nil, err
	}
	if in != nil {
		h, err := installationRevisions(owner, in)
		return owner, in, h, err
	}
	h, err := history.NewStore(c.kube).Get(ctx, owner)
	return owner, in, h, ignoreCorrupt(warn, err)
}

// ignoreCorrupt says on warn that a plugin installation's history
// ConfigMap does not decode, and goes on without its records: the anchor
// says which revisions there are, and the next apply replaces it.
func ignoreCorrupt(warn io.Writer, err error) error {
	if !errors.Is(err, history.ErrCorrupt) {
		return err
	}
	fmt.Fprintf(warn, "warning: %v; its records are ignored (the Namespace's anchor lists the revisions)\n", err)
	return nil
}

// installationRevisions is an Installation's status.history, which the
// operator records.
func installationRevisions(owner inventory.Owner, u *unstructured.Unstructured) (*history.History, error) {
	var in v1alpha1.Installation
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &in); err != nil {
		return nil, fmt.Errorf("read installation %s: %w", owner, err)
	}
	h := &history.History{Owner: owner}
	for _, r := range in.Status.History {
		h.Revisions = append(h.Revisions, history.Revision{Revision: int(r.Revision),
			Identity:  strategy.Identity{Version: r.Version, Registry: r.Registry, Identifier: r.Identifier},
			ConfigMap: r.ConfigMap, Digest: r.Digest, Applied: r.DeployedAt.Time, Source: string(r.Source)})
	}
	return h, nil
}

const historyLong = `List the strategies the installation NAME (an Installation of namespace -n, or a
plugin installation of apply --name) has run, newest first: the revision, the
version, registry and identifier, when it was rolled out, where it came from,
the ConfigMap that keeps it for rollback, and the result of its check.

The newest revisions are kept (apply --history-limit, an Installation's
spec.historyLimit; default 5): a plugin installation keeps each in a revision
ConfigMap of its own, an Installation's are the stored strategies, which the
operator's garbage collection keeps while a history names them.

The history and revision ConfigMaps of a plugin installation can be rewritten
by anyone who may edit ConfigMaps of the namespace, so apply also anchors each
revision (number, identity, digest of its text) in an annotation of the
Namespace object, revisions.installstrategy.io/NAME, which no namespace role
may write. STATUS is the check of each revision against that anchor:
verified (its ConfigMap holds the anchored text), TAMPERED (the history record
or the ConfigMap says otherwise; the reason follows), UNANCHORED (no anchor
records it: applied by a user who may not patch the Namespace, before anchors
existed, or forged), not kept (too large to store). An Installation's
revisions show "-": the operator verifies them. --revision N prints one
revision and exits 1 unless it is verified.

-o json, yaml, jsonpath= and go-template= print the history as an object of the
print-only kind History (` + reportVersion + `); -o name prints the
ConfigMaps that keep the revisions.`

const historyExample = `  kubectl installstrategy history sample -n sample
  kubectl installstrategy history demo -n sample -o jsonpath='{.revisions[0].identity.version}'
  kubectl installstrategy history demo -n sample --revision 3`

func newHistoryCommand(o *options) *cobra.Command {
	var out *output
	var only int
	cmd := &cobra.Command{
		Use:     "history NAME",
		Short:   "List the strategies an installation has run",
		Long:    historyLong,
		Example: historyExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := o.cluster()
			if err != nil {
				return err
			}
			owner, in, h, err := c.installationHistory(cmd.Context(), o.streams.ErrOut, args[0])
			if err != nil {
				return err
			}
			var rows []revisionRow
			if in != nil {
				for _, r := range h.Revisions {
					rows = append(rows, revisionRow{Revision: r, Status: revisionOperator})
				}
			} else {
				dopts, err := o.decodeOptions()
				if err != nil {
					return err
				}
				anchor, anchorErr := history.NewStore(c.kube).Anchor(cmd.Context(), owner)
				if anchorErr != nil && !errors.Is(anchorErr, history.ErrAnchorUnreadable) {
					return anchorErr
				}
				rows = c.checkedRevisions(cmd.Context(), dopts, owner, h, anchor, anchorErr)
			}
			if len(rows) == 0 {
				return fmt.Errorf("installation %s in namespace %s has no history (nothing applied under that name, or applied before history was recorded)", owner.Name, owner.Namespace)
			}
			if only != 0 {
				i := slices.IndexFunc(rows, func(r revisionRow) bool { return r.Revision.Revision == only })
				if i < 0 {
					return fmt.Errorf("installation %s has no revision %d", owner, only)
				}
				rows = rows[i : i+1]
			}
			if err := printHistory(o.streams.Out, out, owner, rows); err != nil {
				return err
			}
			if r := rows[0]; only != 0 && r.Status != revisionVerified && r.Status != revisionOperator {
				return &ExitError{Code: 1, Err: fmt.Errorf("revision %d of %s: %s: %s", only, owner, r.Status, r.Reason)}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&only, "revision", 0, "print only this revision, and exit 1 unless it is verified")
	out = addOutput(cmd, "table")
	return cmd
}

func printHistory(w io.Writer, out *output, owner inventory.Owner, rows []revisionRow) error {
	if out.Name() {
		var items []*unstructured.Unstructured
		for _, r := range rows {
			if r.ConfigMap != "" {
				u := &unstructured.Unstructured{Object: map[string]any{}}
				u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				u.SetName(r.ConfigMap)
				items = append(items, u)
			}
		}
		return out.print(w, toList(items))
	}
	if !out.Human() {
		obj, err := toObject(struct {
			Kind      string        `json:"installationKind"`
			Revisions []revisionRow `json:"revisions"`
		}{owner.Kind, rows}, reportGVK("History"), owner.Name, owner.Namespace)
		if err != nil {
			return err
		}
		return out.print(w, obj)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tVERSION\tREGISTRY\tIDENTIFIER\tAPPLIED\tSOURCE\tCONFIGMAP\tSTATUS")
	var reasons []string
	for i, r := range rows {
		id := r.Identity.Identifier
		if len(id) > 12 {
			id = id[:12]
		}
		mark := ""
		if i == 0 {
			mark = " (current)"
		}
		applied := "<unknown>"
		if !r.Applied.IsZero() {
			applied = duration.HumanDuration(time.Since(r.Applied)) + " ago"
		}
		fmt.Fprintf(tw, "%d%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Revision.Revision, mark, orNone(r.Identity.Version), orNone(r.Identity.Registry), orNone(id),
			applied, orNone(r.Source), orNone(r.ConfigMap), r.Status)
		if r.Reason != "" {
			reasons = append(reasons, fmt.Sprintf("revision %d: %s: %s", r.Revision.Revision, r.Status, r.Reason))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reasons {
		fmt.Fprintln(w, r)
	}
	return nil
}

const rollbackLong = `Return the installation NAME (namespace -n) to the strategy of an earlier
revision (see history): the one before the current, or --to-revision N.

A plugin installation is applied again, as apply does, from the revision's
ConfigMap, and the rollback is recorded as a new revision. The revision must be
verified (see history): its number, identity and digest anchored in the
Namespace object by the apply that ran it, and its ConfigMap holding exactly
that text. Anyone who may edit ConfigMaps of the namespace can rewrite the
revision and history ConfigMaps, so a revision that fails its check is refused;
--allow-unanchored accepts one that no anchor records (its record in the
history ConfigMap is then all that vouches for it: trust every ConfigMap
editor of the namespace before giving it), never a tampered one.

Before it changes anything, rollback prints the plan of the revision against
the cluster (RBAC widening first, then every object), and asks for
confirmation on a terminal; without a terminal it changes nothing unless
--yes is given.

An Installation is pointed at the revision's stored strategy: its
spec.strategy becomes that ConfigMap, with its digest pinned, and the operator
rolls it back (follow with status --watch); the change is shown and confirmed
the same way.`

const rollbackExample = `  kubectl installstrategy rollback sample -n sample --wait
  kubectl installstrategy rollback demo -n sample --to-revision 3 --yes`

func newRollbackCommand(o *options) *cobra.Command {
	var f reconcileFlags
	var a applyFlags
	var toRevision int
	var yes, allowUnanchored bool
	cmd := &cobra.Command{
		Use:     "rollback NAME [--to-revision N]",
		Short:   "Return an installation to a strategy it ran before",
		Long:    rollbackLong,
		Example: rollbackExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if toRevision < 0 {
				return usageError(fmt.Errorf("--to-revision %d: want a revision number (see history)", toRevision))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout+30*time.Second)
			defer cancel()
			c, err := o.cluster()
			if err != nil {
				return err
			}
			owner, in, h, err := c.installationHistory(ctx, o.streams.ErrOut, args[0])
			if err != nil {
				return err
			}
			if in != nil {
				rev, err := h.Get(toRevision)
				if err != nil {
					return err
				}
				if rev.Revision == h.Current().Revision {
					return fmt.Errorf("installation %s in namespace %s runs revision %d already", owner.Name, owner.Namespace, rev.Revision)
				}
				if rev.ConfigMap == "" {
					return fmt.Errorf("revision %d of installation %s in namespace %s was not kept (too large to store); apply its strategy again instead", rev.Revision, owner.Name, owner.Namespace)
				}
				return c.rollbackInstallation(ctx, o, in, rev, yes)
			}
			l, rev, err := c.rollbackTarget(ctx, o, owner, h, toRevision, allowUnanchored)
			if err != nil {
				return err
			}
			f.name = owner.Name
			f.replace = true // the revision held other objects: prune them
			f.rollback = true
			p, l, err := o.observeLoaded(ctx, l, &f)
			if err != nil {
				return err
			}
			pal, err := o.palette(o.streams.Out)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "rollback of installation %s to revision %d (%s, %s) would do:\n", owner, rev.Revision, identityString(rev.Identity), rev.Digest)
			if err := printPlanTable(o.streams.Out, p, pal); err != nil {
				return err
			}
			if p.Blocked != "" {
				return fmt.Errorf("rollback would write nothing: %s", p.Blocked)
			}
			if err := o.confirm(fmt.Sprintf("roll back installation %s to revision %d", owner, rev.Revision), yes); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "rolling back installation %s to revision %d (%s)\n", owner, rev.Revision, identityString(rev.Identity))
			return o.runApply(ctx, c, l, &f, a, fmt.Sprintf("rollback to revision %d", rev.Revision))
		},
	}
	cmd.Flags().IntVar(&toRevision, "to-revision", 0, "the revision to return to (default: the one before the current)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "roll back without asking (required when standard input is not a terminal)")
	cmd.Flags().BoolVar(&allowUnanchored, "allow-unanchored", false, "accept a revision no anchor records, vouched for only by the history ConfigMap (any ConfigMap editor of the namespace can have written it); never a tampered one")
	a.add(cmd)
	f.addAdoption(cmd)
	return cmd
}

// rollbackTarget picks the revision of a plugin installation a rollback
// returns to (n, or the one before the current) and loads it, refusing one
// that fails its check against the anchor.
func (c *cluster) rollbackTarget(ctx context.Context, o *options, owner inventory.Owner, h *history.History, n int, allowUnanchored bool) (*codec.Loaded, *history.Revision, error) {
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, nil, err
	}
	anchor, anchorErr := history.NewStore(c.kube).Anchor(ctx, owner)
	if anchorErr != nil && !errors.Is(anchorErr, history.ErrAnchorUnreadable) {
		return nil, nil, anchorErr
	}
	current := h.Current()
	if ac := anchor.Current(); ac != nil {
		// The anchor says which revisions there are and which runs.
		current = &history.Revision{Revision: ac.Revision}
		if n == 0 {
			if len(anchor.Revisions) < 2 {
				return nil, nil, fmt.Errorf("installation %s has no anchored revision before the current one", owner)
			}
			n = anchor.Revisions[1].Revision
		}
	}
	if current == nil {
		return nil, nil, fmt.Errorf("installation %s in namespace %s has no history", owner.Name, owner.Namespace)
	}
	if n == 0 {
		prev, err := h.Get(0)
		if err != nil {
			return nil, nil, err
		}
		n = prev.Revision
	}
	if n == current.Revision {
		return nil, nil, fmt.Errorf("installation %s in namespace %s runs revision %d already", owner.Name, owner.Namespace, n)
	}
	recorded, _ := h.Get(n)
	if a := anchor.Find(n); a != nil {
		l, status, reason := c.checkAnchored(ctx, dopts, owner, recorded, a)
		switch status {
		case revisionVerified:
			return l, &history.Revision{Revision: n, Identity: a.Identity, Digest: a.Digest, ConfigMap: revisionName(owner, n)}, nil
		case revisionNotKept:
			return nil, nil, fmt.Errorf("revision %d of installation %s in namespace %s was not kept (too large to store); apply its strategy again instead", n, owner.Name, owner.Namespace)
		}
		return nil, nil, fmt.Errorf("revision %d of installation %s is %s: %s; nothing changed", n, owner, status, reason)
	}
	if recorded == nil {
		return nil, nil, fmt.Errorf("installation %s has no revision %d (kubectl installstrategy history %s -n %s lists them)", owner, n, owner.Name, owner.Namespace)
	}
	why := "the namespace's anchor does not record it"
	if anchorErr != nil {
		why = anchorErr.Error()
	}
	if !allowUnanchored {
		return nil, nil, fmt.Errorf("revision %d of installation %s is %s (%s): only the history ConfigMap, which any ConfigMap editor of namespace %s may write, vouches for it; review it and give --allow-unanchored to roll back anyway",
			n, owner, revisionUnanchored, why, owner.Namespace)
	}
	if recorded.ConfigMap == "" {
		return nil, nil, fmt.Errorf("revision %d of installation %s in namespace %s was not kept (too large to store); apply its strategy again instead", n, owner.Name, owner.Namespace)
	}
	fmt.Fprintf(o.streams.ErrOut, "warning: revision %d of %s is %s (%s); --allow-unanchored takes the history ConfigMap's word for it\n", n, owner, revisionUnanchored, why)
	cm, err := c.kube.CoreV1().ConfigMaps(owner.Namespace).Get(ctx, recorded.ConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("revision %d of installation %s: read configmap %s/%s: %w", n, owner, owner.Namespace, recorded.ConfigMap, err)
	}
	// The recorded digest is the pin: nothing is parsed that does not
	// hash to it, and the decode is bounded.
	rev := source.Revision{Get: func(context.Context) (*corev1.ConfigMap, error) { return cm, nil }, Recorded: recorded, Decode: dopts}
	l, err := rev.Load(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("revision %d of installation %s: configmap %s/%s does not hold the recorded digest %s: %w", n, owner, owner.Namespace, recorded.ConfigMap, orNone(recorded.Digest), err)
	}
	return loadedFrom(l), recorded, nil
}

// rollbackInstallation points an Installation at the stored strategy of a
// revision, its digest pinned; the operator does the rest.
func (c *cluster) rollbackInstallation(ctx context.Context, o *options, in *unstructured.Unstructured, rev *history.Revision, yes bool) error {
	w := o.streams.Out
	if _, err := c.store.List(ctx, in.GetNamespace()); err != nil {
		return err
	}
	if _, err := c.entryByName(ctx, rev.ConfigMap); err != nil {
		return fmt.Errorf("revision %d of installation %s/%s: %w", rev.Revision, in.GetNamespace(), in.GetName(), err)
	}
	src := map[string]any{"configMap": map[string]any{"name": rev.ConfigMap}, "image": nil, "product": nil}
	if rev.Digest != "" {
		src["configMap"].(map[string]any)["digest"] = rev.Digest
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"strategy": src}})
	if err != nil {
		return err
	}
	was, _, _ := unstructured.NestedMap(in.Object, "spec", "strategy")
	wasJSON, _ := json.Marshal(was)
	fmt.Fprintf(w, "rollback of installation %s/%s to revision %d (%s) would change spec.strategy:\n  from %s\n  to   {\"configMap\":{\"name\":%q,\"digest\":%q}}\n",
		in.GetNamespace(), in.GetName(), rev.Revision, identityString(rev.Identity), wasJSON, rev.ConfigMap, rev.Digest)
	if err := o.confirm(fmt.Sprintf("roll back installation %s/%s to revision %d", in.GetNamespace(), in.GetName(), rev.Revision), yes); err != nil {
		return err
	}
	if _, err := c.dynamic.Resource(installationsGVR).Namespace(in.GetNamespace()).Patch(ctx, in.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: metakeys.ManagedBy}); err != nil {
		return fmt.Errorf("roll back installation %s/%s: %w", in.GetNamespace(), in.GetName(), err)
	}
	_, err = fmt.Fprintf(w, "installation %s/%s: spec.strategy is now configmap %s (revision %d, %s); the operator rolls it back (kubectl installstrategy status %s -n %s --watch)\n",
		in.GetNamespace(), in.GetName(), rev.ConfigMap, rev.Revision, identityString(rev.Identity), in.GetName(), in.GetNamespace())
	return err
}

// deleteHistory removes a plugin installation's history and the revision
// ConfigMaps it kept (uninstall).
func (c *cluster) deleteHistory(ctx context.Context, owner inventory.Owner) error {
	sel := owner.Selector() + "," + metakeys.RevisionOfLabel + "=" + owner.NameValue()
	if err := c.kube.CoreV1().ConfigMaps(owner.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return fmt.Errorf("uninstall %s: delete its revisions: %w", owner, err)
	}
	hs := history.NewStore(c.kube)
	if err := hs.DeleteAnchor(ctx, owner); err != nil && !apierrors.IsForbidden(err) {
		return err
	}
	return hs.Delete(ctx, owner)
}
