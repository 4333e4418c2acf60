package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// shippedStrategy is KubeVirt's own strategy of one version, read from
// the testdata ConfigMap (kubevirt-TAG.configmap.yaml).
type shippedStrategy struct {
	cm         *corev1.ConfigMap // as in the file
	text       []byte            // its decoded manifests text
	identifier string            // its identifier annotation (KubeVirt's deployment ID)
}

// readShipped reads and decodes a strategy ConfigMap file.
func readShipped(path string) (shippedStrategy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return shippedStrategy{}, err
	}
	cms, err := codec.ReadConfigMaps(path, data)
	if err != nil {
		return shippedStrategy{}, err
	}
	if len(cms) != 1 {
		return shippedStrategy{}, fmt.Errorf("%s: %d ConfigMaps, want 1", path, len(cms))
	}
	text, _, err := codec.Decode(cms[0], codec.DecodeOptions{})
	if err != nil {
		return shippedStrategy{}, fmt.Errorf("%s: %w", path, err)
	}
	return shippedStrategy{cm: cms[0], text: text, identifier: cms[0].Annotations[metakeys.KubeVirtIdentifierAnnotation]}, nil
}

// dumpLabels are the labels the example operator is told to put on its
// dump Jobs' pods (--dump-pod-label): kwok then keeps such a pod running
// until it carries metakeys.TestTerminationMessageAnnotation, and ends it with
// that as its termination message, as a real dump container that wrote
// /dev/termination-log would.
var dumpLabels = map[string]string{metakeys.TestBehaviourLabel: string(localcluster.BehaviourAwaitResult)}

// servedDump is what the dump stand-in did for one dump Job.
type servedDump struct {
	Job        string    `json:"job"`
	Identifier string    `json:"identifier"`
	Seen       time.Time `json:"seen"`   // the Job's creation reached the stand-in
	Stored     time.Time `json:"stored"` // the strategy ConfigMap was created
	Ended      time.Time `json:"ended"`  // the pod was given its termination message
}

// dumpStandIn does the work of the example operator's dump Jobs on kwok,
// where no container runs: for each dump Job of namespace kubevirt it
// stores the shipped strategy of the version the Job's configuration
// names, under the identifier of that configuration, unsigned and in the
// native form (what our dump mode, internal/dump, writes), and ends the
// Job's pod with the digest of the text as its termination message. The
// operator then adopts (and signs) that strategy as it would a real dump's:
// nothing in its trust rules is bypassed. A configuration whose identifier
// is not the shipped strategy's is an error: the run compares both
// operators on the same strategy.
type dumpStandIn struct {
	kube    kubernetes.Interface
	store   *store.Store
	shipped map[string]shippedStrategy // by version

	mu     sync.Mutex
	served []servedDump
}

func newDumpStandIn(kube kubernetes.Interface, shipped map[string]shippedStrategy) (*dumpStandIn, error) {
	st, err := store.New(kube, store.Options{})
	if err != nil {
		return nil, err
	}
	return &dumpStandIn{kube: kube, store: st, shipped: shipped}, nil
}

// dumps is what the stand-in served so far.
func (d *dumpStandIn) dumps() []servedDump {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]servedDump(nil), d.served...)
}

// run watches the dump Jobs (one LIST and one WATCH) and serves each new
// one until ctx ends or one fails.
func (d *dumpStandIn) run(ctx context.Context, logf func(string, ...any)) error {
	jobs := d.kube.BatchV1().Jobs(kubevirtNamespace)
	sel := labels.Set{metakeys.DumpJobLabel: ""}.AsSelector().String()
	lw := selectedListWatch(jobs.List, jobs.Watch, func(o *metav1.ListOptions) { o.LabelSelector = sel })
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	seen := map[types.UID]bool{}
	_, err := watchtools.UntilWithSync(ctx, lw, &batchv1.Job{}, nil, func(ev watch.Event) (bool, error) {
		job, ok := ev.Object.(*batchv1.Job)
		if !ok || ev.Type == watch.Deleted || seen[job.UID] {
			return false, nil
		}
		seen[job.UID] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			sd, err := d.serve(ctx, job)
			if err != nil {
				cancel(fmt.Errorf("dump stand-in: job %s: %w", job.Name, err))
				return
			}
			d.mu.Lock()
			d.served = append(d.served, sd)
			d.mu.Unlock()
			logf("dump stand-in: job %s: stored the shipped strategy %s (identifier %s) +%.2f s, pod ended +%.2f s after the job was seen",
				sd.Job, job.Annotations[metakeys.VersionAnnotation], sd.Identifier, sd.Stored.Sub(sd.Seen).Seconds(), sd.Ended.Sub(sd.Seen).Seconds())
		}()
		return false, nil
	})
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return cause
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// serve does one dump Job's work.
func (d *dumpStandIn) serve(ctx context.Context, job *batchv1.Job) (servedDump, error) {
	sd := servedDump{Job: job.Name, Seen: time.Now()}
	raw := loader.JobConfig(job)
	if raw == "" {
		return sd, fmt.Errorf("no %s in its container", identity.EnvVar)
	}
	cfg, err := identity.ParseConfig([]byte(raw))
	if err != nil {
		return sd, err
	}
	id, err := cfg.Identity(identity.KubeVirt)
	if err != nil {
		return sd, fmt.Errorf("identifier of its configuration: %w", err)
	}
	if want := job.Annotations[metakeys.IdentifierAnnotation]; id.Identifier != want {
		return sd, fmt.Errorf("its configuration's identifier is %s, its annotation says %s", id.Identifier, want)
	}
	sd.Identifier = id.Identifier
	sh, ok := d.shipped[cfg.Version]
	if !ok {
		return sd, fmt.Errorf("asks for version %s, of which no strategy was read", cfg.Version)
	}
	if id.Identifier != sh.identifier {
		return sd, fmt.Errorf("asks for identifier %s; the shipped strategy of %s is %s (the configuration differs from the one it was generated for)", id.Identifier, cfg.Version, sh.identifier)
	}
	if _, err := d.store.PublishText(ctx, job.Namespace, sh.text, strategy.Identity{Version: id.Version, Registry: id.Registry, Identifier: id.Identifier}); err != nil {
		return sd, err
	}
	sd.Stored = time.Now()
	pod, err := d.podOf(ctx, job)
	if err != nil {
		return sd, err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{metakeys.TestTerminationMessageAnnotation: codec.Digest(sh.text)}}})
	if err != nil {
		return sd, err
	}
	if _, err := d.kube.CoreV1().Pods(job.Namespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return sd, fmt.Errorf("end pod %s: %w", pod, err)
	}
	sd.Ended = time.Now()
	return sd, nil
}

// podOf waits for the Job's pod (one LIST and one WATCH) and returns its
// name.
func (d *dumpStandIn) podOf(ctx context.Context, job *batchv1.Job) (string, error) {
	pods := d.kube.CoreV1().Pods(job.Namespace)
	sel := labels.Set{batchv1.JobNameLabel: job.Name}.AsSelector().String()
	lw := selectedListWatch(pods.List, pods.Watch, func(o *metav1.ListOptions) { o.LabelSelector = sel })
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ev, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && ev.Type != watch.Deleted && p.DeletionTimestamp == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("wait for the pod of job %s: %w", job.Name, err)
	}
	return ev.Object.(*corev1.Pod).Name, nil
}
