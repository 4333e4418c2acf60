package operator

import (
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// dumpJobWatch watches the dump Jobs (label metakeys.DumpJobLabel), through
// a cache of its own that holds nothing else, and reconciles the
// installations of a Job's namespace when its status moves: a finished
// dump is loaded at once, not at the loader's next look (its
// RequeueAfter, seconds later, stays as the fallback). Other Jobs of the
// cluster cost nothing.
func (r *Reconciler) dumpJobWatch(mgr ctrl.Manager, h handler.EventHandler) (source.Source, error) {
	sel, err := labels.Parse(metakeys.DumpJobLabel)
	if err != nil {
		return nil, fmt.Errorf("dump job cache: %w", err)
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject:         map[client.Object]cache.ByObject{&batchv1.Job{}: {Label: sel}},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("dump job cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("dump job cache: %w", err)
	}
	// Only a change of a Job's status says something new: its creation
	// and deletion are the reconciler's own doing.
	statusMoved := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*batchv1.Job), e.ObjectNew.(*batchv1.Job)
			return o == nil || n == nil || !equality.Semantic.DeepEqual(o.Status, n.Status)
		},
	}
	return source.Kind[client.Object](c, &batchv1.Job{}, h, statusMoved), nil
}
