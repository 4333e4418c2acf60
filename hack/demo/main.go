// Command demo is the small client hack/demo.sh drives the operator with
// (there is no kubectl binary on the build machine): it installs the
// Installation CRD, creates and patches Installations, waits for the
// operator to pick up a spec, and prints the `kubectl get installations`
// table and the operator's Events.
//
//	demo --kubeconfig FILE crd FILE
//	demo --kubeconfig FILE create NAMESPACE NAME VERSION [real-node]
//	demo --kubeconfig FILE set-version NAMESPACE NAME VERSION
//	demo --kubeconfig FILE wait-target NAMESPACE NAME VERSION
//	demo --kubeconfig FILE get NAMESPACE
//	demo --kubeconfig FILE events NAMESPACE NAME
//	demo --kubeconfig FILE pods NAMESPACE
//	demo --kubeconfig FILE webhook NAMESPACE
//
// "create ... real-node" places the product's pods on the real node;
// "webhook" then creates a valid and an invalid Widget, which the
// product's admission webhook (sample-api, on the real node, serving the
// certificate the operator generated) admits and refuses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/cmdmain"
	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

func main() { cmdmain.Run("demo", run) }

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long waits last")
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) < 2 {
		return errors.New("usage: demo [--kubeconfig FILE] crd|create|set-version|wait-target|get|events|pods|webhook ARGS")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", *kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	need := func(n int) error {
		if len(args) != n+1 {
			return fmt.Errorf("%s takes %d arguments", args[0], n)
		}
		return nil
	}
	switch args[0] {
	case "crd":
		if err := need(1); err != nil {
			return err
		}
		return installCRD(ctx, c, args[1], *timeout)
	case "create":
		if len(args) == 5 && args[4] == "real-node" {
			return create(ctx, c, args[1], args[2], args[3], true)
		}
		if err := need(3); err != nil {
			return err
		}
		return create(ctx, c, args[1], args[2], args[3], false)
	case "webhook":
		if err := need(1); err != nil {
			return err
		}
		return webhook(ctx, c, args[1])
	case "set-version":
		if err := need(3); err != nil {
			return err
		}
		in := &v1alpha1.Installation{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: args[1], Name: args[2]}, in); err != nil {
			return err
		}
		patch := client.MergeFrom(in.DeepCopy())
		in.Spec.Version = args[3]
		return c.Patch(ctx, in, patch)
	case "wait-target":
		if err := need(3); err != nil {
			return err
		}
		return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, *timeout, true, func(ctx context.Context) (bool, error) {
			in := &v1alpha1.Installation{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: args[1], Name: args[2]}, in); err != nil {
				return false, nil
			}
			return in.Status.TargetVersion == args[3] && in.Status.ObservedGeneration == in.Generation, nil
		})
	case "get":
		if err := need(1); err != nil {
			return err
		}
		return get(ctx, c, args[1])
	case "events":
		if err := need(2); err != nil {
			return err
		}
		return events(ctx, c, args[1], args[2])
	case "pods":
		if err := need(1); err != nil {
			return err
		}
		return pods(ctx, c, args[1])
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func installCRD(ctx context.Context, c client.Client, file string, timeout time.Duration) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func create(ctx context.Context, c client.Client, ns, name, version string, realNode bool) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	in := &v1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.InstallationSpec{Version: version, Registry: "registry.example/sample"},
	}
	if realNode {
		on := &v1alpha1.NodePlacement{
			NodeSelector: map[string]string{metakeys.RealNodeLabel: "true"},
			Tolerations:  []corev1.Toleration{{Key: metakeys.RealNodeTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		}
		in.Spec.Workloads, in.Spec.Infra = on, on.DeepCopy()
	}
	return c.Create(ctx, in)
}

// webhook shows the product's admission webhook answering: the API server
// calls it at sample-api's ClusterIP, which this command serves (the local
// cluster has no kube-proxy) from a Ready sample-api pod on the real node.
func webhook(ctx context.Context, c client.Client, ns string) error {
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sample-api"}, &svc); err != nil {
		return err
	}
	backend := func() string {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{metakeys.AppNameLabel: "sample-api"}); err != nil {
			return ""
		}
		for _, p := range list.Items {
			if podReady(&p) == "true" && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
				return net.JoinHostPort(p.Status.PodIP, "8443")
			}
		}
		return ""
	}
	if backend() == "" {
		return errors.New("no Ready sample-api pod (is the product on the real node?)")
	}
	fwd, err := localcluster.ServeClusterIP(svc.Spec.ClusterIP, 443, backend)
	if err != nil {
		return err
	}
	defer fwd.Close()
	widget := func(name string, size int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": generate.SampleGroup + "/v1alpha1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"size": size},
		}}
		return u
	}
	valid := widget("demo-valid", 3)
	if err := c.Create(ctx, valid); err != nil {
		return fmt.Errorf("a valid Widget was refused: %w", err)
	}
	fmt.Println("Widget demo-valid (spec.size 3): admitted by the webhook")
	err = c.Create(ctx, widget("demo-invalid", -1))
	if err == nil {
		return errors.New("an invalid Widget (spec.size -1) was admitted: the webhook did not answer")
	}
	fmt.Printf("Widget demo-invalid (spec.size -1): refused: %v\n", err)
	return c.Delete(ctx, valid)
}

func condition(in *v1alpha1.Installation, t v1alpha1.ConditionType) string {
	if c := in.Condition(t); c != nil {
		return string(c.Status)
	}
	return ""
}

// get prints the table `kubectl get installations` prints (the CRD's
// printer columns) plus the target version.
func get(ctx context.Context, c client.Client, ns string) error {
	var list v1alpha1.InstallationList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tVERSION\tPHASE\tAVAILABLE\tPROGRESSING\tAGE")
	for _, in := range list.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Namespace, in.Name, in.Status.ObservedVersion, in.Status.Phase,
			condition(&in, v1alpha1.ConditionAvailable), condition(&in, v1alpha1.ConditionProgressing),
			duration.HumanDuration(time.Since(in.CreationTimestamp.Time)))
	}
	return w.Flush()
}

// pods prints the pods of a namespace: node, phase, readiness, image.
func pods(ctx context.Context, c client.Client, ns string) error {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tNODE\tSTATUS\tREADY\tIMAGE")
	for _, p := range list.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p), p.Spec.Containers[0].Image)
	}
	return w.Flush()
}

// podReady is a pod's Ready condition as kubectl prints it: "true",
// "false" or "unknown" ("false" when it has none).
func podReady(p *corev1.Pod) string {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return strings.ToLower(string(cond.Status))
		}
	}
	return "false"
}

// events prints the operator's Events about an Installation, oldest first.
func events(ctx context.Context, c client.Client, ns, name string) error {
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	items := slices.DeleteFunc(list.Items, func(e eventsv1.Event) bool {
		return e.Regarding.Kind != "Installation" || e.Regarding.Name != name
	})
	slices.SortStableFunc(items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tTYPE\tREASON\tMESSAGE")
	for _, e := range items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.EventTime.UTC().Format("15:04:05"), e.Type, e.Reason, strings.TrimSpace(e.Note))
	}
	return w.Flush()
}
