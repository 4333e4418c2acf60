package engine_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

type requestLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *requestLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *requestLog) index(method, path, query string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.IndexFunc(l.lines, func(s string) bool {
		m, rest, _ := strings.Cut(s, " ")
		p, q, _ := strings.Cut(rest, "?")
		return m == method && p == path && strings.Contains(q, query)
	})
}

type loggingTransport struct {
	next http.RoundTripper
	log  *requestLog
}

func (t loggingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.log.add(r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery)
	return t.next.RoundTrip(r)
}

// Before it deletes a CRD, an uninstall lists the CRD's custom resources
// from the API server's cache (resourceVersion 0), which waits until the
// API server serves them: the CRD's cleanup finalizer then finds its kind's
// storage ready instead of retrying with a growing backoff (the KubeVirt
// CRDs that outlived a 3-minute cleanup, docs/DEVELOPMENT.md). Here for
// two CRDs, one whose kind was never requested (no storage yet) and one
// with a custom resource; both are gone after the uninstall.
func TestUninstallReadiesCustomResourcesBeforeItDeletesCRDs(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	group := ns + ".crddelete.installstrategy.test"
	s := gizmoStrategy(ns, group)
	s.Objects = append(s.Objects, widgetCRD(t, s.Objects[0], group))
	owner := inventory.Owner{Namespace: ns, Name: "crddelete"}
	if _, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: owner, StageDeadline: time.Minute}); err != nil {
		t.Fatal(err)
	}

	log := &requestLog{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return loggingTransport{next: rt, log: log} })
	deleted, err := engine.Uninstall(ctx, cfg, engine.UninstallOptions{Owner: owner, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, plural := range []string{"gizmos", "widgets"} {
		crd := plural + "." + group
		if !slices.Contains(deleted, strategy.ObjectRef{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: crd}) {
			t.Errorf("CRD %s not deleted: %v", crd, deleted)
		}
		list := log.index(http.MethodGet, "/apis/"+group+"/v1/"+plural, "resourceVersion=0")
		del := log.index(http.MethodDelete, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+crd, "")
		if list < 0 || del < 0 || list > del {
			t.Errorf("%s: list of its custom resources at request %d, its delete at %d; want the list first\n%s", crd, list, del, strings.Join(log.lines, "\n"))
		}
	}
}
