package helmexec_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/installstrategy/installstrategy/internal/gobuild"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmexec"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
)

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// helper builds cmd/installstrategy-helm-render as it is released, once
// per content of its sources: the binary is kept in the user's cache
// folder under a key of every package it links (gobuild.Cached), so a run
// whose sources did not change links nothing.
func helper(t *testing.T) string {
	t.Helper()
	helperOnce.Do(func() {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		helperPath, helperErr = gobuild.Cached(ctx, "", helmexec.HelperName,
			gobuild.Build{Pkg: "github.com/installstrategy/installstrategy/cmd/installstrategy-helm-render"})
	})
	if helperErr != nil {
		t.Fatalf("build the helper: %v", helperErr)
	}
	return helperPath
}

// ownHelper is the helper under a path of this test's own (a symbolic
// link to it), so that its processes can be told from those of other
// tests running the shared cached binary.
func ownHelper(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), helmexec.HelperName)
	if err := os.Symlink(helper(t), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// script writes an executable shell script standing in for the helper.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-helper")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The helper renders exactly what HelmArchive renders in the caller's
// process, errors included (a template error keeps its place), and a
// chart's error is the chart's (not a RendererError).
func TestRendererMatchesInProcess(t *testing.T) {
	r := helmexec.Renderer{Path: helper(t)}
	metallb := ocitest.PackChart(t, filepath.Join("..", "testdata", "charts", "metallb-v0.15.3"))
	hooks := ocitest.PackChart(t, filepath.Join("..", "testdata", "hooks"))
	broken := ocitest.PackChart(t, filepath.Join("..", "testdata", "broken"))
	for _, tc := range []struct {
		name    string
		tgz     []byte
		vals    map[string]any
		opts    helmspec.Options
		wantErr string
	}{
		{name: "metallb", tgz: metallb, vals: map[string]any{"speaker": map[string]any{"frr": map[string]any{"enabled": false}}}, opts: helmspec.Options{ReleaseName: "lb", Namespace: "metallb-system", KubeVersion: "v1.36.0"}},
		{name: "hooks", tgz: hooks, vals: map[string]any{"greeting": "hi", "replicas": 3.0}, opts: helmspec.Options{Namespace: "ns1", KubeVersion: "v1.36.0"}}, // Helm's default differs between a test binary and a built one
		{name: "skip crds", tgz: hooks, opts: helmspec.Options{SkipCRDs: true, SkipSchemaValidation: true, KubeVersion: "v1.36.0"}},                            // the options travel to the helper
		{name: "template error", tgz: broken, vals: map[string]any{"settings": map[string]any{"other": 1.0}}, wantErr: "broken/templates/configmap.yaml:6"},
		{name: "bad kube version", tgz: hooks, opts: helmspec.Options{KubeVersion: "not-a-version"}, wantErr: "kube version"},
		{name: "not an archive", tgz: []byte("not gzip"), wantErr: "load chart c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := render.HelmArchive(t.Context(), "c", tc.tgz, tc.vals, tc.opts)
			got, err := r.RenderArchive(t.Context(), "c", tc.tgz, tc.vals, tc.opts)
			if tc.wantErr != "" {
				if err == nil || wantErr == nil || err.Error() != wantErr.Error() || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, in process %v, want both naming %q", err, wantErr, tc.wantErr)
				}
				if _, broken := errors.AsType[*helmspec.RendererError](err); broken {
					t.Errorf("a chart's error is a RendererError: %v", err)
				}
				return
			}
			if err != nil || wantErr != nil {
				t.Fatalf("error %v, in process %v", err, wantErr)
			}
			if len(got.Manifests) < 100 || string(got.Manifests) != string(want.Manifests) {
				t.Errorf("helper's manifests differ from the in-process ones:\n%s\n---- in process:\n%s", got.Manifests, want.Manifests)
			}
			if !reflect.DeepEqual(got.Chart, want.Chart) || !reflect.DeepEqual(got.Hooks, want.Hooks) {
				t.Errorf("helper's chart and hooks differ from the in-process ones:\n%+v %+v\n%+v %+v", got.Chart, got.Hooks, want.Chart, want.Hooks)
			}
		})
	}
}

