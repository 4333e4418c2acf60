package cluster_test

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

// TestServiceIPsAreLoopback: the API server dials a Service's ClusterIP to
// call a webhook or an aggregated API (KubeVirt's strategy has both). With no
// kube-proxy here, a ClusterIP outside the loopback range would send that
// traffic off the machine; inside it, a dial with no listener is refused at
// once, locally.
func TestServiceIPsAreLoopback(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	svc, err := env.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range svc.Spec.ClusterIPs {
		if parsed := net.ParseIP(ip); parsed == nil || !parsed.IsLoopback() {
			t.Errorf("service ClusterIP %s is not a loopback address", ip)
		}
	}
	kube, err := env.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(kube.Spec.ClusterIP); ip == nil || !ip.IsLoopback() {
		t.Errorf("the kubernetes Service's ClusterIP %s is not a loopback address", kube.Spec.ClusterIP)
	}
}
