package localcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	saIssuer    = "https://kubernetes.default.svc.cluster.local"
	clusterName = "installstrategy-local"
	adminUser   = "installstrategy-admin"
	// frontProxyClient is the user name of the API server's client
	// certificate towards aggregated API servers.
	frontProxyClient = "front-proxy-client"
	pollInterval     = 100 * time.Millisecond
)

// writeFiles generates the PKI, the kubeconfigs and the kwok stage file.
func (u *upper) writeFiles() error {
	pki := filepath.Join(u.dir, "pki")
	ca, err := newCA("installstrategy-local-ca")
	if err != nil {
		return err
	}
	f := &u.files
	if f.caCert, f.caKey, err = ca.write(pki, "ca"); err != nil {
		return err
	}
	serving, err := newServing(ca, "kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIPOf(u.dir))}, u.realNodeSANs()...))
	if err != nil {
		return err
	}
	if f.servingCert, f.servingKey, err = serving.write(pki, "apiserver"); err != nil {
		return err
	}
	if f.saKey, f.saPub, err = writeServiceAccountKeys(pki); err != nil {
		return err
	}
	// The front proxy (request-header) CA and the API server's client
	// certificate for aggregated API servers, as kubeadm sets them up; the
	// controller manager and scheduler read this CA for their delegated
	// authentication.
	frontProxyCA, err := newCA("installstrategy-local-front-proxy-ca")
	if err != nil {
		return err
	}
	if f.frontProxyCA, _, err = frontProxyCA.write(pki, "front-proxy-ca"); err != nil {
		return err
	}
	proxyClient, err := newClient(frontProxyCA, frontProxyClient)
	if err != nil {
		return err
	}
	if f.proxyClientCert, f.proxyClientKey, err = proxyClient.write(pki, "front-proxy-client"); err != nil {
		return err
	}
	identities := []struct {
		file   *string
		name   string
		cn     string
		groups []string
	}{
		// The admin kubeconfig is the one users and tests get.
		{&f.admin, "kubeconfig", adminUser, []string{"system:masters"}},
		{&f.controllerManager, "pki/kube-controller-manager.kubeconfig", "system:kube-controller-manager", nil},
		{&f.scheduler, "pki/kube-scheduler.kubeconfig", "system:kube-scheduler", nil},
		// kwok acts for the kubelets of every fake node.
		{&f.kwok, "pki/kwok.kubeconfig", "kwok", []string{"system:masters"}},
	}
	for _, id := range identities {
		cert, err := newClient(ca, id.cn, id.groups...)
		if err != nil {
			return err
		}
		*id.file = filepath.Join(u.dir, id.name)
		if err := writeKubeconfig(*id.file, u.server(), ca.certPEM, cert); err != nil {
			return err
		}
	}
	f.kwokStages = filepath.Join(u.dir, "kwok-stages.yaml")
	if err := os.WriteFile(f.kwokStages, kwokStages, 0o644); err != nil {
		return fmt.Errorf("write kwok stages: %w", err)
	}
	return nil
}

// writeKubeconfig writes a self-contained kubeconfig for one identity.
func writeKubeconfig(file, server string, caPEM []byte, cert *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	user := cert.cert.Subject.CommonName
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert.certPEM, ClientKeyData: cert.keyPEM}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user}
	cfg.CurrentContext = clusterName
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", file, err)
	}
	return nil
}

// poll calls cond every pollInterval until it reports done, p exits, timeout
// passes or ctx ends. The error names the last observed state.
func (u *upper) poll(ctx context.Context, p *process, what string, cond func(ctx context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, u.opts.Timeout)
	defer cancel()
	last := "not checked yet"
	for {
		done, state, err := cond(ctx)
		switch {
		case err != nil:
			last = err.Error()
		case done:
			return nil
		default:
			last = state
		}
		if p != nil {
			if err := p.failed(); err != nil {
				return startFailure(p, err)
			}
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("wait for %s: %w; last state: %s", what, ctx.Err(), last)
			if p != nil {
				return startFailure(p, err)
			}
			return err
		case <-time.After(pollInterval):
		}
	}
}

// httpOK returns a condition that is done when GET url answers 200.
func httpOK(client *http.Client, url string) func(ctx context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == http.StatusOK {
			return true, "", nil
		}
		return false, fmt.Sprintf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body))), nil
	}
}

