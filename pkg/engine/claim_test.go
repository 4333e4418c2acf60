package engine_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// A claim check's answer is taken only for the strategy and owner it was
// given; any other run checks again.
func TestClaimsAnswerOnlyTheirStrategyAndOwner(t *testing.T) {
	ctx := t.Context()
	se := newSampleEnv(t)
	s := sample(t, se.ns, "v1.0.0")
	rc, err := engine.New(se.cfg)
	if err != nil {
		t.Fatal(err)
	}
	owner := sampleOwner(se.ns)
	claims, err := rc.CheckClaims(ctx, s, engine.Options{Owner: owner})
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if !engine.ClaimsAnswer(claims, s, owner) {
		t.Error("the answer is not taken for its own strategy and owner")
	}
	if engine.ClaimsAnswer(claims, sample(t, se.ns, "v1.0.0"), owner) {
		t.Error("the answer is taken for another strategy (an equal one, parsed again)")
	}
	if engine.ClaimsAnswer(claims, s, inventory.Owner{Namespace: se.ns, Name: "other"}) {
		t.Error("the answer is taken for another owner")
	}
	if engine.ClaimsAnswer(nil, s, owner) {
		t.Error("no answer is taken as one")
	}
}

// A run given the claim check's answer (Options.Claims) reads none of the
// strategy's cluster-scoped objects before its first write: the check is
// not made twice. Without it, the run checks them itself.
func TestRunTakesTheClaimChecksAnswer(t *testing.T) {
	ctx := t.Context()
	se := newSampleEnv(t)
	s := sample(t, se.ns, "v1.0.0")
	owner := sampleOwner(se.ns)

	// Reads of cluster-scoped resources before the run's first write.
	var (
		mu      sync.Mutex
		written bool
		early   []string
	)
	cfg := rest.CopyConfig(se.cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			switch {
			case req.Method != http.MethodGet:
				written = true
			case !written && clusterScopedPath(req.URL.Path):
				early = append(early, req.URL.Path)
			}
			mu.Unlock()
			return rt.RoundTrip(req)
		})
	}
	rc, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := rc.CheckClaims(ctx, s, engine.Options{Owner: owner})
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	mu.Lock()
	checked := len(early)
	early, written = nil, false
	mu.Unlock()
	if checked == 0 {
		t.Fatal("the check read no cluster-scoped object (the sample's ClusterRoles, CRDs): the test cannot tell a run that checks again")
	}

	opts := se.options(t)
	opts.Claims = claims
	res, err := rc.Run(ctx, s, opts)
	assertRolledOver(t, se, res, err)
	mu.Lock()
	if len(early) > 0 {
		t.Errorf("the run given the check's answer read cluster-scoped objects before its first write: %v", early)
	}
	early, written = nil, false
	mu.Unlock()

	// The answer of another strategy is not taken: the run checks.
	opts.Claims = claims
	res, err = rc.Run(ctx, sample(t, se.ns, "v1.0.0"), opts)
	assertRolledOver(t, se, res, err)
	mu.Lock()
	defer mu.Unlock()
	if len(early) == 0 {
		t.Error("a run given another strategy's answer did not check the claims itself")
	}
}

// clusterScopedPath reports whether a request reads cluster-scoped objects
// other than Namespaces (ClusterRoles, CRDs...): not discovery, not a
// namespaced resource. (The run reads its own Namespace before it writes
// it, claims or not.)
func clusterScopedPath(p string) bool {
	seg := strings.Split(strings.Trim(p, "/"), "/")
	// /api/v1/R[/name] or /apis/G/V/R[/name]
	at := 2
	if seg[0] == "apis" {
		at = 3
	}
	if len(seg) <= at {
		return false // discovery
	}
	return seg[at] != "namespaces"
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// The installation's own Namespace is applied once per run: ahead of the
// steps (the inventory and the CA Secret live there), and its step takes
// that result instead of reading and applying it again. (Cacheless, as the
// plugin runs: each apply of an object alone of its kind reads it.)
func TestOwnNamespaceIsAppliedOncePerRun(t *testing.T) {
	se := newSampleEnv(t)
	res, err := se.run(sample(t, se.ns, "v1.0.0"), strategy.Identity{}, se.options(t))
	assertRolledOver(t, se, res, err)
	path := "/api/v1/namespaces/" + se.ns
	var reads int
	for _, r := range se.rec.Reads() {
		if r.Path == path {
			reads++
		}
	}
	// The claim check reads it (a cluster-scoped object), then
	// ensureNamespace to apply it; the namespace step no more.
	if reads != 2 {
		t.Errorf("the run read its Namespace %d times, want twice (claim check, ensureNamespace)", reads)
	}
	var applied []string
	for _, a := range res.Applied {
		if a.Ref.Kind == "Namespace" && a.Ref.Name == se.ns {
			applied = append(applied, string(a.Action))
		}
	}
	if len(applied) != 1 {
		t.Errorf("the result lists its Namespace %d times (%v), want once", len(applied), applied)
	}
}
