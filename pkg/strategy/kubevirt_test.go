package strategy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
)

// Counts from shared/testdata/kubevirt/README.md.
var kubevirtFacts = map[string]struct {
	docs, objects, crds, deployments, daemonsets, secrets, instancetypes, preferences int
}{
	"v1.8.4": {212, 208, 18, 4, 1, 13, 65, 54},
	"v1.9.0": {249, 245, 21, 6, 1, 17, 65, 54},
}

func TestParseRealKubeVirt(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		t.Run(v, func(t *testing.T) {
			text := kubevirtdata.Read(t, v, "manifests.yaml")
			if got := len(splitDocuments(text)); got != kubevirtFacts[v].docs {
				t.Errorf("documents = %d, want %d", got, kubevirtFacts[v].docs)
			}
			s, warnings, err := Parse(text, ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			f := kubevirtFacts[v]
			if len(s.Objects) != f.objects {
				t.Errorf("objects = %d, want %d", len(s.Objects), f.objects)
			}
			counts := map[string]int{}
			for _, c := range s.CountByKind() {
				counts[c.Kind] = c.Count
				if !c.Known {
					t.Errorf("kind %s.%s not known", c.Kind, c.Group)
				}
			}
			for kind, want := range map[string]int{"CustomResourceDefinition": f.crds, "Deployment": f.deployments, "DaemonSet": f.daemonsets,
				"Secret": f.secrets, "VirtualMachineClusterInstancetype": f.instancetypes, "VirtualMachineClusterPreference": f.preferences} {
				if counts[kind] != want {
					t.Errorf("%s = %d, want %d", kind, counts[kind], want)
				}
			}
			byCode := map[WarningCode][]string{}
			for _, w := range warnings {
				byCode[w.Code] = append(byCode[w.Code], w.Object.String())
			}
			if got := len(byCode[WarnDuplicateObject]); got != 4 {
				t.Errorf("duplicate warnings = %d (%v), want 4", got, byCode[WarnDuplicateObject])
			}
			repaired := byCode[WarnAPIVersionRepaired]
			if len(repaired) != 2 || !strings.HasPrefix(repaired[0], "ValidatingAdmissionPolicy") {
				t.Errorf("repairs = %v, want the ValidatingAdmissionPolicy and its Binding", repaired)
			}
			if len(warnings) != 6 {
				t.Errorf("warnings = %d, want 6: %v", len(warnings), warnings)
			}
		})
	}
}

// TestSerializeReproducesKubeVirt checks that serialising a parsed real
// strategy gives KubeVirt's own text back byte for byte, except for exactly
// the repairs: the duplicate documents dropped and the apiVersion fixed.
func TestSerializeReproducesKubeVirt(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		t.Run(v, func(t *testing.T) {
			text := kubevirtdata.Read(t, v, "manifests.yaml")
			s, _, err := Parse(text, ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Serialize()
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			seen := map[string]bool{}
			for _, d := range splitDocuments(text) {
				s2, _, err := Parse(d.Data, ParseOptions{})
				if err != nil {
					t.Fatal(err)
				}
				key := RefOf(s2.Objects[0]).String()
				if seen[key] {
					continue
				}
				seen[key] = true
				doc := string(d.Data)
				if strings.Contains(doc, "kind: ValidatingAdmissionPolicy") {
					doc = strings.Replace(doc, "apiVersion: v1\n", "apiVersion: admissionregistration.k8s.io/v1\n", 1)
				}
				want.WriteString("---\n" + doc)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("serialised text differs from KubeVirt's (minus repairs): %s", firstDifference(got, want.Bytes()))
			}
			// Serialising is a fixed point.
			s3, w3, err := Parse(got, ParseOptions{})
			if err != nil || len(w3) != 0 {
				t.Fatalf("reparse: %v %v", err, w3)
			}
			again, _ := s3.Serialize()
			if !bytes.Equal(again, got) {
				t.Fatalf("serialise is not a fixed point: %s", firstDifference(again, got))
			}
		})
	}
}

func firstDifference(a, b []byte) string {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			lo := max(0, i-80)
			return fmt.Sprintf("at byte %d: got %q, want %q", i, a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}
