package inventory

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The marks of Kubernetes' own objects (see systemObject).
const (
	// systemPrefix starts the names Kubernetes reserves for itself
	// (system:masters, system:aggregate-to-admin, system:node...).
	systemPrefix = "system:"
)

// systemNamespaces are the namespaces Kubernetes keeps for itself.
var systemNamespaces = map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true}

// systemObject says why the object ref, live as live (nil when absent), is
// Kubernetes' own, or "" when it is not. It is the one rule of what is a
// system object: one of the API server's bootstrap objects
// (APIServerBootstrapped), a name that starts with systemPrefix, or one of
// the namespaces kube-system, kube-public and kube-node-lease. Such an
// object is adopted, or deleted after an adoption, only when a
// SystemConsent names it (see AdoptionNeedsConsent, DeletionNeedsConsent).
//
// An object merely in one of those namespaces is not one: a product's own
// strategy puts objects there (KubeVirt's RoleBindings to
// extension-apiserver-authentication-reader in kube-system), and its
// operator may have made them before an adoption. It is one when the list
// of objects comes from someone less trusted than the strategy's author
// (a Helm release Secret): see TakeoverNeedsConsent.
func systemObject(ref strategy.ObjectRef, live *unstructured.Unstructured) string {
	switch {
	case APIServerBootstrapped(live):
		return fmt.Sprintf("the API server's own: label %s=%s", metakeys.BootstrappingLabel, live.GetLabels()[metakeys.BootstrappingLabel])
	case strings.HasPrefix(ref.Name, systemPrefix):
		return "its name starts with " + systemPrefix
	case ref.GroupKind() == kinds.Namespace && systemNamespaces[ref.Name]:
		return "a namespace Kubernetes keeps for itself"
	}
	return ""
}

// systemNamespace reports whether ns is one Kubernetes keeps for itself:
// kube-system, kube-public, kube-node-lease.
func systemNamespace(ns string) bool { return systemNamespaces[ns] }

// TakeoverNeedsConsent is AdoptionNeedsConsent for a list of objects that
// someone other than the strategy's author wrote (a Helm release Secret,
// which anyone who may write Secrets in its namespace may forge): there,
// an object in a system namespace (systemNamespace) needs consent too.
func TakeoverNeedsConsent(ref strategy.ObjectRef, live *unstructured.Unstructured, consent SystemConsent) string {
	if why := AdoptionNeedsConsent(ref, live, consent); why != "" {
		return why
	}
	if systemNamespace(ref.Namespace) && !consent.allows(ref) {
		return fmt.Sprintf("a system object (in namespace %s): not taken over unless named (%s)", ref.Namespace, consentName(ref))
	}
	return ""
}

// APIServerBootstrapped reports whether live carries metakeys.BootstrappingLabel as
// the API server's own objects do: written by the API server
// (metakeys.APIServerFieldManager) or by nobody the server recorded. A product may put
// the label on its own objects (KubeVirt's kubevirt.io:default does): those
// its own operator wrote are not the API server's.
func APIServerBootstrapped(live *unstructured.Unstructured) bool {
	if live == nil {
		return false
	}
	if _, ok := live.GetLabels()[metakeys.BootstrappingLabel]; !ok {
		return false
	}
	fields := live.GetManagedFields()
	if len(fields) == 0 {
		return true
	}
	for _, f := range fields {
		if f.Manager == metakeys.APIServerFieldManager && f.Subresource == "" {
			return true
		}
	}
	return false
}

// AdoptionNeedsConsent says why taking over the live object of ref needs
// consent naming it, or "" when it does not: a system object
// (systemObject) is never taken over unless consent names it.
func AdoptionNeedsConsent(ref strategy.ObjectRef, live *unstructured.Unstructured, consent SystemConsent) string {
	why := systemObject(ref, live)
	if why == "" || consent.allows(ref) {
		return ""
	}
	return fmt.Sprintf("a system object (%s): not taken over unless named (%s)", why, consentName(ref))
}

