// Command benchapply is the kubectl-installstrategy plugin (the same
// commands and flags) with its API requests counted: the count is the last
// line of standard error, "requests N". BenchmarkApply in pkg/engine runs
// `benchapply apply FILE` as a child process, as it runs kubectl and Helm,
// so that time, requests and peak memory are measured alike for the three.
//
// With INSTALLSTRATEGY_BENCH_REQUEST_LOG set, each request is also printed
// to standard error when it ends: milliseconds since start, its duration,
// method, path and status, e.g. to find what a run waits for:
//
//	INSTALLSTRATEGY_BENCH_REQUEST_LOG=1 go run ./hack/benchapply apply product.yaml -n ns
//
// With INSTALLSTRATEGY_BENCH_CPUPROFILE=FILE, a CPU profile of the whole
// run is written to FILE (go tool pprof FILE).
package main

import (
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/cli"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func main() {
	var requests atomic.Int64
	start := time.Now()
	logRequests := os.Getenv("INSTALLSTRATEGY_BENCH_REQUEST_LOG") != ""
	if file := os.Getenv("INSTALLSTRATEGY_BENCH_CPUPROFILE"); file != "" {
		f, err := os.Create(file)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "INSTALLSTRATEGY_BENCH_CPUPROFILE: %v\n", err)
			os.Exit(2)
		}
		defer f.Close()
	}
	code := cli.MainWrapped(os.Args[1:], cli.StdStreams(), func(c *rest.Config) *rest.Config {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				requests.Add(1)
				if !logRequests {
					return rt.RoundTrip(r)
				}
				began := time.Now()
				resp, err := rt.RoundTrip(r)
				status := "error"
				if err == nil {
					status = resp.Status
				}
				fmt.Fprintf(os.Stderr, "request %6d ms %5d ms %s %s %s\n", began.Sub(start).Milliseconds(), time.Since(began).Milliseconds(), r.Method, r.URL.RequestURI(), status)
				return resp, err
			})
		})
		return c
	})
	pprof.StopCPUProfile()
	fmt.Fprintf(os.Stderr, "requests %d\n", requests.Load())
	os.Exit(code)
}
