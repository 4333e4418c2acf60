// Command installstrategy-helm-render renders one Helm chart for the
// installstrategy operator, which runs it for each chart it renders
// (pkg/render/helmexec): a JSON request (the chart archive, values and
// options) on standard input, a JSON response (the manifests and hooks,
// or the render's error) on standard output. The operator keeps Helm's
// template engine out of its own process this way: its memory, a render
// that runs past its deadline (killed), a chart's templates (they see no
// environment).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/installstrategy/installstrategy/internal/buildinfo"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmexec"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(helmexec.HelperName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	showVersion := fs.Bool("version", false, "print the version, commit and build date, and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: %s [--version]

Renders one Helm chart as "helm template --include-crds" does, client-only,
for the installstrategy operator, which starts it for each chart it renders:
it reads one JSON request (name, archive, values, options) on standard input
and writes one JSON response (result or error) on standard output. A chart
that does not render is a response with its error (exit 0); a request that
cannot be read exits 1. It is not meant to be run by hand.

`, helmexec.HelperName)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "%s %s\n", helmexec.HelperName, buildinfo.Get())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q (the request comes on standard input)\n", helmexec.HelperName, fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := helmexec.Serve(ctx, stdin, stdout, render.InProcess{}); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", helmexec.HelperName, err)
		return 1
	}
	return 0
}
