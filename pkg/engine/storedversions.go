package engine

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// StorageVersionsStep is the name of the step that migrates custom
// resources stored at a version their CRD's new definition drops (see
// kinds.Info.MigrateStoredVersions).
const StorageVersionsStep = "crds/storage-versions"

// staleStoredVersions returns the versions live (a CRD in the cluster)
// lists in status.storedVersions that obj (its strategy object) no longer
// defines, and obj's storage version.
func staleStoredVersions(obj, live *unstructured.Unstructured) (stale []string, storage string) {
	defined := map[string]bool{}
	// Read in place: the versions hold the schemas.
	field, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "versions")
	versions, _ := field.([]any)
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		defined[name] = true
		if s, _ := m["storage"].(bool); s {
			storage = name
		}
	}
	if live == nil {
		return nil, storage
	}
	stored, _, _ := unstructured.NestedStringSlice(live.Object, "status", "storedVersions")
	for _, v := range stored {
		if !defined[v] {
			stale = append(stale, v)
		}
	}
	return stale, storage
}

// crdResource returns the resource of obj's (a CRD's) custom resources at
// version.
func crdResourceAt(obj *unstructured.Unstructured, version string) schema.GroupVersionResource {
	group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "plural")
	return schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
}

// migrationsPlanned returns the plan step that Run's storage-version
// migration would take: one item per CRD of s whose live object lists a
// stored version s drops; nil when there is none.
func (r *run) migrationsPlanned(ctx context.Context, p *plan.Plan) (*plan.Step, error) {
	step := &plan.Step{Name: StorageVersionsStep, Stage: kinds.StageCRDs}
	for _, st := range p.Steps {
		for _, it := range st.Items {
			info, _ := kinds.Lookup(it.Ref.GroupKind())
			if !info.MigrateStoredVersions || it.Object == nil {
				continue
			}
			live, err := r.a.Get(ctx, it.Object)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", StorageVersionsStep, err)
			}
			stale, storage := staleStoredVersions(it.Object, live)
			if len(stale) == 0 {
				continue
			}
			step.Items = append(step.Items, plan.Item{Ref: it.Ref, Action: apply.ActionMigrate, Object: it.Object, Live: live,
				Reason: fmt.Sprintf("rewrite the stored %s at %s, then drop %s from status.storedVersions and the CRD",
					crdResourceAt(it.Object, storage).Resource, storage, strings.Join(stale, ", "))})
		}
	}
	if len(step.Items) == 0 {
		return nil, nil
	}
	return step, nil
}

// withMigrationStep inserts the storage-version step after the CRDs step.
func withMigrationStep(p *plan.Plan, step *plan.Step) {
	i := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Stage != kinds.StageCRDs })
	if i < 0 {
		i = len(p.Steps)
	}
	p.Steps = slices.Insert(p.Steps, i, *step)
}

// migrateStoredVersions runs after the CRDs step is ready (the new
// definitions are served, their dropped stored versions kept unserved by
// apply.WithLive): for each CRD whose live status.storedVersions lists a
// version the strategy drops, it rewrites every custom resource through
// the new storage version (a read and an unchanged write each, what
// kube-storage-version-migrator does), then sets storedVersions to what
// remains, then applies the CRD again, which now drops the version.
// seen holds copies of the CRDs read moments ago (the wait's): the others
// are read.
func (r *run) migrateStoredVersions(ctx context.Context, objs []*unstructured.Unstructured, seen map[strategy.ObjectRef]*unstructured.Unstructured) error {
	for _, obj := range objs {
		info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind())
		if !info.MigrateStoredVersions {
			continue
		}
		ref := strategy.RefOf(obj)
		live := seen[ref]
		if live == nil {
			var err error
			if live, err = r.a.Get(ctx, obj); err != nil {
				return fmt.Errorf("%s %s: %w", StorageVersionsStep, ref, err)
			}
		}
		stale, storage := staleStoredVersions(obj, live)
		if len(stale) == 0 || storage == "" {
			continue
		}
		// The API server switches its storage of the custom resources
		// to the new version shortly after the CRD is updated: a write
		// before that stores at the old version again, which the trim
		// below would then leave undecodable once the version goes.
		if err := r.waitStorage(ctx, obj, storage); err != nil {
			return fmt.Errorf("%s %s: %w", StorageVersionsStep, ref, err)
		}
		n, err := r.rewriteStored(ctx, crdResourceAt(obj, storage))
		if err != nil {
			return fmt.Errorf("%s %s: rewrite at %s: %w", StorageVersionsStep, ref, storage, err)
		}
		ri, err := r.a.Resource(obj)
		if err != nil {
			return fmt.Errorf("%s %s: %w", StorageVersionsStep, ref, err)
		}
		err = r.a.Retry(ctx, func() error {
			cur, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			stored, _, _ := unstructured.NestedStringSlice(cur.Object, "status", "storedVersions")
			kept := slices.DeleteFunc(slices.Clone(stored), func(v string) bool { return slices.Contains(stale, v) })
			if !slices.Contains(kept, storage) {
				kept = append(kept, storage)
			}
			if err := unstructured.SetNestedStringSlice(cur.Object, kept, "status", "storedVersions"); err != nil {
				return err
			}
			out, err := ri.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			// The apply below must not take a cached copy from before
			// this write, which still lists the dropped versions.
			r.a.Wrote(out)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s %s: update status.storedVersions: %w", StorageVersionsStep, ref, err)
		}
		res, err := r.a.Apply(ctx, obj)
		if err != nil {
			return fmt.Errorf("%s %s: %w", StorageVersionsStep, ref, err)
		}
		r.emit(Event{Type: EventApplied, Step: StorageVersionsStep, Ref: ref, Action: apply.ActionMigrate,
			Reason: fmt.Sprintf("%d stored objects rewritten at %s; %s dropped (%s)", n, storage, strings.Join(stale, ", "), res.Action)})
	}
	return nil
}

