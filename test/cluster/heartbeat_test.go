package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

// TestNodeLeasesAreRenewed: the node lifecycle controller judges a node's
// health by its Lease in kube-node-lease. If kwok renews none, every node
// turns NotReady once the grace period has passed since the cluster
// started, and every pod on it is marked not Ready for good — rollouts that
// happen to run then never finish. Each node must have a Lease that is
// renewed again while we watch.
func TestNodeLeasesAreRenewed(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("the cluster has no nodes")
	}
	first := map[string]time.Time{}
	testenv.WaitFor(ctx, t, "every node's Lease renewed twice", func(ctx context.Context) (bool, string, error) {
		var waiting []string
		for _, n := range nodes.Items {
			lease, err := env.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("%s: %v", n.Name, err))
				continue
			}
			if lease.Spec.RenewTime == nil {
				waiting = append(waiting, n.Name+": never renewed")
				continue
			}
			renewed := lease.Spec.RenewTime.Time
			seen, ok := first[n.Name]
			if !ok {
				first[n.Name] = renewed
				waiting = append(waiting, n.Name+": first renewal seen")
			} else if !renewed.After(seen) {
				waiting = append(waiting, fmt.Sprintf("%s: not renewed since %s", n.Name, seen.Format(time.RFC3339)))
			}
		}
		return len(waiting) == 0, strings.Join(waiting, "; "), nil
	})
}
