package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// revisionLabel marks the ConfigMaps in which the plugin keeps the
// strategies its installations ran, for rollback. They are not strategies
// of the store (no strategy label), so no lookup by identity ever picks
// one and the operator's GC never sees them.
const revisionLabel = "installstrategy.io/revision-of"

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
	if err != nil {
		return nil, err
	}
	next := 1
	if cur := h.Current(); cur != nil {
		next = cur.Revision + 1
	}
	rev := history.Revision{Identity: s.Identity, Source: source}
	// Compact: a revision is read back only by rollback, and KubeVirt's
	// block YAML would cost the plugin more time and memory than the rest
	// of a KubeVirt install's client side (docs/NOTES.md).
	cm, err := codec.Encode(s, codec.EncodeOptions{Namespace: owner.Namespace, Name: revisionName(owner, next), Compact: true})
	if err != nil {
		return nil, fmt.Errorf("keep revision %d of %s: %w", next, owner, err)
	}
	labels := owner.Labels()
	labels[revisionLabel] = owner.NameValue()
	cm.Labels = labels
	switch size := len(cm.Data[codec.ManifestsKey]); {
	case size > codec.ObjectSizeLimit*9/10:
		fmt.Fprintf(errOut, "warning: the strategy (%s encoded) is too large to keep for rollback; revision %d of %s is recorded without it\n", bytesString(size), next, owner)
	default:
		if _, err := c.kube.CoreV1().ConfigMaps(owner.Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: inventory.ManagedBy}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("keep revision %d of %s: create configmap %s/%s: %w", next, owner, owner.Namespace, cm.Name, err)
		}
		rev.ConfigMap, rev.Digest = cm.Name, cm.Annotations[codec.NativeDigestAnnotation]
	}
	h, dropped, err := hs.RecordOn(ctx, h, owner, rev, limit)
	if err != nil {
		return nil, err
	}
	if cur := h.Current(); cur.ConfigMap != rev.ConfigMap && rev.ConfigMap != "" {
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
	return h.Current(), nil
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
func (c *cluster) installationHistory(ctx context.Context, name string) (inventory.Owner, *unstructured.Unstructured, *history.History, error) {
	owner, in, err := c.historyOwner(ctx, name)
	if err != nil {
		return owner, nil, nil, err
	}
	if in != nil {
		h, err := installationRevisions(owner, in)
		return owner, in, h, err
	}
	h, err := history.NewStore(c.kube).Get(ctx, owner)
	return owner, in, h, err
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

func newHistoryCommand(o *options) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "List the strategies an installation has run",
		Long: `List the strategies the installation NAME (an Installation of namespace -n, or a
plugin installation of apply --name) has run, newest first: the revision, the
version, registry and identifier, when it was rolled out, where it came from,
and the ConfigMap that keeps it for rollback.

The newest revisions are kept (apply --history-limit, an Installation's
spec.historyLimit; default 5): a plugin installation keeps each in a revision
ConfigMap of its own, an Installation's are the stored strategies, which the
operator's garbage collection keeps while a history names them.

-o json, yaml, jsonpath= and go-template= print the history as an object of the
print-only kind History (` + reportVersion + `); -o name prints the
ConfigMaps that keep the revisions.`,
		Example: `  kubectl installstrategy history sample -n sample
  kubectl installstrategy history demo -n sample -o jsonpath='{.revisions[0].identity.version}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := o.cluster()
			if err != nil {
				return err
			}
			owner, _, h, err := c.installationHistory(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if len(h.Revisions) == 0 {
				return fmt.Errorf("installation %s in namespace %s has no history (nothing applied under that name, or applied before history was recorded)", owner.Name, owner.Namespace)
			}
			return printHistory(o.streams.Out, out, h)
		},
	}
	out = addOutput(cmd, "table")
	return cmd
}

func printHistory(w io.Writer, out *output, h *history.History) error {
	if out.Name() {
		var items []*unstructured.Unstructured
		for _, r := range h.Revisions {
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
			Kind      string             `json:"installationKind"`
			Revisions []history.Revision `json:"revisions"`
		}{h.Owner.Kind, h.Revisions}, reportGVK("History"), h.Owner.Name, h.Owner.Namespace)
		if err != nil {
			return err
		}
		return out.print(w, obj)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tVERSION\tREGISTRY\tIDENTIFIER\tAPPLIED\tSOURCE\tCONFIGMAP")
	for i, r := range h.Revisions {
		id := r.Identity.Identifier
		if len(id) > 12 {
			id = id[:12]
		}
		mark := ""
		if i == 0 {
			mark = " (current)"
		}
		fmt.Fprintf(tw, "%d%s\t%s\t%s\t%s\t%s ago\t%s\t%s\n", r.Revision, mark, orNone(r.Identity.Version), orNone(r.Identity.Registry), orNone(id),
			duration.HumanDuration(time.Since(r.Applied)), orNone(r.Source), orNone(r.ConfigMap))
	}
	return tw.Flush()
}

func newRollbackCommand(o *options) *cobra.Command {
	var f reconcileFlags
	var a applyFlags
	var toRevision int
	cmd := &cobra.Command{
		Use:   "rollback NAME [--to-revision N]",
		Short: "Return an installation to a strategy it ran before",
		Long: `Return the installation NAME (namespace -n) to the strategy of an earlier
revision (see history): the one before the current, or --to-revision N.

A plugin installation is applied again, as apply does, from the revision's
ConfigMap (verified against its digest), and the rollback is recorded as a new
revision. An Installation is pointed at the revision's stored strategy: its
spec.strategy becomes that ConfigMap, with its digest pinned, and the operator
rolls it back (follow with status --watch).`,
		Example: `  kubectl installstrategy rollback sample -n sample --wait
  kubectl installstrategy rollback demo -n sample --to-revision 3`,
		Args: cobra.ExactArgs(1),
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
			owner, in, h, err := c.installationHistory(ctx, args[0])
			if err != nil {
				return err
			}
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
			if in != nil {
				return c.rollbackInstallation(ctx, o.streams.Out, in, rev)
			}
			cm, err := c.kube.CoreV1().ConfigMaps(owner.Namespace).Get(ctx, rev.ConfigMap, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("revision %d of installation %s: read configmap %s/%s: %w", rev.Revision, owner, owner.Namespace, rev.ConfigMap, err)
			}
			dopts, err := o.decodeOptions()
			if err != nil {
				return err
			}
			l, err := codec.LoadConfigMap("configmap/"+rev.ConfigMap, cm, dopts, strategy.ParseOptions{})
			if err != nil {
				return fmt.Errorf("revision %d of installation %s: %w", rev.Revision, owner, err)
			}
			if l.Info == nil || !l.Info.DigestVerified || l.Info.Digest != rev.Digest {
				return fmt.Errorf("revision %d of installation %s: configmap %s/%s does not hold the recorded digest %s", rev.Revision, owner, owner.Namespace, rev.ConfigMap, rev.Digest)
			}
			f.name = owner.Name
			f.replace = true // the revision held other objects: prune them
			fmt.Fprintf(o.streams.Out, "rolling back installation %s to revision %d (%s)\n", owner, rev.Revision, identityString(rev.Identity))
			return o.runApply(ctx, c, l, &f, a, fmt.Sprintf("rollback to revision %d", rev.Revision))
		},
	}
	cmd.Flags().IntVar(&toRevision, "to-revision", 0, "the revision to return to (default: the one before the current)")
	a.add(cmd)
	f.addAdoption(cmd)
	return cmd
}

// rollbackInstallation points an Installation at the stored strategy of a
// revision, its digest pinned; the operator does the rest.
func (c *cluster) rollbackInstallation(ctx context.Context, w io.Writer, in *unstructured.Unstructured, rev *history.Revision) error {
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
	if _, err := c.dynamic.Resource(installationsGVR).Namespace(in.GetNamespace()).Patch(ctx, in.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: inventory.ManagedBy}); err != nil {
		return fmt.Errorf("roll back installation %s/%s: %w", in.GetNamespace(), in.GetName(), err)
	}
	_, err = fmt.Fprintf(w, "installation %s/%s: spec.strategy is now configmap %s (revision %d, %s); the operator rolls it back (kubectl installstrategy status %s -n %s --watch)\n",
		in.GetNamespace(), in.GetName(), rev.ConfigMap, rev.Revision, identityString(rev.Identity), in.GetName(), in.GetNamespace())
	return err
}

// deleteHistory removes a plugin installation's history and the revision
// ConfigMaps it kept (uninstall).
func (c *cluster) deleteHistory(ctx context.Context, owner inventory.Owner) error {
	sel := owner.Selector() + "," + revisionLabel + "=" + owner.NameValue()
	if err := c.kube.CoreV1().ConfigMaps(owner.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return fmt.Errorf("uninstall %s: delete its revisions: %w", owner, err)
	}
	return history.NewStore(c.kube).Delete(ctx, owner)
}
