// Package inventory owns who an applied object belongs to: the identity of
// an installation (an Installation namespace/name driven by the operator, or
// a plugin installation with a name), the labels that mark its objects, and
// the in-cluster inventory — one ConfigMap per installation listing every
// object it applied — that prune and uninstall delete from. An object is
// deleted only when it is in its installation's inventory *and* still carries
// that installation's labels, so one installation never deletes another's
// objects, and an object labelled by hand is never deleted.
package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The owner kinds: who drives an installation.
const (
	// KindInstallation is an Installation custom resource, reconciled by
	// the operator.
	KindInstallation = "Installation"
	// KindPlugin is an installation of the kubectl plugin's apply.
	KindPlugin = "plugin"
)

// Owner identifies an installation. Namespace and Name are required; Kind is
// KindInstallation or KindPlugin ("" means KindPlugin).
type Owner struct {
	Namespace string
	Name      string
	Kind      string
}

// String names the owner as "namespace/name", the way messages cite it.
func (o Owner) String() string { return o.Namespace + "/" + o.Name }

// IsZero reports whether the owner is unset.
func (o Owner) IsZero() bool { return o.Namespace == "" && o.Name == "" }

// Validate says what is wrong with an owner, or nil.
func (o Owner) Validate() error {
	if o.Name == "" {
		return fmt.Errorf("installation: no name")
	}
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return fmt.Errorf("installation name %q: %s", o.Name, errs[0])
	}
	if o.Namespace == "" {
		return fmt.Errorf("installation %s: no namespace", o.Name)
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("installation namespace %q: %s", o.Namespace, errs[0])
	}
	switch o.Kind {
	case "", KindPlugin, KindInstallation:
	default:
		return fmt.Errorf("installation %s: unknown kind %q", o, o.Kind)
	}
	return nil
}

func (o Owner) kind() string {
	if o.Kind == "" {
		return KindPlugin
	}
	return o.Kind
}

// NameValue is the value of NameLabel: the name when it is a valid label
// value, else "h-" and 40 hex digits of its SHA-256.
func (o Owner) NameValue() string {
	if len(validation.IsValidLabelValue(o.Name)) == 0 {
		return o.Name
	}
	sum := sha256.Sum256([]byte(o.Name))
	return "h-" + hex.EncodeToString(sum[:])[:40]
}

// Labels returns the labels that mark the owner's objects.
func (o Owner) Labels() map[string]string {
	return map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy, metakeys.InstallationLabel: o.NameValue(), metakeys.InstallationNamespaceLabel: o.Namespace}
}

// Selector returns a label selector matching the owner's objects.
func (o Owner) Selector() string {
	return fmt.Sprintf("%s=%s,%s=%s,%s=%s", metakeys.ManagedByLabel, metakeys.ManagedBy, metakeys.InstallationLabel, o.NameValue(), metakeys.InstallationNamespaceLabel, o.Namespace)
}

// Owns reports whether labels mark an object of this owner.
func (o Owner) Owns(labels map[string]string) bool {
	return labels[metakeys.ManagedByLabel] == metakeys.ManagedBy && labels[metakeys.InstallationLabel] == o.NameValue() && labels[metakeys.InstallationNamespaceLabel] == o.Namespace
}

// Claim is what the labels of a live object say about who it belongs to,
// seen from one owner.
type Claim int

// The claims.
const (
	// ClaimNone: no installation's labels; someone else wrote it (kubectl,
	// Helm, a person) or nobody marked it.
	ClaimNone Claim = iota
	// ClaimOurs: this owner's labels.
	ClaimOurs
	// ClaimLegacy: the labels an older installstrategy wrote for this
	// owner (the operator's "installstrategy.<namespace>.<name>"
	// managed-by value). Such an object is this owner's: the next apply
	// relabels it in place, and prune may delete it.
	ClaimLegacy
	// ClaimLegacyShared: the managed-by value "installstrategy" without
	// installation labels, which every plugin apply of an older
	// installstrategy wrote. It cannot be attributed to one installation:
	// a plugin installation whose strategy holds the object migrates it in
	// place, but prune never deletes it on that ground.
	ClaimLegacyShared
	// ClaimOther: another installation's labels.
	ClaimOther
)

// ClaimOf reads what labels say about an object's owner, from o's view.
// The caller checks the applied-hash annotation (pkg/apply) for the legacy
// claims: legacy labels alone, without it, are not ours.
func (o Owner) ClaimOf(labels map[string]string) Claim {
	by := labels[metakeys.ManagedByLabel]
	_, hasName := labels[metakeys.InstallationLabel]
	switch {
	case hasName && o.Owns(labels):
		return ClaimOurs
	case hasName && by == metakeys.ManagedBy:
		return ClaimOther
	case by == LegacyManagedBy(o.Namespace, o.Name) && o.kind() == KindInstallation:
		return ClaimLegacy
	case by == metakeys.ManagedBy && o.kind() == KindPlugin:
		return ClaimLegacyShared
	case by == metakeys.ManagedBy:
		return ClaimNone
	case isLegacyManagedBy(by):
		return ClaimOther
	}
	return ClaimNone
}

// OtherOwner describes the installation that labels name, for messages:
// "namespace/name" (the name label's value), or the legacy managed-by value.
func OtherOwner(labels map[string]string) string {
	if n, ok := labels[metakeys.InstallationLabel]; ok {
		return labels[metakeys.InstallationNamespaceLabel] + "/" + n
	}
	return labels[metakeys.ManagedByLabel]
}

// LegacyManagedBy is the managed-by value the operator of installstrategy
// v0.1 wrote for an Installation: "installstrategy.<namespace>.<name>" when
// that is a valid label value, else "installstrategy." and a hash of
// namespace and name.
func LegacyManagedBy(namespace, name string) string {
	v := "installstrategy." + namespace + "." + name
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "installstrategy." + hex.EncodeToString(sum[:])[:32]
}

// ByAnInstallation reports whether labels mark an object some
// installation wrote: its installation labels with the managed-by value,
// or the managed-by value an older operator wrote for one
// (LegacyManagedBy).
func ByAnInstallation(labels map[string]string) bool {
	_, hasName := labels[metakeys.InstallationLabel]
	return hasName && labels[metakeys.ManagedByLabel] == metakeys.ManagedBy || isLegacyManagedBy(labels[metakeys.ManagedByLabel])
}

func isLegacyManagedBy(v string) bool {
	return len(v) > len("installstrategy.") && v[:len("installstrategy.")] == "installstrategy."
}