// rewriteStored reads every object of gvr (in every namespace) and writes
// it back unchanged, so the API server stores it at gvr's version. An
// object changed or deleted meanwhile was stored anew already.
func (r *run) rewriteStored(ctx context.Context, gvr schema.GroupVersionResource) (int, error) {
	res := r.a.Dynamic().Resource(gvr)
	n := 0
	opts := metav1.ListOptions{Limit: 500}
	for {
		var list *unstructured.UnstructuredList
		err := r.a.Retry(ctx, func() error {
			var err error
			list, err = res.List(ctx, opts)
			return err
		})
		if err != nil {
			return n, err
		}
		for i := range list.Items {
			o := &list.Items[i]
			err := r.a.Retry(ctx, func() error {
				_, err := res.Namespace(o.GetNamespace()).Update(ctx, o, metav1.UpdateOptions{FieldManager: r.opts.FieldManager})
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					return nil
				}
				return err
			})
			if err != nil {
				return n, fmt.Errorf("%s %s/%s: %w", gvr.Resource, o.GetNamespace(), o.GetName(), err)
			}
			n++
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return n, nil
		}
	}
}

// storageVersionHash is the storageVersionHash discovery shows for the
// resources of kind stored at group/version: what the API server's
// discovery computes (k8s.io/apiserver/pkg/endpoints/discovery, copied
// rather than linked: that package pulls the API server's endpoint code
// in; TestStorageVersionHashIsDiscoverys holds the copy to the cluster's).
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// waitStorage waits (within the stage deadline) until the API server
// stores the custom resources of crd (a strategy's CRD object) at
// storage: until discovery's storageVersionHash for their resource is
// the hash of storage, asked afresh each time (not a sleep: the switch
// follows the CRD update by an informer's delay). Discovery is asked at a
// version the CRD serves, the storage version first.
func (r *run) waitStorage(ctx context.Context, crd *unstructured.Unstructured, storage string) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	served := servedVersions(crd, storage)
	if len(served) == 0 {
		// Nothing serves the resource: nothing can be rewritten either.
		return fmt.Errorf("no version of %s.%s is served to rewrite its objects at %s", plural, group, storage)
	}
	want := storageVersionHash(group, storage, kind)
	last := "not listed"
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, r.opts.StageDeadline, true, func(ctx context.Context) (bool, error) {
		list, err := r.kube.Discovery().ServerResourcesForGroupVersion(group + "/" + served[0])
		if err != nil {
			// Not listed yet (a version just served), or a passing
			// fault: asked again.
			last = err.Error()
			return false, nil
		}
		for _, res := range list.APIResources {
			if res.Name == plural {
				last = "hash " + res.StorageVersionHash
				return res.StorageVersionHash == want, nil
			}
		}
		last = "not listed"
		return false, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("the API server does not store %s.%s at %s yet (discovery's storageVersionHash %s, want %s): %w", plural, group, storage, last, want, err)
	}
	return err
}

// servedVersions returns the versions crd serves, first if served.
func servedVersions(crd *unstructured.Unstructured, first string) []string {
	var out []string
	field, _, _ := unstructured.NestedFieldNoCopy(crd.Object, "spec", "versions")
	versions, _ := field.([]any)
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		if name == first {
			out = slices.Insert(out, 0, name)
			continue
		}
		out = append(out, name)
	}
	return out
}
