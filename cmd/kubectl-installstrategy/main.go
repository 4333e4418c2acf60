// Command kubectl-installstrategy is the kubectl plugin for install
// strategies: put it on PATH and run `kubectl installstrategy --help`.
package main

import (
	"os"

	"github.com/installstrategy/installstrategy/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.StdStreams()))
}
