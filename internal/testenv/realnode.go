package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// RealNode returns the real node of the local test cluster (kubelet,
// containerd, runc; see docs/DEVELOPMENT.md, "The real node"). A cluster
// without one fails the test under CI=true (CI runs as root, where
// localcluster always starts it) and skips it otherwise.
func (e *Env) RealNode(t testing.TB) *localcluster.RealNode {
	t.Helper()
	s, err := localcluster.Load(filepath.Dir(os.Getenv(KubeconfigEnv)))
	reason := ""
	switch {
	case err != nil:
		reason = err.Error()
	case s.RealNode == nil:
		reason = "the cluster was started without one (not root, missing packages, or --real-node=false)"
	default:
		return s.RealNode
	}
	msg := fmt.Sprintf("the local cluster has no real node: %s\nrun as root on Debian/Ubuntu: `make tools` installs containerd, runc and the CNI plugins, `make cluster-up` starts the node\n(make test runs a test of test/e2e on the cluster with the real node only if its name matches REAL_NODE_TESTS of hack/test.sh: TestReal... or ...OnRealNode)", reason)
	if InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return nil
}

// OnRealNode changes a pod spec so that it runs on the real node: its node
// selector and the toleration of its taint.
func OnRealNode(spec *corev1.PodSpec) {
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[metakeys.RealNodeLabel] = "true"
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: metakeys.RealNodeTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule})
}
