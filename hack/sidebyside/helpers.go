package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/installstrategy/installstrategy/internal/localcluster"
)

// Names in the KubeVirt strategy the helpers serve.
const (
	kubevirtNamespace  = "kubevirt"
	virtAPIService     = "virt-api"
	virtAPISecret      = "kubevirt-virt-api-certs"
	operatorWebhookSvc = "kubevirt-operator-webhook"
	voWebhookAddr      = "127.0.0.1:8444" // virt-operator's webhook server (port fixed in virt-operator)
)

// untilNamed watches one named object of a resource (one LIST and one
// WATCH, not a polling loop, so waiting adds next to nothing to the
// request counts) until cond holds, and returns it.
func untilNamed(ctx context.Context, kube kubernetes.Interface, resource, namespace, name string, obj runtime.Object, cond func(runtime.Object) bool) (runtime.Object, error) {
	lw := cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), resource, namespace, fields.OneTermEqualSelector("metadata.name", name))
	ev, err := watchtools.UntilWithSync(ctx, lw, obj, nil, func(ev watch.Event) (bool, error) {
		return ev.Type != watch.Deleted && cond(ev.Object), nil
	})
	if err != nil {
		return nil, err
	}
	return ev.Object, nil
}

// clusterIP waits for a Service with a loopback ClusterIP (the local
// cluster's service CIDR) and returns it; any other address is refused.
func clusterIP(ctx context.Context, kube kubernetes.Interface, name string) (string, error) {
	obj, err := untilNamed(ctx, kube, "services", kubevirtNamespace, name, &corev1.Service{}, func(o runtime.Object) bool {
		return o.(*corev1.Service).Spec.ClusterIP != ""
	})
	if err != nil {
		return "", fmt.Errorf("service %s/%s: %w", kubevirtNamespace, name, err)
	}
	ip := obj.(*corev1.Service).Spec.ClusterIP
	if parsed := net.ParseIP(ip); parsed == nil || !parsed.IsLoopback() {
		return "", fmt.Errorf("service %s/%s has ClusterIP %s, not a loopback address; refusing to listen on it", kubevirtNamespace, name, ip)
	}
	return ip, nil
}

// listenClusterIP listens on ip:443 and says clearly why when it cannot:
// every local cluster on this machine uses the same service CIDR, so
// another cluster's helper may hold the address.
func listenClusterIP(ip string, port int, what string) (net.Listener, error) {
	ln, err := localcluster.ListenClusterIP(ip, port)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; the run cannot be measured while it does", what, err)
	}
	return ln, nil
}

// helpers runs the stand-ins the KubeVirt strategy needs on kwok nodes; an
// error of one is fatal to the phase that waits for its operator.
type helpers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	lns    []io.Closer
	err    error         // the first helper's failure
	failed chan struct{} // closed on it
	log    io.Writer
}

// startHelpers starts the fake virt-api, and the bridge to virt-operator's
// webhook server and the dump stand-in when asked (dumps not nil).
func startHelpers(ctx context.Context, kube kubernetes.Interface, bridgeOperatorWebhook bool, dumps *dumpStandIn, log io.Writer) *helpers {
	ctx, cancel := context.WithCancel(ctx)
	h := &helpers{cancel: cancel, failed: make(chan struct{}), log: log}
	h.goRun(ctx, func(ctx context.Context) error { return h.fakeVirtAPI(ctx, kube) })
	if bridgeOperatorWebhook {
		h.goRun(ctx, func(ctx context.Context) error { return h.operatorWebhookBridge(ctx, kube) })
	}
	if dumps != nil {
		h.goRun(ctx, func(ctx context.Context) error { return dumps.run(ctx, h.logf) })
	}
	return h
}

// logf writes one stamped line to the helpers' log.
func (h *helpers) logf(format string, args ...any) {
	fmt.Fprintf(h.log, "%s %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

func (h *helpers) goRun(ctx context.Context, f func(context.Context) error) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if err := f(ctx); err != nil && ctx.Err() == nil {
			h.mu.Lock()
			if h.err == nil {
				h.err = err
				close(h.failed)
			}
			h.mu.Unlock()
		}
	}()
}

func (h *helpers) keep(ln io.Closer) {
	h.mu.Lock()
	h.lns = append(h.lns, ln)
	h.mu.Unlock()
}

// failure is the first helper's error, nil while none failed.
func (h *helpers) failure() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// stop closes the listeners and waits for the helpers.
func (h *helpers) stop() {
	h.cancel()
	h.mu.Lock()
	for _, ln := range h.lns {
		ln.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// fakeVirtAPI answers virt-api's admission webhooks with "allowed", over
// TLS with the certificate the operator generated into virt-api's Secret:
// the API server checks it against the CA bundle the operator injected
// into the webhook configurations, so a wrong bundle still fails.
func (h *helpers) fakeVirtAPI(ctx context.Context, kube kubernetes.Interface) error {
	ip, err := clusterIP(ctx, kube, virtAPIService)
	if err != nil {
		return fmt.Errorf("fake virt-api: %w", err)
	}
	obj, err := untilNamed(ctx, kube, "secrets", kubevirtNamespace, virtAPISecret, &corev1.Secret{}, func(o runtime.Object) bool {
		s := o.(*corev1.Secret)
		return len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0
	})
	if err != nil {
		return fmt.Errorf("fake virt-api: secret %s: %w", virtAPISecret, err)
	}
	sec := obj.(*corev1.Secret)
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		return fmt.Errorf("fake virt-api: certificate of %s: %w", virtAPISecret, err)
	}
	ln, err := listenClusterIP(ip, 443, "fake virt-api")
	if err != nil {
		return err
	}
	h.keep(ln)
	fmt.Fprintf(h.log, "%s fake virt-api serving on %s:443\n", time.Now().Format(time.RFC3339Nano), ip)
	srv := &http.Server{Handler: http.HandlerFunc(allowAll), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(h.log, "fake virt-api: ", log.LstdFlags),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("fake virt-api: %w", err)
	}
	return nil
}

// allowAll answers an AdmissionReview with allowed.
func allowAll(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// operatorWebhookBridge forwards TCP from virt-operator's own webhook
// Service (kubevirt-operator-webhook, whose endpoints would be the
// operator's pods) to the local process's webhook server. TLS stays end to
// end: the API server verifies virt-operator's own certificate.
func (h *helpers) operatorWebhookBridge(ctx context.Context, kube kubernetes.Interface) error {
	ip, err := clusterIP(ctx, kube, operatorWebhookSvc)
	if err != nil {
		return fmt.Errorf("virt-operator webhook bridge: %w", err)
	}
	fwd, err := localcluster.ServeClusterIP(ip, 443, func() string { return voWebhookAddr })
	if err != nil {
		return fmt.Errorf("virt-operator webhook bridge: %w; the run cannot be measured while it does", err)
	}
	h.keep(fwd)
	fmt.Fprintf(h.log, "%s virt-operator webhook bridge %s:443 -> %s\n", time.Now().Format(time.RFC3339Nano), ip, voWebhookAddr)
	<-ctx.Done()
	return nil
}
