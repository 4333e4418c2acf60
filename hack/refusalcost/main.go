// Command refusalcost measures what refusing the worst input found for
// each untrusted entry point costs (issue 39: a refusal of any input up to
// 1 MiB compressed costs at most 256 MB of peak RSS and 10 s of CPU). Each
// refusal runs in a child process of its own, which measures the bytes it
// allocates, its CPU time and its peak RSS (VmHWM, reset just before) over
// the refusal alone; the input is built by the parent and read by the
// child before the measurement starts. It prints a table and exits
// non-zero when an input is not refused or a refusal passes the bound.
//
//	go run ./hack/refusalcost          (make refusal-cost)
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/helmrelease"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// The bound of issue 39.
const (
	maxRSS = 256 << 20
	maxCPU = 10 * time.Second
)

// entry is one entry point and the worst input found for it: build makes
// the input (in the parent), refuse reads and refuses it (in the child;
// reg is the parent's loopback registry).
type entry struct {
	name, input string
	build       func(reg string) ([]byte, error)
	prepare     func(input []byte, reg string) (func() error, error)
}

// documents is a text of n bytes of empty documents: the 160 KB
// ConfigMap that cost 5 GB.
func documents(n int) []byte { return bytes.Repeat([]byte("---\nkind: A\n"), n/12) }

var id = strategy.Identity{Version: "v1", Registry: "example.com", Identifier: "id-v1"}

// lyingCM is a strategy ConfigMap of text that records another text's
// digest (so whatever admits it by that digest decodes it before the
// digest of the text refuses it).
func lyingCM(text []byte, name string) ([]byte, error) {
	cm, err := codec.EncodeText(text, codec.EncodeOptions{Namespace: "ns", Name: name, Identity: id})
	if err != nil {
		return nil, err
	}
	cm.Annotations[metakeys.DigestAnnotation] = codec.Digest([]byte("another text"))
	return json.Marshal(cm)
}

func readCM(input []byte) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, json.Unmarshal(input, cm)
}

// bomb is gzip of n zero bytes with a trailer claiming claim bytes.
func bomb(n int, claim uint32) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= len(chunk) {
		_, _ = zw.Write(chunk[:min(left, len(chunk))])
	}
	_ = zw.Close()
	out := buf.Bytes()
	binary.LittleEndian.PutUint32(out[len(out)-4:], claim)
	return out
}

