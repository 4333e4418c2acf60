// Package cli implements the kubectl-installstrategy plugin: its commands,
// flags and printers. cmd/kubectl-installstrategy only calls Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/gctune"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Streams are the standard input, output and error of a command.
type Streams = genericiooptions.IOStreams

// StdStreams returns the process's standard streams.
func StdStreams() Streams {
	return Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// ExitError ends the command with a given exit code. A nil Err means the
// command already said what there was to say (diff's "different" is code 1).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageError marks a mistake in how a command was called (a bad flag or
// flag value, a wrong number of arguments): exit status 2.
func usageError(err error) error { return &ExitError{Code: 2, Err: err} }

// Main runs the plugin with args and returns the process exit code: 0 on
// success, 2 on a usage error, 1 on any other error (or the code of an
// *ExitError).
func Main(args []string, streams Streams) int {
	return MainWrapped(args, streams, nil)
}

// MainWrapped is Main with wrap (when not nil) applied to the REST config
// of every cluster connection, as genericclioptions' WrapConfigFn:
// hack/benchapply counts the plugin's API requests with it.
func MainWrapped(args []string, streams Streams, wrap func(*rest.Config) *rest.Config) int {
	gctune.Apply(os.Getenv, gctune.PluginPercent)
	silenceKlog()
	root := newRootCommand(streams, wrap)
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	code := 1
	var exit *ExitError
	if errors.As(err, &exit) {
		code = exit.Code
		if exit.Err == nil {
			return code
		}
	}
	fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	return code
}

// options are the flags every command shares.
type options struct {
	// ctx is the running command's context (set before it runs), for
	// the cluster connection's first request.
	ctx            context.Context
	streams        Streams
	kube           *genericclioptions.ConfigFlags
	maxDecodedSize string
	// color is --color: auto, always or never.
	color string
	// qps and burst are --kube-api-qps and --kube-api-burst: the client's
	// own limit on requests to the API server.
	qps   float64
	burst int
	// insecureRegistry is --insecure-registry: plain HTTP to the
	// registry of an oci:// reference.
	insecureRegistry bool
	// clusterTrust, when set (apply's --key and --allow-unsigned), is
	// what a strategy read from the cluster (cm/NAME) must pass.
	clusterTrust *clusterTrust
	// chart, when set (apply's and plan's --from-helm), is the chart the
	// strategy was rendered from: a walk lists its repository.
	chart *chartWalk
	// revisions, when set (apply's and plan's revision/N), is the
	// installation whose anchored revisions a walk lists.
	revisions *revisionWalk
	// oci is the registry client, made on first use (ociClient).
	oci *oci.Client
}

// The default client-side limits (--kube-api-qps, --kube-api-burst),
// kapp's.
const (
	defaultQPS   = 1000
	defaultBurst = 1000
)

// clientLimits sets the client-side rate limit of cfg from
// --kube-api-qps and --kube-api-burst: a negative QPS means none (the API
// server's priority and fairness still applies), as in controller-runtime.
func (o *options) clientLimits(cfg *rest.Config) error {
	switch {
	case o.qps == 0:
		return usageError(errors.New("--kube-api-qps 0: want a positive rate, or a negative one for no client-side limit"))
	case o.qps > 0 && o.burst < 1:
		return usageError(fmt.Errorf("--kube-api-burst %d: want at least 1 with --kube-api-qps %v", o.burst, o.qps))
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	return nil
}

func (o *options) decodeOptions() (codec.DecodeOptions, error) {
	q, err := resource.ParseQuantity(o.maxDecodedSize)
	if err != nil || q.Sign() <= 0 {
		return codec.DecodeOptions{}, usageError(fmt.Errorf("--max-decoded-size %q: want a positive size such as 64Mi", o.maxDecodedSize))
	}
	return codec.DecodeOptions{MaxDecodedBytes: q.Value()}, nil
}

// namespace returns the -n flag's value, or "" when not given.
func (o *options) namespace() string {
	if o.kube.Namespace == nil {
		return ""
	}
	return *o.kube.Namespace
}

// NewRootCommand builds the command tree.
func NewRootCommand(streams Streams) *cobra.Command { return newRootCommand(streams, nil) }

const rootLong = `kubectl installstrategy works with install strategies: the complete, versioned set
of manifests a KubeVirt-style operator stores, gzip+base64 encoded, in a ConfigMap
and reconciles into the cluster.

It reads KubeVirt's own strategy ConfigMaps (kubectl get cm -n kubevirt
kubevirt-install-strategy-xxxxx -o yaml) as well as the native form written by
installstrategy, which adds a sha256 digest that every read verifies.

Every command that reads a strategy takes FILE, "-" (standard input), cm/NAME
(a strategy ConfigMap in the cluster, namespace -n; chunks reassembled) or
oci://HOST/REPOSITORY:TAG or @sha256:DIGEST (a strategy artifact in a registry,
checked against its digests; see publish, pull, copy and verify). A file
may hold strategy ConfigMaps (YAML or JSON, a List, or kubectl get output; other
objects in it are skipped and named, a chunked strategy's head is reassembled
from the chunks beside it, and several strategies need --name) or a
plain manifests text (documents separated by --- lines). Objects read from a
cluster that are not strategies (a Secret, an ordinary ConfigMap, a chunk of a
stored strategy) are refused with what they are. -f FILE is the same as the
argument (kubectl's spelling).

Every verb that prints objects (list, inspect, status, plan, decode, apply
--dry-run) takes kubectl's -o: its own table (and wide, or text) by default,
and cli-runtime's printers for json, yaml, name, jsonpath= and go-template=.

Without a reachable cluster, a cluster verb fails at once in one line naming
the server (client-go's klog output is silenced).`

func newRootCommand(streams Streams, wrap func(*rest.Config) *rest.Config) *cobra.Command {
	o := &options{streams: streams, kube: genericclioptions.NewConfigFlags(true)}
	o.kube.WrapConfigFn = wrap
	root := &cobra.Command{
		Use:           "kubectl-installstrategy",
		Short:         "Decode, inspect, diff and verify install strategies",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			o.ctx = cmd.Context()
			_, err := o.palette(nil)
			return err
		},
		// A word that is no command is a usage error, with suggestions.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageError(errors.New(msg + " (see --help)"))
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError(fmt.Errorf("%s: %w (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath()))
	})
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.maxDecodedSize, "max-decoded-size", "64Mi",
		"refuse strategies whose decoded text is larger than this (guards against gzip bombs)")
	// kapp's limits: high enough that a large product is paced by the
	// API server's priority and fairness, which shares it between
	// clients, not by a client-side bucket (Helm's parallel writes run at
	// several hundred a second too).
	root.PersistentFlags().Float64Var(&o.qps, "kube-api-qps", defaultQPS,
		"requests per second to the API server that the client allows itself (the API server's priority and fairness paces it too); negative: no client-side limit; lower it (kubectl's discovery uses 50) to spare a busy API server")
	root.PersistentFlags().IntVar(&o.burst, "kube-api-burst", defaultBurst, "requests the client may send at once above --kube-api-qps")
	root.PersistentFlags().StringVar(&o.color, "color", "auto", "colour what is printed for people: auto (on a terminal, unless $NO_COLOR is set), always or never")
	root.AddCommand(
		newDecodeCommand(o),
		newEncodeCommand(o),
		newInspectCommand(o),
		newDiffCommand(o),
		newVerifyCommand(o),
		newSignCommand(o),
		newIDCommand(o),
		newListCommand(o),
		newGetCommand(o),
		newPublishCommand(o),
		newPullCommand(o),
		newCopyCommand(o),
		newStatusCommand(o),
		newPlanCommand(o),
		newApplyCommand(o),
		newUninstallCommand(o),
		newHistoryCommand(o),
		newRollbackCommand(o),
		newVersionCommand(o),
	)
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	return root
}

// wrapArgs makes a wrong number of arguments a usage error (exit 2).
func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError(fmt.Errorf("%s: %w (usage: %s)", cmd.CommandPath(), err, cmd.UseLine()))
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// printWarnings writes parse warnings to standard error.
func printWarnings(w io.Writer, warnings []strategy.Warning) {
	for _, x := range warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
}
