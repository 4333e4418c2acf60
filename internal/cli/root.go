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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/installstrategy/installstrategy/pkg/codec"
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

// Main runs the plugin with args and returns the process exit code: 0 on
// success, 1 on error (or the code of an *ExitError).
func Main(args []string, streams Streams) int {
	root := NewRootCommand(streams)
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
	streams        Streams
	kube           *genericclioptions.ConfigFlags
	maxDecodedSize string
}

func (o *options) decodeOptions() (codec.DecodeOptions, error) {
	q, err := resource.ParseQuantity(o.maxDecodedSize)
	if err != nil || q.Sign() <= 0 {
		return codec.DecodeOptions{}, fmt.Errorf("--max-decoded-size %q: want a positive size such as 64Mi", o.maxDecodedSize)
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
func NewRootCommand(streams Streams) *cobra.Command {
	o := &options{streams: streams, kube: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-installstrategy",
		Short: "Decode, inspect, diff and verify install strategies",
		Long: `kubectl installstrategy works with install strategies: the complete, versioned set
of manifests a KubeVirt-style operator stores, gzip+base64 encoded, in a ConfigMap
and reconciles into the cluster.

It reads KubeVirt's own strategy ConfigMaps (kubectl get cm -n kubevirt
kubevirt-install-strategy-xxxxx -o yaml) as well as the native form written by
installstrategy, which adds a sha256 digest that every read verifies.

Wherever a command takes FILE, "-" reads standard input, and the file may hold a
strategy ConfigMap (YAML or JSON, a List, or kubectl get output) or a plain
manifests text (documents separated by --- lines).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.maxDecodedSize, "max-decoded-size", "64Mi",
		"refuse strategies whose decoded text is larger than this (guards against gzip bombs)")
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
		newStatusCommand(o),
		newPlanCommand(o),
		newApplyCommand(o),
		newVersionCommand(o),
	)
	return root
}

// loadStrategy reads FILE|- and returns the one strategy in it. name picks
// a ConfigMap by name when the input holds several.
//
// A path of the form cm/NAME (or configmap/NAME) reads the strategy
// ConfigMap NAME from the cluster (namespace -n), through the store, so a
// chunked strategy is reassembled and verified.
func (o *options) loadStrategy(ctx context.Context, path, name string) (*codec.Loaded, error) {
	if cmName, ok := clusterRef(path); ok {
		c, err := o.cluster()
		if err != nil {
			return nil, err
		}
		e, err := c.entryByName(ctx, cmName)
		if err != nil {
			return nil, err
		}
		return c.loadEntry(ctx, e)
	}
	in, err := o.readInput(path)
	if err != nil {
		return nil, err
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	if in.Strategy != nil {
		if name != "" {
			return nil, fmt.Errorf("%s: --name applies to ConfigMaps, but the input is a manifests text", in.Source)
		}
		return codec.LoadInput(in, dopts, strategy.ParseOptions{})
	}
	cm, err := pickConfigMap(in, name)
	if err != nil {
		return nil, err
	}
	return codec.LoadConfigMap(in.Source, cm, dopts, strategy.ParseOptions{})
}

func (o *options) readInput(path string) (*codec.Input, error) {
	data, err := codec.ReadFile(path, o.streams.In)
	if err != nil {
		return nil, err
	}
	source := path
	if path == "-" {
		source = "standard input"
	}
	return codec.ParseInput(source, data, strategy.ParseOptions{})
}

func pickConfigMap(in *codec.Input, name string) (*corev1.ConfigMap, error) {
	if name == "" {
		if len(in.ConfigMaps) == 1 {
			return in.ConfigMaps[0], nil
		}
		var names []string
		for _, cm := range in.ConfigMaps {
			names = append(names, cm.Name)
		}
		return nil, fmt.Errorf("%s: holds %d strategy ConfigMaps (%s); pick one with --name", in.Source, len(in.ConfigMaps), strings.Join(names, ", "))
	}
	for _, cm := range in.ConfigMaps {
		if cm.Name == name {
			return cm, nil
		}
	}
	return nil, fmt.Errorf("%s: no strategy ConfigMap named %q", in.Source, name)
}

// printWarnings writes parse warnings to standard error.
func printWarnings(w io.Writer, warnings []strategy.Warning) {
	for _, x := range warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
}
