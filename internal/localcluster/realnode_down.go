package localcluster

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// downRealNode undoes what startRealNode and reserveRealNode did: it
// deletes the node's pods through the API (so the kubelet stops their
// sandboxes and CNI frees their addresses) and the node, stops the kubelet,
// kills what still runs in containerd, stops containerd and the proxy,
// unmounts, and removes the bridge, its guard and the host paths Up
// created. It works when the API server is already gone too.
func downRealNode(ctx context.Context, stateDir string, pids map[string]int, log io.Writer) error {
	d := realNodePaths(stateDir)
	slot, ok, err := realNodeSlot(d)
	if !ok || err != nil {
		return err
	}
	name := nodeIP(slot)
	sandboxes, errs := stopRealNode(ctx, stateDir, d, name, pids, log)
	unmountUnder(d.root)
	br, chain := bridgeName(slot), guardChain(slot)
	_ = exec.Command("ip", "link", "del", br).Run()
	if err := removeChain("filter", chain); err != nil {
		errs = append(errs, err)
	}
	if err := removeChain("nat", apiChain(slot)); err != nil {
		errs = append(errs, err)
	}
	// Host paths: what this node left there, and the folders themselves
	// when Up created them and they are empty now.
	cleanHostPaths(d, sandboxes)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(log, "real node %s removed (bridge %s, chain %s)\n", name, br, chain)
	return nil
}

// realNodeSlot reads the slot the node was given; ok is false when there
// is no real node (no slot file).
func realNodeSlot(d realNodeDirs) (slot int, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(d.etc, "slot"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("real node: %w", err)
	}
	slot, err = strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, false, fmt.Errorf("real node: slot file: %w", err)
	}
	return slot, true, nil
}

// stopRealNode deletes the node's pods and the node (when the API server
// answers), stops the kubelet, kills and deletes containerd's tasks, stops
// containerd and kills leftover shims. It returns the sandboxes containerd
// held (their CNI results are removed later).
func stopRealNode(ctx context.Context, stateDir string, d realNodeDirs, name string, pids map[string]int, log io.Writer) (sandboxes []string, errs []error) {
	if pid, ok := pids[RealNodeKubelet]; ok && owned(pid, stateDir) {
		if cs, err := clientFor(filepath.Join(stateDir, "kubeconfig")); err == nil && checkReady(ctx, filepath.Join(stateDir, "kubeconfig")) == nil {
			deletePodsOf(ctx, cs, name, d.sock, log)
			if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				fmt.Fprintf(log, "real node: delete node %s: %v\n", name, err)
			}
		}
	}
	stopOne := func(proc string) {
		if pid, ok := pids[proc]; ok {
			if owned(pid, stateDir) {
				fmt.Fprintf(log, "stopping %s (pid %d)\n", proc, pid)
			}
			if err := stop(ctx, pid, stateDir, 10*time.Second); err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", proc, err))
			}
		}
	}
	stopOne(RealNodeKubelet)
	if pid, ok := pids[RealNodeContainerd]; ok && owned(pid, stateDir) {
		sandboxes = ctrList(ctx, d.sock, "containers")
		for _, id := range ctrList(ctx, d.sock, "tasks") {
			_ = exec.CommandContext(ctx, "ctr", "-a", d.sock, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).Run()
		}
		time.Sleep(500 * time.Millisecond)
		for _, id := range ctrList(ctx, d.sock, "tasks") {
			_ = exec.CommandContext(ctx, "ctr", "-a", d.sock, "-n", "k8s.io", "tasks", "delete", "-f", id).Run()
		}
	}
	stopOne(RealNodeContainerd)
	killShims(d.sock, log)
	return sandboxes, errs
}

// unmountUnder unmounts everything mounted below root, deepest first.
func unmountUnder(root string) {
	// Mounts under the node's folder, deepest first: network namespaces,
	// overlay root filesystems, tmpfs volumes, the kubelet folder's bind.
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		var targets []string
		for line := range strings.SplitSeq(string(mounts), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && strings.HasPrefix(f[4], root+"/") {
				targets = append(targets, f[4])
			}
		}
		slices.Sort(targets)
		for _, t := range slices.Backward(slices.Compact(targets)) {
			if exec.Command("umount", t).Run() != nil {
				_ = exec.Command("umount", "-l", t).Run()
			}
		}
	}
}

// cleanHostPaths removes what the node left in the host paths (CNI
// results of its sandboxes, container log links into its folder, the
// device plugin socket) and the host paths Up created, once empty.
func cleanHostPaths(d realNodeDirs, sandboxes []string) {
	for _, id := range sandboxes {
		_ = os.Remove("/var/lib/cni/results/cni-loopback-" + id + "-lo")
		_ = os.Remove("/var/lib/cni/results/realnode-pods-" + id + "-eth0")
	}
	if links, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, l := range links {
			p := filepath.Join("/var/log/containers", l.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, d.root+"/") {
				_ = os.Remove(p)
			}
		}
	}
	_ = os.Remove("/var/lib/kubelet/device-plugins/kubelet.sock")
	for _, p := range hostPaths {
		if _, err := os.Stat(createdMarker(d, p)); err == nil {
			removeEmptyDirs(p)
		}
	}
	if _, err := os.Stat(createdMarker(d, "cgroups")); err == nil {
		cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
		for _, c := range cgroups {
			removeEmptyDirs(c)
		}
	}
}

// deletePodsOf deletes every pod bound to node at once and waits up to
// 30 s until containerd runs no task.
func deletePodsOf(ctx context.Context, cs kubernetes.Interface, node, sock string, log io.Writer) {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		fmt.Fprintf(log, "real node: list pods of %s: %v\n", node, err)
		return
	}
	for _, p := range pods.Items {
		err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)})
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(log, "real node: delete pod %s/%s: %v\n", p.Namespace, p.Name, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(ctrList(ctx, sock, "tasks")) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
}

// ctrList lists the ids of containerd objects (containers, tasks) in the
// k8s.io namespace.
func ctrList(ctx context.Context, sock, what string) []string {
	out, err := exec.CommandContext(ctx, "ctr", "-a", sock, "-n", "k8s.io", what, "ls", "-q").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// killShims kills containerd shims of this node that outlived containerd
// (their command line names its socket).
func killShims(sock string, log io.Writer) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		cmdline, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(cmdline, []byte("containerd-shim")) {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if i := slices.Index(args, "-address"); i < 0 || i+1 >= len(args) || args[i+1] != sock {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			fmt.Fprintf(log, "real node: killed leftover shim %d\n", pid)
		}
	}
}

// removeEmptyDirs removes dir and the folders below it that are empty
// (a cgroup folder counts as empty when it has no child groups and tasks).
func removeEmptyDirs(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeEmptyDirs(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir)
}
