package apply

import (
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// AdoptPolicy says what to do with a live object that has the name of a
// strategy object but was not written by this applier.
type AdoptPolicy int

const (
	// AdoptNever reports such an object as a *ConflictError and leaves it
	// alone. It is the zero value.
	AdoptNever AdoptPolicy = iota
	// AdoptAll takes such objects over: they are applied like ours.
	// Options.Adoptable, when set, narrows it to the objects it lists.
	AdoptAll
)

// Options tunes an Applier. Owner is required; the zero value of the rest
// applies for an empty identity with field manager "installstrategy",
// never adopting.
type Options struct {
	// Identity is the target identity written into the annotations.
	Identity strategy.Identity
	// FieldManager is the server-side apply field manager; "" means
	// DefaultFieldManager.
	FieldManager string
	// Owner is the installation whose labels the applier writes, and the
	// only one whose objects it updates.
	Owner inventory.Owner
	// Adopt says whether objects no installation owns (written by kubectl,
	// Helm or a person) are taken over. Another installation's objects are
	// never adopted, nor is a system object (inventory.SystemObject) that
	// SystemConsent does not name.
	Adopt AdoptPolicy
	// Adoptable, when not nil, is all that AdoptAll takes over: the
	// objects proven to be a Helm release's (helmrelease.Release.Verify).
	// Any other object no installation owns is a conflict.
	Adoptable map[strategy.ObjectRef]bool
	// SystemConsent names the system objects (inventory.SystemObject)
	// that may be adopted. The zero value names none: such objects are
	// conflicts (ConflictError.System says why).
	SystemConsent inventory.SystemConsent
	// DryRun sends every write as a server-side dry run: nothing is
	// persisted, and a recreate is only reported.
	DryRun bool
	// RetryFor bounds how long Apply and Delete retry a transient failure
	// (isTransient: a webhook whose backend is not up yet, 429, 5xx, a
	// conflict, a broken connection) before returning it; 0 means
	// defaultRetryFor, a negative value does not retry.
	RetryFor time.Duration
	// LeavePodTemplates leaves pod templates as the strategy has them: no
	// identity annotations are put on them, so taking over running
	// workloads (a Helm release's) restarts no pod. Their pods then carry
	// no identity, which rollover checks look for: use it without waiting.
	// The zero value annotates pod templates (see Prepare).
	LeavePodTemplates bool
	// Released holds objects whose installation labels name an
	// installation that no longer exists (no inventory; see
	// inventory.Store.Holder), by object, with that installation's
	// "namespace/name": while the live object still names it, it is taken
	// over (relabelled in place) instead of being a conflict. Nil takes
	// nothing over.
	Released map[strategy.ObjectRef]string
	// Recreate names objects of kinds that are never recreated
	// (kinds.Info.NeverRecreate) that may be deleted and written anew
	// when an immutable field changes: an override the caller accepted.
	// Nil recreates none of them.
	Recreate map[strategy.ObjectRef]bool
}

// Action is what the applier did (or, on a dry run, would do) to an object.
type Action string

// Result says what happened to one object.
type Result struct {
	Ref    strategy.ObjectRef `json:"ref"`
	Action Action             `json:"action"`
	// Reason explains the action: the kind not served, the first field that
	// differs, the immutable field, the owner of a conflicting object.
	Reason string `json:"reason,omitempty"`
	// Changes lists the fields an update changes (empty for create).
	Changes []Change `json:"changes,omitempty"`
	// Fallback is true when server-side apply rejected the object and it
	// was written with create or update instead.
	Fallback bool `json:"fallback,omitempty"`
	// Adopted is true when the object existed, belonged to no installation,
	// and was taken over (Options.Adopt); Reason says from whom.
	Adopted bool `json:"adopted,omitempty"`
	// Shared is true for an existing object of a kind merged into rather
	// than owned (kinds.Info.MergeIntoExisting): written, never deleted.
	Shared bool `json:"shared,omitempty"`
	// Object is the live object after the write, or the live object when
	// nothing was written; nil for skipped objects.
	Object *unstructured.Unstructured `json:"-"`
	// Generation is Object's metadata.generation (0 without Object): what
	// the write left, or what was found when nothing was written. It
	// outlives Object in a run's results (pkg/engine), so that changes
	// seen later can be told from the applier's own.
	Generation int64 `json:"generation,omitempty"`
}

// ConflictError reports a live object that is not ours where a strategy
// object should be.
type ConflictError struct {
	Ref strategy.ObjectRef
	// ManagedBy is the live object's managed-by label ("" when absent).
	ManagedBy string
	// Installation names the other installation ("namespace/name") when
	// the object is another installation's; "" otherwise.
	Installation string
	// System says why the object is a system object that adoption may
	// not take without consent naming it (inventory.AdoptionNeedsConsent);
	// "" otherwise.
	System string
}

func (e *ConflictError) Error() string {
	switch {
	case e.Installation != "":
		return fmt.Sprintf("%s belongs to installation %s; not overwritten", e.Ref, e.Installation)
	case e.System != "":
		return fmt.Sprintf("%s is %s; not overwritten", e.Ref, e.System)
	case e.ManagedBy == "":
		return fmt.Sprintf("%s exists and was not applied by installstrategy (no managed-by label); not overwritten (adopt it to take it over)", e.Ref)
	}
	return fmt.Sprintf("%s exists and is managed by someone else (managed-by %q); not overwritten (adopt it to take it over)", e.Ref, e.ManagedBy)
}

func (a *Applier) conflictOf(ref strategy.ObjectRef, live *unstructured.Unstructured, claim inventory.Claim) *ConflictError {
	e := &ConflictError{Ref: ref, ManagedBy: live.GetLabels()[metakeys.ManagedByLabel]}
	switch {
	case claim == inventory.ClaimOther:
		e.Installation = inventory.OtherOwner(live.GetLabels())
	case claim == inventory.ClaimNone && a.adopts(ref):
		e.System = inventory.AdoptionNeedsConsent(ref, live, a.opts.SystemConsent)
	}
	return e
}

// adopts reports whether the options let ref be adopted, system objects
// aside (see adoptable).
func (a *Applier) adopts(ref strategy.ObjectRef) bool {
	return a.opts.Adopt == AdoptAll && (a.opts.Adoptable == nil || a.opts.Adoptable[ref])
}

// adoptable reports whether live, the object of ref that no installation
// owns, is taken over: the options adopt it, and it is not a system object
// (inventory.SystemObject) that SystemConsent does not name.
func (a *Applier) adoptable(ref strategy.ObjectRef, live *unstructured.Unstructured) bool {
	return a.adopts(ref) && inventory.AdoptionNeedsConsent(ref, live, a.opts.SystemConsent) == ""
}

// NotServedError reports a kind the cluster does not serve.
type NotServedError struct {
	Ref strategy.ObjectRef
}

func (e *NotServedError) Error() string {
	return fmt.Sprintf("%s: kind %s is not served by the cluster", e.Ref, e.Ref.GroupKind())
}

// The actions.
const (
	ActionCreate   Action = "create"
	ActionUpdate   Action = "update"
	ActionRecreate Action = "recreate"
	// ActionRefuse: an immutable field changes on an object that is never
	// recreated (kinds.Info.NeverRecreate); nothing is written.
	ActionRefuse    Action = "refuse"
	ActionUnchanged Action = "unchanged"
	ActionSkip      Action = "skip"
	ActionConflict  Action = "conflict"
	ActionDelete    Action = "delete"
	// ActionMigrate: a CRD's stored custom resources are rewritten at its
	// new storage version before a stored version is dropped.
	ActionMigrate Action = "migrate"
)
