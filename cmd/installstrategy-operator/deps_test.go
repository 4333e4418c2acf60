package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The operator has the charts it pulled rendered by its helper process
// (pkg/render/helmexec): it links neither Helm's template engine (nor
// sprig, nor Go's text/template, whose linking keeps every exported
// method of every type in the binary: 14 MB more resident) nor Helm's
// install action, CLI, getters, registry client, Kubernetes client or
// storage drivers, nor kustomize and kubectl, which doubled its binary and
// its baseline memory when it did (docs/NOTES.md, "Linking Helm").
func TestOperatorLinksNoHelmCLIOrKustomize(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"helm.sh/helm/v4/pkg/action", "helm.sh/helm/v4/pkg/cli", "helm.sh/helm/v4/pkg/getter",
		"helm.sh/helm/v4/pkg/registry", "helm.sh/helm/v4/pkg/downloader", "helm.sh/helm/v4/pkg/kube",
		"helm.sh/helm/v4/pkg/storage", "sigs.k8s.io/kustomize/", "k8s.io/kubectl/",
		"helm.sh/helm/v4/pkg/engine", "github.com/Masterminds/sprig", "text/template", "html/template",
	}
	// pkg/render itself (its helmspec and helmexec are the operator's).
	const renderPkg = "github.com/installstrategy/installstrategy/pkg/render"
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		if d == renderPkg {
			t.Errorf("the operator links %s", d)
		}
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") || strings.HasSuffix(f, "/") && strings.HasPrefix(d, f) {
				t.Errorf("the operator links %s", d)
			}
		}
	}
}
