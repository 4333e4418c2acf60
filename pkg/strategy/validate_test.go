package strategy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// object is a manifests text of one object, after a first valid document
// so that the refused one is document 2, starting at line 7.
func object(apiVersion, kind, namespace, name string) string {
	ns := ""
	if namespace != "" {
		ns = fmt.Sprintf("  namespace: %q\n", namespace)
	}
	return fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n---\napiVersion: %q\nkind: %q\nmetadata:\n  name: %q\n%s",
		apiVersion, kind, name, ns)
}

// Names are data: an identifying field that the API server would refuse,
// and that a file name, a URL or a terminal could take for something else,
// is a parse error naming the document, its line, the field and the value.
func TestParseRefusesNamesTheAPIServerWould(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := []struct {
		what                       string
		apiVersion, kind, ns, name string
		field, value               string
	}{
		{"name climbing out", "v1", "ConfigMap", "ns", "../../../.bashrc", "metadata.name", "../../../.bashrc"},
		{"name with a slash", "v1", "ConfigMap", "ns", "a/b", "metadata.name", "a/b"},
		{"name that is dot", "v1", "ConfigMap", "ns", ".", "metadata.name", "."},
		{"name that is dot dot", "rbac.authorization.k8s.io/v1", "ClusterRole", "", "..", "metadata.name", ".."},
		{"name with a percent", "v1", "ConfigMap", "ns", "a%2Fb", "metadata.name", "a%2Fb"},
		{"name with NUL", "v1", "ConfigMap", "ns", "a\x00b", "metadata.name", "a\x00b"},
		{"name with a newline", "v1", "ConfigMap", "ns", "a\nb", "metadata.name", "a\nb"},
		{"name with a terminal escape", "v1", "ConfigMap", "ns", "a\x1b[2Jb", "metadata.name", "a\x1b[2Jb"},
		{"namespace dot dot", "v1", "ConfigMap", "..", "n", "metadata.namespace", ".."},
		{"namespace with a slash", "v1", "ConfigMap", "a/b", "n", "metadata.namespace", "a/b"},
		{"namespace upper case", "v1", "ConfigMap", "NS", "n", "metadata.namespace", "NS"},
		{"namespace too long", "v1", "ConfigMap", long, "n", "metadata.namespace", long},
		{"absolute namespace", "v1", "ConfigMap", "/etc", "n", "metadata.namespace", "/etc"},
		{"kind climbing out", "v1", "../../x", "ns", "n", "kind", "../../x"},
		{"kind with a slash", "v1", "a/b", "ns", "n", "kind", "a/b"},
		{"kind with a dot", "v1", "Config.Map", "ns", "n", "kind", "Config.Map"},
		{"kind with a space", "v1", "Config Map", "ns", "n", "kind", "Config Map"},
		{"kind of a digit first", "v1", "9Map", "ns", "n", "kind", "9Map"},
		{"group dot dot", "../v1", "Thing", "ns", "n", "group of apiVersion", ".."},
		{"group upper case", "Example.COM/v1", "Thing", "ns", "n", "group of apiVersion", "Example.COM"},
		{"group with a backslash", `a\b/v1`, "Thing", "ns", "n", "group of apiVersion", `a\b`},
		{"version dot dot", "example.com/..", "Thing", "ns", "n", "version of apiVersion", ".."},
		{"version with a dot", "example.com/v1.2", "Thing", "ns", "n", "version of apiVersion", "v1.2"},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			_, _, err := Parse([]byte(object(c.apiVersion, c.kind, c.ns, c.name)), ParseOptions{})
			if err == nil {
				t.Fatal("parsed")
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Document != 2 || pe.Line != 7 {
				t.Fatalf("want a ParseError of document 2 at line 7, got %v", err)
			}
			msg := err.Error()
			for _, want := range []string{"document 2 (line 7", "invalid " + c.field + " ", fmt.Sprintf("%q", c.value)} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q: %s", want, msg)
				}
			}
		})
	}
}

// What the API server accepts is not refused: RBAC names with ':',
// upper case and '@' in a name (path segment names), a CRD kind with '-',
// a version starting with a digit, a long name.
func TestParseAcceptsWhatTheAPIServerDoes(t *testing.T) {
	cases := []struct{ apiVersion, kind, ns, name string }{
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "system:controller:kubevirt"},
		{"rbac.authorization.k8s.io/v1", "RoleBinding", "kube-system", "Admin@Example:x_y"},
		{"example.com/v1alpha1", "My-Kind", "ns", "a.b.c"},
		{"example.com/1v", "Thing", "", "x"},
		{"v1", "ConfigMap", "ns", strings.Repeat("n", 300)},
		{"v1", "ConfigMap", "ns", "..."},
		{"v1", "ConfigMap", "ns", "ünïcode"},
	}
	for _, c := range cases {
		if _, _, err := Parse([]byte(object(c.apiVersion, c.kind, c.ns, c.name)), ParseOptions{}); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// A refused item of a List names the List, the item and the field.
func TestParseRefusesABadNameInAListItem(t *testing.T) {
	text := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: ok}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: ok, namespace: ../x}\n"
	_, _, err := Parse([]byte(text), ParseOptions{})
	if err == nil || !strings.Contains(err.Error(), "List item 2: invalid metadata.namespace \"../x\"") {
		t.Fatalf("got %v", err)
	}
}

// A huge refused value is quoted in part: the error stays small.
func TestParseErrorQuotesALongValueInPart(t *testing.T) {
	name := strings.Repeat("/", 1<<20)
	_, _, err := Parse([]byte(object("v1", "ConfigMap", "ns", name)), ParseOptions{})
	if err == nil {
		t.Fatal("parsed")
	}
	if len(err.Error()) > 1024 {
		t.Fatalf("error of %d bytes", len(err.Error()))
	}
}

// Invalid UTF-8 cannot come through YAML or JSON (they carry text), but an
// object built otherwise is checked the same.
func TestValidateNamesRefusesInvalidUTF8(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName("a\xffb")
	if err := validateNames(u); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("got %v", err)
	}
}
