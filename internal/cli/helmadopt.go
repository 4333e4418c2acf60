package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/helmrelease"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// helmAdoption is plan's and apply's --adopt-helm-release.
type helmAdoption struct {
	name string
	rel  *helmrelease.Release
}

func (h *helmAdoption) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&h.name, "adopt-helm-release", "", "take over every object of this Helm release in -n (field ownership moved, no pod restarted), then retire the release: Helm's annotations removed, its release Secrets deleted (kept in secret/installstrategy-helm-release-NAME); without a strategy argument the strategy is the release's own deployed manifest. As Helm requires, every object must carry the release's label app.kubernetes.io/managed-by=Helm and meta.helm.sh annotations, and be no system object (see --allow-system-object), or nothing is taken over")
}

// load finds the release and returns the strategy: src when given, else
// the deployed revision's manifest at the chart's version. It turns on
// adoption and leaves pod templates alone.
func (h *helmAdoption) load(ctx context.Context, o *options, src string, f *reconcileFlags) (*codec.Loaded, error) {
	c, err := o.cluster()
	if err != nil {
		return nil, err
	}
	if h.rel, err = helmrelease.Find(ctx, c.kube, c.namespace, h.name); err != nil {
		return nil, err
	}
	// The release Secret is anyone's who may write Secrets in -n: only
	// what the live objects prove is the release's is adopted (with
	// --adopt too, the strategy's other objects no installation owns).
	consent, err := f.consent()
	if err != nil {
		return nil, err
	}
	objs, resolve, err := h.objects(c)
	if err != nil {
		return nil, err
	}
	owned, err := h.rel.Verify(ctx, resolve, objs, helmrelease.VerifyOptions{AllowMissing: src != "", SystemConsent: consent})
	if err != nil {
		return nil, err
	}
	if !f.adopt {
		f.adoptable = owned
	}
	f.adopt, f.leavePodTemplates = true, true
	if src != "" {
		return o.strategyArg(ctx, src)
	}
	s, warnings, err := strategy.Parse([]byte(h.rel.Manifest), strategy.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: manifest: %w", h.rel, err)
	}
	s.Identity = strategy.Identity{Version: h.rel.Chart.Version}
	return &codec.Loaded{Strategy: s, Warnings: warnings}, nil
}

// objects returns the release's own objects, namespaced as Helm applied
// them, and the resolver of their resources.
func (h *helmAdoption) objects(c *cluster) ([]*unstructured.Unstructured, helmrelease.Resolver, error) {
	a, err := c.applier()
	if err != nil {
		return nil, nil, err
	}
	s, _, err := strategy.Parse([]byte(h.rel.Manifest), strategy.ParseOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: manifest: %w", h.rel, err)
	}
	if s, err = a.DefaultNamespaces(s, h.rel.Namespace); err != nil {
		return nil, nil, err
	}
	return s.Objects, a.Resource, nil
}

// printPlan prints what retiring the release would do.
func (h *helmAdoption) printPlan(ctx context.Context, w io.Writer, o *options, _ *codec.Loaded) error {
	c, err := o.cluster()
	if err != nil {
		return err
	}
	objs, resolve, err := h.objects(c)
	if err != nil {
		return err
	}
	r, err := h.rel.Plan(ctx, resolve, objs)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthen retire %s: remove Helm's annotations from %d objects, delete %d release secrets (%s), kept in secret/%s\n",
		h.rel, len(r.Unmarked), len(r.Deleted), strings.Join(r.Deleted, ", "), r.Backup)
	return nil
}

// apply takes the release over and retires it.
func (h *helmAdoption) apply(cmd *cobra.Command, o *options, args []string, file *fileFlag, f *reconcileFlags, a applyFlags, dryRun string) error {
	if dryRun != "none" {
		return usageError(errors.New("--adopt-helm-release: for a dry run use plan --adopt-helm-release"))
	}
	var src string
	if len(args) > 0 || file.path != "" {
		var err error
		if src, err = file.source(cmd, args); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout+30*time.Second)
	defer cancel()
	l, err := h.load(ctx, o, src, f)
	if err != nil {
		return err
	}
	c, err := o.prepared(l, f)
	if err != nil {
		return err
	}
	// Rollover checks look for identity the pod templates do not get.
	a.wait = false
	if err := o.runApply(ctx, c, l, f, a, h.rel.String()); err != nil {
		return fmt.Errorf("%w (the helm release is left as it was)", err)
	}
	objs, resolve, err := h.objects(c)
	if err != nil {
		return err
	}
	r, err := h.rel.Retire(ctx, c.kube, resolve, objs)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.streams.Out, "retired %s: Helm's annotations removed from %d objects, release secrets deleted (%s), kept in secret/%s\n",
		h.rel, len(r.Unmarked), strings.Join(r.Deleted, ", "), r.Backup)
	return nil
}
