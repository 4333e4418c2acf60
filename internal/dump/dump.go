// Package dump is the logic of the operator's --dump-install-strategy mode:
// read the target configuration, generate the strategy of the operator's
// own product for it, and publish it through the store unless an intact
// copy for the same identifier is already there.
package dump

import (
	"context"
	"errors"
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Generator builds a product's strategy for a configuration.
type Generator func(cfg *identity.Config, alg identity.Algorithm) (*strategy.Strategy, error)

// Sample generates the built-in sample product.
func Sample(cfg *identity.Config, alg identity.Algorithm) (*strategy.Strategy, error) {
	return generate.Sample(cfg, generate.Options{Algorithm: alg})
}

// Options of Run. Store is required.
type Options struct {
	// ConfigJSON is the target configuration (the identity.EnvVar value).
	ConfigJSON []byte
	// Store publishes the strategy.
	Store *store.Store
	// Generate builds the strategy; nil means Sample.
	Generate Generator
	// OwnVersion is the operator's own version; "" (a development build)
	// dumps any version the configuration asks for. A configuration
	// without a version gets OwnVersion.
	OwnVersion string
}

// Result says what Run published.
type Result struct {
	Identity strategy.Identity
	// Entry is the stored strategy (published now or found).
	Entry store.Entry
	// Published is false when an intact copy was already stored.
	Published bool
	// Objects is the number of objects in the strategy.
	Objects int
	// Digest is the "sha256:" digest of the strategy's text: what the dump
	// Job's container reports in its termination message, so the operator
	// accepts exactly that strategy (see TerminationLog).
	Digest string
}

// TerminationLog is where a container's termination message goes (the
// kubelet's default terminationMessagePath).
const TerminationLog = "/dev/termination-log"

// Run dumps the strategy of a configuration. The configuration's recorded
// id, when present, must be what one of the identity algorithms computes,
// and that algorithm names the strategy.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if len(opts.ConfigJSON) == 0 {
		return nil, fmt.Errorf("dump strategy: no configuration (set %s)", identity.EnvVar)
	}
	if opts.Store == nil {
		return nil, errors.New("dump strategy: no store")
	}
	gen := opts.Generate
	if gen == nil {
		gen = Sample
	}
	cfg, err := identity.ParseConfig(opts.ConfigJSON)
	if err != nil {
		return nil, fmt.Errorf("dump strategy: %s: %w", identity.EnvVar, err)
	}
	if cfg.Namespace == "" {
		return nil, fmt.Errorf("dump strategy: %s has no namespace", identity.EnvVar)
	}
	switch {
	case cfg.Version == "":
		cfg.Version = opts.OwnVersion
	case opts.OwnVersion != "" && cfg.Version != opts.OwnVersion:
		return nil, fmt.Errorf("dump strategy: this operator is version %s, the configuration asks for %s", opts.OwnVersion, cfg.Version)
	}
	if cfg.Version == "" {
		return nil, fmt.Errorf("dump strategy: %s has no version and this operator has none of its own", identity.EnvVar)
	}
	alg, err := cfg.Verify()
	if err != nil {
		return nil, fmt.Errorf("dump strategy: %w", err)
	}
	s, err := gen(cfg, alg)
	if err != nil {
		return nil, fmt.Errorf("dump strategy: %w", err)
	}
	if cfg.ID != "" && s.Identity.Identifier != cfg.ID {
		return nil, fmt.Errorf("dump strategy: generated identifier %s, the configuration records %s", s.Identity.Identifier, cfg.ID)
	}
	text, err := s.Serialize()
	if err != nil {
		return nil, fmt.Errorf("dump strategy: %w", err)
	}
	e, published, err := opts.Store.Ensure(ctx, cfg.Namespace, s)
	if err != nil {
		return nil, fmt.Errorf("dump strategy: %w", err)
	}
	return &Result{Identity: s.Identity, Entry: e, Published: published, Objects: len(s.Objects), Digest: codec.Digest(text)}, nil
}

// Product is the operator's built-in product (operator.Options.Product):
// the sample product with the native identifier.
func Product(cfg *identity.Config) (*strategy.Strategy, error) {
	return Sample(cfg, identity.Native)
}