// tarGz packs files (name, size of zeros) under dir/.
func tarGz(dir string, files map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for n, data := range files {
		_ = tw.WriteHeader(&tar.Header{Name: dir + "/" + n, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(data)
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

var entries = []entry{
	{
		name: "ConfigMap (gate, pinned to another digest)", input: "64 MiB of empty documents, recording the pinned digest",
		build: func(string) ([]byte, error) { return lyingCM(documents(int(codec.DefaultMaxDecodedBytes)), "s") },
		prepare: func(input []byte, _ string) (func() error, error) {
			cm, err := readCM(input)
			pinned := cm.Annotations[metakeys.DigestAnnotation]
			return func() error { _, err := trust.Gate{Policy: trust.Policy{Pinned: pinned}}.Open(cm); return err }, err
		},
	},
	{
		name: "ConfigMap (gate, unsigned, keys trusted)", input: "64 MiB of empty documents, no signature",
		build: func(string) ([]byte, error) { return lyingCM(documents(int(codec.DefaultMaxDecodedBytes)), "s") },
		prepare: func(input []byte, _ string) (func() error, error) {
			cm, err := readCM(input)
			key, _ := trust.GenerateKey()
			var ring trust.KeyRing
			_ = ring.Add("release", key.Public())
			return func() error { _, err := trust.Gate{Policy: trust.Policy{Keys: &ring}}.Open(cm); return err }, err
		},
	},
	{
		name: "gzip, lying trailer (codec.Gunzip)", input: "gzip of 1 GiB of zeros, trailer claiming the limit",
		build: func(string) ([]byte, error) { return bomb(1<<30, uint32(codec.DefaultMaxDecodedBytes)), nil },
		prepare: func(input []byte, _ string) (func() error, error) {
			return func() error { _, err := codec.Gunzip(input, 0); return err }, nil
		},
	},
	{
		name: "chunk set (store.Assemble)", input: "a head listing one chunk 15,000 times",
		build: func(string) ([]byte, error) {
			var list []string
			for range 15000 {
				list = append(list, `{"name":"c","size":10,"digest":"sha256:00"}`)
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Annotations: map[string]string{
				metakeys.ChunksAnnotation: "[" + strings.Join(list, ",") + "]", metakeys.DigestAnnotation: codec.Digest(nil)}}}
			return json.Marshal(cm)
		},
		prepare: func(input []byte, _ string) (func() error, error) {
			head, err := readCM(input)
			chunk := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Data: map[string]string{store.ChunkKey: "0123456789"}}
			return func() error { _, err := store.Assemble(head, []*corev1.ConfigMap{chunk}); return err }, err
		},
	},
	{
		name: "OCI manifest (oci.Client.Pull)", input: "a 64 MiB manifest, streamed",
		build: func(string) ([]byte, error) { return nil, nil },
		prepare: func(_ []byte, reg string) (func() error, error) {
			c, err := oci.New(oci.Options{})
			return func() error { _, err := c.Pull(context.Background(), "oci://"+reg+"/acme/huge:v1"); return err }, err
		},
	},
	{
		name: "OCI layer (oci.Client.Pull)", input: "1 MiB layer: gzip of 1 GiB of zeros",
		build: func(reg string) ([]byte, error) {
			return nil, putArtifact(reg+"/acme/bomb:v1", bomb(1<<30, 0))
		},
		prepare: func(_ []byte, reg string) (func() error, error) {
			c, err := oci.New(oci.Options{})
			return func() error { _, err := c.Pull(context.Background(), "oci://"+reg+"/acme/bomb:v1"); return err }, err
		},
	},
	{
		name: "OCI signatures (oci.Client.Signatures)", input: "51 signatures of 16 KiB",
		build: func(reg string) ([]byte, error) {
			c, err := oci.New(oci.Options{})
			if err != nil {
				return nil, err
			}
			var sigs []oci.Signature
			for i := range oci.MaxSignatures + 1 {
				sigs = append(sigs, oci.Signature{Payload: fmt.Appendf(nil, "%d%s", i, bytes.Repeat([]byte(" "), 16<<10)), Signature: "c2ln"})
			}
			return nil, c.AddSignatures(context.Background(), reg+"/acme/sigs", "sha256:"+strings.Repeat("0", 64), sigs)
		},
		prepare: func(_ []byte, reg string) (func() error, error) {
			c, err := oci.New(oci.Options{})
			a := &oci.Artifact{Repository: reg + "/acme/sigs", Digest: "sha256:" + strings.Repeat("0", 64)}
			return func() error { _, err := c.Signatures(context.Background(), a); return err }, err
		},
	},
	{
		name: "chart archive, bomb (render.LoadArchive)", input: "three nested archives of 16 MiB each",
		build: func(string) ([]byte, error) {
			var sub []byte
			for i := 2; i >= 0; i-- {
				files := map[string][]byte{"Chart.yaml": fmt.Appendf(nil, "apiVersion: v2\nname: c%d\nversion: 1.0.0\n", i), "files/zeros": make([]byte, 16<<20)}
				if sub != nil {
					files[fmt.Sprintf("charts/c%d.tgz", i+1)] = sub
				}
				sub = tarGz(fmt.Sprintf("c%d", i), files)
			}
			return sub, nil
		},
		prepare: func(input []byte, _ string) (func() error, error) {
			return func() error { _, err := render.LoadArchive("bomb", input); return err }, nil
		},
	},
	{
		name: "chart archive, under the bound (render.LoadArchive)", input: "31 MiB of files, no Chart.yaml (Helm loads it all, then refuses)",
		build: func(string) ([]byte, error) {
			files := map[string][]byte{}
			for i := range 31 {
				files[fmt.Sprintf("files/f%d", i)] = make([]byte, 1<<20-1024)
			}
			return tarGz("c", files), nil
		},
		prepare: func(input []byte, _ string) (func() error, error) {
			return func() error { _, err := render.LoadArchive("big", input); return err }, nil
		},
	},
	{
		name: "Helm release Secret (helmrelease.Find)", input: "base64 of gzip of 512 MiB of zeros, trailer claiming 32 MiB",
		build: func(string) ([]byte, error) {
			return []byte(base64.StdEncoding.EncodeToString(bomb(512<<20, helmrelease.MaxReleaseBytes))), nil
		},
		prepare: func(input []byte, _ string) (func() error, error) {
			kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.r.v1", Namespace: "ns",
				Labels: map[string]string{"owner": "helm", "name": "r", "status": "deployed", "version": "1"}},
				Type: metakeys.HelmReleaseSecretType, Data: map[string][]byte{"release": input}})
			return func() error { _, err := helmrelease.Find(context.Background(), kube, "ns", "r"); return err }, nil
		},
	},
	{
		name: "history revision (history.OpenRevision)", input: "64 MiB of empty documents, recording the anchored digest",
		build: func(string) ([]byte, error) {
			return lyingCM(documents(int(codec.DefaultMaxDecodedBytes)), "installstrategy-revision-r-1")
		},
		prepare: func(input []byte, _ string) (func() error, error) {
			cm, err := readCM(input)
			a := history.Anchored{Revision: 1, Digest: cm.Annotations[metakeys.DigestAnnotation], Identity: id}
			return func() error { _, err := history.OpenRevision(cm, a, history.OpenOptions{}); return err }, err
		},
	},
}

