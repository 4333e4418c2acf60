package strategy

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// maxShownValue bounds how much of a refused value an error quotes.
const maxShownValue = 80

// validateNames checks the fields that identify an object (its apiVersion's
// group and version, kind, metadata.namespace and metadata.name) as the API
// server would on create, so that nothing downstream (a file name, a URL, a
// label) receives a value no cluster could hold:
//
//   - group: a DNS-1123 subdomain, or empty for the core group;
//   - version: a DNS-1123 label (CRDs and APIServices ask for the stricter
//     DNS-1035 label, which is one);
//   - kind: in lower case a DNS-1035 label, the rule for a CRD's
//     spec.names.kind; every built-in kind (a Go type name) passes it;
//   - namespace: empty, or a DNS-1123 label (the namespace name rule);
//   - name: a path segment name (not "." or "..", no "/" or "%"), the
//     least strict rule of any kind (RBAC objects use it: "system:..."),
//     so that no object the API server accepts is refused.
//
// It goes further than the API server in one way: a name or namespace
// holding invalid UTF-8 or a control character (a newline, an escape
// sequence for the terminal) is refused; no real product uses one, and
// such a name cannot be shown or written safely.
//
// The object's apiVersion, kind and metadata were checked to be present
// strings by checkObject.
func validateNames(u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	if gvk.Group != "" {
		if errs := validation.IsDNS1123Subdomain(gvk.Group); len(errs) > 0 {
			return invalidField("apiVersion", "group", gvk.Group, errs)
		}
	}
	if errs := validation.IsDNS1123Label(gvk.Version); len(errs) > 0 {
		return invalidField("apiVersion", "version", gvk.Version, errs)
	}
	if errs := validation.IsDNS1035Label(strings.ToLower(gvk.Kind)); len(errs) > 0 {
		return invalidField("kind", "", gvk.Kind, append([]string{"may have mixed case, but should otherwise match"}, errs...))
	}
	if ns := u.GetNamespace(); ns != "" {
		if errs := displayable(ns); len(errs) > 0 {
			return invalidField("metadata.namespace", "", ns, errs)
		}
		if errs := apivalidation.ValidateNamespaceName(ns, false); len(errs) > 0 {
			return invalidField("metadata.namespace", "", ns, errs)
		}
	}
	name := u.GetName()
	if errs := displayable(name); len(errs) > 0 {
		return invalidField("metadata.name", "", name, errs)
	}
	if errs := path.ValidatePathSegmentName(name, false); len(errs) > 0 {
		return invalidField("metadata.name", "", name, errs)
	}
	return nil
}

// displayable refuses invalid UTF-8 and control characters.
func displayable(s string) []string {
	if !utf8.ValidString(s) {
		return []string{"must be valid UTF-8"}
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return []string{"may not contain a control character"}
	}
	return nil
}

// invalidField is the error of a refused identifying field; part names
// the part of a compound field ("group" of apiVersion).
func invalidField(field, part, value string, errs []string) error {
	what := field
	if part != "" {
		what = part + " of " + field
	}
	shown := value
	if len(shown) > maxShownValue {
		shown = shown[:maxShownValue] + "…"
	}
	return fmt.Errorf("invalid %s %q: %s", what, shown, strings.Join(errs, "; "))
}
