// Command sample-component is the process of every component of the sample
// product (pkg/generate.Sample: sample-api, sample-controller,
// sample-handler) when it runs on the local cluster's real node: `make
// images` packs it into the images registry.example/sample/COMPONENT:VERSION.
// It logs its arguments, answers GET /healthz on :8080 (the handler's
// readiness probe) and runs until SIGTERM or SIGINT.
//
// Crash mode: with SAMPLE_CRASH=true in its environment it exits 1 at once,
// before it serves, so that a rollout that sets it (a customize patch)
// crash-loops for real and never becomes ready.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
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
