package testenv

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace for the test, named after it, and
// returns its name once its default service account exists (so pods can be
// created in it at once). The namespace is deleted when the test ends; if
// the test failed, its pods and events are logged first.
func (e *Env) Namespace(ctx context.Context, t testing.TB) string {
	t.Helper()
	prefix := notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-")
	prefix = strings.Trim(prefix, "-")
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-")
	}
	ns, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "t-" + prefix + "-",
			Labels:       map[string]string{metakeys.TestNamespaceLabel: "true"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create test namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		// The test's context is cancelled before cleanups run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if t.Failed() {
			e.logNamespace(ctx, t, name)
		}
		err := e.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete test namespace %s: %v", name, err)
		}
	})
	WaitFor(ctx, t, "service account "+name+"/default", func(ctx context.Context) (bool, string, error) {
		_, err := e.Kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not created yet", nil
		}
		return err == nil, "", err
	})
	return name
}

// logNamespace logs the pods and events of a namespace, to explain a failure.
func (e *Env) logNamespace(ctx context.Context, t testing.TB, ns string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "state of namespace %s at the end of the failed test:\n", ns)
	pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "  list pods: %v\n", err)
	} else {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "  pod %s\n", DescribePod(&p))
		}
	}
	events, err := e.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "  list events: %v\n", err)
	} else {
		items := events.Items
		slices.SortFunc(items, func(a, b corev1.Event) int {
			return a.LastTimestamp.Compare(b.LastTimestamp.Time)
		})
		if len(items) > 30 {
			items = items[len(items)-30:]
		}
		for _, ev := range items {
			fmt.Fprintf(&b, "  event %s %s/%s %s: %s\n", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	t.Log(b.String())
}