// DeletionNeedsConsent says why deleting the live object of an inventory
// entry needs consent naming it, or "" when it does not. A system object
// (systemObject) the installation created may be deleted (a product that
// installs into kube-system); one it adopted may not, nor one of the API
// server's own (APIServerBootstrapped). Adopted is the inventory's mark
// (Entry.Adopted) or the live object's (metakeys.AdoptedAnnotation,
// written at the adoption; MarkAdoption): the inventory is a ConfigMap a
// namespace editor may write, the live object is not, so clearing the
// inventory's mark does not make an adopted object deletable.
func DeletionNeedsConsent(e Entry, live *unstructured.Unstructured, consent SystemConsent) string {
	why := systemObject(e.ObjectRef, live)
	if why == "" || consent.allows(e.ObjectRef) {
		return ""
	}
	if !e.Adopted && !markedAdopted(live) && !APIServerBootstrapped(live) {
		return ""
	}
	return fmt.Sprintf("a system object (%s) taken over, not created: not deleted unless named (%s)", why, consentName(e.ObjectRef))
}

// MarkAdoption reports whether adopting the object ref, live as live,
// must leave metakeys.AdoptedAnnotation on it: a system object
// (systemObject), whose deletion the adoption decides (DeletionNeedsConsent).
func MarkAdoption(ref strategy.ObjectRef, live *unstructured.Unstructured) bool {
	return systemObject(ref, live) != ""
}

// markedAdopted reports whether live carries metakeys.AdoptedAnnotation.
func markedAdopted(live *unstructured.Unstructured) bool {
	if live == nil {
		return false
	}
	_, ok := live.GetAnnotations()[metakeys.AdoptedAnnotation]
	return ok
}

// ObjectName names an object on the command line: KIND[.GROUP]/NAME, or
// KIND[.GROUP]/NAMESPACE/NAME for a namespaced object. Without a group it
// names the kind in any group.
type ObjectName struct {
	Group, Kind, Namespace, Name string
	// AnyGroup is true when no group was given.
	AnyGroup bool
}

// parseObjectName reads KIND[.GROUP]/[NAMESPACE/]NAME.
func parseObjectName(s string) (ObjectName, error) {
	parts := strings.Split(s, "/")
	var n ObjectName
	switch len(parts) {
	case 2:
		n.Name = parts[1]
	case 3:
		n.Namespace, n.Name = parts[1], parts[2]
	}
	kind, group, dotted := strings.Cut(parts[0], ".")
	n.Kind, n.Group, n.AnyGroup = kind, group, !dotted
	if n.Kind == "" || n.Name == "" || (len(parts) == 3 && n.Namespace == "") || (dotted && group == "") {
		return ObjectName{}, fmt.Errorf("object %q: want KIND[.GROUP]/NAME or KIND[.GROUP]/NAMESPACE/NAME", s)
	}
	return n, nil
}

// Matches reports whether n names ref (the kind compared without case, as
// kubectl does).
func (n ObjectName) Matches(ref strategy.ObjectRef) bool {
	return strings.EqualFold(n.Kind, ref.Kind) && (n.AnyGroup || n.Group == ref.Group) && n.Namespace == ref.Namespace && n.Name == ref.Name
}

// SystemConsent names the system objects (systemObject) an installation
// may take over and delete. The zero value names none.
type SystemConsent []ObjectName

// ParseSystemConsent reads names of parseObjectName's form.
func ParseSystemConsent(names []string) (SystemConsent, error) {
	var c SystemConsent
	for _, s := range names {
		n, err := parseObjectName(s)
		if err != nil {
			return nil, err
		}
		c = append(c, n)
	}
	return c, nil
}

// allows reports whether consent names ref.
func (c SystemConsent) allows(ref strategy.ObjectRef) bool {
	for _, n := range c {
		if n.Matches(ref) {
			return true
		}
	}
	return false
}

// consentName is how consent names ref: KIND[.GROUP]/[NAMESPACE/]NAME.
func consentName(ref strategy.ObjectRef) string {
	s := ref.Kind
	if ref.Group != "" {
		s += "." + ref.Group
	}
	if ref.Namespace != "" {
		s += "/" + ref.Namespace
	}
	return s + "/" + ref.Name
}
