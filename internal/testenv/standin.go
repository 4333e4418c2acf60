package testenv

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/localcluster"
)

// WebhookStandIn plays the pods behind a product's webhook Service where
// kwok runs none: it listens on the Service's (loopback) ClusterIP, port
// 443, and presents the certificate of the TLS Secret the pods would mount
// — the one the engine issued, read at each handshake — so the API server
// calling the webhook verifies it against the CA bundle the engine
// injected, for the name it dials (SERVICE.NAMESPACE.svc). It admits every
// AdmissionReview and answers anything else with 400. The product's
// webhooks keep their failurePolicy: a wrong certificate or bundle fails
// the writes they guard.
type WebhookStandIn struct {
	// Reviews counts the admission reviews answered.
	Reviews atomic.Int64
	srv     *http.Server
	started chan error
	// done is closed when the stand-in has stopped listening.
	done chan struct{}
}

// Close stops the stand-in (the pods it played are gone, e.g. an operator
// handing over to another) and frees the ClusterIP's port for whoever
// serves the Service next. It waits until the stand-in started or gave up.
func (s *WebhookStandIn) Close() error {
	err := <-s.started
	s.started <- err
	if cerr := s.srv.Close(); err == nil {
		err = cerr
	}
	<-s.done
	return err
}

// ServeWebhookStandIn starts a stand-in for the pods behind Service
// namespace/service that mount Secret namespace/secret, once the Service
// has a ClusterIP and the Secret a certificate (it waits in the
// background), until the test ends; a failure to start fails the test at
// its end.
func (e *Env) ServeWebhookStandIn(ctx context.Context, t testing.TB, namespace, service, secret string) *WebhookStandIn {
	t.Helper()
	s := &WebhookStandIn{}
	var mu sync.Mutex
	var last *tls.Certificate
	var read time.Time
	current := func(ctx context.Context) (*tls.Certificate, error) {
		// The Secret is read at most once a second: the API server opens
		// many connections at once.
		mu.Lock()
		defer mu.Unlock()
		if last != nil && time.Since(read) < time.Second {
			return last, nil
		}
		sec, err := e.Kube.CoreV1().Secrets(namespace).Get(ctx, secret, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if len(sec.Data["tls.crt"]) == 0 {
			return nil, errors.New("secret " + namespace + "/" + secret + " holds no certificate yet")
		}
		pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
		if err != nil {
			return nil, err
		}
		last, read = &pair, time.Now()
		return last, nil
	}
	// Clients that drop a connection mid-handshake (the API server does,
	// under load) are not the test's business: no log lines for them.
	srv := &http.Server{Handler: http.HandlerFunc(s.admit), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return current(hello.Context())
		}},
	}
	started := make(chan error, 1)
	s.srv, s.started, s.done = srv, started, make(chan struct{})
	go func() {
		defer close(s.done)
		var ip string
		err := Poll(ctx, fmt.Sprintf("Service %s/%s and the certificate of Secret %s", namespace, service, secret), func(ctx context.Context) (bool, string, error) {
			svc, err := e.Kube.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			if _, err := current(ctx); err != nil {
				return false, err.Error(), nil
			}
			ip = svc.Spec.ClusterIP
			return true, "", nil
		})
		if err != nil {
			started <- err
			return
		}
		ln, err := localcluster.ListenClusterIP(ip, 443)
		if err != nil {
			started <- err
			return
		}
		started <- nil
		_ = srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		select {
		case err := <-started:
			if err != nil {
				t.Errorf("stand-in for %s/%s: %v", namespace, service, err)
			}
		default:
		}
	})
	return s
}

func (s *WebhookStandIn) admit(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an admission review", http.StatusBadRequest)
		return
	}
	s.Reviews.Add(1)
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}
