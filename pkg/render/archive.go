package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	"helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/loader"

	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Bounds of a chart archive, checked before Helm's loader reads a byte of
// it. Helm's own loader allows 100 MiB of files per archive, and as much
// again for every subchart archive inside it, each buffered whole.
const (
	// MaxArchiveBytes bounds the decompressed bytes of a chart archive:
	// its tar stream (headers included) and those of every archive
	// nested in it, counted together.
	MaxArchiveBytes = 32 << 20
	// maxArchiveDepth bounds how deep archives nest (a chart's subchart
	// archive is depth 1).
	maxArchiveDepth = 8
)

// errArchiveBudget ends a check whose decompressed bytes passed the bound.
var errArchiveBudget = errors.New("decompressed bytes over the bound")

// CheckArchive reads a chart archive (.tgz) as a stream, keeping none of
// it, and refuses it, with a *trust.RefusedError at step "size", when its
// decompressed bytes (every nested .tgz opened and counted in the same
// total) pass MaxArchiveBytes or archives nest deeper than
// maxArchiveDepth. It costs the gzip and tar readers of each level, not
// the archive's size. A malformed archive is not its business: Helm's
// loader says what is wrong with it.
func CheckArchive(archive []byte) error {
	budget := int64(MaxArchiveBytes)
	return checkArchive(bytes.NewReader(archive), "", 0, &budget)
}

func checkArchive(r io.Reader, where string, depth int, budget *int64) error {
	if depth > maxArchiveDepth {
		return &trust.RefusedError{Step: "size", Err: fmt.Errorf("%w: archives in the chart archive nest deeper than %d (at %s)", trust.ErrTooLarge, maxArchiveDepth, strings.TrimPrefix(where, "/"))}
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil
	}
	defer zr.Close()
	tr := tar.NewReader(&budgetReader{r: zr, left: budget})
	for {
		hd, err := tr.Next()
		if *budget < 0 {
			// However the readers above wrap errArchiveBudget.
			return tooLarge()
		}
		if err != nil {
			return nil // the end, or malformed: Helm's loader says which
		}
		if hd.Typeflag != tar.TypeReg || !strings.HasSuffix(hd.Name, ".tgz") {
			continue // tr.Next reads past it, counted
		}
		if err := checkArchive(tr, where+"/"+hd.Name, depth+1, budget); err != nil {
			return err
		}
		if *budget < 0 {
			return tooLarge()
		}
	}
}

func tooLarge() error {
	return &trust.RefusedError{Step: "size", Err: fmt.Errorf("%w: chart archive decompresses to more than %d bytes", trust.ErrTooLarge, MaxArchiveBytes)}
}

// budgetReader counts what it reads against a budget shared by every
// level of a check.
type budgetReader struct {
	r    io.Reader
	left *int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if *b.left < 0 {
		return 0, errArchiveBudget
	}
	if int64(len(p)) > *b.left+1 {
		p = p[:*b.left+1]
	}
	n, err := b.r.Read(p)
	*b.left -= int64(n)
	if *b.left < 0 {
		return n, errArchiveBudget
	}
	return n, err
}

// LoadArchive is the one way a chart archive reaches Helm's loader:
// CheckArchive first, then loader.LoadArchive. name names the chart in
// errors.
func LoadArchive(name string, archive []byte) (chart.Charter, error) {
	if err := CheckArchive(archive); err != nil {
		return nil, fmt.Errorf("load chart %s: %w", name, err)
	}
	loaded, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", name, err)
	}
	return loaded, nil
}
