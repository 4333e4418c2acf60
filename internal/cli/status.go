package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// Status is what the status command reports of an Installation or a KubeVirt
// custom resource.
type Status struct {
	Kind       string                     `json:"kind"`
	Namespace  string                     `json:"namespace"`
	Name       string                     `json:"name"`
	Phase      string                     `json:"phase"`
	Observed   string                     `json:"observed"`
	Target     string                     `json:"target"`
	Conditions []metav1.Condition         `json:"conditions,omitempty"`
	Components []v1alpha1.ComponentStatus `json:"components,omitempty"`
}

// Deployed: the target is observed, Available is true and nothing is in
// progress.
func (s *Status) Deployed() bool {
	return s.Phase == string(v1alpha1.PhaseDeployed) && s.condition("Available") == metav1.ConditionTrue &&
		s.condition("Progressing") != metav1.ConditionTrue
}

// Degraded: the Degraded condition is true, or the phase is Failed.
func (s *Status) Degraded() bool {
	return s.condition("Degraded") == metav1.ConditionTrue || s.Phase == string(v1alpha1.PhaseFailed)
}

func (s *Status) condition(t string) metav1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}

var (
	installationsGVR = schema.GroupVersionResource{Group: "installstrategy.io", Version: "v1alpha1", Resource: "installations"}
	kubevirtsGVR     = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
)

const statusLong = `Show an Installation's phase, conditions, observed and target identity, and the
rollout progress of each component (desired, updated, ready pods; bars in a
terminal, plain lines otherwise). Without a name, the one Installation of the
namespace is shown; if there is none, the namespace's KubeVirt custom resource.

For a KubeVirt CR (kubevirt/NAME) the phase, conditions and identities come from
its status, and each component's progress from its pods' install-strategy
annotations: a pod is updated when it carries the target version, registry and
identifier.

--watch follows the rollout until it is Deployed (exit 0) or Degraded (exit 1),
or --timeout passes (exit 1).

-o json, yaml, jsonpath= and go-template= print the status as an object of the
custom resource's kind (apiVersion, kind, metadata, then phase, observed,
target, conditions and components); -o name prints installation.installstrategy.io/NAME
or kubevirt.kubevirt.io/NAME.`

const statusExample = `  kubectl installstrategy status -n sample
  kubectl installstrategy status demo -n sample --watch --timeout 10m
  kubectl installstrategy status kubevirt/kubevirt -n kubevirt -o yaml`

func newStatusCommand(o *options) *cobra.Command {
	var watch bool
	var timeout time.Duration
	var out *output
	cmd := &cobra.Command{
		Use:     "status [INSTALLATION | kubevirt/NAME]",
		Short:   "Show the phase, conditions and rollout progress of an installation",
		Long:    statusLong,
		Example: statusExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := o.cluster()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			ctx := cmd.Context()
			if !watch {
				s, err := c.status(ctx, name)
				if err != nil {
					return err
				}
				return printStatus(o.streams.Out, out, s, isTerminal(o.streams.Out))
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			last := ""
			for {
				s, err := c.status(ctx, name)
				if err != nil && ctx.Err() == nil {
					return err
				}
				if s != nil {
					var b strings.Builder
					if err := printStatus(&b, out, s, isTerminal(o.streams.Out)); err != nil {
						return err
					}
					if b.String() != last {
						last = b.String()
						if _, err := io.WriteString(o.streams.Out, stamp()+last); err != nil {
							return err
						}
					}
					switch {
					case s.Degraded():
						return &ExitError{Code: 1, Err: fmt.Errorf("%s/%s in namespace %s is degraded: %s", strings.ToLower(s.Kind), s.Name, s.Namespace, conditionMessage(s, "Degraded"))}
					case s.Deployed():
						return nil
					}
				}
				select {
				case <-ctx.Done():
					return &ExitError{Code: 1, Err: fmt.Errorf("%s in namespace %s: not deployed after %s", orDefaultName(name), c.namespace, timeout)}
				case <-time.After(time.Second):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the rollout until Deployed or Degraded")
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Minute, "with --watch, give up after this long")
	out = addOutput(cmd, "table")
	return cmd
}

func stamp() string { return "--- " + time.Now().UTC().Format("15:04:05") + "\n" }

func conditionMessage(s *Status, t string) string {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// status reads the named Installation (or kubevirt/NAME), or the one of the
// namespace.
func (c *cluster) status(ctx context.Context, name string) (*Status, error) {
	if kv, ok := strings.CutPrefix(name, "kubevirt/"); ok {
		return c.kubevirtStatus(ctx, kv)
	}
	if name != "" {
		u, err := c.dynamic.Resource(installationsGVR).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get installation %s/%s: %w", c.namespace, name, err)
		}
		return installationStatus(u)
	}
	list, err := c.dynamic.Resource(installationsGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list installations in %s: %w", c.namespace, err)
	}
	if err == nil && len(list.Items) > 1 {
		var names []string
		for _, it := range list.Items {
			names = append(names, it.GetName())
		}
		return nil, fmt.Errorf("namespace %s has %d installations (%s): name one", c.namespace, len(names), strings.Join(names, ", "))
	}
	if err == nil && len(list.Items) == 1 {
		return installationStatus(&list.Items[0])
	}
	kvs, err := c.dynamic.Resource(kubevirtsGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err == nil && len(kvs.Items) == 1 {
		return c.kubevirtStatus(ctx, kvs.Items[0].GetName())
	}
	return nil, fmt.Errorf("no Installation (nor KubeVirt CR) in namespace %s", c.namespace)
}

func installationStatus(u *unstructured.Unstructured) (*Status, error) {
	var in v1alpha1.Installation
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &in); err != nil {
		return nil, fmt.Errorf("read installation %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	st := in.Status
	return &Status{Kind: "Installation", Namespace: in.Namespace, Name: in.Name, Phase: string(st.Phase),
		Observed:   identityLine(st.ObservedVersion, st.ObservedRegistry, st.ObservedIdentifier),
		Target:     identityLine(st.TargetVersion, st.TargetRegistry, st.TargetIdentifier),
		Conditions: st.Conditions, Components: st.Components}, nil
}

func identityLine(version, registry, id string) string {
	if version == "" && registry == "" && id == "" {
		return "<none>"
	}
	return strings.TrimSpace(strings.Join([]string{version, registry, id}, " "))
}

// kubevirtStatus reads a KubeVirt CR and its pods' install-strategy
// annotations.
func (c *cluster) kubevirtStatus(ctx context.Context, name string) (*Status, error) {
	u, err := c.dynamic.Resource(kubevirtsGVR).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get kubevirt %s/%s: %w", c.namespace, name, err)
	}
	str := func(f string) string { return statusString(u, f) }
	s := &Status{Kind: "KubeVirt", Namespace: c.namespace, Name: name, Phase: str("phase"),
		Observed: identityLine(str("observedKubeVirtVersion"), str("observedKubeVirtRegistry"), str("observedDeploymentID")),
		Target:   identityLine(str("targetKubeVirtVersion"), str("targetKubeVirtRegistry"), str("targetDeploymentID"))}
	if conds, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		for _, raw := range conds {
			m, _ := raw.(map[string]any)
			s.Conditions = append(s.Conditions, metav1.Condition{Type: fmt.Sprint(m["type"]), Status: metav1.ConditionStatus(fmt.Sprint(m["status"])),
				Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])})
		}
	}
	pods, err := c.kube.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: metakeys.KubeVirtLabel})
	if err != nil {
		return nil, fmt.Errorf("list kubevirt pods in namespace %s: %w", c.namespace, err)
	}
	s.Components = kubevirtComponents(pods.Items, str("targetKubeVirtVersion"), str("targetKubeVirtRegistry"), str("targetDeploymentID"))
	return s, nil
}

