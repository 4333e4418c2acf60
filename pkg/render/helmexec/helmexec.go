// Package helmexec renders charts in a helper process: Renderer starts the
// helper (cmd/installstrategy-helm-render, shipped beside the operator),
// sends it one request on its standard input and reads one response from
// its standard output; Serve is the helper's side. Neither links Helm's
// template engine, so a program that has its charts rendered this way
// stays free of it (pkg/render/helmspec says why that matters).
//
// The process boundary also bounds a chart's templates in a way a
// goroutine cannot: a render past its deadline is killed, not left
// running, its memory is the helper's and is returned when it exits, and
// it sees no environment variable of the caller.
package helmexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
)

// HelperName is the helper's file name, looked for beside the running
// program and then in $PATH.
const HelperName = "installstrategy-helm-render"

// defaultMaxResultBytes bounds a response: a rendered chart larger than
// the largest strategy text a ConfigMap is decoded to (pkg/codec's
// DefaultMaxDecodedBytes, 64 MiB) could not be stored anyway.
const defaultMaxResultBytes = 64 << 20

// maxStderr is how much of the helper's standard error an error quotes.
const maxStderr = 8 << 10

// Request is what the helper reads: one chart archive and its inputs.
type Request struct {
	Name    string           `json:"name"`
	Archive []byte           `json:"archive"`
	Values  map[string]any   `json:"values,omitempty"`
	Options helmspec.Options `json:"options"`
}

// Response is what the helper writes: the render, or the render's error
// (a chart that does not render is an answer, not a failure of the
// helper).
type Response struct {
	Result *helmspec.Result `json:"result,omitempty"`
	Error  string           `json:"error,omitempty"`
}

// Renderer renders charts in a helper process (a helmspec.Renderer).
type Renderer struct {
	// Path is the helper's executable; empty means DefaultPath.
	Path string
	// MaxResultBytes bounds the response; 0 means defaultMaxResultBytes.
	MaxResultBytes int64
}

// DefaultPath finds the helper: HelperName beside the running program
// (as the operator image has it), else in $PATH.
func DefaultPath() (string, error) {
	var beside string
	if self, err := os.Executable(); err == nil {
		beside = filepath.Join(filepath.Dir(self), HelperName)
		if st, err := os.Stat(beside); err == nil && !st.IsDir() {
			return beside, nil
		}
	}
	if p, err := exec.LookPath(HelperName); err == nil {
		return p, nil
	}
	if beside == "" {
		return "", fmt.Errorf("the chart renderer %s is not in $PATH", HelperName)
	}
	return "", fmt.Errorf("the chart renderer %s is neither beside this program (%s) nor in $PATH: it ships with the operator (its image has it), or name it with --helm-renderer", HelperName, beside)
}

// RenderArchive renders archive in a new helper process. The helper is
// killed at ctx's deadline; its environment is empty.
func (r Renderer) RenderArchive(ctx context.Context, name string, archive []byte, vals map[string]any, opts helmspec.Options) (*helmspec.Result, error) {
	fail := func(err error) (*helmspec.Result, error) {
		return nil, fmt.Errorf("render chart %s: %w", name, err)
	}
	broken := func(err error) (*helmspec.Result, error) {
		return nil, &helmspec.RendererError{Err: fmt.Errorf("render chart %s: %w", name, err)}
	}
	if opts.PostRenderer != nil {
		// It would not survive the request's JSON, and the helper runs
		// with an empty environment, never another program.
		return fail(errors.New("a post-renderer runs a program, and the helper renderer does not: render with pkg/render in the calling process, as kubectl installstrategy encode --from-helm --post-renderer does"))
	}
	path := r.Path
	if path == "" {
		p, err := DefaultPath()
		if err != nil {
			return broken(err)
		}
		path = p
	}
	req, err := json.Marshal(Request{Name: name, Archive: archive, Values: vals, Options: opts})
	if err != nil {
		return fail(fmt.Errorf("encode the request: %w", err))
	}
	limit := r.MaxResultBytes
	if limit <= 0 {
		limit = defaultMaxResultBytes
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = []string{}
	// Past the deadline the helper is killed; a child it left holding its
	// output open is not waited for.
	cmd.WaitDelay = time.Second
	cmd.Stdin = bytes.NewReader(req)
	stdout := &capped{max: limit}
	stderr := &capped{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return fail(context.Cause(ctx)) // as HelmArchive's error at the deadline
	}
	if stdout.over {
		return fail(fmt.Errorf("the rendered chart is over %d bytes", limit))
	}
	if runErr != nil {
		msg := strings.TrimSpace(stderr.buf.String())
		if msg == "" {
			msg = "no output on standard error"
		}
		return broken(fmt.Errorf("chart renderer %s: %w: %s", path, runErr, msg))
	}
	var resp Response
	if err := json.Unmarshal(stdout.buf.Bytes(), &resp); err != nil {
		return broken(fmt.Errorf("chart renderer %s: its answer: %w", path, err))
	}
	if resp.Error != "" {
		return nil, errors.New(resp.Error)
	}
	if resp.Result == nil {
		return broken(fmt.Errorf("chart renderer %s: an answer with neither a result nor an error", path))
	}
	return resp.Result, nil
}

// Serve reads one Request from in, renders it with render and writes one
// Response to out. A render's error is written as the Response's error;
// an error is returned for a request that cannot be read or a response
// that cannot be written.
func Serve(ctx context.Context, in io.Reader, out io.Writer, render helmspec.Renderer) error {
	var req Request
	dec := json.NewDecoder(in)
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("read the request on standard input: %w", err)
	}
	if len(req.Archive) == 0 {
		return fmt.Errorf("read the request on standard input: no chart archive")
	}
	var resp Response
	res, err := render.RenderArchive(ctx, req.Name, req.Archive, req.Values, req.Options)
	if err != nil {
		resp.Error = err.Error()
	} else {
		resp.Result = res
	}
	if err := json.NewEncoder(out).Encode(resp); err != nil {
		return fmt.Errorf("write the response: %w", err)
	}
	return nil
}

// capped keeps the first max bytes written and notes whether more came.
type capped struct {
	buf  bytes.Buffer
	max  int64
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - int64(c.buf.Len()); int64(len(p)) > room {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}
