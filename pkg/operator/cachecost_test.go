package operator

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// Anyone who may create ConfigMaps in a watched namespace (with the
// operator watching every namespace: any tenant) may label them as
// strategies, and the manager's cache holds every such ConfigMap. What it
// keeps of one is a few hundred bytes, whatever the ConfigMap holds (about
// 1 MiB of data, 256 KiB of annotations): a few hundred such ConfigMaps
// of a megabyte no longer take the operator past its 512 MiB memory limit.
// The watch still tells the operator's own writes from others' as before.
func TestStrategyConfigMapCacheKeepsOnlyWhatTheWatchReads(t *testing.T) {
	big := strings.Repeat("x", 900<<10)
	meta := metav1.ObjectMeta{Namespace: "tenant", Name: "s", UID: k8stypes.UID("uid-1"), ResourceVersion: "7",
		Labels:        map[string]string{metakeys.StrategyLabel: "", "padding": strings.Repeat("y", 63)},
		Annotations:   map[string]string{metakeys.DigestAnnotation: "sha256:" + strings.Repeat("a", 64), "padding": strings.Repeat("z", 250<<10)},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}}}
	forged := meta
	forged.Annotations = map[string]string{metakeys.DigestAnnotation: "sha256:" + strings.Repeat("a", 100<<10)}
	for _, tc := range []struct {
		name string
		in   client.Object
	}{
		{"metadata of a ConfigMap with 250 KiB of annotations", &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta}},
		{"a ConfigMap with 900 KiB of data", &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"manifests": big}, BinaryData: map[string][]byte{"b": []byte(big)}}},
		{"a digest annotation of 100 KiB", &metav1.PartialObjectMetadata{ObjectMeta: forged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := TransformStrategyConfigMap(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			kept := out.(client.Object)
			b, err := json.Marshal(kept)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 1024 {
				t.Errorf("the cache keeps %d bytes of the ConfigMap: %.300s", len(b), b)
			}
			if kept.GetName() != "s" || kept.GetNamespace() != "tenant" || kept.GetUID() != "uid-1" || kept.GetResourceVersion() != "7" {
				t.Errorf("kept %s/%s uid %s rv %s, want what names the object", kept.GetNamespace(), kept.GetName(), kept.GetUID(), kept.GetResourceVersion())
			}
			if !isStrategyConfigMap(kept) {
				t.Error("the kept ConfigMap is no longer labelled as a strategy")
			}
			if len(tc.in.GetAnnotations()[metakeys.DigestAnnotation]) <= maxCachedDigest && createKey(kept) != createKey(tc.in) {
				t.Errorf("create key %q, want %q: the operator's own creations would reconcile", createKey(kept), createKey(tc.in))
			}
			// The watch's decisions are those it makes on the whole object.
			r := &Reconciler{}
			p := r.strategyConfigMapChanged()
			r.own.expect(createKey(tc.in))
			if got, want := p.Create(event.CreateEvent{Object: kept}), createKey(tc.in) == "" || len(tc.in.GetAnnotations()[metakeys.DigestAnnotation]) > maxCachedDigest; got != want {
				t.Errorf("the operator's own creation reconciles: %v, want %v", got, want)
			}
		})
	}
	by, err := StrategyConfigMapsCache()
	if err != nil {
		t.Fatal(err)
	}
	if by.Transform == nil || by.Label == nil || by.Label.String() != metakeys.StrategyLabel {
		t.Errorf("StrategyConfigMapsCache: label %v, transform set %v", by.Label, by.Transform != nil)
	}
}
