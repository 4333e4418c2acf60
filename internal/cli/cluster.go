package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
)

// cluster holds the clients of the cluster the kubeconfig flags name.
type cluster struct {
	config    *rest.Config
	kube      kubernetes.Interface
	dynamic   dynamic.Interface
	namespace string
	store     *store.Store
	// rc is built at the first need (see reconciler); its applier answers
	// applier: one discovery, one set of clients, for a whole command.
	rc  *engine.Reconciler
	app *apply.Applier
}

// applier returns the command's applier (a REST mapper over discovery, the
// dynamic and metadata clients), built at the first call.
func (c *cluster) applier() (*apply.Applier, error) {
	if c.app == nil {
		a, err := apply.NewForConfig(c.config, apply.Options{})
		if err != nil {
			return nil, err
		}
		c.app = a
	}
	return c.app, nil
}

// reconciler returns the command's reconciler over applier's clients,
// built at the first call.
func (c *cluster) reconciler() (*engine.Reconciler, error) {
	if c.rc == nil {
		a, err := c.applier()
		if err != nil {
			return nil, err
		}
		// The engine reports what it does itself: the API server's
		// warnings on its reads and writes are not printed (as
		// engine.New does).
		quiet := rest.CopyConfig(c.config)
		quiet.WarningHandler = rest.NoWarnings{}
		kube, err := kubernetes.NewForConfig(quiet)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		c.rc = engine.NewWithClients(engine.Clients{Applier: a, Kube: kube})
	}
	return c.rc, nil
}

// cluster connects to the cluster of --kubeconfig/--context; the namespace
// is -n, else the kubeconfig context's, else "default".
func (o *options) cluster() (*cluster, error) {
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if err := o.clientLimits(cfg); err != nil {
		return nil, err
	}
	ns, _, err := o.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig namespace: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	st, err := store.New(kube, store.Options{Decode: dopts})
	if err != nil {
		return nil, err
	}
	if err := reachable(o.ctx, kube, cfg.Host); err != nil {
		return nil, err
	}
	return &cluster{config: cfg, kube: kube, dynamic: dyn, namespace: ns, store: st}, nil
}

// silenceKlog discards what client-go logs through klog (retries of an
// unreachable server, discovery failures): the plugin reports errors
// itself, in one line.
func silenceKlog() { klog.SetLogger(logr.Discard()) }

// probeTimeout bounds the first request to the API server.
const probeTimeout = 15 * time.Second

// reachable asks the API server for its version, so that a cluster that
// does not answer fails the command at once, in one line naming the server,
// instead of after the retries of whatever the command reads first. An
// answer of any status (even 401 or 403) counts as reachable: the command's
// own requests report those.
func reachable(ctx context.Context, kube kubernetes.Interface, server string) error {
	if ctx == nil {
		return errors.New("cluster: no command context") // a programming error
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := kube.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
	var status apierrors.APIStatus
	if err == nil || errors.As(err, &status) {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer within %s", probeTimeout)
	}
	return fmt.Errorf("cannot reach the cluster at %s: %w", server, err)
}

// clusterRef returns the ConfigMap name of a "cm/NAME" or "configmap/NAME"
// source, and whether the source is one.
func clusterRef(source string) (string, bool) {
	for _, p := range []string{"cm/", "configmap/", "configmaps/"} {
		if name, ok := strings.CutPrefix(source, p); ok && name != "" {
			return name, true
		}
	}
	return "", false
}

// entryByName finds a stored strategy by its (head) ConfigMap's name.
func (c *cluster) entryByName(ctx context.Context, name string) (store.Entry, error) {
	entries, err := c.store.List(ctx, c.namespace)
	for _, e := range entries {
		if e.Name == name {
			return e, nil
		}
	}
	if err != nil {
		return store.Entry{}, err
	}
	return store.Entry{}, fmt.Errorf("no strategy ConfigMap %q in namespace %s (see kubectl installstrategy list)", name, c.namespace)
}

// configMapWriters says who may have written a stored strategy nobody
// verified.
func configMapWriters(e store.Entry) string {
	return "any ConfigMap editor of namespace " + e.Namespace + " (digest included)"
}

// loadUnverified reads the stored strategy e with no trust decision but
// "not verified" (source.Unverified: chunks and size bounded, the decode
// bounded by --max-decoded-size and checked against the recorded digest,
// then the parse); its VerifiedBy says so. For a verb that shows it, or
// acts on it at the user's word (--allow-unsigned).
func (c *cluster) loadUnverified(ctx context.Context, dopts codec.DecodeOptions, e store.Entry) (*codec.Loaded, error) {
	l, err := source.Unverified{Reader: c.store, Entry: e, Why: configMapWriters(e) + " may have written it", Decode: dopts}.Load(ctx)
	if err != nil {
		return nil, err
	}
	return loadedFrom(l), nil
}
