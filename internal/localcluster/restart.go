package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Restart stops one component of the running cluster in stateDir and
// starts it again with the same command line: SIGKILL when kill is set (a
// crash), else SIGTERM with a grace period (a rolling restart). It returns
// once the component answers again (etcd /health, kube-apiserver /readyz)
// and the state records its new pid. It is how tests restart etcd and
// kube-apiserver at a point of their choosing.
func Restart(ctx context.Context, stateDir, component string, kill bool) error {
	if !slices.Contains(Components, component) {
		return fmt.Errorf("restart %s: not a component (want one of %s)", component, strings.Join(Components, ", "))
	}
	s, err := Load(stateDir)
	if err != nil {
		return fmt.Errorf("restart %s: %w", component, err)
	}
	pid := s.PIDs[component]
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return fmt.Errorf("restart %s: read its command line: %w", component, err)
	}
	argv := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
	grace := 10 * time.Second
	if kill {
		grace = 0
	}
	if err := stop(ctx, pid, s.StateDir, grace); err != nil {
		return fmt.Errorf("restart %s: %w", component, err)
	}
	p, err := startAgain(ctx, s.StateDir, component, argv)
	if err != nil {
		return fmt.Errorf("restart %s: %w", component, err)
	}
	s.PIDs[component] = p.pid
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("restart %s: encode cluster state: %w", component, err)
	}
	if err := os.WriteFile(filepath.Join(s.StateDir, stateFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("restart %s: write cluster state: %w", component, err)
	}
	ready := func(ctx context.Context) (bool, string, error) { return true, "", nil }
	switch component {
	case Etcd:
		ready = httpOK(http.DefaultClient, s.EtcdURL+"/health")
	case KubeAPIServer:
		cs, err := clientFor(s.Kubeconfig)
		if err != nil {
			return fmt.Errorf("restart %s: %w", component, err)
		}
		ready = func(ctx context.Context) (bool, string, error) {
			body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return false, fmt.Sprintf("GET /readyz: %v: %s", err, strings.TrimSpace(string(body))), nil
			}
			return true, "", nil
		}
	}
	u := &upper{opts: Options{Timeout: 2 * time.Minute}}
	if err := u.poll(ctx, p, component+" answering", ready); err != nil {
		return fmt.Errorf("restart %s: %w", component, err)
	}
	return nil
}

// startAgain starts a component with its old command line. Its port may
// still be taken for a moment after the old process died: a start that
// fails on that within a second is tried again, for up to 30 s.
func startAgain(ctx context.Context, stateDir, component string, argv []string) (*process, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := start(stateDir, component, argv[0], argv[1:])
		if err != nil {
			return nil, err
		}
		select {
		case <-p.exited:
		case <-time.After(time.Second):
			return p, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if log := tail(p.logFile, 5); !strings.Contains(log, "address already in use") || time.Now().After(deadline) {
			return nil, fmt.Errorf("%w; log: %s", p.failed(), log)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
