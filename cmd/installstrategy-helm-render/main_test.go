package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/render/helmexec"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
)

// One request in, one response out: a chart that renders gives its
// manifests, one that does not gives its error with exit 0; a request
// that cannot be read, an argument or an unknown flag are refused.
func TestRun(t *testing.T) {
	charts := filepath.Join("..", "..", "pkg", "render", "testdata")
	hooks := ocitest.PackChart(t, filepath.Join(charts, "hooks"))
	broken := ocitest.PackChart(t, filepath.Join(charts, "broken"))
	request := func(archive []byte, vals map[string]any) string {
		b, err := json.Marshal(helmexec.Request{Name: "c", Archive: archive, Values: vals, Options: helmspec.Options{Namespace: "ns1", ReleaseName: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		stdin    string
		code     int
		stdout   []string
		stderr   []string
		response bool
		// manifests are in the response's result
		manifests []string
	}{
		{name: "renders", stdin: request(hooks, map[string]any{"greeting": "hi"}), response: true, manifests: []string{`greeting: "hi"`, "name: r-config"}, stdout: []string{`"action":"dropped"`}},
		{name: "chart error", stdin: request(broken, map[string]any{"settings": map[string]any{"other": 1}}), response: true, stdout: []string{`"error":"render chart c:`, "broken/templates/configmap.yaml:6"}},
		{name: "no request", stdin: "", code: 1, stderr: []string{"read the request on standard input"}},
		{name: "not json", stdin: "manifests please", code: 1, stderr: []string{"read the request on standard input"}},
		{name: "no archive", stdin: `{"name":"c"}`, code: 1, stderr: []string{"no chart archive"}},
		{name: "argument", args: []string{"chart.tgz"}, code: 2, stderr: []string{`unexpected argument "chart.tgz"`}},
		{name: "unknown flag", args: []string{"--values=x"}, code: 2, stderr: []string{"flag provided but not defined"}},
		{name: "help", args: []string{"--help"}, code: 0, stderr: []string{"standard input", "not meant to be run by hand"}},
		{name: "version", args: []string{"--version"}, code: 0, stdout: []string{helmexec.HelperName + " "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, strings.NewReader(tc.stdin), &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, stderr.String())
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%.2000s", w, stdout.String())
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if tc.response {
				var resp helmexec.Response
				if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil || (resp.Result == nil) == (resp.Error == "") {
					t.Fatalf("response %s: %v; want a result or an error", stdout.String(), err)
				}
				for _, w := range tc.manifests {
					if resp.Result == nil || !strings.Contains(string(resp.Result.Manifests), w) {
						t.Errorf("the rendered manifests lack %q: %+v", w, resp)
					}
				}
			}
		})
	}
}
