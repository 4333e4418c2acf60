package source

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// GivenByUser is the VerifiedBy of a local input (a file, standard input,
// a kustomization): whoever runs the command vouches for what they give.
const GivenByUser = "given by the user"

// File is a manifests text or strategy ConfigMaps in a file ("-":
// standard input) the user gave: bounded in size, then read as
// codec.ParseInput reads it (a ConfigMap's decode bounded and checked
// against its recorded digest). Load returns the input's one strategy;
// Input, for a caller that picks among several ConfigMaps, stops before
// the ConfigMaps are decoded.
type File struct {
	Path  string
	Stdin io.Reader
	// MaxBytes bounds the file; 0 means codec.DefaultMaxDecodedBytes.
	MaxBytes int
	Decode   codec.DecodeOptions
	Parse    strategy.ParseOptions
}

// Name is how the input is named in errors.
func (f File) Name() string {
	if f.Path == "-" {
		return "standard input"
	}
	return f.Path
}

// Input reads and bounds the file and tells its strategies from its
// other objects.
func (f File) Input() (*codec.Input, error) {
	data, err := f.Bytes()
	if err != nil {
		return nil, err
	}
	return codec.ParseInput(f.Name(), data, f.Parse)
}

// Bytes reads the file, at most one byte more than its bound: a larger
// one is refused at the "size" step having cost no more than that. For a
// caller that parses the text its own way (the plugin's encode).
func (f File) Bytes() ([]byte, error) {
	max := f.MaxBytes
	if max <= 0 {
		max = codec.DefaultMaxDecodedBytes
	}
	r := f.Stdin
	if f.Path != "-" {
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, fmt.Errorf("read %w", err)
		}
		defer fh.Close()
		r = fh
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if len(data) > max {
		return nil, &trust.RefusedError{Step: "size", Err: fmt.Errorf("%w: %s is more than %d bytes, the bound", trust.ErrTooLarge, f.Name(), max)}
	}
	return data, nil
}

// Load implements Source.
func (f File) Load(context.Context) (*Loaded, error) {
	in, err := f.Input()
	if err != nil {
		return nil, err
	}
	l, err := codec.LoadInput(in, f.Decode, f.Parse)
	if err != nil {
		return nil, err
	}
	return &Loaded{Strategy: l.Strategy, Text: l.Text, Digest: codec.Digest(l.Text), VerifiedBy: GivenByUser,
		From: "file " + f.Name(), Warnings: l.Warnings, Info: l.Info}, nil
}

// Kustomize is a kustomization folder the user gave, built as kubectl
// kustomize builds it; the built text is bounded before it is parsed.
type Kustomize struct {
	Dir string
	// Build is pkg/render/kustomize.Build. It is passed in, not linked
	// here: kustomize's libraries would add text/template to the
	// operator, which loads through this package too.
	Build func(dir string) ([]byte, error)
	// MaxBytes bounds the built text; 0 means codec.DefaultMaxDecodedBytes.
	MaxBytes int
	Parse    strategy.ParseOptions
}

// Load implements Source.
func (k Kustomize) Load(context.Context) (*Loaded, error) {
	text, err := k.Build(k.Dir)
	if err != nil {
		return nil, err
	}
	where := "kustomization " + k.Dir
	if err := bound(where, text, k.MaxBytes); err != nil {
		return nil, err
	}
	st, warnings, err := parse(where, text, k.Parse)
	if err != nil {
		return nil, err
	}
	return &Loaded{Strategy: st, Text: text, Digest: codec.Digest(text), VerifiedBy: GivenByUser, From: where, Warnings: warnings}, nil
}
