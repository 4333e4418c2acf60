package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// configMapReads records the lists and watches of strategy ConfigMaps
// (by their label) outside one namespace (the key namespace, whose
// trusted keys ConfigMap is read whole) and the Accept header of each.
type configMapReads struct {
	skip string
	mu   sync.Mutex
	seen []string
}

func (c *configMapReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		p := req.URL.Path
		if req.Method == http.MethodGet && strings.HasSuffix(p, "/configmaps") && !strings.Contains(p, "/namespaces/"+c.skip+"/") &&
			strings.Contains(req.URL.Query().Get("labelSelector"), metakeys.StrategyLabel) {
			c.mu.Lock()
			c.seen = append(c.seen, req.URL.RequestURI()+" Accept: "+req.Header.Get("Accept"))
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (c *configMapReads) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The operator watches strategy ConfigMaps to learn that one changed, and
// reads one's data only when an Installation names it, through the
// store's bounded reads. So its manager lists and watches them as
// metadata only (the API server sends no data), and its cache keeps of
// each a few hundred bytes: a tenant who may create ConfigMaps, and
// labels a few hundred of a megabyte as strategies, no longer takes the
// operator (512 MiB limit) down with them.
func TestManagerWatchesStrategyConfigMapsAsMetadata(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	keys := ns + "-keys"
	reads := &configMapReads{skip: keys}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(reads.wrap)
	mgr, err := newManager(logr.Discard(), cfg, managerOptions{
		namespace: ns, keyNamespace: keys, leaderElectionNamespace: ns,
		probeAddr: "0", metricsAddr: "0", qps: 50, burst: 100, skipNameValidation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: ns,
		Labels:      map[string]string{metakeys.StrategyLabel: ""},
		Annotations: map[string]string{"padding": strings.Repeat("z", 200<<10)}},
		Data: map[string]string{"manifests": strings.Repeat("x", 700<<10)}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the strategy ConfigMap in the manager's cache", func(ctx context.Context) (bool, string, error) {
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := mgr.GetCache().List(ctx, &l, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		if len(l.Items) != 1 {
			return false, fmt.Sprintf("%d ConfigMaps", len(l.Items)), nil
		}
		if a := l.Items[0].Annotations; len(a) > 0 {
			t.Errorf("the cache keeps the ConfigMap's annotations: %d of them", len(a))
		}
		return true, "", nil
	})
	seen := reads.get()
	if len(seen) == 0 {
		t.Fatal("the manager read no ConfigMaps")
	}
	for _, s := range seen {
		if !strings.Contains(s, "as=PartialObjectMetadata") {
			t.Errorf("the manager reads whole ConfigMaps: %s", s)
		}
	}
}
