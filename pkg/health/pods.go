package health

import (
	"context"
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// pods checks the pods of a workload: none failed, every one not being
// deleted is ready and carries the target identity annotations. The pods
// of a template kept at adoption (apply.KeptTemplateAnnotation) carry the
// previous installer's annotations, not ours: the workload's status, which
// the callers check, says whether they are of its current template.
func (c *Checker) pods(ctx context.Context, live *unstructured.Unstructured, ns string, sel *metav1.LabelSelector) (Status, error) {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return Status{}, fmt.Errorf("pod selector: %w", err)
	}
	list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return Status{}, fmt.Errorf("list pods in %s: %w", ns, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	_, kept := live.GetAnnotations()[metakeys.KeptTemplateAnnotation]
	var waiting []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if reason, failed := PodFailure(p); failed {
			return Status{Failed: true, Reason: fmt.Sprintf("pod %s: %s", p.Name, reason)}, nil
		}
		if c.Identity.Version != "" && !kept && !PodCarriesIdentity(p, c.Identity) {
			waiting = append(waiting, p.Name+" has not the target identity")
			continue
		}
		if !PodReady(p) {
			waiting = append(waiting, p.Name+" not ready")
		} else if why, ok := c.restartedRecently(p); ok {
			waiting = append(waiting, p.Name+" "+why)
		}
	}
	if len(waiting) > 0 {
		return Status{Reason: "pods: " + strings.Join(waiting, ", ")}, nil
	}
	return Status{Ready: true}, nil
}

// PodCarriesIdentity reports whether a pod carries the identity
// annotations of id (so it runs the target version).
func PodCarriesIdentity(p *corev1.Pod, id strategy.Identity) bool {
	return annotationsCarry(p.Annotations, id)
}

// annotationsCarry reports whether annotations (a pod's, a pod template's)
// carry the identity.
func annotationsCarry(a map[string]string, id strategy.Identity) bool {
	return a[metakeys.InstallStrategyVersionAnnotation] == id.Version && a[metakeys.InstallStrategyRegistryAnnotation] == id.Registry && a[metakeys.InstallStrategyIdentifierAnnotation] == id.Identifier
}

// templateCarries reports whether a live workload's pod template was
// applied for the checker's target identity (always, when it has none; see
// apply.TemplateIdentity).
func (c *Checker) templateCarries(live *unstructured.Unstructured) bool {
	return c.Identity.Version == "" || TemplateCarries(live, c.Identity)
}

// TemplateCarries reports whether a live workload's pod template was
// applied for identity id: it carries id's annotations, or it was kept at
// adoption by the write that gave the workload id (apply.TemplateIdentity).
func TemplateCarries(live *unstructured.Unstructured, id strategy.Identity) bool {
	return apply.TemplateIdentity(live) == id
}

// PodReady reports whether a pod is Running and Ready.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// restartedRecently reports whether a container of a ready pod restarted
// after a failed exit less than StableAfter ago, and how.
func (c *Checker) restartedRecently(p *corev1.Pod) (string, bool) {
	stable := c.StableAfter
	if stable == 0 {
		stable = defaultStableAfter
	}
	if stable < 0 {
		return "", false
	}
	for _, cs := range p.Status.ContainerStatuses {
		last := cs.LastTerminationState.Terminated
		if cs.State.Running == nil || last == nil || last.ExitCode == 0 {
			continue
		}
		if up := c.now().Sub(cs.State.Running.StartedAt.Time); up < stable {
			return fmt.Sprintf("container %s restarted %s ago after exit %d (restarts %d)", cs.Name, up.Round(time.Second), last.ExitCode, cs.RestartCount), true
		}
	}
	return "", false
}

// PodFailure reports whether a pod has failed or crash-loops, and how.
func PodFailure(p *corev1.Pod) (string, bool) {
	if p.Status.Phase == corev1.PodFailed {
		return "failed: " + p.Status.Reason + " " + p.Status.Message, true
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && (w.Reason == "CrashLoopBackOff" || w.Reason == "ImagePullBackOff" || w.Reason == "ErrImagePull" || w.Reason == "CreateContainerConfigError") {
			return fmt.Sprintf("container %s: %s (restarts %d)", cs.Name, w.Reason, cs.RestartCount), true
		}
	}
	return "", false
}
