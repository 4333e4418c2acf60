package deploy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

const usage = `usage: deploy COMMAND [flags]

Installs the installstrategy operator into a cluster from its kustomize
manifests, without kubectl. The cluster is the current context of
$KUBECONFIG (or ~/.kube/config), unless --kubeconfig or --context says
otherwise.

Commands:
  deploy     render --dir with --image, server-side apply it (namespace and
             CRD first), and wait until the CRD is Established and the
             operator's Deployment is Available
  undeploy   delete what deploy applies, in reverse order and the CRD last,
             and wait until it is gone; refused while Installations exist,
             unless --keep-crd keeps the CRD (and them)
  render     print the manifests deploy would apply; needs no cluster

Flags:
`

// Main runs hack/deploy's command line (see usage) and returns the exit
// code: 0 on success, 1 on failure, 2 on a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o Options
	var kubeconfig, kubecontext string
	fs := flags(stderr, &o, &kubeconfig, &kubecontext)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs.Usage()
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	cmd := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", cmd, fs.Args())
		return 2
	}
	o.Out = stdout
	if err := run(ctx, cmd, o, kubeconfig, kubecontext, stdout); err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func flags(out io.Writer, o *Options, kubeconfig, kubecontext *string) *flag.FlagSet {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		_, _ = fmt.Fprint(out, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Dir, "dir", DefaultDir, "the kustomization to render")
	fs.StringVar(&o.Image, "image", "", "the operator's image; empty keeps the kustomization's")
	fs.StringVar(kubeconfig, "kubeconfig", "", "kubeconfig file; empty means $KUBECONFIG, else ~/.kube/config")
	fs.StringVar(kubecontext, "context", "", "kubeconfig context; empty means the current context")
	fs.StringVar(&o.FieldOwner, "field-owner", DefaultFieldOwner, "server-side apply field manager")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "bound of each wait (CRD Established, Deployment Available, an object gone)")
	fs.BoolVar(&o.KeepCRD, "keep-crd", false, "undeploy: keep the CRD and its Installations, remove only the operator")
	fs.StringVar(&o.LocalCluster, "local-cluster", "", "deploy: state folder of hack/localcluster; when the target is that cluster and it has a real node, the operator and its dump Jobs run there")
	return fs
}

func run(ctx context.Context, cmd string, o Options, kubeconfig, kubecontext string, stdout io.Writer) error {
	if cmd == "render" {
		objs, err := Render(o.Dir, o.Image)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			data, err := yaml.Marshal(obj.Object)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(stdout, "---\n%s", data); err != nil {
				return err
			}
		}
		return nil
	}
	if cmd != "deploy" && cmd != "undeploy" {
		return fmt.Errorf("unknown command (want deploy, undeploy or render)")
	}
	cfg, where, err := RestConfig(kubeconfig, kubecontext)
	if err != nil {
		return err
	}
	start := time.Now()
	var results []Result
	if cmd == "deploy" && o.LocalCluster != "" {
		var why string
		if o.RealNode, why = LocalRealNode(o.LocalCluster, cfg.Host); o.RealNode != nil {
			_, _ = fmt.Fprintf(stdout, "deploy: on the local cluster's real node %s (API server at %s:%d for its pods)\n", o.RealNode.Name, o.RealNode.APIHost, o.RealNode.APIPort)
		} else {
			_, _ = fmt.Fprintf(stdout, "deploy: not on a real node: %s\n", why)
		}
	}
	if cmd == "deploy" {
		image := o.Image
		if image == "" {
			image = "as in the kustomization"
		}
		_, _ = fmt.Fprintf(stdout, "deploy: %s to %s (image %s, field owner %s)\n", o.withDefaults().Dir, where, image, o.withDefaults().FieldOwner)
		results, err = Deploy(ctx, cfg, o)
	} else {
		_, _ = fmt.Fprintf(stdout, "undeploy: %s from %s\n", o.withDefaults().Dir, where)
		results, err = Undeploy(ctx, cfg, o)
	}
	if err != nil {
		return err
	}
	counts := map[Action]int{}
	for _, r := range results {
		counts[r.Action]++
	}
	var parts []string
	for _, a := range []Action{Created, Configured, Unchanged, Deleted, Absent, Kept} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	_, _ = fmt.Fprintf(stdout, "%s: done in %s: %d objects (%s)\n", cmd, time.Since(start).Round(100*time.Millisecond), len(results), strings.Join(parts, ", "))
	return nil
}

// RestConfig loads the REST config of the kubeconfig file (empty: the
// usual $KUBECONFIG / ~/.kube/config lookup) and context (empty: the
// current one), and describes the cluster for the progress lines.
func RestConfig(kubeconfig, kubecontext string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubecontext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	name := kubecontext
	if name == "" {
		name = raw.CurrentContext
	}
	where := cfg.Host
	if name != "" {
		where = fmt.Sprintf("%s (context %s)", cfg.Host, name)
	}
	return cfg, where, nil
}
