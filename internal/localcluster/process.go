package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane component started by Up.
type process struct {
	name    string
	pid     int
	logFile string
	// exited is closed when the process has exited; waitErr is then set.
	exited  chan struct{}
	waitErr error
}

// start runs bin with args as a daemon: in a session of its own (so it
// outlives the caller and a terminal's signals), stdin from /dev/null,
// stdout and stderr to logs/<name>.log. The pid is recorded in
// pids/<name>.pid before start returns, so Down finds it even when Up fails
// or its caller is killed.
func start(stateDir, name, bin string, args []string) (*process, error) {
	logFile := filepath.Join(stateDir, "logs", name+".log")
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer out.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()

	cmd := exec.Command(bin, args...)
	cmd.Env = componentEnv(os.Environ())
	cmd.Dir = stateDir
	cmd.Stdin = devnull
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, logFile: logFile, exited: make(chan struct{})}
	// Reap the child while this process lives, so a crash is noticed at once
	// and a stopped component does not linger as a zombie.
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	pidFile := filepath.Join(stateDir, "pids", name+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		return nil, fmt.Errorf("record pid of %s: %w", name, err)
	}
	return p, nil
}

// ComponentGOGC is the GOGC the components run with when the environment
// sets none. The API servers are the largest consumers of CPU in make test
// (a third of a 2-core machine), a sixth of it garbage collection at Go's
// default of 100; at 400 their heaps grow larger (a few hundred MB more
// each) and the cluster spends about 6% less CPU on the same tests
// (docs/adr/2026-12-07-cluster-components-run-at-gogc-400.md).
const ComponentGOGC = "400"

// componentEnv returns env with GOGC=ComponentGOGC added when env sets no
// GOGC.
func componentEnv(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOGC=") {
			return env
		}
	}
	return append(env[:len(env):len(env)], "GOGC="+ComponentGOGC)
}

// failed returns a non-nil error when the process has already exited.
func (p *process) failed() error {
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Errorf("%s exited: %w", p.name, p.waitErr)
		}
		return fmt.Errorf("%s exited", p.name)
	default:
		return nil
	}
}

// readPIDs returns the recorded pids of a state directory by component name.
func readPIDs(stateDir string) (map[string]int, error) {
	entries, err := os.ReadDir(filepath.Join(stateDir, "pids"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pid files: %w", err)
	}
	pids := make(map[string]int, len(entries))
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(stateDir, "pids", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read pid file of %s: %w", name, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 1 {
			return nil, fmt.Errorf("pid file of %s: bad pid %q", name, strings.TrimSpace(string(data)))
		}
		pids[name] = pid
	}
	return pids, nil
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain spaces or parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	return data[i+2] != 'Z' && data[i+2] != 'X'
}

// owned reports whether pid is alive and was started for stateDir: every
// component's command line names a file in its state directory. This guards
// against killing an unrelated process that reused a recorded pid.
func owned(pid int, stateDir string) bool {
	if !alive(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return bytes.Contains(cmdline, []byte(stateDir+string(filepath.Separator)))
}

// stop ends the process group of pid: SIGTERM, then SIGKILL when it is still
// alive after grace. It returns once the process is gone.
func stop(ctx context.Context, pid int, stateDir string, grace time.Duration) error {
	if !owned(pid, stateDir) {
		return nil
	}
	signal := func(sig syscall.Signal) {
		// The component leads its own process group (Setsid); signal the
		// group so anything it started goes too, and the pid itself in case
		// it left the group.
		_ = syscall.Kill(-pid, sig)
		_ = syscall.Kill(pid, sig)
	}
	signal(syscall.SIGTERM)
	if waitGone(ctx, pid, grace) {
		return nil
	}
	signal(syscall.SIGKILL)
	if waitGone(ctx, pid, 10*time.Second) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	return fmt.Errorf("stop pid %d: still alive after SIGKILL", pid)
}

// waitGone polls until pid is no longer alive, d has passed or ctx is done.
func waitGone(ctx context.Context, pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !alive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return !alive(pid)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of file, for error messages.
func tail(file string, n int) string {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	lines := make([]string, 0, n)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if len(lines) == n {
			lines = lines[1:]
		}
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines, "\n")
}
