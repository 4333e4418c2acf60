package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Faults chooses what a FaultProxy does to the requests it forwards. The
// zero value forwards every request untouched.
type Faults struct {
	// Rate is the share of requests, from 0 to 1, that fail instead of
	// reaching kube-apiserver: each failing request gets, at random, a 500
	// or a 503 (a Status as kube-apiserver writes it), a 429 with
	// Retry-After: 1, or its connection reset.
	Rate float64
	// Latency delays every forwarded request by a random duration up to it.
	Latency time.Duration
	// Watches lets faults hit watch requests too; by default a watch is
	// forwarded untouched (a watch that fails is only retried later by
	// its informer, which tests a different thing: a slow client).
	Watches bool
}

// Fault kinds, as FaultProxy.Injected counts them.
const (
	FaultInternalError = "500"
	FaultUnavailable   = "503"
	FaultTooMany       = "429"
	FaultReset         = "reset"
)

var faultKinds = []string{FaultInternalError, FaultUnavailable, FaultTooMany, FaultReset}

// FaultProxy is an HTTP proxy on loopback in front of kube-apiserver that
// fails a chosen share of the requests (see Faults). Clients reach it with
// Config; it forwards with the upstream configuration's credentials.
type FaultProxy struct {
	// Config points a client at the proxy (plain HTTP on loopback; the
	// proxy adds the upstream credentials).
	Config *rest.Config

	mu       sync.Mutex
	faults   Faults
	rnd      *rand.Rand
	injected map[string]int
	passed   atomic.Int64
	srv      *http.Server
}

// StartFaultProxy starts a FaultProxy in front of the API server of
// upstream, with faults f and random choices seeded by seed. Close stops
// it.
func StartFaultProxy(upstream *rest.Config, f Faults, seed uint64) (*FaultProxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("fault proxy: upstream host %q: %v", upstream.Host, err)
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	rt, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: upstream transport: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fault proxy: listen: %w", err)
	}
	p := &FaultProxy{faults: f, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), injected: map[string]int{}}
	forward := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			writeStatus(w, http.StatusBadGateway, "fault proxy: upstream: "+err.Error())
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault, delay := p.decide(r)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		switch fault {
		case "":
			p.passed.Add(1)
			forward.ServeHTTP(w, r)
		case FaultInternalError:
			writeStatus(w, http.StatusInternalServerError, "fault proxy: injected internal error")
		case FaultUnavailable:
			writeStatus(w, http.StatusServiceUnavailable, "fault proxy: injected unavailability")
		case FaultTooMany:
			w.Header().Set("Retry-After", "1")
			writeStatus(w, http.StatusTooManyRequests, "fault proxy: injected throttling")
		case FaultReset:
			reset(w)
		}
	})}
	go func() { _ = p.srv.Serve(ln) }()
	p.Config = &rest.Config{Host: "http://" + ln.Addr().String(), QPS: upstream.QPS, Burst: upstream.Burst, Timeout: upstream.Timeout, UserAgent: upstream.UserAgent}
	return p, nil
}

// decide picks the fault (none: "") and the delay of a request.
func (p *FaultProxy) decide(r *http.Request) (string, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var delay time.Duration
	if p.faults.Latency > 0 {
		delay = time.Duration(p.rnd.Int64N(int64(p.faults.Latency)))
	}
	if r.URL.Query().Get("watch") == "true" && !p.faults.Watches {
		return "", delay
	}
	if p.faults.Rate <= 0 || p.rnd.Float64() >= p.faults.Rate {
		return "", delay
	}
	fault := faultKinds[p.rnd.IntN(len(faultKinds))]
	p.injected[fault]++
	return fault, delay
}

// SetFaults changes the faults of the requests from now on (the zero
// value: none).
func (p *FaultProxy) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Injected returns how many faults of each kind were injected so far, and
// how many requests were forwarded.
func (p *FaultProxy) Injected() (map[string]int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out, p.passed.Load()
}

// Close stops the proxy and drops its connections.
func (p *FaultProxy) Close() error { return p.srv.Close() }

// writeStatus answers a request as kube-apiserver answers a failure: a
// metav1.Status with the code and a message.
func writeStatus(w http.ResponseWriter, code int, msg string) {
	reason := map[int]string{500: "InternalError", 502: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests"}[code]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`,
		strings.ReplaceAll(msg, "\n", " "), reason, code)
}

// reset closes the request's connection with a TCP reset (SO_LINGER 0),
// as a dropped connection or a crashed load balancer does.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeStatus(w, http.StatusInternalServerError, "fault proxy: cannot reset")
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// FaultKubeconfig is the kubeconfig ServeFaultProxy writes in the state
// directory: clients that use it go through the proxy.
const FaultKubeconfig = "kubeconfig-faults"

// ServeFaultProxy runs a FaultProxy in front of the cluster in stateDir
// until ctx is done, with a kubeconfig for it written to
// FaultKubeconfig in stateDir; it prints the fault counts to log every
// 10 s and at the end.
func ServeFaultProxy(ctx context.Context, stateDir string, f Faults, log io.Writer) error {
	s, err := Load(stateDir)
	if err != nil {
		return err
	}
	upstream, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return fmt.Errorf("fault proxy: %w", err)
	}
	p, err := StartFaultProxy(upstream, f, uint64(time.Now().UnixNano()))
	if err != nil {
		return err
	}
	defer p.Close()
	file := filepath.Join(s.StateDir, FaultKubeconfig)
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: faults\n  cluster: {server: %q}\ncontexts:\n- name: faults\n  context: {cluster: faults, user: faults}\ncurrent-context: faults\nusers:\n- name: faults\n  user: {}\n", p.Config.Host)
	if err := os.WriteFile(file, []byte(kc), 0o600); err != nil {
		return fmt.Errorf("fault proxy: write kubeconfig: %w", err)
	}
	defer os.Remove(file)
	fmt.Fprintf(log, "fault proxy on %s failing %.0f%% of requests; export KUBECONFIG=%s\n", p.Config.Host, f.Rate*100, file)
	report := func() {
		injected, passed := p.Injected()
		fmt.Fprintf(log, "faults injected %v, requests forwarded %d\n", injected, passed)
	}
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			report()
			return nil
		case <-t.C:
			report()
		}
	}
}
