// Package helmrelease reads a Helm release from the cluster (the storage
// Secrets sh.helm.release.v1.NAME.vN of Helm's default driver) and retires
// it once an installation has taken its objects over: a copy of every
// release Secret is kept in one Secret of ours, Helm's ownership
// annotations are removed from the objects, and the release Secrets are
// deleted, so that Helm no longer lists, upgrades or uninstalls them.
package helmrelease

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Release is the deployed revision of a Helm release and the Secrets of
// all its revisions.
type Release struct {
	Name, Namespace string
	// Revision is the deployed revision's number.
	Revision int
	// Chart is the chart of the deployed revision.
	Chart render.Chart
	// Manifest is the deployed revision's manifests text (hooks are not
	// in it).
	Manifest string
	// Secrets are the release Secrets of every revision, oldest first.
	Secrets []corev1.Secret
}

// String names the release for people and history: helm release
// NS/NAME revision N (chart C V).
func (r *Release) String() string {
	return fmt.Sprintf("helm release %s/%s revision %d (chart %s %s)", r.Namespace, r.Name, r.Revision, r.Chart.Name, r.Chart.Version)
}

// backupName is the name of the Secret Retire keeps the release in.
func (r *Release) backupName() string { return "installstrategy-helm-release-" + r.Name }

// Find reads release name in namespace ns: the revision whose status is
// deployed (the newest, if several claim it).
func Find(ctx context.Context, kube kubernetes.Interface, ns, name string) (*Release, error) {
	what := fmt.Sprintf("helm release %s/%s", ns, name)
	list, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		return nil, fmt.Errorf("%s: list release secrets: %w", what, err)
	}
	var secrets []corev1.Secret
	for _, s := range list.Items {
		if s.Type == metakeys.HelmReleaseSecretType {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%s: no release secrets (type %s, sh.helm.release.v1.%s.vN) in namespace %s; a release kept by Helm's configmap or sql driver is not supported", what, metakeys.HelmReleaseSecretType, name, ns)
	}
	sort.Slice(secrets, func(i, j int) bool { return version(secrets[i]) < version(secrets[j]) })
	var deployed *release.Release
	for i := len(secrets) - 1; i >= 0 && deployed == nil; i-- {
		if secrets[i].Labels["status"] != "deployed" {
			continue
		}
		rel, err := decode(secrets[i].Data["release"])
		if err != nil {
			return nil, fmt.Errorf("%s: secret %s: %w", what, secrets[i].Name, err)
		}
		deployed = rel
	}
	if deployed == nil {
		return nil, fmt.Errorf("%s: no deployed revision (a release that failed or is pending is not taken over)", what)
	}
	r := &Release{Name: name, Namespace: ns, Revision: deployed.Version, Manifest: deployed.Manifest, Secrets: secrets}
	if c := deployed.Chart; c != nil && c.Metadata != nil {
		r.Chart = render.Chart{Name: c.Metadata.Name, Version: c.Metadata.Version, AppVersion: c.Metadata.AppVersion}
	}
	return r, nil
}

func version(s corev1.Secret) int {
	v, _ := strconv.Atoi(s.Labels["version"])
	return v
}

// MaxReleaseBytes bounds a release's decompressed JSON: a Secret holds
// at most 1 MiB, and Helm's gzip of a release's JSON rarely exceeds 1:20.
const MaxReleaseBytes = 32 << 20

// decode reads Helm's encoding of a release: base64 of gzip of JSON.
func decode(data []byte) (*release.Release, error) {
	b, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, fmt.Errorf("decode release: %w", err)
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		// A release Secret is written by anyone who may write Secrets in
		// the namespace: its decompressed size is bounded as a strategy's.
		if b, err = codec.Gunzip(b, MaxReleaseBytes); err != nil {
			return nil, fmt.Errorf("decode release: %w", err)
		}
	}
	var rel release.Release
	if err := json.Unmarshal(b, &rel); err != nil {
		return nil, fmt.Errorf("decode release: %w", err)
	}
	return &rel, nil
}

