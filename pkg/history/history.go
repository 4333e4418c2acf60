// Package history records the strategies an installation has run, newest
// first, in one ConfigMap per installation beside its inventory: the
// revision, identity, stored strategy ConfigMap and digest, when, and from
// what source. The plugin's history and rollback read it, and the store's
// GC keeps the strategies it names (the last Limit of each installation)
// instead of deleting every strategy but the one in use.
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const (
	// RevisionsKey is the data key holding the revisions as JSON.
	RevisionsKey = "revisions"
	// namePrefix starts every history ConfigMap's name; the rest is the
	// inventory's (see inventory.ConfigMapName).
	namePrefix = "installstrategy-history-"
	// DefaultLimit is how many revisions are kept when Limit is 0.
	DefaultLimit = 5
)

// Revision is one strategy an installation ran.
type Revision struct {
	// Revision counts up from 1 for each strategy recorded.
	Revision int               `json:"revision"`
	Identity strategy.Identity `json:"identity"`
	// ConfigMap is the stored strategy's (head) ConfigMap in the
	// installation's namespace, "" when it was not stored.
	ConfigMap string `json:"configMap,omitempty"`
	// Digest is the sha256 digest of its text, when recorded.
	Digest string `json:"digest,omitempty"`
	// Applied is when the strategy was rolled out.
	Applied time.Time `json:"applied"`
	// Source says where the strategy came from: a file, cm/NAME, an
	// image, "rollback to revision N".
	Source string `json:"source,omitempty"`
}

// History is what an installation has run, newest first.
type History struct {
	Owner     inventory.Owner
	Revisions []Revision
	// read is the ConfigMap it was read from (nil: none existed), for
	// RecordOn's first attempt.
	read *corev1.ConfigMap
}

// Current is the newest revision, nil when there is none.
func (h *History) Current() *Revision {
	if len(h.Revisions) == 0 {
		return nil
	}
	return &h.Revisions[0]
}

// Get returns revision n, or (n == 0) the one before the newest.
func (h *History) Get(n int) (*Revision, error) {
	if n == 0 {
		if len(h.Revisions) < 2 {
			return nil, fmt.Errorf("installation %s has no revision before the current one (%d recorded)", h.Owner, len(h.Revisions))
		}
		return &h.Revisions[1], nil
	}
	for i := range h.Revisions {
		if h.Revisions[i].Revision == n {
			return &h.Revisions[i], nil
		}
	}
	return nil, fmt.Errorf("installation %s has no revision %d (kubectl installstrategy history %s -n %s lists them)", h.Owner, n, h.Owner.Name, h.Owner.Namespace)
}

// ConfigMapName is the name of an owner's history ConfigMap.
func ConfigMapName(o inventory.Owner) string {
	return namePrefix + strings.TrimPrefix(inventory.ConfigMapName(o), inventory.NamePrefix)
}

// Store reads and writes histories.
type Store struct {
	kube kubernetes.Interface
	// Clock stamps Applied; nil means time.Now.
	Clock func() time.Time
	// OwnerReference, when set, is put on histories created (the operator
	// sets its Installation, so the history goes with it).
	OwnerReference *metav1.OwnerReference
}

// NewStore returns a store over a typed client.
func NewStore(kube kubernetes.Interface) *Store { return &Store{kube: kube} }

// Get reads an owner's history; a missing one is empty. One whose records
// do not decode is an error wrapping ErrCorrupt, with an empty history.
func (s *Store) Get(ctx context.Context, o inventory.Owner) (*History, error) {
	h, _, err := s.get(ctx, o)
	return h, err
}

func (s *Store) get(ctx context.Context, o inventory.Owner) (*History, *corev1.ConfigMap, error) {
	cm, err := s.kube.CoreV1().ConfigMaps(o.Namespace).Get(ctx, ConfigMapName(o), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &History{Owner: o}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("history of %s: %w", o, err)
	}
	h, err := decode(o, cm)
	return h, cm, err
}

// ErrCorrupt is wrapped by the error of a history ConfigMap whose records
// do not decode (or are beyond maxRecordsBytes): whoever may edit the
// namespace's ConfigMaps can write one.
var ErrCorrupt = errors.New("history unreadable")

// maxRecordsBytes bounds the records decoded: what one ConfigMap holds.
const maxRecordsBytes = 1 << 20

// decode reads a history ConfigMap's records. One that does not decode is
// an error wrapping ErrCorrupt, returned with an empty history of cm, so a
// caller may go on without its records (the anchor says which revisions
// there are) and RecordOn replaces it.
func decode(o inventory.Owner, cm *corev1.ConfigMap) (*History, error) {
	h := &History{Owner: o, read: cm}
	data := cm.Data[RevisionsKey]
	if data == "" {
		return h, nil
	}
	fail := func(err error) (*History, error) {
		return &History{Owner: o, read: cm}, fmt.Errorf("history of %s: configmap %s/%s: data.%s: %w: %w", o, cm.Namespace, cm.Name, RevisionsKey, ErrCorrupt, err)
	}
	if len(data) > maxRecordsBytes {
		return fail(fmt.Errorf("%d bytes, more than %d", len(data), maxRecordsBytes))
	}
	if err := json.Unmarshal([]byte(data), &h.Revisions); err != nil {
		return fail(err)
	}
	return h, nil
}

