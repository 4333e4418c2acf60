package source_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const helmIndex = `apiVersion: v1
entries:
  sample:
  - name: sample
    version: 3.0.0
    urls: [sample-3.0.0.tgz]
  - name: sample
    version: 2.0.0
    urls: [sample-2.0.0.tgz]
  - name: sample
    version: 2.0.0
    urls: [elsewhere/sample-2.0.0.tgz]
  - name: sample
    version: 1.0.0
    urls: [sample-1.0.0.tgz]
  other:
  - name: other
    version: 9.0.0
generated: "2026-12-06T00:00:00Z"
`

// A Helm repository's index.yaml, served by a local server: the chart's
// versions, once each, and none of another chart's.
func TestHelmIndexVersions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/charts/index.yaml" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, helmIndex)
	}))
	defer srv.Close()
	l, err := source.HelmIndex{URL: srv.URL + "/charts/", Chart: "sample"}.Versions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"3.0.0", "2.0.0", "1.0.0"}; !slices.Equal(l.Versions, want) || l.Truncated != "" {
		t.Fatalf("versions %v (truncated %q), want %v", l.Versions, l.Truncated, want)
	}
	if l, err := (source.HelmIndex{URL: srv.URL + "/charts", Chart: "absent"}).Versions(t.Context()); err != nil || len(l.Versions) != 0 {
		t.Fatalf("absent chart: %v, %v", l.Versions, err)
	}
	if _, err := (source.HelmIndex{URL: srv.URL + "/nothing", Chart: "sample"}).Versions(t.Context()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing index: %v", err)
	}
}

// Trust before cost: an index above its bound is refused, whether its
// server says its length or streams it without one, and what is not an
// index is an error, not an empty list.
func TestHelmIndexBound(t *testing.T) {
	big := helmIndex + "# " + strings.Repeat("x", 4096) + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sized/index.yaml":
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			fmt.Fprint(w, big)
		case "/streamed/index.yaml":
			w.(http.Flusher).Flush() // no Content-Length: chunked
			for i := 0; i < 64; i++ {
				fmt.Fprint(w, strings.Repeat("# padding\n", 10))
			}
		case "/html/index.yaml":
			fmt.Fprint(w, "<html>not here</html>")
		}
	}))
	defer srv.Close()
	for _, dir := range []string{"sized", "streamed"} {
		_, err := source.HelmIndex{URL: srv.URL + "/" + dir, Chart: "sample", MaxBytes: 4096}.Versions(t.Context())
		if !errors.Is(err, source.ErrIndexTooLarge) {
			t.Errorf("%s: %v, want ErrIndexTooLarge", dir, err)
		}
	}
	if l, err := (source.HelmIndex{URL: srv.URL + "/sized", Chart: "sample"}).Versions(t.Context()); err != nil || len(l.Versions) != 3 {
		t.Errorf("within the default bound: %v, %v", l.Versions, err)
	}
	if _, err := (source.HelmIndex{URL: srv.URL + "/html", Chart: "sample"}).Versions(t.Context()); err == nil {
		t.Error("an HTML page was taken as an index")
	}
}

// Many versions are cut at MaxListedVersions, and the listing says so.
func TestHelmIndexManyVersions(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nentries:\n  sample:\n")
	for i := 0; i < source.MaxListedVersions+5; i++ {
		fmt.Fprintf(&b, "  - version: 1.0.%d\n", i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, b.String()) }))
	defer srv.Close()
	l, err := source.HelmIndex{URL: srv.URL, Chart: "sample"}.Versions(t.Context())
	if err != nil || len(l.Versions) != source.MaxListedVersions || l.Truncated == "" {
		t.Fatalf("%d versions, truncated %q, %v", len(l.Versions), l.Truncated, err)
	}
}

// Stored strategies: the versions their entries claim, once each; the
// entries of one version in the store's order.
func TestStoredVersions(t *testing.T) {
	entry := func(name, version string) store.Entry {
		return store.Entry{Name: name, Namespace: "ns", Identity: strategy.Identity{Version: version}}
	}
	s := source.Stored{Entries: []store.Entry{entry("a", "v1.0.0"), entry("b", "v2.0.0"), entry("c", "v2.0.0"), entry("d", "")}}
	l, err := s.Versions(t.Context())
	if err != nil || !slices.Equal(l.Versions, []string{"v1.0.0", "v2.0.0"}) {
		t.Fatalf("versions %v, %v", l.Versions, err)
	}
	var names []string
	for _, e := range s.ByVersion("v2.0.0") {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{"b", "c"}) {
		t.Fatalf("ByVersion: %v", names)
	}
}

// The versions of a plugin installation's anchored revisions, each once,
// newest first; ByVersion returns every anchored revision of a version.
func TestRevisionVersions(t *testing.T) {
	rev := func(n int, version string) history.Anchored {
		return history.Anchored{Revision: n, Identity: strategy.Identity{Version: version}}
	}
	r := source.Revisions{Anchored: []history.Anchored{rev(4, "v1.0.0"), rev(3, "v3.0.0"), rev(2, "v2.0.0"), rev(1, "v1.0.0"), rev(0, "")}}
	l, err := r.Versions(t.Context())
	if err != nil || !slices.Equal(l.Versions, []string{"v1.0.0", "v3.0.0", "v2.0.0"}) || l.Truncated != "" {
		t.Fatalf("versions %v (%q), %v", l.Versions, l.Truncated, err)
	}
	var ns []int
	for _, a := range r.ByVersion("v1.0.0") {
		ns = append(ns, a.Revision)
	}
	if !slices.Equal(ns, []int{4, 1}) {
		t.Fatalf("ByVersion: %v", ns)
	}
}

// The tags of a registry's repository, bounded, through the client.
func TestOCITagsVersions(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t)
	c, err := oci.New(oci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v1.0.0", "v2.0.0", "v3.0.0"} {
		if _, err := c.Push(ctx, reg.Ref("acme/sample:"+v), []byte("kind: ConfigMap\n"), oci.Meta{Product: "sample", Version: v}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := source.OCITags{Client: c, Reference: reg.Ref("acme/sample:v3.0.0")}.Versions(ctx)
	if err != nil || len(l.Versions) != 3 || l.Truncated != "" {
		t.Fatalf("%v (truncated %q), %v", l.Versions, l.Truncated, err)
	}
	if _, err := c.Push(ctx, reg.Ref("acme/chart:1.0.0_build.1"), []byte("kind: ConfigMap\n"), oci.Meta{Product: "chart", Version: "1.0.0+build.1"}); err != nil {
		t.Fatal(err)
	}
	l, err = source.OCITags{Client: c, Reference: reg.Ref("acme/chart"), Chart: true}.Versions(ctx)
	if err != nil || !slices.Equal(l.Versions, []string{"1.0.0+build.1"}) || source.ChartTag(l.Versions[0]) != "1.0.0_build.1" {
		t.Fatalf("a chart's tags as its versions: %v, %v", l.Versions, err)
	}
	l, err = source.OCITags{Client: c, Reference: reg.Ref("acme/sample"), Max: 2}.Versions(ctx)
	if err != nil || len(l.Versions) != 2 || !strings.Contains(l.Truncated, "more than 2 tags") {
		t.Fatalf("bounded: %v (truncated %q), %v", l.Versions, l.Truncated, err)
	}
}
