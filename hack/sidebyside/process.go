package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/installstrategy/installstrategy/internal/gobuild"
)

// operatorProcess is one operator running as a local process, its output
// in a log file.
type operatorProcess struct {
	name          string
	cmd           *exec.Cmd
	logPath       string
	log           *os.File
	metricsURL    string
	requestMetric string // its own client request counter
	requestLabel  string // the counter's verb label
	errorMarker   string // in the log lines of errors
	started       time.Time
	ready         time.Time
	exited        chan struct{}
	waitErr       error
}

// processSpec says how to start an operator and when it is ready.
type processSpec struct {
	name          string
	path          string
	args          []string
	env           []string
	logPath       string
	readyLine     string // a log line that says it is ready to work
	metricsURL    string
	requestMetric string
	requestLabel  string
	errorMarker   string
}

// startProcess starts spec and waits until its log has readyLine.
func startProcess(ctx context.Context, spec processSpec, timeout time.Duration) (*operatorProcess, error) {
	f, err := os.Create(spec.logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = spec.env
	// Every line of output is stamped with the time it arrived, so that
	// logs without timestamps of their own show where the time went.
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), sc.Bytes())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	p := &operatorProcess{name: spec.name, cmd: cmd, logPath: spec.logPath, log: f, metricsURL: spec.metricsURL,
		requestMetric: spec.requestMetric, requestLabel: spec.requestLabel, errorMarker: spec.errorMarker, exited: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		f.Close()
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		pw.Close()
		<-copied
		close(p.exited)
	}()
	deadline := time.Now().Add(timeout)
	for {
		data, _ := os.ReadFile(spec.logPath)
		if bytes.Contains(data, []byte(spec.readyLine)) {
			p.ready = time.Now()
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before it was ready (%v); log %s:\n%s", spec.name, p.waitErr, spec.logPath, tail(data, 2000))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready (no %q in its log) within %s; log %s", spec.name, spec.readyLine, timeout, spec.logPath)
		}
	}
}

// alive reports an error when the process has exited.
func (p *operatorProcess) alive() error {
	select {
	case <-p.exited:
		data, _ := os.ReadFile(p.logPath)
		return fmt.Errorf("%s exited (%v); log %s:\n%s", p.name, p.waitErr, p.logPath, tail(data, 2000))
	default:
		return nil
	}
}

// stop sends SIGTERM, and SIGKILL after 30 seconds.
func (p *operatorProcess) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	p.log.Close()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}

// portsFree fails when one of the loopback ports is taken: the operators
// bind them, and a second process on them would fail mid-run.
func portsFree(ports ...int) error {
	var errs []error
	for _, port := range ports {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			errs = append(errs, fmt.Errorf("port 127.0.0.1:%d is taken (another virt-operator or operator running?): %w", port, err))
			continue
		}
		ln.Close()
	}
	return errors.Join(errs...)
}

// buildBinary builds a main package of the repository into dir, as its
// image is built (internal/gobuild: static, stripped; virt-operator is
// built static too, by build.sh).
func buildBinary(ctx context.Context, dir, pkg string) (string, error) {
	bin, err := absPath(dir, filepath.Base(pkg))
	if err != nil {
		return "", err
	}
	cmd := gobuild.Command(ctx, bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s (run from the repository root): %v\n%s", pkg, err, out)
	}
	return bin, nil
}
