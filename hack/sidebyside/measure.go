package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// procStat is what /proc says about a process at one moment.
type procStat struct {
	PeakRSSKiB int64   `json:"peakRSSKiB"` // VmHWM
	RSSKiB     int64   `json:"rssKiB"`     // VmRSS
	CPUSeconds float64 `json:"cpuSeconds"` // utime + stime
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports (the kernel's ABI, whatever
// its internal HZ).
const clockTicks = 100

func readProc(pid int) (procStat, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStat{}, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProc(string(status), string(stat))
}

// parseProc reads VmHWM and VmRSS from /proc/PID/status and utime and
// stime (fields 14 and 15) from /proc/PID/stat.
func parseProc(status, stat string) (procStat, error) {
	var p procStat
	for _, line := range strings.Split(status, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmHWM":
			p.PeakRSSKiB = n
		case "VmRSS":
			p.RSSKiB = n
		}
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return p, fmt.Errorf("/proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return p, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return p, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	p.CPUSeconds = float64(ticks) / clockTicks
	if p.PeakRSSKiB == 0 {
		return p, fmt.Errorf("/proc status: no VmHWM")
	}
	return p, nil
}

// counts are request counters by a label (verb or method).
type counts map[string]float64

// top is the n largest counts, largest first, as "KEY: N".
func (c counts) top(n int) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c[a] != c[b] {
			if c[a] > c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	if len(keys) > n {
		keys = keys[:n]
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s: %.0f", strings.Join(strings.Fields(k), " "), c[k])
	}
	return out
}

func (c counts) total() float64 {
	var n float64
	for _, v := range c {
		n += v
	}
	return n
}

// minus is c - before, keeping only labels that changed.
func (c counts) minus(before counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range before {
		if _, ok := c[k]; !ok && v != 0 {
			out[k] = -v
		}
	}
	return out
}

// sumBy sums the samples of one counter in Prometheus text by the values
// of labels (joined by spaces).
func sumBy(text, metric string, labels ...string) (counts, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := counts{}
	fam, ok := families[metric]
	if !ok {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		vals := make([]string, len(labels))
		for _, l := range m.GetLabel() {
			if i := slices.Index(labels, l.GetName()); i >= 0 {
				vals[i] = l.GetValue()
			}
		}
		key := strings.Join(vals, " ")
		switch {
		case m.GetCounter() != nil:
			out[key] += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			out[key] += m.GetUntyped().GetValue()
		}
	}
	return out, nil
}

// sample is one reading of the counters and of the process.
type sample struct {
	At        time.Time `json:"at"`
	APIServer counts    `json:"apiserver"` // apiserver_request_total by verb
	// APIServerBy is apiserver_request_total by verb, code, group and
	// resource, to see where requests go.
	APIServerBy counts    `json:"-"`
	Own         counts    `json:"own"` // the operator's client requests by verb/method
	Proc        *procStat `json:"proc,omitempty"`
}

// scraper reads the API server's and an operator's metrics.
type scraper struct {
	kube kubernetes.Interface
	http *http.Client
	dir  string // where raw snapshots go
}

func newScraper(kube kubernetes.Interface, dir string) *scraper {
	return &scraper{kube: kube, dir: dir, http: &http.Client{
		Timeout: 10 * time.Second,
		// virt-operator serves its metrics over TLS with a certificate of
		// its own; this is loopback and only read.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec
	}}
}

// take reads the API server's request counter, the operator's own client
// counter (when op is not nil) and its /proc, saving the raw metrics as
// NAME.apiserver.prom and NAME.operator.prom.
func (s *scraper) take(ctx context.Context, name string, op *operatorProcess) (sample, error) {
	smp := sample{At: time.Now()}
	raw, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return smp, fmt.Errorf("API server metrics: %w", err)
	}
	_ = os.WriteFile(fmt.Sprintf("%s/%s.apiserver.prom", s.dir, name), raw, 0o644)
	if smp.APIServer, err = sumBy(string(raw), "apiserver_request_total", "verb"); err != nil {
		return smp, err
	}
	if smp.APIServerBy, err = sumBy(string(raw), "apiserver_request_total", "verb", "code", "group", "resource", "subresource"); err != nil {
		return smp, err
	}
	if op == nil {
		return smp, nil
	}
	text, err := s.get(ctx, op.metricsURL)
	if err != nil {
		return smp, fmt.Errorf("%s metrics: %w", op.name, err)
	}
	_ = os.WriteFile(fmt.Sprintf("%s/%s.operator.prom", s.dir, name), []byte(text), 0o644)
	if smp.Own, err = sumBy(text, op.requestMetric, op.requestLabel); err != nil {
		return smp, err
	}
	p, err := readProc(op.cmd.Process.Pid)
	if err != nil {
		return smp, fmt.Errorf("%s: %w", op.name, err)
	}
	smp.Proc = &p
	return smp, nil
}

func (s *scraper) get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
