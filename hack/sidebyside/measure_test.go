package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProc(t *testing.T) {
	status := "Name:\tvirt-operator\nVmPeak:\t 2000000 kB\nVmHWM:\t  257024 kB\nVmRSS:\t  250000 kB\nThreads:\t12\n"
	// A command name with a space and a parenthesis, as the kernel allows.
	stat := "4242 (virt op) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 737 163 0 0 20 0 12 0 100 2000000 62500"
	p, err := parseProc(status, stat)
	if err != nil {
		t.Fatal(err)
	}
	if p.PeakRSSKiB != 257024 || p.RSSKiB != 250000 {
		t.Errorf("RSS: got %+v", p)
	}
	if p.CPUSeconds != 9.0 {
		t.Errorf("CPU: got %v s, want 9 (737+163 ticks)", p.CPUSeconds)
	}
	if _, err := parseProc("Name:\tx\n", stat); err == nil {
		t.Error("no VmHWM: no error")
	}
	if _, err := parseProc(status, "4242 (x) S 1"); err == nil {
		t.Error("short stat: no error")
	}
}

func TestReadOwnProc(t *testing.T) {
	p, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.PeakRSSKiB <= 0 || p.PeakRSSKiB < p.RSSKiB {
		t.Errorf("got %+v", p)
	}
}

func TestSumByAndMinus(t *testing.T) {
	before := `# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 10
rest_client_requests_total{code="404",host="127.0.0.1:6443",method="GET"} 2
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 5
# TYPE other_total counter
other_total 99
`
	after := strings.ReplaceAll(before, `method="POST"} 5`, `method="POST"} 8`) +
		"rest_client_requests_total{code=\"200\",host=\"127.0.0.1:6443\",method=\"PUT\"} 1\n"
	// The appended sample follows another family; put it with its own.
	after = strings.Replace(after, "# TYPE other_total counter\nother_total 99\nrest_client", "rest_client", 1) + "# TYPE other_total counter\nother_total 99\n"
	a, err := sumBy(before, "rest_client_requests_total", "method")
	if err != nil {
		t.Fatal(err)
	}
	if a["GET"] != 12 || a["POST"] != 5 || a.total() != 17 {
		t.Errorf("before: %v", a)
	}
	b, err := sumBy(after, "rest_client_requests_total", "method")
	if err != nil {
		t.Fatal(err)
	}
	d := b.minus(a)
	if len(d) != 2 || d["POST"] != 3 || d["PUT"] != 1 || d.total() != 4 {
		t.Errorf("delta: %v", d)
	}
	none, err := sumBy(before, "kubevirt_rest_client_requests_total", "verb")
	if err != nil || len(none) != 0 {
		t.Errorf("absent metric: %v, %v", none, err)
	}
	if got := per30(counts{"GET": 20}, 60); got != 10 {
		t.Errorf("per30: %v", got)
	}
}

func TestReportRatios(t *testing.T) {
	vo := []phaseResult{{Side: sideVirtOperator, Phase: "install v1.9.0", Round: 1, TriggerToDone: 22, Own: counts{"CREATE": 300}, Settled: procStat{PeakRSSKiB: 250 << 10}}}
	us := []phaseResult{{Side: sideOurs, Phase: "install v1.9.0", Round: 1, TriggerToDone: 10, Own: counts{"POST": 330}, Settled: procStat{PeakRSSKiB: 100 << 10}}}
	g := goals(vo, us)
	for _, want := range []string{"faster to done: met (2.20x)", "fewer own requests: MISSED (1.10", "under half the peak RSS: met (0.40)"} {
		if !strings.Contains(g, want) {
			t.Errorf("goals %q: no %q", g, want)
		}
	}
	var sb strings.Builder
	printReport(&sb, &config{rounds: 1, nodes: 3, settle: 30 * time.Second}, append(vo, us...))
	if !strings.Contains(sb.String(), "0.45 (2.20x faster)") {
		t.Errorf("report has no time ratio:\n%s", sb.String())
	}

	// A third side gets its own column and ratio; the KubeVirt statuses
	// of virt-operator and the example are compared.
	vo[0].CRStatus = map[string]any{"phase": "Deployed"}
	ex := []phaseResult{{Side: sideExample, Phase: "install v1.9.0", Round: 1, TriggerToDone: 11, Own: counts{"POST": 360}, Settled: procStat{PeakRSSKiB: 150 << 10},
		CRStatus: map[string]any{"phase": "Deployed"}}}
	sb.Reset()
	printReport(&sb, &config{rounds: 1, nodes: 3, settle: 30 * time.Second}, append(append(ex, us...), vo...))
	head := ""
	for _, line := range strings.Split(sb.String(), "\n") {
		if strings.Contains(line, "ours/vo") {
			head = line
		}
	}
	if f := strings.Fields(head); len(f) != 5 || f[0] != sideVirtOperator || f[1] != sideOurs || f[2] != sideExample || f[4] != "example/vo" {
		t.Errorf("heading %q: want the sides in report order, then ours/vo and example/vo", head)
	}
	for _, want := range []string{"0.45 (2.20x faster)  0.50 (2.00x faster)", "example: goals", "1 of 1 fields equal"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("report has no %q:\n%s", want, sb.String())
		}
	}
}

func TestRotate(t *testing.T) {
	sides := []string{"a", "b", "c"}
	for n, want := range []string{"a b c", "b c a", "c a b", "a b c"} {
		if got := strings.Join(rotate(sides, n), " "); got != want {
			t.Errorf("rotate(%d) = %q, want %q", n, got, want)
		}
	}
	if strings.Join(sides, " ") != "a b c" {
		t.Errorf("rotate changed its input: %v", sides)
	}
	if rotate(nil, 1) != nil {
		t.Error("rotate(nil) is not nil")
	}
}
