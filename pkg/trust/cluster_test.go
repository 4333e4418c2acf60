package trust_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// An operator running outside the cluster may start before its key
// namespace exists: the namespace is created with the key, and a second
// start reads the same key.
func TestEnsureOperatorKeyCreatesItsNamespace(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := fmt.Sprintf("key-ns-%d", time.Now().UnixNano()%1000000)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	first, err := trust.EnsureOperatorKey(ctx, env.Kube, ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, trust.OperatorKeySecret, metav1.GetOptions{}); err != nil {
		t.Fatalf("key secret: %v", err)
	}
	again, err := trust.EnsureOperatorKey(ctx, env.Kube, ns)
	if err != nil {
		t.Fatal(err)
	}
	if first.Signer.KeyID() != again.Signer.KeyID() {
		t.Errorf("second start read another key: %s, then %s", first.Signer.KeyID(), again.Signer.KeyID())
	}
}