func (u *upper) startEtcd(ctx context.Context) error {
	peer := "http://127.0.0.1:" + strconv.Itoa(u.ports.etcdPeer)
	p, err := u.launch(Etcd,
		"--name=localcluster",
		"--data-dir="+filepath.Join(u.dir, "etcd"),
		"--listen-client-urls="+u.etcdURL(),
		"--advertise-client-urls="+u.etcdURL(),
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=localcluster="+peer,
		"--initial-cluster-state=new",
		// A throwaway test cluster: durability is not worth the fsyncs.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	return u.poll(ctx, p, "etcd health", httpOK(http.DefaultClient, u.etcdURL()+"/health"))
}

func (u *upper) startAPIServer(ctx context.Context) error {
	f := u.files
	p, err := u.launch(KubeAPIServer,
		"--etcd-servers="+u.etcdURL(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(u.ports.apiserver),
		"--cert-dir="+filepath.Join(u.dir, "pki"),
		"--tls-cert-file="+f.servingCert,
		"--tls-private-key-file="+f.servingKey,
		"--client-ca-file="+f.caCert,
		"--service-account-issuer="+saIssuer,
		"--service-account-key-file="+f.saPub,
		"--service-account-signing-key-file="+f.saKey,
		"--service-cluster-ip-range="+serviceCIDROf(u.dir),
		"--authorization-mode=RBAC",
		"--requestheader-client-ca-file="+f.frontProxyCA,
		"--requestheader-allowed-names="+frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+f.proxyClientCert,
		"--proxy-client-key-file="+f.proxyClientKey,
		// The kubernetes Service cannot have a loopback endpoint (Endpoints
		// validation rejects it), and nothing in the cluster could use one.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	cs, err := clientFor(f.admin)
	if err != nil {
		return err
	}
	return u.poll(ctx, p, "kube-apiserver /readyz", func(ctx context.Context) (bool, string, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, "", fmt.Errorf("GET /readyz: %w: %s", err, strings.TrimSpace(string(body)))
		}
		return true, "", nil
	})
}

// controlPlaneArgs are the flags kube-controller-manager and kube-scheduler
// share: their kubeconfig for everything, a loopback secure port with its
// own cert folder, no leader election, no profiling.
func (u *upper) controlPlaneArgs(kubeconfig string, port int, name string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(u.dir, "pki", name),
		"--leader-elect=false",
		"--profiling=false",
	}
}

func (u *upper) startControllers(ctx context.Context) error {
	f := u.files
	kcm, err := u.launch(KubeControllerManager, append(u.controlPlaneArgs(f.controllerManager, u.ports.controllerManager, "kube-controller-manager"),
		// Every default controller, node lifecycle included (it removes the
		// not-ready taint of fake nodes); no node IPAM, fake nodes need no
		// pod CIDRs.
		"--controllers=*,-nodeipam",
		// kwok renews the fake nodes' Leases (see startNodes). If a node
		// misses its grace period, the node lifecycle controller marks
		// every pod of the node not Ready, which kwok never undoes; tests do
		// not exercise node failure, so give a loaded 2-core machine slack.
		"--node-monitor-grace-period=5m",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+f.saKey,
		"--root-ca-file="+f.caCert,
		"--cluster-signing-cert-file="+f.caCert,
		"--cluster-signing-key-file="+f.caKey,
		"--cluster-name="+clusterName,
	)...)
	if err != nil {
		return err
	}
	sched, err := u.launch(KubeScheduler, u.controlPlaneArgs(f.scheduler, u.ports.scheduler, "kube-scheduler")...)
	if err != nil {
		return err
	}
	// Their serving certificates are self-signed; /healthz is public.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health check of a self-signed endpoint
	if err := u.poll(ctx, kcm, "kube-controller-manager /healthz",
		httpOK(insecure, "https://127.0.0.1:"+strconv.Itoa(u.ports.controllerManager)+"/healthz")); err != nil {
		return err
	}
	return u.poll(ctx, sched, "kube-scheduler /healthz",
		httpOK(insecure, "https://127.0.0.1:"+strconv.Itoa(u.ports.scheduler)+"/healthz"))
}

// startNodes starts kwok, creates the fake nodes and waits until they are
// Ready and schedulable and the controllers have created the default
// namespace's service account.
func (u *upper) startNodes(ctx context.Context) ([]string, error) {
	p, err := u.launch(Kwok,
		"--kubeconfig="+u.files.kwok,
		"--config="+u.files.kwokStages,
		// Only the fake nodes (created with this annotation): the real
		// node has a kubelet of its own.
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		// Without a lease duration kwok v0.7.0 renews no node Lease and
		// picks its slow node heartbeat (a status update every 10 to 20
		// minutes), so every node went NotReady once the grace period
		// passed — about 5 minutes into a cluster's life — and its pods
		// were marked not Ready for good. With one, kwok renews each
		// node's Lease every 10 s and updates node status every 20–45 s.
		"--node-lease-duration-seconds=40",
		"--server-address=127.0.0.1:"+strconv.Itoa(u.ports.kwok),
	)
	if err != nil {
		return nil, err
	}
	cs, err := clientFor(u.files.admin)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, u.opts.Nodes)
	for i := range u.opts.Nodes {
		node := fakeNode(i)
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = setFakeNodeResources(ctx, cs, node.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("create node %s: %w", node.Name, err)
		}
		names = append(names, node.Name)
	}
	err = u.poll(ctx, p, "nodes Ready and schedulable", func(ctx context.Context) (bool, string, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", fmt.Errorf("list nodes: %w", err)
		}
		var waiting []string
		for _, n := range list.Items {
			if why := nodeNotReady(&n); why != "" {
				waiting = append(waiting, n.Name+": "+why)
			}
		}
		if len(list.Items) < len(names) {
			waiting = append(waiting, fmt.Sprintf("%d of %d nodes exist", len(list.Items), len(names)))
		}
		return len(waiting) == 0, strings.Join(waiting, "; "), nil
	})
	if err != nil {
		return nil, err
	}
	// The service-account and token controllers are working once the
	// default namespace has its service account.
	err = u.poll(ctx, u.procs[KubeControllerManager], "service account default/default", func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not created yet", nil
		}
		return err == nil, "", err
	})
	if err != nil {
		return nil, err
	}
	u.logf("nodes ready: %s (%s is the tainted control plane)", strings.Join(names, ", "), names[0])
	return names, nil
}

