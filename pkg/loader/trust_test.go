package loader_test

import (
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// signingSetup is setup with a store that signs with a new key and trusts
// only it, and dump pods that wait for the test's result.
func signingSetup(t *testing.T) (*fixture, *trust.KeyRing) {
	t.Helper()
	signer, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ring := &trust.KeyRing{}
	if err := ring.Add("test", signer.Public()); err != nil {
		t.Fatal(err)
	}
	f := setup(t, loader.Options{PodLabels: testenv.BehaviourLabels(testenv.BehaviourAwaitResult)})
	var serr error
	if f.store, serr = store.NewForConfig(f.env.Config, store.Options{Signer: signer, Trusted: func(e store.Entry) error {
		_, err := ring.Verify(e.Digest, e.Signature, e.SignatureKey)
		return err
	}}); serr != nil {
		t.Fatal(serr)
	}
	if f.loader, serr = loader.New(loader.Options{Store: f.store, Kube: f.env.Kube, Clock: f.clock, PodLabels: testenv.BehaviourLabels(testenv.BehaviourAwaitResult)}); serr != nil {
		t.Fatal(serr)
	}
	return f, ring
}

// With a signing store, a dump Job's result is adopted — verified and
// signed — only when the Job's pod reported its digest; a Job put in the
// dump Job's place that runs another image is not believed, whatever its
// pod reports.
func TestDumpJobResultAdoptedByReportedDigest(t *testing.T) {
	f, ring := signingSetup(t)
	ctx := t.Context()
	req := f.request("v1.1.0")
	name := f.start(t, req)
	job, ok := f.job(t, name)
	if !ok {
		t.Fatal("no dump job")
	}
	plain, err := store.New(f.env.Kube, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := dump.Run(ctx, dump.Options{ConfigJSON: []byte(loader.JobConfig(job)), Store: plain})
	if err != nil {
		t.Fatal(err)
	}
	// Not adopted before the Job reports: still pending, not signed.
	if r, err := f.loader.Load(ctx, req); err != nil || !r.Pending() {
		t.Fatalf("load before the report: %+v, %v; want pending", r, err)
	}
	f.env.FinishDumpJob(ctx, t, f.ns, name, res.Digest)
	got, err := f.loadUntil(t, req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := got.Strategy.Serialize()
	if codec.Digest(text) != res.Digest {
		t.Errorf("loaded %s, want the reported %s", codec.Digest(text), res.Digest)
	}
	e, err := f.store.Find(ctx, f.ns, res.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Verify(e.Digest, e.Signature, e.SignatureKey); err != nil {
		t.Errorf("adopted strategy not signed: %v", err)
	}

	// An impostor in the dump Job's place (another image) for another
	// version; its pod reports the digest of what it stored.
	req = f.request("v1.2.0")
	name = f.start(t, req)
	real, _ := f.job(t, name)
	if err := f.env.Kube.BatchV1().Jobs(f.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	f.waitJobGone(t, name)
	impostor := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: real.Labels, Annotations: real.Annotations}}
	impostor.Spec.Template.ObjectMeta.Labels = map[string]string{}
	for k, v := range real.Spec.Template.Labels {
		if k != batchv1.ControllerUidLabel && k != "controller-uid" && k != batchv1.JobNameLabel && k != "job-name" {
			impostor.Spec.Template.ObjectMeta.Labels[k] = v
		}
	}
	impostor.Spec.Template.Spec = *real.Spec.Template.Spec.DeepCopy()
	impostor.Spec.Template.Spec.Containers[0].Image = "registry.example/evil:latest"
	impostor.Spec.BackoffLimit = ptr.To(int32(0))
	if _, err := f.env.Kube.BatchV1().Jobs(f.ns).Create(ctx, impostor, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err = dump.Run(ctx, dump.Options{ConfigJSON: []byte(loader.JobConfig(real)), Store: plain})
	if err != nil {
		t.Fatal(err)
	}
	f.env.FinishDumpJob(ctx, t, f.ns, name, res.Digest)
	_, err = f.loadUntil(t, req)
	if err == nil || !strings.Contains(err.Error(), "is not the loader's dump job") {
		t.Fatalf("impostor job: %v; want it refused", err)
	}
	if _, err := f.store.Find(ctx, f.ns, res.Identity); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the impostor's strategy is trusted: %v", err)
	}
}
