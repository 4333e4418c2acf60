// Command sample-component is the process of every component of the sample
// product (pkg/generate.Sample: sample-api, sample-controller,
// sample-handler) when it runs on the local cluster's real node: `make
// images` packs it into the images registry.example/sample/COMPONENT:VERSION.
// It logs its arguments, answers GET /healthz on :8080 (the handler's
// readiness probe) and runs until SIGTERM or SIGINT.
//
// With --tls-cert-dir=DIR and --port=P (sample-api's arguments) it also
// serves HTTPS on :P with DIR/tls.crt and DIR/tls.key (the Secret the
// reconciler fills; read again on every handshake, so a rotated
// certificate is served as soon as the kubelet updates the volume) and
// answers the product's admission webhook at /validate-widgets: a Widget
// whose spec.size is negative is refused, any other admitted.
//
// Crash mode: with SAMPLE_CRASH=true in its environment it exits 1 at once,
// before it serves, so that a rollout that sets it (a customize patch)
// crash-loops for real and never becomes ready.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// CrashEnv is the environment variable of the crash mode.
const CrashEnv = "SAMPLE_CRASH"

func main() {
	fmt.Printf("sample-component %s: started\n", strings.Join(os.Args[1:], " "))
	if os.Getenv(CrashEnv) == "true" {
		fmt.Fprintf(os.Stderr, "sample-component: %s=true: crashing\n", CrashEnv)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if dir, port := flagValue("--tls-cert-dir"), flagValue("--port"); dir != "" && port != "" {
		go serveWebhook(ctx, dir, port)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintf(os.Stderr, "sample-component: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("sample-component: stopping")
}

// flagValue returns the value of --name=VALUE among the arguments.
func flagValue(name string) string {
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// serveWebhook serves the validating webhook over HTTPS until ctx ends.
func serveWebhook(ctx context.Context, dir, port string) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /validate-widgets", validateWidgets)
	srv := &http.Server{
		Addr:              ":" + port,
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
			return &c, err
		}},
	}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Printf("sample-component: webhook on :%s with the certificate in %s\n", port, dir)
	if err := srv.ListenAndServeTLS("", ""); err != nil && err != http.ErrServerClosed {
		fmt.Fprintf(os.Stderr, "sample-component: webhook: %v\n", err)
		os.Exit(1)
	}
}

// validateWidgets answers an AdmissionReview (v1): a Widget with a
// negative spec.size is refused.
func validateWidgets(w http.ResponseWriter, r *http.Request) {
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Request    *struct {
			UID    string `json:"uid"`
			Object struct {
				Spec struct {
					Size *int64 `json:"size"`
				} `json:"spec"`
			} `json:"object"`
		} `json:"request"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	response := map[string]any{"uid": review.Request.UID, "allowed": true}
	if size := review.Request.Object.Spec.Size; size != nil && *size < 0 {
		response["allowed"] = false
		response["status"] = map[string]any{"code": 422, "message": fmt.Sprintf("sample-api: spec.size %d is negative", *size)}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}
