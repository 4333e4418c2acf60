package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/source"
)

// The check statuses of a plugin installation's revision (history's
// STATUS column, rollback's refusal).
const (
	// revisionVerified: anchored, and its ConfigMap holds the anchored text
	// and identity.
	revisionVerified = "verified"
	// revisionTampered: the history record or the ConfigMap says something
	// other than the anchor.
	revisionTampered = "TAMPERED"
	// revisionUnanchored: no anchor records it (recorded by a user who may
	// not patch the Namespace, before anchors existed, or forged).
	revisionUnanchored = "UNANCHORED"
	// revisionNotKept: anchored, but too large to keep (nothing to check).
	revisionNotKept = "not kept"
	// revisionOperator: an Installation's revision, which the operator
	// verifies (its stored strategies are signed by its key).
	revisionOperator = "-"
)

// revisionRow is a revision of a plugin installation with the result of
// its check.
type revisionRow struct {
	history.Revision
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// checkedRevisions merges a plugin installation's history with its anchor,
// newest first: each recorded or anchored revision with its check. The
// anchor's view wins; a revision only the history records is unanchored.
func (c *cluster) checkedRevisions(ctx context.Context, dopts codec.DecodeOptions, owner inventory.Owner, h *history.History, anchor *history.Anchor, anchorErr error) []revisionRow {
	var rows []revisionRow
	seen := map[int]bool{}
	for _, r := range h.Revisions {
		seen[r.Revision] = true
		row := revisionRow{Revision: r}
		a := anchor.Find(r.Revision)
		switch {
		case a == nil && anchorErr != nil:
			row.Status, row.Reason = revisionUnanchored, anchorErr.Error()
		case a == nil:
			row.Status, row.Reason = revisionUnanchored, "the namespace's anchor does not record it"
		default:
			_, row.Status, row.Reason = c.checkAnchored(ctx, dopts, owner, &r, a)
		}
		rows = append(rows, row)
	}
	if anchor != nil {
		for _, a := range anchor.Revisions {
			if seen[a.Revision] {
				continue
			}
			row := revisionRow{Revision: history.Revision{Revision: a.Revision, Identity: a.Identity, Digest: a.Digest, ConfigMap: revisionName(owner, a.Revision)}}
			_, row.Status, row.Reason = c.checkAnchored(ctx, dopts, owner, nil, &a)
			if row.Status == revisionVerified {
				row.Reason = "the history ConfigMap lacks it (edited or replaced)"
			}
			rows = append(rows, row)
		}
	}
	slices.SortStableFunc(rows, func(x, y revisionRow) int { return y.Revision.Revision - x.Revision.Revision })
	return rows
}

// checkAnchored checks an anchored revision against its history record r
// (nil: none) and loads it from the ConfigMap rollback reads
// (revisionName), whatever the record names: the strategy when it is
// verified, else nil and the status and reason history shows and
// rollback refuses with.
func (c *cluster) checkAnchored(ctx context.Context, dopts codec.DecodeOptions, owner inventory.Owner, r *history.Revision, a *history.Anchored) (*codec.Loaded, string, string) {
	if r != nil && !a.Matches(*r) {
		return nil, revisionTampered, fmt.Sprintf("the history record says %s %s, the anchor %s %s", identityString(r.Identity), r.Digest, identityString(a.Identity), a.Digest)
	}
	name := revisionName(owner, a.Revision)
	l, err := c.loadAnchored(ctx, dopts, owner, name, a)
	switch {
	case errors.Is(err, errRevisionGone) && r != nil && r.ConfigMap == "":
		return nil, revisionNotKept, "too large to keep"
	case err != nil:
		return nil, revisionTampered, err.Error()
	case r != nil && r.ConfigMap != name:
		return nil, revisionTampered, fmt.Sprintf("the history record names configmap %s, the revision is kept in %s", orNone(r.ConfigMap), name)
	}
	return l, revisionVerified, ""
}

// errRevisionGone is the error of an anchored revision whose ConfigMap
// does not exist (too large to keep, or deleted).
var errRevisionGone = errors.New("is gone")

// loadAnchored reads the ConfigMap of an anchored revision and returns its
// strategy only if it holds the anchored text and identity
// (history.OpenRevision: the metadata is compared before anything is
// decoded, the text is decoded within bounds and hashed, and nothing is
// parsed unless it hashes to the anchored digest).
func (c *cluster) loadAnchored(ctx context.Context, dopts codec.DecodeOptions, owner inventory.Owner, name string, a *history.Anchored) (*codec.Loaded, error) {
	get := func(ctx context.Context) (*corev1.ConfigMap, error) {
		cm, err := c.kube.CoreV1().ConfigMaps(owner.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("configmap %s/%s %w", owner.Namespace, name, errRevisionGone)
		case err != nil:
			return nil, fmt.Errorf("read configmap %s/%s: %w", owner.Namespace, name, err)
		}
		return cm, nil
	}
	l, err := source.Revision{Get: get, Anchored: a, Decode: dopts}.Load(ctx)
	if err != nil {
		return nil, err
	}
	return loadedFrom(l), nil
}

// loadedFrom is a strategy pkg/source let through, as the verbs take it.
func loadedFrom(l *source.Loaded) *codec.Loaded {
	return &codec.Loaded{Strategy: l.Strategy, Text: l.Text, Warnings: l.Warnings, Info: l.Info, VerifiedBy: l.VerifiedBy}
}

// stdinIsTerminal says whether standard input is a terminal a person
// answers on (a variable so tests can play one).
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// errNotConfirmed is the refusal of a change nobody confirmed.
var errNotConfirmed = errors.New("not confirmed: nothing changed")

// confirm asks on a terminal whether to go on with what question says;
// without a terminal, yes (--yes) is the only answer.
func (o *options) confirm(question string, yes bool) error {
	if yes {
		return nil
	}
	if !stdinIsTerminal(o.streams.In) {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: standard input is not a terminal to confirm it; give --yes", question)}
	}
	fmt.Fprintf(o.streams.ErrOut, "%s [y/N]: ", question)
	line, _ := bufio.NewReader(io.LimitReader(o.streams.In, 64)).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return &ExitError{Code: 1, Err: errNotConfirmed}
}