// Record adds rev as the newest revision of o's history (its number and,
// when zero, its time are set here) and keeps the newest limit revisions (0
// means DefaultLimit); it returns the history written and the revisions
// dropped. A history whose records do not decode (ErrCorrupt) is
// replaced. When the newest revision already runs the same identity with
// the same digest, nothing is added (a resync, a re-apply). A non-zero
// rev.Revision is the least number the revision gets, and it is added
// even then: a caller that knows of later numbers than the history does
// (an anchor, see RecordAnchor) never reuses one.
func (s *Store) Record(ctx context.Context, o inventory.Owner, rev Revision, limit int) (*History, []Revision, error) {
	return s.RecordOn(ctx, nil, o, rev, limit)
}

// RecordOn is Record starting from read, a history Get returned a moment
// ago (nil: read it now): one request fewer when nobody wrote it since,
// and a fresh read and another attempt when someone did (the write is
// refused as a conflict).
func (s *Store) RecordOn(ctx context.Context, read *History, o inventory.Owner, rev Revision, limit int) (*History, []Revision, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if rev.Applied.IsZero() {
		now := time.Now
		if s.Clock != nil {
			now = s.Clock
		}
		rev.Applied = now().UTC().Truncate(time.Second)
	}
	floor := rev.Revision
	var h *History
	var dropped []Revision
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm *corev1.ConfigMap
		var err error
		if read != nil && read.Owner == o {
			h = &History{Owner: o, Revisions: slices.Clone(read.Revisions)}
			cm, read = read.read, nil
		} else if h, cm, err = s.get(ctx, o); err != nil && !errors.Is(err, ErrCorrupt) {
			return err
		}
		dropped = nil
		cur := h.Current()
		if cur != nil && cur.Identity == rev.Identity && cur.Digest == rev.Digest && floor <= cur.Revision {
			if len(h.Revisions) <= limit {
				return nil
			}
		} else {
			rev.Revision = max(floor, 1)
			if cur != nil {
				rev.Revision = max(floor, cur.Revision+1)
			}
			h.Revisions = append([]Revision{rev}, h.Revisions...)
		}
		if len(h.Revisions) > limit {
			dropped = append(dropped, h.Revisions[limit:]...)
			h.Revisions = h.Revisions[:limit]
		}
		err = s.write(ctx, h, cm)
		if cm == nil && apierrors.IsAlreadyExists(err) {
			// Created since it was read: read it again, as for a conflict.
			return apierrors.NewConflict(corev1.Resource("configmaps"), ConfigMapName(o), err)
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("record history of %s: %w", o, err)
	}
	return h, dropped, nil
}

func (s *Store) write(ctx context.Context, h *History, cm *corev1.ConfigMap) error {
	data, err := json.Marshal(h.Revisions)
	if err != nil {
		return err
	}
	o := h.Owner
	if cm == nil {
		labels := o.Labels()
		labels[metakeys.HistoryLabel] = ""
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(o), Namespace: o.Namespace, Labels: labels,
			Annotations: map[string]string{metakeys.InstallationAnnotation: o.Name}}}
		if s.OwnerReference != nil {
			cm.OwnerReferences = []metav1.OwnerReference{*s.OwnerReference}
		}
		cm.Data = map[string]string{RevisionsKey: string(data)}
		_, err = s.kube.CoreV1().ConfigMaps(o.Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: metakeys.ManagedBy})
		return err
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[RevisionsKey] = string(data)
	_, err = s.kube.CoreV1().ConfigMaps(o.Namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: metakeys.ManagedBy})
	return err
}

// Delete removes an owner's history (uninstall); a missing one is no
// error.
func (s *Store) Delete(ctx context.Context, o inventory.Owner) error {
	err := s.kube.CoreV1().ConfigMaps(o.Namespace).Delete(ctx, ConfigMapName(o), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete history of %s: %w", o, err)
	}
	return nil
}

// Referenced returns every revision that the histories of a namespace
// hold: what the store's GC keeps, and what no installation's trimming
// may delete while another still names it.
func (s *Store) Referenced(ctx context.Context, namespace string) ([]Revision, error) {
	list, err := s.kube.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: metakeys.HistoryLabel})
	if err != nil {
		return nil, fmt.Errorf("list histories in namespace %s: %w", namespace, err)
	}
	var out []Revision
	for i := range list.Items {
		h, err := decode(inventory.Owner{Namespace: namespace, Name: list.Items[i].Annotations[metakeys.InstallationAnnotation]}, &list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, h.Revisions...)
	}
	return out, nil
}
