// Command localcluster starts and stops the local Kubernetes control plane
// used by the tests and the demo (see internal/localcluster and docs/DEVELOPMENT.md).
//
//	localcluster up   [--state-dir DIR] [--bin-dir DIR] [--nodes N] [--timeout D] [--keep-on-failure] [--real-node=false]
//	localcluster down [--state-dir DIR]
//	localcluster env  [--state-dir DIR]
//	localcluster restart [--state-dir DIR] [--kill] COMPONENT
//	localcluster faultproxy [--state-dir DIR] [--rate R] [--latency D] [--watches]
//	localcluster load [--state-dir DIR] IMAGE.tar...   import images into the real node's containerd
//
// up prints progress on stderr and, on stdout, the shell lines that point
// clients at the cluster, ending with `export KUBECONFIG=...`; env prints the
// same lines for a running cluster. --bin-dir defaults to $TOOLS_DIR and
// --state-dir to $CLUSTER_STATE_DIR, else _output/cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/installstrategy/installstrategy/internal/cmdmain"
	"github.com/installstrategy/installstrategy/internal/localcluster"
)

func main() { cmdmain.Run("localcluster", run) }

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: localcluster up|down|env|restart|faultproxy [flags]")
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("localcluster "+cmd, flag.ContinueOnError)
	stateDir := fs.String("state-dir", envOr("CLUSTER_STATE_DIR", "_output/cluster"), "state directory of the cluster")
	var opts localcluster.Options
	if cmd == "up" {
		fs.StringVar(&opts.BinDir, "bin-dir", os.Getenv("TOOLS_DIR"), "directory with the control-plane binaries (make tools)")
		fs.IntVar(&opts.Nodes, "nodes", 3, "number of fake nodes; the first is a tainted control-plane node")
		fs.DurationVar(&opts.Timeout, "timeout", 2*time.Minute, "how long to wait for each component")
		fs.BoolVar(&opts.KeepOnFailure, "keep-on-failure", false, "leave processes and state of a failed start for debugging")
		fs.BoolVar(&opts.RealNode, "real-node", true, "also start a real node (kubelet, containerd, runc) when the machine can run one (root, Linux, the Debian packages)")
	}
	kill := fs.Bool("kill", false, "restart: SIGKILL the component (a crash) instead of SIGTERM")
	var faults localcluster.Faults
	fs.Float64Var(&faults.Rate, "rate", 0.1, "faultproxy: share of requests that fail")
	fs.DurationVar(&faults.Latency, "latency", 0, "faultproxy: random delay of each request, up to this")
	fs.BoolVar(&faults.Watches, "watches", false, "faultproxy: fail watch requests too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch cmd {
	case "restart":
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: localcluster restart [--kill] COMPONENT (one of %v)", localcluster.Components)
		}
		return localcluster.Restart(ctx, *stateDir, fs.Arg(0), *kill)
	case "faultproxy":
		return localcluster.ServeFaultProxy(ctx, *stateDir, faults, os.Stderr)
	case "up":
		opts.StateDir = *stateDir
		opts.Log = os.Stderr
		s, err := localcluster.Up(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Print(s.Env())
		return nil
	case "down":
		if err := localcluster.Down(ctx, *stateDir, os.Stderr); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "local cluster in %s is down\n", *stateDir)
		return nil
	case "load":
		s, err := localcluster.Load(*stateDir)
		if err != nil {
			return fmt.Errorf("%w (start it with `make cluster-up`)", err)
		}
		if s.RealNode == nil {
			return fmt.Errorf("the cluster in %s has no real node to load images into", *stateDir)
		}
		if fs.NArg() == 0 {
			return errors.New("usage: localcluster load [--state-dir DIR] IMAGE.tar...")
		}
		if err := localcluster.ImportImages(ctx, s.RealNode.Containerd, fs.Args()...); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "imported %d image(s) into the real node %s\n", fs.NArg(), s.RealNode.Name)
		return nil
	case "env":
		s, err := localcluster.Load(*stateDir)
		if err != nil {
			return fmt.Errorf("%w (start it with `make cluster-up`)", err)
		}
		fmt.Print(s.Env())
		return nil
	default:
		return fmt.Errorf("unknown command %q: want up, down, env, load, restart or faultproxy", cmd)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