// rawManifest is a manifest given as bytes, for remote.Put.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// putArtifact stores layer and a strategy manifest naming it at ref.
func putArtifact(ref string, layer []byte) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	l := static.NewLayer(layer, oci.LayerMediaType)
	if err := remote.WriteLayer(r.Context(), l); err != nil {
		return err
	}
	d, _ := l.Digest()
	cd, _ := static.NewLayer([]byte("{}"), oci.ConfigMediaType).Digest()
	m, _ := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: oci.ArtifactType,
		Config:      v1.Descriptor{MediaType: oci.ConfigMediaType, Size: 2, Digest: cd},
		Layers:      []v1.Descriptor{{MediaType: oci.LayerMediaType, Size: int64(len(layer)), Digest: d}},
		Annotations: map[string]string{metakeys.ProductAnnotation: "p", metakeys.VersionAnnotation: "v1", metakeys.DigestAnnotation: codec.Digest(nil)}})
	return remote.Put(r, rawManifest(m))
}

// serve runs a loopback registry whose acme/huge manifests are 64 MiB.
func serve() *httptest.Server {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/v2/acme/huge/manifests/") {
			h.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
		_, _ = io.WriteString(w, `{"schemaVersion":2,"annotations":{"a":"`)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for range (64 << 20) / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"}}`)
	}))
}

// result is what a child measured.
type result struct {
	Alloc    uint64        `json:"alloc"`
	CPU      time.Duration `json:"cpu"`
	PeakRSS  uint64        `json:"peakRSS"`
	Err      string        `json:"err"`
	Refused  bool          `json:"refused"`
	InputLen int           `json:"inputLen"`
}

func main() {
	child := flag.Int("child", -1, "run entry N and print its measurement (internal)")
	input := flag.String("input", "", "the input file of -child (internal)")
	reg := flag.String("registry", "", "the registry of -child (internal)")
	flag.Parse()
	if *child >= 0 {
		if err := measure(entries[*child], *input, *reg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "refusalcost:", err)
		os.Exit(1)
	}
}

func run() error {
	srv := serve()
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	dir, err := os.MkdirTemp("", "refusalcost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("%-52s | %-62s | %9s | %9s | %7s | %8s\n", "entry point", "worst input", "input", "alloc", "CPU", "peak RSS")
	fmt.Println(strings.Repeat("-", 52) + "-|-" + strings.Repeat("-", 62) + "-|-----------|-----------|---------|---------")
	failed := 0
	for i, e := range entries {
		in, err := e.build(reg)
		if err != nil {
			return fmt.Errorf("%s: build the input: %w", e.name, err)
		}
		path := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(path, in, 0o600); err != nil {
			return err
		}
		cmd := exec.Command(self, "-child", strconv.Itoa(i), "-input", path, "-registry", reg)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		size := fmt.Sprintf("%d KiB", (len(in)+1023)/1024)
		if len(in) == 0 {
			size = "served"
		}
		fmt.Printf("%-52s | %-62s | %9s | %6.1f MB | %5.2f s | %5.1f MB\n", e.name, e.input, size, float64(r.Alloc)/1e6, r.CPU.Seconds(), float64(r.PeakRSS)/1e6)
		switch {
		case !r.Refused:
			fmt.Printf("  NOT REFUSED: %s\n", r.Err)
			failed++
		case r.PeakRSS > maxRSS || r.CPU > maxCPU:
			fmt.Printf("  OVER THE BOUND (%d MB peak RSS, %s CPU)\n", maxRSS>>20, maxCPU)
			failed++
		}
		if len(in) > 1<<20 {
			fmt.Printf("  input over 1 MiB\n")
			failed++
		}
	}
	fmt.Printf("\nbound: a refusal of any input up to 1 MiB compressed costs at most %d MB of peak RSS and %s of CPU (issue 39);\n", maxRSS>>20, maxCPU)
	fmt.Println("each refusal measured in a child process of its own: alloc = bytes allocated, CPU = user+system, peak RSS = VmHWM reset before the refusal.")
	if failed > 0 {
		return fmt.Errorf("%d entries failed", failed)
	}
	return nil
}

// measure runs e's refusal of the input at path and prints its cost.
func measure(e entry, path, reg string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	refuse, err := e.prepare(in, reg)
	if err != nil {
		return err
	}
	var before, after runtime.MemStats
	var ru0, ru1 syscall.Rusage
	runtime.GC()
	resetPeak()
	runtime.ReadMemStats(&before)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	rerr := refuse()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	runtime.ReadMemStats(&after)
	r := result{Alloc: after.TotalAlloc - before.TotalAlloc, CPU: cpu(ru1) - cpu(ru0), PeakRSS: peak(ru1), InputLen: len(in)}
	if rerr != nil {
		r.Err = rerr.Error()
		r.Refused = true
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

func cpu(ru syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeak resets the process's peak RSS (VmHWM) to its current RSS.
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peak is VmHWM, or the rusage maximum where /proc has none.
func peak(ru syscall.Rusage) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				return kb << 10
			}
		}
	}
	return uint64(ru.Maxrss) << 10
}
