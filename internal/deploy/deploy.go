// Package deploy installs the operator itself into a cluster, the way
// `make deploy` and `make undeploy` do (hack/deploy is their main): it
// renders the kustomization config/default in Go (krusty, no kubectl), sets
// the operator's image, applies every object with server-side apply in the
// kind table's stages (the namespace and the CRD first), and waits, with a
// deadline and progress lines, until the CRD is Established and the
// operator's Deployment is Available. Undeploy deletes the same objects in
// reverse order, the CRD last, and waits until they are gone.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/render/kustomize"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Defaults of Options.
const (
	// DefaultDir is the kustomization of `make deploy`, relative to the
	// repository root.
	DefaultDir = "config/default"
	// DefaultFieldOwner is the server-side apply field manager.
	DefaultFieldOwner = "installstrategy-deploy"
	// DefaultTimeout bounds each wait: the CRD Established, the
	// Deployment Available, an object gone.
	DefaultTimeout = 3 * time.Minute
	// DefaultProgressInterval is how often a wait that goes on says so.
	DefaultProgressInterval = 5 * time.Second
)

// The operator's Deployment and container in the kustomization, whose
// image Options.Image replaces.
const (
	OperatorDeployment = "installstrategy-operator"
	OperatorContainer  = "operator"
	// OperatorImageEnv is the environment variable that tells the operator
	// its own image; Options.Image sets it with the container's image.
	OperatorImageEnv = "OPERATOR_IMAGE"
)

// Options tune Deploy and Undeploy. The zero value uses the defaults above
// and the kustomization's own image.
type Options struct {
	// Dir is the kustomization directory; "" means DefaultDir.
	Dir string
	// Image replaces the operator container's image; "" keeps the
	// kustomization's.
	Image string
	// FieldOwner is the server-side apply field manager; "" means
	// DefaultFieldOwner.
	FieldOwner string
	// Timeout bounds each wait; 0 means DefaultTimeout.
	Timeout time.Duration
	// ProgressInterval is how often a wait prints that it still waits; 0
	// means DefaultProgressInterval.
	ProgressInterval time.Duration
	// KeepCRD makes Undeploy leave the CustomResourceDefinitions (and so
	// every Installation) in place and remove only the operator.
	KeepCRD bool
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// RealNode, when set, puts the operator and its dump Jobs on the
	// local cluster's real node (see LocalRealNode).
	RealNode *RealNode
	// LocalCluster is the command line's --local-cluster: the state
	// folder whose real node, if any, sets RealNode.
	LocalCluster string
}

func (o Options) withDefaults() Options {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.FieldOwner == "" {
		o.FieldOwner = DefaultFieldOwner
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

// Action is what Deploy or Undeploy did to one object.
type Action string

// The actions.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Deleted    Action = "deleted"
	// Absent: Undeploy found nothing to delete.
	Absent Action = "absent"
	// Kept: Undeploy left the object in place (Options.KeepCRD).
	Kept Action = "kept"
)

// Result says what happened to one object.
type Result struct {
	Ref    strategy.ObjectRef
	Action Action
}

// Render builds the kustomization dir, sets the operator's image (when
// image is not empty) and returns the objects in apply order: by stage of
// the kind table (namespaces and CRDs first, workloads last), then by kind
// and name.
func Render(dir, image string) ([]*unstructured.Unstructured, error) {
	rm, err := kustomize.Resources(dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		// Through JSON, so numbers are int64/float64 as in every other
		// unstructured object (r.Map gives int, which DeepCopy refuses).
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		objs = append(objs, obj)
	}
	if image != "" {
		if err := setImage(objs, image); err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		ra, rb := strategy.RefOf(a), strategy.RefOf(b)
		sa, sb := stageOf(ra), stageOf(rb)
		switch {
		case sa != sb:
			return int(sa) - int(sb)
		case kinds.Less(ra.GroupKind(), rb.GroupKind()):
			return -1
		case kinds.Less(rb.GroupKind(), ra.GroupKind()):
			return 1
		case ra.Less(rb):
			return -1
		case rb.Less(ra):
			return 1
		}
		return 0
	})
	return objs, nil
}

func stageOf(r strategy.ObjectRef) kinds.Stage {
	info, _ := kinds.Lookup(r.GroupKind())
	return info.Stage
}

