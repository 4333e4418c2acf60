// Command benchapply is the kubectl-installstrategy plugin (the same
// commands and flags) with its API requests counted: the count is the last
// line of standard error, "requests N". BenchmarkApply in pkg/reconcile runs
// `benchapply apply FILE` as a child process, as it runs kubectl and Helm,
// so that time, requests and peak memory are measured alike for the three.
package main

import (
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/cli"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func main() {
	var requests atomic.Int64
	code := cli.MainWrapped(os.Args[1:], cli.StdStreams(), func(c *rest.Config) *rest.Config {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				requests.Add(1)
				return rt.RoundTrip(r)
			})
		})
		return c
	})
	fmt.Fprintf(os.Stderr, "requests %d\n", requests.Load())
	os.Exit(code)
}
