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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
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
		case !a.Matches(r):
			row.Status, row.Reason = revisionTampered, fmt.Sprintf("the history record says %s %s, the anchor %s %s", identityString(r.Identity), r.Digest, identityString(a.Identity), a.Digest)
		default:
			row.Status, row.Reason = c.checkRevisionText(ctx, dopts, owner, r.ConfigMap, a)
		}
		rows = append(rows, row)
	}
	if anchor != nil {
		for _, a := range anchor.Revisions {
			if seen[a.Revision] {
				continue
			}
			row := revisionRow{Revision: history.Revision{Revision: a.Revision, Identity: a.Identity, Digest: a.Digest, ConfigMap: revisionName(owner, a.Revision)}}
			row.Status, row.Reason = c.checkRevisionText(ctx, dopts, owner, row.ConfigMap, &a)
			if row.Status == revisionVerified {
				row.Reason = "the history ConfigMap lacks it (edited or replaced)"
			}
			rows = append(rows, row)
		}
	}
	slices.SortStableFunc(rows, func(x, y revisionRow) int { return y.Revision.Revision - x.Revision.Revision })
	return rows
}

// checkRevisionText checks the ConfigMap of an anchored revision.
func (c *cluster) checkRevisionText(ctx context.Context, dopts codec.DecodeOptions, owner inventory.Owner, name string, a *history.Anchored) (string, string) {
	if name == "" {
		return revisionNotKept, "too large to keep"
	}
	if _, err := c.loadAnchored(ctx, dopts, owner, name, a); err != nil {
		return revisionTampered, err.Error()
	}
	return revisionVerified, ""
}

// loadAnchored reads the ConfigMap of an anchored revision and returns its
// strategy only if it holds the anchored text and identity: the digest
// annotation is compared before anything is decoded, the text is hashed
// while decoded, and nothing is parsed unless both match.
func (c *cluster) loadAnchored(ctx context.Context, dopts codec.DecodeOptions, owner inventory.Owner, name string, a *history.Anchored) (*codec.Loaded, error) {
	cm, err := c.kube.CoreV1().ConfigMaps(owner.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("configmap %s/%s is gone", owner.Namespace, name)
		}
		return nil, fmt.Errorf("read configmap %s/%s: %w", owner.Namespace, name, err)
	}
	if got := cm.Annotations[codec.NativeDigestAnnotation]; got != a.Digest {
		return nil, fmt.Errorf("configmap %s/%s records digest %s, the anchor %s", owner.Namespace, name, orNone(got), a.Digest)
	}
	if id := codec.DescribeConfigMap(cm).Identity; id != a.Identity {
		return nil, fmt.Errorf("configmap %s/%s records identity %s, the anchor %s", owner.Namespace, name, identityString(id), identityString(a.Identity))
	}
	text, info, err := codec.Decode(cm, dopts)
	if err != nil {
		return nil, err
	}
	if !info.DigestVerified || info.Digest != a.Digest {
		return nil, fmt.Errorf("configmap %s/%s: text does not hash to the anchored %s", owner.Namespace, name, a.Digest)
	}
	s, warnings, err := strategy.Parse(text, strategy.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: manifests: %w", owner.Namespace, name, err)
	}
	s.Identity = a.Identity
	return &codec.Loaded{Strategy: s, Text: text, Warnings: warnings, Info: &info}, nil
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