// setImage sets the image of the operator's container.
func setImage(objs []*unstructured.Unstructured, image string) error {
	if strings.TrimSpace(image) != image || strings.ContainsAny(image, " \t\n") || strings.HasSuffix(image, ":") || strings.HasSuffix(image, "@") {
		return fmt.Errorf("image %q is not an image reference", image)
	}
	for _, o := range objs {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		if info.PodTemplate == nil || o.GetKind() != "Deployment" || o.GetName() != OperatorDeployment {
			continue
		}
		path := append(slices.Clone(info.PodTemplate), "spec", "containers")
		containers, _, err := unstructured.NestedSlice(o.Object, path...)
		if err != nil {
			return fmt.Errorf("%s: %w", strategy.RefOf(o), err)
		}
		for i, c := range containers {
			m, _ := c.(map[string]any)
			if m["name"] != OperatorContainer {
				continue
			}
			m["image"] = image
			// The operator dumps other versions of its product with its
			// own image (--operator-image defaults to $OPERATOR_IMAGE).
			env, _ := m["env"].([]any)
			env = slices.DeleteFunc(env, func(e any) bool {
				em, _ := e.(map[string]any)
				return em["name"] == OperatorImageEnv
			})
			m["env"] = append(env, map[string]any{"name": OperatorImageEnv, "value": image})
			containers[i] = m
			return unstructured.SetNestedSlice(o.Object, containers, path...)
		}
		return fmt.Errorf("%s has no container %q", strategy.RefOf(o), OperatorContainer)
	}
	return fmt.Errorf("no Deployment %s rendered", OperatorDeployment)
}

// clients are what Deploy and Undeploy talk to the cluster with.
type clients struct {
	a    *apply.Applier
	kube kubernetes.Interface
	o    Options
}

func newClients(cfg *rest.Config, o Options) (*clients, error) {
	a, err := apply.NewForConfig(cfg, apply.Options{FieldManager: o.FieldOwner})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return &clients{a: a, kube: kube, o: o}, nil
}

func (c *clients) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(c.o.Out, format+"\n", args...)
}

// Deploy renders o.Dir with o.Image and applies it to the cluster of cfg,
// stage by stage, waiting after each stage until its objects are ready
// (the CRD Established, the Deployment Available). Applying the same
// manifests again changes nothing (every Result is Unchanged).
func Deploy(ctx context.Context, cfg *rest.Config, o Options) ([]Result, error) {
	o = o.withDefaults()
	objs, err := Render(o.Dir, o.Image)
	if err != nil {
		return nil, err
	}
	if o.RealNode != nil {
		if err := placeOnRealNode(objs, o.RealNode); err != nil {
			return nil, fmt.Errorf("deploy on real node %s: %w", o.RealNode.Name, err)
		}
	}
	c, err := newClients(cfg, o)
	if err != nil {
		return nil, err
	}
	var results []Result
	for _, stage := range kinds.Stages() {
		var batch []*unstructured.Unstructured
		for _, obj := range objs {
			if stageOf(strategy.RefOf(obj)) == stage {
				batch = append(batch, obj)
			}
		}
		if len(batch) == 0 {
			continue
		}
		for _, obj := range batch {
			r, err := c.apply(ctx, obj)
			if err != nil {
				return results, err
			}
			results = append(results, r)
			c.printf("  %s %s", r.Ref, r.Action)
		}
		if err := c.waitReady(ctx, batch); err != nil {
			return results, err
		}
		// Kinds of CRDs applied in this stage are served from now on.
		c.a.ResetMapper()
	}
	return results, nil
}

// apply writes one object with server-side apply, taking over fields that
// another manager owns (these manifests are the truth for these objects).
func (c *clients) apply(ctx context.Context, obj *unstructured.Unstructured) (Result, error) {
	ref := strategy.RefOf(obj)
	ri, err := c.a.Resource(obj)
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: %w", ref, err)
	}
	live, err := c.a.Get(ctx, obj)
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: %w", ref, err)
	}
	out, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: c.o.FieldOwner, Force: true})
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: %w", ref, err)
	}
	switch {
	case live == nil:
		return Result{Ref: ref, Action: Created}, nil
	case live.GetResourceVersion() == out.GetResourceVersion():
		return Result{Ref: ref, Action: Unchanged}, nil
	}
	return Result{Ref: ref, Action: Configured}, nil
}