// VerifyOptions tunes Verify. The zero value refuses a manifest object
// that is not in the cluster, and every system object.
type VerifyOptions struct {
	// AllowMissing passes over manifest objects that are not in the
	// cluster instead of refusing them: the caller's own strategy, not the
	// release's manifest, says what is created.
	AllowMissing bool
	// SystemConsent names the system objects (inventory.SystemObject)
	// that may be taken over.
	SystemConsent inventory.SystemConsent
}

// refusedError lists the objects of a release's manifest that are not
// provably the release's, each with why: nothing is taken over.
type refusedError struct {
	// Release names the release (Release.String).
	Release string
	// Refused are "REF: why", in manifest order.
	Refused []string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("%s: %d objects of its manifest are not provably the release's, nothing taken over (Helm's own ownership check: label %s=%s and annotations %s, %s naming the release on the live object):\n  %s",
		e.Release, len(e.Refused), metakeys.ManagedByLabel, metakeys.HelmManagedBy, metakeys.HelmReleaseNameAnnotation, metakeys.HelmReleaseNamespaceAnnotation, strings.Join(e.Refused, "\n  "))
}

// Verify decides which objects of the release's manifest (objs, namespaced
// as Helm applied them) are the release's by what the cluster says, not by
// what the release Secret says: whoever may write Secrets in the namespace
// can forge one naming any object. An object is the release's when its
// live copy carries what Helm itself requires before it touches an
// existing object: the label app.kubernetes.io/managed-by=Helm and the
// annotations meta.helm.sh/release-name and release-namespace naming this
// release. Only whoever may write that object can have put them there.
// A system object, or one in a system namespace
// (inventory.TakeoverNeedsConsent), is not the release's to give unless
// opts.SystemConsent names it, and an object not in the cluster is
// refused unless opts.AllowMissing. Like Helm, one object that fails
// refuses the whole takeover: a *refusedError lists every one. On success
// Verify returns the release's objects that exist.
func (r *Release) Verify(ctx context.Context, resolve Resolver, objs []*unstructured.Unstructured, opts VerifyOptions) (map[strategy.ObjectRef]bool, error) {
	owned := map[strategy.ObjectRef]bool{}
	seen := map[strategy.ObjectRef]bool{}
	var refused []string
	for _, obj := range objs {
		ref := strategy.RefOf(obj)
		if seen[ref] {
			continue
		}
		seen[ref] = true
		refuse := func(why string) { refused = append(refused, ref.String()+": "+why) }
		ri, err := resolve(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", r, ref, err)
		}
		live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && opts.AllowMissing:
			continue
		case apierrors.IsNotFound(err):
			refuse("not in the cluster: a deployed release's objects exist, and nothing is created on the word of a release Secret")
			continue
		case err != nil:
			return nil, fmt.Errorf("%s: get %s: %w", r, ref, err)
		}
		if why := inventory.TakeoverNeedsConsent(ref, live, opts.SystemConsent); why != "" {
			refuse(why)
			continue
		}
		a, by := live.GetAnnotations(), live.GetLabels()[metakeys.ManagedByLabel]
		if by != metakeys.HelmManagedBy || a[metakeys.HelmReleaseNameAnnotation] != r.Name || a[metakeys.HelmReleaseNamespaceAnnotation] != r.Namespace {
			refuse(fmt.Sprintf("not the release's: label %s=%q, annotations %s=%q, %s=%q",
				metakeys.ManagedByLabel, by, metakeys.HelmReleaseNameAnnotation, a[metakeys.HelmReleaseNameAnnotation], metakeys.HelmReleaseNamespaceAnnotation, a[metakeys.HelmReleaseNamespaceAnnotation]))
			continue
		}
		owned[ref] = true
	}
	if len(refused) > 0 {
		return nil, &refusedError{Release: r.String(), Refused: refused}
	}
	return owned, nil
}

// Resolver finds the resource of an object: its client, namespaced when
// the kind is. pkg/apply's Applier.Resource is one.
type Resolver func(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error)

// Retirement is what Retire did, or would do.
type Retirement struct {
	// Backup is the Secret that keeps the release Secrets.
	Backup string
	// Unmarked are the objects whose Helm annotations were removed.
	Unmarked []strategy.ObjectRef
	// Deleted are the release Secrets deleted.
	Deleted []string
}

