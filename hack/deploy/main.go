// Command deploy installs the installstrategy operator into the cluster of
// $KUBECONFIG from config/default, without kubectl: `make deploy` and
// `make undeploy` run it. The logic is in internal/deploy; run it with
// no arguments for its usage.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/installstrategy/installstrategy/internal/deploy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := deploy.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