// A post-renderer runs a program, which the helper does not: a render
// that has one is refused, naming it, and no helper is started.
func TestRendererRefusesPostRenderer(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	r := helmexec.Renderer{Path: script(t, "touch "+marker)}
	hooks := ocitest.PackChart(t, filepath.Join("..", "testdata", "hooks"))
	_, err := r.RenderArchive(t.Context(), "c", hooks, nil, helmspec.Options{PostRenderer: upper{}})
	if err == nil || !strings.Contains(err.Error(), "post-renderer") {
		t.Fatalf("error %v, want a refusal naming the post-renderer", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the helper was started")
	}
}

type upper struct{}

func (upper) Run(b *bytes.Buffer) (*bytes.Buffer, error) {
	return bytes.NewBufferString(strings.ToUpper(b.String())), nil
}

// A render past the deadline is killed, not waited for; a helper that
// fails, answers nonsense or is missing is a RendererError naming what
// happened, and sees none of the caller's environment; an answer over the
// bound is refused.
func TestRendererFailures(t *testing.T) {
	hooks := ocitest.PackChart(t, filepath.Join("..", "testdata", "hooks"))
	t.Setenv("INSTALLSTRATEGY_TEST_SECRET", "do-not-pass")
	ctx := t.Context()

	t.Run("deadline", func(t *testing.T) {
		// A child that outlives the helper holds its output open: the
		// render still returns at the deadline.
		r := helmexec.Renderer{Path: script(t, "sleep 60 & sleep 60")}
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := r.RenderArchive(dctx, "c", hooks, nil, helmspec.Options{})
		if err == nil || !strings.Contains(err.Error(), "render chart c: context deadline exceeded") {
			t.Fatalf("error %v, want the deadline", err)
		}
		if waited := time.Since(start); waited > 20*time.Second {
			t.Errorf("returned after %v: the helper was waited for", waited)
		}
	})
	t.Run("templates that loop", func(t *testing.T) {
		// A signed chart whose templates loop: in the operator's process
		// the render went on after its deadline; the helper is killed.
		dir := filepath.Join(t.TempDir(), "loop")
		if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{
			"Chart.yaml":               "apiVersion: v2\nname: loop\nversion: 0.1.0\n",
			"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loop\ndata:\n{{- range $i := until 5000 }}{{- range $j := until 5000 }}{{- if eq $j -1 }}  never: here{{ end }}{{- end }}{{- end }}\n",
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		own := ownHelper(t)
		start := time.Now()
		_, err := helmexec.Renderer{Path: own}.RenderArchive(dctx, "loop", ocitest.PackChart(t, dir), nil, helmspec.Options{})
		if err == nil || !strings.Contains(err.Error(), "render chart loop: context deadline exceeded") {
			t.Fatalf("error %v, want the deadline", err)
		}
		if waited := time.Since(start); waited > 20*time.Second {
			t.Errorf("returned after %v", waited)
		}
		// The helper is gone: no process runs it any more.
		out, _ := exec.Command("pgrep", "-f", own).Output()
		if pids := strings.Fields(string(out)); len(pids) > 0 {
			t.Errorf("the helper still runs after its deadline: pids %v", pids)
		}
	})
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{name: "crash", body: "echo boom >&2; exit 3", want: []string{"exit status 3", "boom"}},
		{name: "environment", body: "env >&2; exit 1", want: []string{"exit status 1"}},
		{name: "nonsense", body: "cat >/dev/null; echo not json", want: []string{"its answer"}},
		{name: "empty answer", body: "cat >/dev/null; echo '{}'", want: []string{"neither a result nor an error"}},
		{name: "missing", want: []string{"no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "absent")
			if tc.body != "" {
				path = script(t, tc.body)
			}
			_, err := helmexec.Renderer{Path: path}.RenderArchive(ctx, "c", hooks, nil, helmspec.Options{})
			if _, broken := errors.AsType[*helmspec.RendererError](err); !broken {
				t.Fatalf("error %v (%T), want a RendererError", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "do-not-pass") {
				t.Errorf("the helper saw the caller's environment: %v", err)
			}
		})
	}
	t.Run("over the bound", func(t *testing.T) {
		_, err := helmexec.Renderer{Path: helper(t), MaxResultBytes: 512}.RenderArchive(ctx, "c", hooks, nil, helmspec.Options{})
		if err == nil || !strings.Contains(err.Error(), "over 512 bytes") {
			t.Fatalf("error %v, want the bound", err)
		}
	})
	t.Run("default path", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := helmexec.Renderer{}.RenderArchive(ctx, "c", hooks, nil, helmspec.Options{})
		if _, broken := errors.AsType[*helmspec.RendererError](err); !broken || !strings.Contains(err.Error(), "--helm-renderer") {
			t.Fatalf("error %v, want a RendererError naming --helm-renderer", err)
		}
		bin := filepath.Join(t.TempDir(), helmexec.HelperName)
		if err := os.Symlink(helper(t), bin); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", filepath.Dir(bin))
		if got, err := helmexec.DefaultPath(); err != nil || got != bin {
			t.Fatalf("DefaultPath = %q, %v; want %s from $PATH", got, err, bin)
		}
		res, err := helmexec.Renderer{}.RenderArchive(ctx, "c", hooks, nil, helmspec.Options{})
		if err != nil || res.Chart.Name != "hooks" {
			t.Fatalf("render through $PATH: %v, %+v", err, res)
		}
	})
}