// waitReady waits until every object of objs is ready by its kind's health
// rule, printing what it waits for when that changes and at least every
// ProgressInterval.
func (c *clients) waitReady(ctx context.Context, objs []*unstructured.Unstructured) error {
	checker := &health.Checker{Kube: c.kube}
	var last string
	var lastAt time.Time
	err := checker.Wait(ctx, c.a.Get, objs, health.WaitOptions{
		Deadline: c.o.Timeout,
		Interval: 500 * time.Millisecond,
		OnProgress: func(all []health.Status) {
			var waiting []string
			for _, s := range all {
				if !s.Ready {
					waiting = append(waiting, fmt.Sprintf("%s (%s)", s.Ref, orUnknown(s.Reason)))
				}
			}
			if len(waiting) == 0 {
				return
			}
			state := strings.Join(waiting, ", ")
			if state != last || time.Since(lastAt) >= c.o.ProgressInterval {
				c.printf("  waiting for %s", state)
				last, lastAt = state, time.Now()
			}
		},
	})
	var degraded *health.DegradedError
	if errors.As(err, &degraded) {
		verb := "failed"
		if degraded.Reason == health.ReasonProgressDeadlineExceeded {
			verb = fmt.Sprintf("not ready after %s", c.o.Timeout)
		}
		parts := make([]string, 0, len(degraded.Objects))
		for _, s := range degraded.Objects {
			parts = append(parts, fmt.Sprintf("%s %s: %s", s.Ref, verb, orUnknown(s.Reason)))
		}
		return errors.New(strings.Join(parts, "; "))
	}
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", refs(objs), err)
	}
	for _, obj := range objs {
		if info, _ := kinds.Lookup(strategy.RefOf(obj).GroupKind()); info.Health != kinds.HealthNone {
			c.printf("  %s ready", strategy.RefOf(obj))
		}
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func refs(objs []*unstructured.Unstructured) string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, strategy.RefOf(o).String())
	}
	return strings.Join(out, ", ")
}

// Undeploy deletes what Deploy applies (rendered from o.Dir) in reverse
// order, the CRDs last, and waits until each object is gone before the
// next, so the operator's pods stop before its permissions go. With
// o.KeepCRD the CRDs stay. Without it, Undeploy refuses to start while any
// custom resource of those CRDs (an Installation) exists: deleting the CRD
// would delete them without the operator to run their finalizers, and the
// products they installed would stay behind; delete them first, or keep
// the CRD. Objects already gone are Absent; undeploying twice is fine.
func Undeploy(ctx context.Context, cfg *rest.Config, o Options) ([]Result, error) {
	o = o.withDefaults()
	objs, err := Render(o.Dir, "")
	if err != nil {
		return nil, err
	}
	c, err := newClients(cfg, o)
	if err != nil {
		return nil, err
	}
	objs = deleteOrder(objs)
	// Custom resources deleted without the operator would hang on their
	// finalizers and leave their products: without KeepCRD any of them
	// stops the undeploy; with it, those in a namespace undeploy deletes.
	if err := c.refuseWhileCustomResources(ctx, objs, o.KeepCRD); err != nil {
		return nil, err
	}
	var results []Result
	for _, obj := range objs {
		ref := strategy.RefOf(obj)
		if o.KeepCRD && isCRD(obj) == 1 {
			results = append(results, Result{Ref: ref, Action: Kept})
			c.printf("  %s kept", ref)
			continue
		}
		action, err := c.delete(ctx, obj)
		if err != nil {
			return results, err
		}
		results = append(results, Result{Ref: ref, Action: action})
		c.printf("  %s %s", ref, action)
	}
	return results, nil
}

// deleteOrder returns objects in apply order (Render's) in the order to
// delete them: the reverse, with the CRDs last, after the operator is gone.
func deleteOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := slices.Clone(objs)
	slices.Reverse(out)
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return isCRD(a) - isCRD(b) })
	return out
}

func isCRD(o *unstructured.Unstructured) int {
	if info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind()); info.Health == kinds.HealthCRD {
		return 1
	}
	return 0
}

