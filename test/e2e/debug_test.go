package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

// TestOperatorDebugFlags: the operator's two diagnostics work on the real
// binary. --log-verbosity 2 logs each API request (method, path, status),
// which is how a rollout's reads are broken down by path; and
// --pprof-bind-address serves Go's profiles (a heap profile is how its
// memory is found).
func TestOperatorDebugFlags(t *testing.T) {
	e := setup(t, withoutManager())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pprofAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	op := newOperatorProcess(t, "operator", e.ns, "--log-verbosity", "2", "--pprof-bind-address", pprofAddr)
	op.start()

	// The manager's cache lists the Installations of its namespace.
	list := fmt.Sprintf(`"method"="GET" "path"="/apis/installstrategy.io/v1alpha1/namespaces/%s/installations?`, e.ns)
	testenv.WaitFor(ctx, t, "the list of Installations in the request log", func(context.Context) (bool, string, error) {
		op.mustRun()
		return op.logContains(list), "", nil
	})
	if !op.logContains(`"status"=200`) {
		t.Errorf("no request logged with its status:\n%s", op.logSince(0))
	}

	var profile string
	testenv.WaitFor(ctx, t, "a heap profile", func(ctx context.Context) (bool, string, error) {
		op.mustRun()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+"/debug/pprof/heap?debug=1", nil)
		if err != nil {
			return false, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error(), nil // not listening yet
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return false, "", fmt.Errorf("GET /debug/pprof/heap: %s\n%s", resp.Status, body)
		}
		profile = string(body)
		return true, "", err
	})
	if !strings.HasPrefix(profile, "heap profile:") {
		t.Errorf("GET /debug/pprof/heap?debug=1 = %.200q, want a heap profile", profile)
	}
}
