package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The history ConfigMap and the revision ConfigMaps of a plugin
// installation live in its namespace, where anyone who may edit ConfigMaps
// can rewrite them, digests included. What a rollback acts on is therefore
// anchored elsewhere: each revision's number, identity and text digest are
// also recorded in an annotation of the installation's Namespace object.
// The Namespace is cluster-scoped: no default namespace role (admin, edit)
// may update it, so a namespace editor cannot forge the anchor, while the
// installer of a product with cluster-scoped objects (CRDs, ClusterRoles)
// has the rights to write it anyway.

// maxAnchored is the most revisions one anchor keeps (the newest): every
// installation of a namespace shares its Namespace object's 256 KiB of
// annotations.
const maxAnchored = 100

// maxAnchorBytes bounds the anchor annotation read: maxAnchored entries of
// the longest identity the API accepts would not reach it.
const maxAnchorBytes = 128 << 10

// ErrAnchorUnreadable is wrapped by the error of an anchor that could not be
// read (the Namespace object is forbidden to the user): its revisions can
// be neither verified nor trusted.
var ErrAnchorUnreadable = errors.New("anchor unreadable")

// Anchored is a revision as its installer recorded it in the anchor.
type Anchored struct {
	Revision int               `json:"revision"`
	Digest   string            `json:"digest"`
	Identity strategy.Identity `json:"identity"`
}

// Anchor is what the Namespace object records of a plugin installation's
// revisions, newest first.
type Anchor struct {
	Owner     inventory.Owner
	Revisions []Anchored
}

// AnchorAnnotation is the Namespace annotation that anchors an owner's
// revisions.
func AnchorAnnotation(o inventory.Owner) string {
	return metakeys.AnchorAnnotationPrefix + o.NameValue()
}

// Find returns the anchored revision n, nil when the anchor has none.
func (a *Anchor) Find(n int) *Anchored {
	if a == nil {
		return nil
	}
	for i := range a.Revisions {
		if a.Revisions[i].Revision == n {
			return &a.Revisions[i]
		}
	}
	return nil
}

// Current is the newest anchored revision, nil when there is none.
func (a *Anchor) Current() *Anchored {
	if a == nil || len(a.Revisions) == 0 {
		return nil
	}
	return &a.Revisions[0]
}

// Matches reports whether a history record says what the anchor does of
// its revision: same number, identity and digest.
func (a Anchored) Matches(r Revision) bool {
	return a.Revision == r.Revision && a.Digest == r.Digest && a.Identity == r.Identity
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Anchor reads the anchor of an owner's revisions. A Namespace without
// the annotation is an empty anchor; a Namespace the user may not read is
// an error wrapping ErrAnchorUnreadable.
func (s *Store) Anchor(ctx context.Context, o inventory.Owner) (*Anchor, error) {
	a, _, err := s.anchor(ctx, o)
	return a, err
}

func (s *Store) anchor(ctx context.Context, o inventory.Owner) (*Anchor, *corev1.Namespace, error) {
	ns, err := s.kube.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("revisions of %s: read namespace %s: %w: %w", o, o.Namespace, ErrAnchorUnreadable, err)
		}
		return nil, nil, fmt.Errorf("revisions of %s: read namespace %s: %w", o, o.Namespace, err)
	}
	a, err := decodeAnchor(o, ns.Annotations[AnchorAnnotation(o)])
	return a, ns, err
}

// decodeAnchor parses an anchor annotation, refusing what the installer
// would not have written (oversized, a revision out of order, a digest that
// is not one).
func decodeAnchor(o inventory.Owner, raw string) (*Anchor, error) {
	a := &Anchor{Owner: o}
	if raw == "" {
		return a, nil
	}
	fail := func(err error) (*Anchor, error) {
		return nil, fmt.Errorf("revisions of %s: namespace %s annotation %s: %w", o, o.Namespace, AnchorAnnotation(o), err)
	}
	if len(raw) > maxAnchorBytes {
		return fail(fmt.Errorf("%d bytes, more than the %d an anchor holds", len(raw), maxAnchorBytes))
	}
	if err := json.Unmarshal([]byte(raw), &a.Revisions); err != nil {
		return fail(err)
	}
	for i, r := range a.Revisions {
		if r.Revision <= 0 || (i > 0 && r.Revision >= a.Revisions[i-1].Revision) {
			return fail(fmt.Errorf("revision %d out of order", r.Revision))
		}
		if !digestRE.MatchString(r.Digest) {
			return fail(fmt.Errorf("revision %d: digest %q is not sha256:<64 hex digits>", r.Revision, r.Digest))
		}
	}
	return a, nil
}

// RecordAnchor anchors revision r of an owner (replacing an anchored
// revision of the same number) and keeps the newest limit anchored
// revisions (0 means DefaultLimit, at most maxAnchored). The write is a
// patch of the Namespace's annotation conditional on the version read, so
// a concurrent record is read again rather than lost.
func (s *Store) RecordAnchor(ctx context.Context, o inventory.Owner, r Revision, limit int) (*Anchor, error) {
	if !digestRE.MatchString(r.Digest) {
		return nil, fmt.Errorf("anchor revision %d of %s: digest %q is not sha256:<64 hex digits>", r.Revision, o, r.Digest)
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, maxAnchored)
	var out *Anchor
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		a, ns, err := s.anchor(ctx, o)
		if err != nil {
			return err
		}
		a.Revisions = slices.DeleteFunc(a.Revisions, func(x Anchored) bool { return x.Revision == r.Revision })
		a.Revisions = append(a.Revisions, Anchored{Revision: r.Revision, Digest: r.Digest, Identity: r.Identity})
		slices.SortFunc(a.Revisions, func(x, y Anchored) int { return y.Revision - x.Revision })
		if len(a.Revisions) > limit {
			a.Revisions = a.Revisions[:limit]
		}
		if err := s.patchAnchor(ctx, o, ns.ResourceVersion, a.Revisions); err != nil {
			return err
		}
		out = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("anchor revision %d of %s in namespace %s: %w", r.Revision, o, o.Namespace, err)
	}
	return out, nil
}

// DeleteAnchor removes an owner's anchor (uninstall); a missing one is no
// error.
func (s *Store) DeleteAnchor(ctx context.Context, o inventory.Owner) error {
	ns, err := s.kube.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete the revision anchor of %s: %w", o, err)
	}
	if _, ok := ns.Annotations[AnchorAnnotation(o)]; !ok {
		return nil
	}
	if err := s.patchAnchor(ctx, o, "", nil); err != nil {
		return fmt.Errorf("delete the revision anchor of %s: %w", o, err)
	}
	return nil
}

// patchAnchor sets (revs non-nil) or removes the anchor annotation, on
// the Namespace version read when resourceVersion is given.
func (s *Store) patchAnchor(ctx context.Context, o inventory.Owner, resourceVersion string, revs []Anchored) error {
	var value any
	if revs != nil {
		data, err := json.Marshal(revs)
		if err != nil {
			return err
		}
		value = string(data)
	}
	md := map[string]any{"annotations": map[string]any{AnchorAnnotation(o): value}}
	if resourceVersion != "" {
		md["resourceVersion"] = resourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	_, err = s.kube.CoreV1().Namespaces().Patch(ctx, o.Namespace, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: metakeys.ManagedBy})
	return err
}