// refuseWhileCustomResources fails, naming them, when a CRD of objs has
// custom resources in the cluster.
func (c *clients) refuseWhileCustomResources(ctx context.Context, objs []*unstructured.Unstructured, keepCRD bool) error {
	deleted := map[string]bool{} // namespaces undeploy deletes
	for _, obj := range objs {
		if obj.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
			deleted[obj.GetName()] = true
		}
	}
	for _, obj := range objs {
		if isCRD(obj) == 0 {
			continue
		}
		live, err := c.a.Get(ctx, obj)
		if err != nil {
			return err
		}
		if live == nil {
			continue
		}
		group, _, _ := unstructured.NestedString(live.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(live.Object, "spec", "names", "plural")
		version := storageVersion(live)
		if version == "" {
			continue
		}
		res := c.a.Dynamic().Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: plural})
		// Without KeepCRD every custom resource counts; with it, those in
		// the namespaces undeploy deletes.
		lists := []dynamic.ResourceInterface{res}
		if keepCRD {
			lists = nil
			for _, ns := range slices.Sorted(maps.Keys(deleted)) {
				lists = append(lists, res.Namespace(ns))
			}
		}
		var names []string
		for _, l := range lists {
			list, err := l.List(ctx, metav1.ListOptions{Limit: 10})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("list %s.%s: %w", plural, group, err)
			}
			for _, it := range list.Items {
				names = append(names, it.GetNamespace()+"/"+it.GetName())
			}
			if list.GetContinue() != "" {
				names = append(names, "…")
			}
		}
		if len(names) == 0 {
			continue
		}
		if keepCRD {
			return fmt.Errorf("%s.%s live in a namespace undeploy deletes (%s): deleting it would delete them without the operator to uninstall their products; "+
				"delete them first and let the operator finish. Nothing was deleted", plural, group, strings.Join(names, ", "))
		}
		return fmt.Errorf("%s.%s still exist (%s): deleting %s would delete them without the operator to uninstall their products; "+
			"delete them first and let the operator finish, or keep the CRD (make undeploy KEEP_CRD=true, or --keep-crd). Nothing was deleted",
			plural, group, strings.Join(names, ", "), strategy.RefOf(obj))
	}
	return nil
}

// storageVersion is the served version a CRD stores, "" when none.
func storageVersion(crd *unstructured.Unstructured) string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["storage"] == true && m["served"] == true {
			name, _ := m["name"].(string)
			return name
		}
	}
	return ""
}

// delete deletes one object in the foreground (a Deployment goes only once
// its pods are gone) and waits until it is gone.
func (c *clients) delete(ctx context.Context, obj *unstructured.Unstructured) (Action, error) {
	ref := strategy.RefOf(obj)
	live, err := c.a.Get(ctx, obj)
	if err != nil {
		return "", fmt.Errorf("delete %s: %w", ref, err)
	}
	if live == nil {
		return Absent, nil
	}
	ri, err := c.a.Resource(obj)
	if err != nil {
		return "", fmt.Errorf("delete %s: %w", ref, err)
	}
	fg := metav1.DeletePropagationForeground
	uid := live.GetUID()
	err = ri.Delete(ctx, live.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "", fmt.Errorf("delete %s: %w", ref, err)
	}
	if err := c.waitGone(ctx, live); err != nil {
		return "", err
	}
	return Deleted, nil
}

// waitGone waits until live (the object with its UID) no longer exists,
// saying what holds it back at least every ProgressInterval.
func (c *clients) waitGone(ctx context.Context, live *unstructured.Unstructured) error {
	ref := strategy.RefOf(live)
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	start := time.Now()
	lastAt := start
	state := "deletion requested"
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		cur, err := c.a.Get(ctx, live)
		switch {
		case err == nil && (cur == nil || cur.GetUID() != live.GetUID()):
			return nil
		case err == nil:
			state = terminating(cur)
		case ctx.Err() == nil:
			state = "error: " + err.Error()
		}
		if time.Since(lastAt) >= c.o.ProgressInterval {
			c.printf("  waiting for %s to be gone (%s)", ref, state)
			lastAt = time.Now()
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s still exists %s after its deletion: %s", ref, c.o.Timeout, state)
			}
			return fmt.Errorf("waiting for %s to be gone: %w", ref, ctx.Err())
		case <-tick.C:
		}
	}
}

// terminating describes what keeps a deleted object: its finalizers and,
// for a namespace, the conditions that say which content remains.
func terminating(u *unstructured.Unstructured) string {
	parts := []string{"terminating"}
	if f := u.GetFinalizers(); len(f) > 0 {
		parts = append(parts, "finalizers "+strings.Join(f, ", "))
	}
	if f, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "finalizers"); len(f) > 0 {
		parts = append(parts, "finalizers "+strings.Join(f, ", "))
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] == "True" && m["message"] != nil {
			parts = append(parts, fmt.Sprintf("%v: %v", m["type"], m["message"]))
		}
	}
	return strings.Join(parts, "; ")
}