// Plan says what Retire would do to objs, reading only.
func (r *Release) Plan(ctx context.Context, resolve Resolver, objs []*unstructured.Unstructured) (*Retirement, error) {
	return r.retire(ctx, nil, resolve, objs)
}

// Retire retires the release after its objects (objs, as the strategy
// has them) were taken over: it keeps every release Secret in the Secret
// backupName, removes Helm's ownership annotations from each object that
// carries this release's, then deletes the release Secrets. It can be run
// again after a failure.
func (r *Release) Retire(ctx context.Context, kube kubernetes.Interface, resolve Resolver, objs []*unstructured.Unstructured) (*Retirement, error) {
	return r.retire(ctx, kube, resolve, objs)
}

// retire does the work; a nil kube only reads.
func (r *Release) retire(ctx context.Context, kube kubernetes.Interface, resolve Resolver, objs []*unstructured.Unstructured) (*Retirement, error) {
	res := &Retirement{Backup: r.backupName()}
	if kube != nil {
		if err := r.backup(ctx, kube); err != nil {
			return nil, err
		}
	}
	patch := []byte(`{"metadata":{"annotations":{"` + metakeys.HelmReleaseNameAnnotation + `":null,"` + metakeys.HelmReleaseNamespaceAnnotation + `":null}}}`)
	var errs []error
	for _, obj := range objs {
		ref := strategy.RefOf(obj)
		ri, err := resolve(obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("get %s: %w", ref, err))
			continue
		}
		a := live.GetAnnotations()
		if a[metakeys.HelmReleaseNameAnnotation] != r.Name || a[metakeys.HelmReleaseNamespaceAnnotation] != r.Namespace {
			continue
		}
		if kube != nil {
			if _, err := ri.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: metakeys.HelmAdoptFieldManager}); err != nil {
				errs = append(errs, fmt.Errorf("remove helm's annotations from %s: %w", ref, err))
				continue
			}
		}
		res.Unmarked = append(res.Unmarked, ref)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("retire %s: %w", r, err)
	}
	for _, s := range r.Secrets {
		if kube != nil {
			err := kube.CoreV1().Secrets(r.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return res, fmt.Errorf("retire %s: delete secret %s: %w", r, s.Name, err)
			}
		}
		res.Deleted = append(res.Deleted, s.Name)
	}
	return res, nil
}

// backup creates (or completes) the Secret backupName with every release
// Secret's encoded release under the Secret's name.
func (r *Release) backup(ctx context.Context, kube kubernetes.Interface) error {
	secrets := kube.CoreV1().Secrets(r.Namespace)
	b, err := secrets.Get(ctx, r.backupName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		b = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: r.backupName(), Namespace: r.Namespace,
				Labels:      map[string]string{metakeys.HelmReleaseLabel: r.Name},
				Annotations: map[string]string{metakeys.HelmReleaseSourceAnnotation: r.String()},
			},
			Type: metakeys.HelmReleaseBackupSecretType,
			Data: map[string][]byte{},
		}
	case err != nil:
		return fmt.Errorf("retire %s: get secret %s: %w", r, r.backupName(), err)
	case b.Type != metakeys.HelmReleaseBackupSecretType:
		return fmt.Errorf("retire %s: secret %s exists and is not a helm release backup (type %s)", r, r.backupName(), b.Type)
	}
	if b.Data == nil {
		b.Data = map[string][]byte{}
	}
	for _, s := range r.Secrets {
		b.Data[s.Name] = s.Data["release"]
	}
	if b.ResourceVersion == "" {
		_, err = secrets.Create(ctx, b, metav1.CreateOptions{FieldManager: metakeys.HelmAdoptFieldManager})
	} else {
		_, err = secrets.Update(ctx, b, metav1.UpdateOptions{FieldManager: metakeys.HelmAdoptFieldManager})
	}
	if err != nil {
		return fmt.Errorf("retire %s: keep the release in secret %s: %w", r, r.backupName(), err)
	}
	return nil
}
