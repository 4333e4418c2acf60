package engine

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/installstrategy/installstrategy/pkg/certs"
	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// dnsNamesFor returns the names of the Services that serve the Secret's
// certificate (servingServices), each as NAME, NAME.NS, NAME.NS.svc and
// NAME.NS.svc.cluster.local; a Secret no Service serves gets its own name
// (a client certificate).
func dnsNamesFor(secret *unstructured.Unstructured, services []*unstructured.Unstructured) []string {
	var names []string
	for _, svc := range services {
		names = append(names, certs.ServiceDNSNames(svc.GetName(), svc.GetNamespace())...)
	}
	if len(names) == 0 {
		return []string{secret.GetName()}
	}
	return names
}

// servingPod is what a pod (or a workload's pod template) tells about
// the certificates it serves: its labels and the Secrets it mounts.
type servingPod struct {
	namespace string
	labels    map[string]string
	secrets   []string
}

// podOf reads a pod or pod template (a map with metadata and spec).
func podOf(ns string, pod map[string]any) servingPod {
	p := servingPod{namespace: ns}
	p.labels, _, _ = unstructured.NestedStringMap(pod, "metadata", "labels")
	vols, _, _ := unstructured.NestedSlice(pod, "spec", "volumes")
	var typed []corev1.Volume
	for _, v := range vols {
		m, _ := v.(map[string]any)
		var vol corev1.Volume
		if m == nil || runtime.DefaultUnstructuredConverter.FromUnstructured(m, &vol) != nil {
			continue
		}
		typed = append(typed, vol)
	}
	p.mounts(typed)
	return p
}

// mounts adds the Secrets the volumes mount: secret volumes and the
// secret sources of projected ones.
func (p *servingPod) mounts(vols []corev1.Volume) {
	add := func(n string) {
		if n != "" && !slices.Contains(p.secrets, n) {
			p.secrets = append(p.secrets, n)
		}
	}
	for _, v := range vols {
		if v.Secret != nil {
			add(v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		}
	}
}

// certScan is what a strategy tells about its certificates: its empty
// TLS Secrets, its Services, its workloads' pod templates, and the
// Services (namespace/name) its webhooks and APIServices dial.
type certScan struct {
	secrets, services []*unstructured.Unstructured
	templates         []servingPod
	dialed            map[string]bool
}

func scanCerts(objects []*unstructured.Unstructured) certScan {
	sc := certScan{dialed: map[string]bool{}}
	for _, o := range objects {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		switch {
		case isEmptyTLSSecret(o):
			sc.secrets = append(sc.secrets, o)
		case info.RoutesToPods && o.GetAPIVersion() == info.APIVersion():
			sc.services = append(sc.services, o)
		case info.PodTemplate != nil:
			tmpl, _, _ := unstructured.NestedMap(o.Object, info.PodTemplate...)
			sc.templates = append(sc.templates, podOf(o.GetNamespace(), tmpl))
		}
		info.EachServiceCall(o.Object, func(call kinds.ServiceCall) { sc.dialed[call.Namespace+"/"+call.Name] = true })
	}
	return sc
}

// podLister lists at most limit pods of a namespace that match a label
// selector.
type podLister func(ctx context.Context, namespace, selector string, limit int64) ([]corev1.Pod, error)

// livePods is the run's podLister: the API server's first page.
func (r *run) livePods(ctx context.Context, namespace, selector string, limit int64) ([]corev1.Pod, error) {
	list, err := r.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: limit})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// livePodLimit bounds the pods read for one Service (see servingServices):
// the pods of one workload mount the same Secrets, so a few suffice.
const livePodLimit = 50

// servingServices returns, for each empty TLS Secret (namespace/name), the
// Services of the strategy that serve its certificate: those whose
// selector picks pods that mount it, as their clients reach them. The
// pods are the strategy's workloads' (their pod templates). A Service
// that a webhook or APIService of the strategy dials but that no workload
// of the strategy backs is served by pods outside it — KubeVirt's
// kubevirt-operator-webhook by virt-operator's own Deployment, which
// mounts kubevirt-operator-certs — so its live pods are read (at most
// livePodLimit, selected by its selector in its namespace): they tie it
// to the TLS Secrets of the strategy they mount, except a Secret a
// workload of the strategy mounts (a pod outside the strategy does not add
// names to a certificate the strategy's own workloads serve).
func servingServices(ctx context.Context, sc certScan, listPods podLister) (map[string][]*unstructured.Unstructured, error) {
	secrets, services, templates, dialed := sc.secrets, sc.services, sc.templates, sc.dialed
	tls := map[string]bool{}
	for _, s := range secrets {
		tls[s.GetNamespace()+"/"+s.GetName()] = true
	}
	mounted := map[string]bool{}
	for _, p := range templates {
		for _, n := range p.secrets {
			mounted[p.namespace+"/"+n] = true
		}
	}
	out := map[string][]*unstructured.Unstructured{}
	tie := func(p servingPod, svc *unstructured.Unstructured, outside bool) {
		for _, n := range p.secrets {
			key := p.namespace + "/" + n
			if !tls[key] || (outside && mounted[key]) || slices.Contains(out[key], svc) {
				continue
			}
			out[key] = append(out[key], svc)
		}
	}
	for _, svc := range services {
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		if len(sel) == 0 {
			continue
		}
		selector := labels.SelectorFromSet(sel)
		backed := false
		for _, p := range templates {
			if p.namespace == svc.GetNamespace() && selector.Matches(labels.Set(p.labels)) {
				backed = true
				tie(p, svc, false)
			}
		}
		if backed || !dialed[svc.GetNamespace()+"/"+svc.GetName()] {
			continue
		}
		pods, err := listPods(ctx, svc.GetNamespace(), selector.String(), livePodLimit)
		if err != nil {
			return nil, fmt.Errorf("pods behind service %s/%s: %w", svc.GetNamespace(), svc.GetName(), err)
		}
		for i := range pods {
			pod := &pods[i]
			if pod.Namespace != svc.GetNamespace() || !selector.Matches(labels.Set(pod.Labels)) {
				continue
			}
			p := servingPod{namespace: pod.Namespace, labels: pod.Labels}
			p.mounts(pod.Spec.Volumes)
			tie(p, svc, true)
		}
	}
	return out, nil
}