// kubevirtComponents groups pods by their kubevirt.io label; a pod is
// updated when its install-strategy annotations name the target.
func kubevirtComponents(pods []corev1.Pod, version, registry, id string) []v1alpha1.ComponentStatus {
	byName := map[string]*v1alpha1.ComponentStatus{}
	for i := range pods {
		p := &pods[i]
		comp := p.Labels[metakeys.KubeVirtLabel]
		if comp == "" || p.DeletionTimestamp != nil {
			continue
		}
		cs := byName[comp]
		if cs == nil {
			cs = &v1alpha1.ComponentStatus{Name: comp, Kind: "Pod"}
			byName[comp] = cs
		}
		cs.Desired++
		a := p.Annotations
		if a[metakeys.KubeVirtVersionAnnotation] == version && a[metakeys.KubeVirtRegistryAnnotation] == registry && a[metakeys.KubeVirtIdentifierAnnotation] == id {
			cs.Updated++
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				cs.Ready++
			}
		}
	}
	out := make([]v1alpha1.ComponentStatus, 0, len(byName))
	for _, cs := range byName {
		cs.RolledOver = cs.Updated == cs.Desired && cs.Ready == cs.Desired
		out = append(out, *cs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func printStatus(w io.Writer, out *output, s *Status, tty bool) error {
	if !out.Human() {
		gv := v1alpha1.GroupVersion
		if s.Kind == "KubeVirt" {
			gv = kubevirtsGVR.GroupVersion()
		}
		obj, err := toObject(s, gv.WithKind(s.Kind), s.Name, s.Namespace)
		if err != nil {
			return err
		}
		return out.print(w, obj)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s: phase %s\n", s.Kind, s.Namespace, s.Name, orNone(s.Phase))
	fmt.Fprintf(&b, "  observed: %s\n  target:   %s\n", s.Observed, s.Target)
	for _, c := range s.Conditions {
		fmt.Fprintf(&b, "  %-13s %-7s %s", c.Type, c.Status, c.Reason)
		if c.Message != "" {
			fmt.Fprintf(&b, ": %s", c.Message)
		}
		b.WriteByte('\n')
	}
	for _, c := range s.Components {
		mark := " "
		if c.RolledOver {
			mark = "✓"
		}
		label := c.Name
		if c.Role != "" {
			label += " (" + c.Role + ")"
		}
		if tty {
			fmt.Fprintf(&b, "  %s %-34s %s %d/%d updated, %d ready\n", mark, label, bar(c.Updated, c.Desired, 20), c.Updated, c.Desired, c.Ready)
		} else {
			fmt.Fprintf(&b, "  %s %s %s: %d/%d updated, %d/%d ready\n", mark, c.Kind, label, c.Updated, c.Desired, c.Ready, c.Desired)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func bar(done, total int32, width int) string {
	if total <= 0 {
		return "[" + strings.Repeat(" ", width) + "]"
	}
	n := int(done) * width / int(total)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// orDefaultName names the installation status looks at.
func orDefaultName(name string) string {
	if name == "" {
		return "the installation"
	}
	return name
}
