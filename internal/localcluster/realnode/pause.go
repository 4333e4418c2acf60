// Command pause is the sandbox container of the local cluster's real node
// (localhost/pause:local): it waits for SIGTERM or SIGINT and, as PID 1,
// reaps the children it inherits. hack/localcluster builds it with
// CGO_ENABLED=0 and packs it with internal/ociimage.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
