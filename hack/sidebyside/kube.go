package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// kube holds the clients of the harness (not of the operators).
type kube struct {
	cfg *rest.Config
	cs  kubernetes.Interface
	dyn dynamic.Interface
	a   *apply.Applier
}

func newKube(cfg *rest.Config) (*kube, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	a, err := apply.NewForConfig(cfg, apply.Options{FieldManager: "sidebyside"})
	if err != nil {
		return nil, err
	}
	return &kube{cfg: cfg, cs: cs, dyn: a.Dynamic(), a: a}, nil
}

func (k *kube) namespace(ctx context.Context, name string, labels map[string]string) error {
	_, err := k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// applyFile server-side applies every document of a YAML file (forcing
// conflicts: the file is the truth) and waits for the CRDs among them to be
// Established.
func (k *kube) applyFile(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		k.a.ResetMapper()
		ri, err := k.a.Resource(&u)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if _, err := ri.Apply(ctx, u.GetName(), &u, metav1.ApplyOptions{FieldManager: "sidebyside", Force: true}); err != nil {
			return fmt.Errorf("%s: apply %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == "CustomResourceDefinition" {
			if err := k.established(ctx, u.GetName()); err != nil {
				return err
			}
		}
	}
	k.a.ResetMapper()
	return nil
}

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// established waits until a CRD's names are accepted and it is
// Established (set-up, not measured).
func (k *kube) established(ctx context.Context, name string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := k.dyn.Resource(crds).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return conditionStatus(u, "Established") == "True", nil
	})
}

// storedStrategy is a strategy ConfigMap created in the cluster.
type storedStrategy struct {
	name   string
	digest string // of its decoded text, for the Installation's pin
	text   []byte
}

// storeConfigMap creates a shipped strategy ConfigMap (KubeVirt's own,
// with generateName) in namespace kubevirt.
func (k *kube) storeConfigMap(ctx context.Context, sh shippedStrategy) (storedStrategy, error) {
	cm := sh.cm.DeepCopy()
	cm.Namespace = kubevirtNamespace
	created, err := k.cs.CoreV1().ConfigMaps(kubevirtNamespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return storedStrategy{}, fmt.Errorf("create the strategy ConfigMap %s: %w", sh.identifier, err)
	}
	return storedStrategy{name: created.Name, digest: codec.Digest(sh.text), text: sh.text}, nil
}

// untilCR watches the custom resource (one LIST and one WATCH) until done
// holds or ctx ends; on failure the error says what it last reported.
func (k *kube) untilCR(ctx context.Context, gvr schema.GroupVersionResource, done func(*unstructured.Unstructured) (bool, string)) error {
	ri := k.dyn.Resource(gvr).Namespace(kubevirtNamespace)
	sel := fields.OneTermEqualSelector("metadata.name", crName).String()
	lw := selectedListWatch(ri.List, ri.Watch, func(o *metav1.ListOptions) { o.FieldSelector = sel })
	last := "not created"
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		ok, last = done(u)
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w; it last reported: %s", gvr.Resource, kubevirtNamespace, crName, err, last)
	}
	return nil
}

// cr reads the custom resource kubevirt/kubevirt.
func (k *kube) cr(ctx context.Context, gvr schema.GroupVersionResource) (*unstructured.Unstructured, error) {
	u, err := k.dyn.Resource(gvr).Namespace(kubevirtNamespace).Get(ctx, crName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", gvr.Resource, kubevirtNamespace, crName, err)
	}
	return u, nil
}

// writeYAML writes v as YAML.
func writeYAML(path string, v any) error {
	data, err := sigsyaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// selectedListWatch lists and watches with a client's List and Watch, each
// request's options changed by sel (a label or field selector).
func selectedListWatch[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), sel func(*metav1.ListOptions)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel(&o)
			return watchFn(ctx, o)
		},
	}
}

// objectCheck is what a lookup of every strategy object found.
type objectCheck struct {
	Total     int      `json:"total"`
	Present   int      `json:"present"`
	NotServed int      `json:"notServed"` // kinds the cluster does not serve (monitoring)
	Missing   []string `json:"missing,omitempty"`
}

// checkObjects looks up every object of a strategy text.
func (k *kube) checkObjects(ctx context.Context, text []byte) (objectCheck, error) {
	s, _, err := strategy.Parse(text, strategy.ParseOptions{})
	if err != nil {
		return objectCheck{}, err
	}
	k.a.ResetMapper()
	var c objectCheck
	for _, obj := range s.Objects {
		c.Total++
		live, err := k.a.Get(ctx, obj)
		var notServed *apply.NotServedError
		switch {
		case errors.As(err, &notServed):
			c.NotServed++
		case err != nil:
			return c, err
		case live == nil:
			c.Missing = append(c.Missing, strategy.RefOf(obj).String())
		default:
			c.Present++
		}
	}
	return c, nil
}
