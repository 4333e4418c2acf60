// Command servicebridge plays kube-proxy for one Service of the local
// cluster (hack/localcluster), whose service CIDR is loopback and which
// runs no kube-proxy: it waits until the Service has a ClusterIP, then
// forwards TCP from that ClusterIP and the Service's first port to a local
// address, where the process playing the Service's pods listens (an
// operator run outside the cluster). TLS stays end to end.
//
//	go run ./hack/servicebridge --namespace kubevirt --service kubevirt-operator-webhook --to 127.0.0.1:8444
//
// It runs until interrupted. It refuses a ClusterIP that is not loopback:
// on a real cluster kube-proxy does this.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/installstrategy/installstrategy/internal/localcluster"
)

func main() {
	namespace := flag.String("namespace", "", "namespace of the Service")
	service := flag.String("service", "", "name of the Service")
	to := flag.String("to", "", "HOST:PORT the Service's pods would listen on")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the local cluster")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace, *service, *to); err != nil {
		fmt.Fprintln(os.Stderr, "servicebridge:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace, service, to string) error {
	if namespace == "" || service == "" || to == "" {
		return fmt.Errorf("--namespace, --service and --to are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for {
		svc, err := kube.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
		if err == nil && svc.Spec.ClusterIP != "" && len(svc.Spec.Ports) > 0 {
			port := int(svc.Spec.Ports[0].Port)
			fwd, err := localcluster.ServeClusterIP(svc.Spec.ClusterIP, port, func() string { return to })
			if err != nil {
				return fmt.Errorf("service %s/%s: %w", namespace, service, err)
			}
			defer fwd.Close()
			fmt.Printf("service %s/%s: %s:%d -> %s\n", namespace, service, svc.Spec.ClusterIP, port, to)
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("service %s/%s: not there before the end", namespace, service)
		case <-time.After(time.Second):
		}
	}
}