// FakeNodeResources is what each fake node reports as its capacity and
// allocatable: the resources a real kubelet reports (cpu, memory, pods,
// ephemeral-storage, and hugepages of both sizes, none, as on a host
// without them), sized so that every test's pods fit side by side. kwok's
// own default has no ephemeral-storage, so a pod that asks for any (as
// Bitnami charts' resource presets do: 50Mi) never scheduled.
var FakeNodeResources = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("1k"),
	corev1.ResourceMemory:           resource.MustParse("1Ti"),
	corev1.ResourcePods:             resource.MustParse("1M"),
	corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	"hugepages-1Gi":                 resource.MustParse("0"),
	"hugepages-2Mi":                 resource.MustParse("0"),
}

// setFakeNodeResources writes FakeNodeResources into the status of a fake
// node that already exists (a node is created with them).
func setFakeNodeResources(ctx context.Context, cs kubernetes.Interface, name string) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": FakeNodeResources, "allocatable": FakeNodeResources}})
	if err != nil {
		return fmt.Errorf("node %s: its resources: %w", name, err)
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("node %s: set its resources: %w", name, err)
	}
	return nil
}

// fakeNode returns node i; node 0 is the control plane. Its status holds
// FakeNodeResources: a node may be created with its status (as a kubelet
// registers), and kwok's node-initialize stage keeps the capacity and
// allocatable a node already reports (its defaults apply only to an empty
// list) while its heartbeats write conditions only.
func fakeNode(i int) *corev1.Node {
	name := fmt.Sprintf("kwok-worker-%d", i)
	if i == 0 {
		name = "kwok-control-plane"
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
				metakeys.FakeNodeLabel:   "true",
			},
		},
		Status: corev1.NodeStatus{Capacity: FakeNodeResources.DeepCopy(), Allocatable: FakeNodeResources.DeepCopy()},
	}
	if i == 0 {
		n.Labels[ControlPlaneLabel] = ""
		n.Spec.Taints = []corev1.Taint{{Key: ControlPlaneTaint, Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// nodeNotReady says why a node cannot take pods yet, or "" when it can.
func nodeNotReady(n *corev1.Node) string {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "condition Ready is not True"
	}
	if n.Spec.Unschedulable {
		return "unschedulable"
	}
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") || strings.HasPrefix(t.Key, "node.cloudprovider.kubernetes.io/") {
			return "taint " + t.Key
		}
	}
	return ""
}

// clientFor returns a clientset for a kubeconfig file.
func clientFor(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", kubeconfig, err)
	}
	return cs, nil
}

// checkReady returns nil when the API server of kubeconfig answers /readyz.
func checkReady(ctx context.Context, kubeconfig string) error {
	cs, err := clientFor(kubeconfig)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET /readyz: %w: %s", err, strings.TrimSpace(string(body)))
	}
	return nil
}

// serviceCIDROf is the service CIDR of the cluster in dir (its absolute
// state directory): a /20 in the loopback range (4,094 Services: 1,000
// Installations of a product with two Services need 2,000; a /24 ran out
// at 126), since the API server dials ClusterIPs for webhooks and
// aggregated APIs and, with no kube-proxy here, any other range would send
// that traffic off the machine. Each state directory has its own (one of
// 1,600 from 127.100.0.0 to 127.199.240.0, by a hash of the path), so that
// clusters running side by side on one machine do not give the same
// ClusterIP to their Services: a helper serving one cluster's webhook on
// its ClusterIP would answer the other's API server.
func serviceCIDROf(dir string) string {
	b, c := serviceNet(dir)
	return fmt.Sprintf("127.%d.%d.0/20", b, c)
}

// serviceIPOf is the first address of serviceCIDROf(dir): the kubernetes
// Service's ClusterIP.
func serviceIPOf(dir string) string {
	b, c := serviceNet(dir)
	return fmt.Sprintf("127.%d.%d.1", b, c)
}

func serviceNet(dir string) (b, c int) {
	h := fnv.New32a()
	h.Write([]byte(dir))
	sum := h.Sum32()
	return 100 + int(sum%100), int(sum/100) % 16 * 16
}
