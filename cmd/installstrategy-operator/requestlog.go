package main

import (
	"net/http"
	"time"

	"github.com/go-logr/logr"
)

// requestLogVerbosity is the --log-verbosity from which every request to
// the API server is logged (method, path with query, status, duration), as
// kubectl's -v=6 does: the way to see which reads a rollout makes.
const requestLogVerbosity = 2

// logRequests wraps a transport so that each request is logged once its
// response headers arrive (a watch is logged when it starts, not when it
// ends), or when it fails.
func logRequests(log logr.Logger) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return requestLogger{next: next, log: log}
	}
}

type requestLogger struct {
	next http.RoundTripper
	log  logr.Logger
}

func (l requestLogger) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := l.next.RoundTrip(req)
	kv := []any{"method", req.Method, "path", req.URL.RequestURI(), "ms", time.Since(start).Milliseconds()}
	if err != nil {
		l.log.Info("API request failed", append(kv, "error", err.Error())...)
		return resp, err
	}
	l.log.Info("API request", append(kv, "status", resp.StatusCode)...)
	return resp, nil
}
