package history_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestRecord: revisions count up, newest first; a re-apply of the newest
// adds none; the history keeps the newest Limit and returns the dropped.
func TestRecord(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	owner := inventory.Owner{Namespace: ns, Name: "demo"}
	st := history.NewStore(env.Kube)
	st.Clock = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	rev := func(v string) history.Revision {
		return history.Revision{Identity: strategy.Identity{Version: v}, ConfigMap: "cm-" + v, Source: v + ".yaml"}
	}
	for _, v := range []string{"v1", "v2", "v2", "v3"} {
		if _, _, err := st.Record(ctx, owner, rev(v), 3); err != nil {
			t.Fatal(err)
		}
	}
	h, err := st.Get(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Revisions) != 3 || h.Revisions[0].Revision != 3 || h.Revisions[0].Identity.Version != "v3" || h.Revisions[2].Revision != 1 || !h.Revisions[0].Applied.Equal(st.Clock()) {
		t.Fatalf("history: %+v", h.Revisions)
	}
	if prev, err := h.Get(0); err != nil || prev.Identity.Version != "v2" {
		t.Fatalf("Get(0): %+v %v, want v2", prev, err)
	}
	if _, err := h.Get(9); err == nil {
		t.Fatal("Get(9) of 3 revisions succeeded")
	}
	h, dropped, err := st.Record(ctx, owner, rev("v4"), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Revisions) != 3 || h.Revisions[0].Revision != 4 || len(dropped) != 1 || dropped[0].Identity.Version != "v1" {
		t.Fatalf("after v4 with limit 3: %+v, dropped %+v", h.Revisions, dropped)
	}
	refs, err := st.Referenced(ctx, ns)
	if err != nil || len(refs) != 3 {
		t.Fatalf("Referenced: %d, %v; want 3", len(refs), err)
	}
	if err := st.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if h, err := st.Get(ctx, owner); err != nil || len(h.Revisions) != 0 {
		t.Fatalf("after Delete: %+v %v", h, err)
	}
}

// TestRecordOn: recording on a history just read writes without reading
// it again; when someone wrote it in between (or created it), the write is
// refused and the history read afresh, so no revision is lost.
func TestRecordOn(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	owner := inventory.Owner{Namespace: ns, Name: "demo"}
	var gets atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet {
				gets.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	st := history.NewStore(kubernetes.NewForConfigOrDie(cfg))
	other := history.NewStore(env.Kube)
	rev := func(v string) history.Revision {
		return history.Revision{Identity: strategy.Identity{Version: v}, Source: v + ".yaml"}
	}
	for i, v := range []string{"v1", "v2"} {
		read, err := st.Get(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		gets.Store(0)
		h, _, err := st.RecordOn(ctx, read, owner, rev(v), 5)
		if err != nil {
			t.Fatal(err)
		}
		if n := gets.Load(); n != 0 {
			t.Errorf("RecordOn of %s read the history %d times after Get", v, n)
		}
		if len(h.Revisions) != i+1 || h.Revisions[0].Identity.Version != v {
			t.Fatalf("after %s: %+v", v, h.Revisions)
		}
	}
	// Someone records v3 between our read and our write.
	read, err := st.Get(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Record(ctx, owner, rev("v3"), 5); err != nil {
		t.Fatal(err)
	}
	h, _, err := st.RecordOn(ctx, read, owner, rev("v4"), 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(h); got != "v4 v3 v2 v1" {
		t.Fatalf("after a write in between: %s, want v4 v3 v2 v1", got)
	}
	// The history is created by someone else between our read (none) and
	// our write.
	owner2 := inventory.Owner{Namespace: ns, Name: "second"}
	read, err = st.Get(ctx, owner2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Record(ctx, owner2, rev("v1"), 5); err != nil {
		t.Fatal(err)
	}
	if h, _, err = st.RecordOn(ctx, read, owner2, rev("v2"), 5); err != nil {
		t.Fatal(err)
	}
	if got := versions(h); got != "v2 v1" {
		t.Fatalf("after a creation in between: %s, want v2 v1", got)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func versions(h *history.History) string {
	var out []string
	for _, r := range h.Revisions {
		out = append(out, r.Identity.Version)
	}
	return strings.Join(out, " ")
}
