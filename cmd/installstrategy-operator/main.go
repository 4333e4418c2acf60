// Command installstrategy-operator is the installstrategy operator. For now
// it has one mode, --dump-install-strategy: it reads the target
// configuration from TARGET_DEPLOYMENT_CONFIG, generates the strategy of
// its product (the built-in sample product) and publishes it in the
// configuration's namespace, as KubeVirt's virt-operator does in its dump
// Job. The logic is in internal/dump; this file wires flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/store"
)

// version is the operator's own version, stamped at build time with
// -ldflags "-X main.version=v1.2.0"; empty in development builds, which
// dump any version asked for.
var version = ""

func main() {
	log := funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, args) }, funcr.Options{})
	if err := run(log, os.Args[1:]); err != nil {
		log.Error(err, "installstrategy-operator failed")
		os.Exit(1)
	}
}

func run(log logr.Logger, args []string) error {
	fs := flag.NewFlagSet("installstrategy-operator", flag.ContinueOnError)
	dumpMode := fs.Bool("dump-install-strategy", false, "generate the strategy for the configuration in $"+identity.EnvVar+", publish it in its namespace, and exit")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty means the in-cluster configuration")
	format := fs.String("strategy-format", string(codec.FormatNative), "form of the published strategy ConfigMap: native or kubevirt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*dumpMode {
		return errors.New("only --dump-install-strategy is implemented in this build")
	}
	f, err := codec.ParseFormat(*format)
	if err != nil {
		return err
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	st, err := store.NewForConfig(cfg, store.Options{Format: f})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := dump.Run(ctx, dump.Options{ConfigJSON: []byte(os.Getenv(identity.EnvVar)), Store: st, OwnVersion: version})
	if err != nil {
		return err
	}
	kv := []any{"configmap", res.Entry.String(), "version", res.Identity.Version, "identifier", res.Identity.Identifier, "objects", res.Objects, "chunks", len(res.Entry.Chunks)}
	if res.Published {
		log.Info("strategy published", kv...)
	} else {
		log.Info("strategy already stored", kv...)
	}
	return nil
}

// restConfig loads the kubeconfig file when one is given, else the
// in-cluster configuration.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
	}
	return cfg, nil
}
