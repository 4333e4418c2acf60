package history_test

import (
	"testing"
	"time"

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
