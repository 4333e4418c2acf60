package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestRequestLog: at --log-verbosity 2 every request of the operator's
// clients is logged with its method, path and status; below it none is.
func TestRequestLog(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	for _, verbosity := range []int{1, 2} {
		var lines []string
		log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: verbosity})
		cfg := &rest.Config{Host: srv.URL}
		if rl := log.V(requestLogVerbosity); rl.Enabled() {
			cfg.Wrap(logRequests(rl))
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		_, _ = cs.CoreV1().ConfigMaps("ns").Get(t.Context(), "missing", metav1.GetOptions{})
		got := strings.Join(lines, "\n")
		if verbosity < requestLogVerbosity {
			if got != "" {
				t.Errorf("verbosity %d logged %q, want nothing", verbosity, got)
			}
			continue
		}
		for _, want := range []string{`"method"="GET"`, `"path"="/api/v1/namespaces/ns/configmaps/missing"`, `"status"=404`} {
			if !strings.Contains(got, want) {
				t.Errorf("verbosity %d logged %q, want %s", verbosity, got, want)
			}
		}
	}
}
