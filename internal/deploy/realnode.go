package deploy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// RealNode puts the operator, and the dump Jobs it starts, on the real
// node of the local cluster (docs/DEVELOPMENT.md, "The real node"): its
// node selector and the toleration of its taint, and, since the kubernetes
// Service is not reachable from its pods, KUBERNETES_SERVICE_HOST and
// _PORT of the forwarded API server address for the operator and (through
// --dump-pod-env) for its dump containers.
type RealNode struct {
	// Name is the node's name.
	Name string
	// APIHost and APIPort reach the API server from the node's pods.
	APIHost string
	APIPort int
}

// LocalRealNode returns the real node of the local cluster in stateDir
// when that cluster runs, has one and is the cluster of server (the
// kubeconfig's server URL); else nil and why not.
func LocalRealNode(stateDir, server string) (*RealNode, string) {
	s, err := localcluster.Load(stateDir)
	switch {
	case errors.Is(err, localcluster.ErrNotRunning):
		return nil, "no local cluster runs in " + stateDir
	case err != nil:
		return nil, err.Error()
	case s.Server != server:
		return nil, fmt.Sprintf("the target %s is not the local cluster in %s (%s)", server, stateDir, s.Server)
	case s.RealNode == nil:
		return nil, "the local cluster in " + stateDir + " has no real node"
	}
	return &RealNode{Name: s.RealNode.Name, APIHost: s.RealNode.APIHost, APIPort: s.RealNode.APIPort}, ""
}

// placeOnRealNode changes the rendered operator Deployment for rn.
func placeOnRealNode(objs []*unstructured.Unstructured, rn *RealNode) error {
	for _, o := range objs {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		if info.PodTemplate == nil || o.GetKind() != "Deployment" || o.GetName() != OperatorDeployment {
			continue
		}
		spec := append(slices.Clone(info.PodTemplate), "spec")
		selector, _, _ := unstructured.NestedStringMap(o.Object, append(spec, "nodeSelector")...)
		if selector == nil {
			selector = map[string]string{}
		}
		selector[metakeys.RealNodeLabel] = "true"
		if err := unstructured.SetNestedStringMap(o.Object, selector, append(spec, "nodeSelector")...); err != nil {
			return fmt.Errorf("%s: %w", strategy.RefOf(o), err)
		}
		tolerations, _, _ := unstructured.NestedSlice(o.Object, append(spec, "tolerations")...)
		tolerations = append(tolerations, map[string]any{"key": metakeys.RealNodeTaint, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
		if err := unstructured.SetNestedSlice(o.Object, tolerations, append(spec, "tolerations")...); err != nil {
			return fmt.Errorf("%s: %w", strategy.RefOf(o), err)
		}
		containers, _, err := unstructured.NestedSlice(o.Object, append(spec, "containers")...)
		if err != nil {
			return fmt.Errorf("%s: %w", strategy.RefOf(o), err)
		}
		host, port := rn.APIHost, strconv.Itoa(rn.APIPort)
		for i, c := range containers {
			m, _ := c.(map[string]any)
			if m["name"] != OperatorContainer {
				continue
			}
			env, _ := m["env"].([]any)
			m["env"] = append(env,
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": host},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": port})
			args, _ := m["args"].([]any)
			m["args"] = append(args,
				"--dump-pod-env=KUBERNETES_SERVICE_HOST="+host+",KUBERNETES_SERVICE_PORT="+port,
				"--dump-pod-node-selector="+metakeys.RealNodeLabel+"=true",
				"--dump-pod-tolerations="+metakeys.RealNodeTaint+"=true:NoSchedule")
			containers[i] = m
			return unstructured.SetNestedSlice(o.Object, containers, append(spec, "containers")...)
		}
		return fmt.Errorf("%s has no container %q", strategy.RefOf(o), OperatorContainer)
	}
	return fmt.Errorf("no Deployment %s rendered", OperatorDeployment)
}
