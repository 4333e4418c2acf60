// Package cmdmain is the main function of the project's small commands
// (hack/...): run with a context that SIGINT and SIGTERM cancel, and on an
// error print "NAME: error" to standard error and exit 1.
package cmdmain

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Run calls run with the command's arguments and exits 1 on its error.
func Run(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
