package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// clusterTrust is the trust decision of a verb that acts on a strategy
// others may have written: one read from the cluster (cm/NAME), which
// anyone who may edit ConfigMaps of the namespace may have written, digest
// included, or an artifact pulled by tag (oci://REF:TAG), which anyone who
// may push to the repository or move the tag may have. It is read through
// trust.Gate (a ConfigMap) or its cosign signatures are checked (an
// artifact), and must be signed by one of the user's keys (--key), unless
// the user takes it as it is (--allow-unsigned). An artifact pulled by
// digest (oci://REF@sha256:...) is pinned by the user and needs neither.
//
// A verb that writes nothing (plan, diff) has an optional clusterTrust:
// --key checks the signature when given; without it the strategy is read
// as it is, and a line on standard error says it was not verified.
type clusterTrust struct {
	keys          []string
	allowUnsigned bool
	optional      bool
}

// addClusterTrust adds --key and --allow-unsigned to a verb that acts on
// cm/NAME or oci://; the verb sets options.clusterTrust to the result when
// it runs.
func addClusterTrust(cmd *cobra.Command) *clusterTrust {
	t := &clusterTrust{}
	cmd.Flags().StringArrayVar(&t.keys, "key", nil, "PEM public key file (e.g. cosign.pub; repeatable: any of them) whose signature a strategy read from the cluster (cm/NAME) or pulled by tag (oci://) must carry, checked before it is parsed")
	cmd.Flags().BoolVar(&t.allowUnsigned, "allow-unsigned", false, "take a strategy read from the cluster (cm/NAME) or pulled by tag (oci://) without a signature: any ConfigMap editor of the namespace, or anyone who may push to the repository, may have written it")
	return t
}

// addOptionalClusterTrust adds --key to a verb that writes nothing: with
// it, a strategy read from the cluster or pulled by tag must be signed by
// one of the keys, as for apply; without it, it is read unverified.
func addOptionalClusterTrust(cmd *cobra.Command) *clusterTrust {
	t := &clusterTrust{optional: true}
	cmd.Flags().StringArrayVar(&t.keys, "key", nil, "PEM public key file (repeatable: any of them) whose signature a strategy read from the cluster (cm/NAME) or pulled by tag (oci://) must carry, checked before it is parsed (default: read it unverified, and say so)")
	return t
}

// unverified reports what to do with a strategy at where without --key:
// read it as it is (err nil) and, once read, print say on standard error;
// or the refusal; or errKeyGiven, to check its signature.
func (t *clusterTrust) unverified(where, writers string) (say string, err error) {
	switch {
	case len(t.keys) > 0 && t.allowUnsigned:
		return "", usageError(errors.New("--allow-unsigned takes a strategy without a signature; --key requires one: give one of them"))
	case len(t.keys) > 0:
		return "", errKeyGiven
	case t.allowUnsigned:
		return fmt.Sprintf("warning: %s is taken without a signature (--allow-unsigned): %s may have written it\n", where, writers), nil
	case t.optional:
		return fmt.Sprintf("note: %s is not verified (give --key to check its signature): %s may have written it\n", where, writers), nil
	}
	return "", fmt.Errorf("%s: %s may have written it: give --key with the public key it must be signed by (see sign, verify --key), or --allow-unsigned to take it as it is", where, writers)
}

// readAsIs reads a strategy unverified and, once it is read, prints say.
func readAsIs(o *options, say string, read func() (*codec.Loaded, error)) (*codec.Loaded, error) {
	l, err := read()
	if err == nil {
		fmt.Fprint(o.streams.ErrOut, say)
	}
	return l, err
}

// repositoryWriters says who may have written an artifact pulled by tag.
func repositoryWriters(r name.Reference) string {
	return "anyone who may push to " + r.Context().String() + " or move its tag"
}

// errKeyGiven tells unverified's caller to check the signature.
var errKeyGiven = errors.New("verify with --key")

// load reads the stored strategy e through the gate: the head's metadata
// is judged (a signature by a key of --key over the recorded digest)
// before any chunk is fetched or anything decoded, the decode is bounded,
// and the text's own digest is judged again before it is parsed.
func (t *clusterTrust) load(ctx context.Context, o *options, c *cluster, e store.Entry) (*codec.Loaded, error) {
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	switch say, err := t.unverified("configmap "+e.String(), configMapWriters(e)); {
	case err == nil:
		return readAsIs(o, say, func() (*codec.Loaded, error) { return c.loadUnverified(ctx, dopts, e) })
	case !errors.Is(err, errKeyGiven):
		return nil, err
	}
	ring, err := readKeyRing(t.keys)
	if err != nil {
		return nil, err
	}
	src := source.ConfigMap{Reader: c.store, Entry: e, Gate: trust.Gate{Policy: trust.Policy{Keys: ring}, Decode: dopts}}
	l, err := src.Load(ctx)
	if err != nil {
		if errors.As(err, new(*store.CorruptError)) {
			return nil, err // it names the configmap
		}
		return nil, fmt.Errorf("configmap %s: %w", e, err)
	}
	fmt.Fprintf(o.streams.ErrOut, "configmap %s: %s\n", e, l.VerifiedBy)
	return loadedFrom(l), nil
}

// pull pulls the artifact ref names and decides its trust before its text
// is parsed: a reference by digest is pinned by the user; one by tag must
// carry a cosign signature by a key of --key whose statement binds it to
// the product (the repository's last path element) and to the identity the
// artifact claims, unless the user takes it as it is.
func (t *clusterTrust) pull(ctx context.Context, o *options, ref string) (*codec.Loaded, error) {
	c, r, err := o.ociRef(ref)
	if err != nil {
		return nil, err
	}
	if _, pinned := r.(name.Digest); pinned {
		if len(t.keys) == 0 {
			l, _, err := o.pullStrategy(ctx, ref)
			return l, err
		}
	} else if say, err := t.unverified(ref, repositoryWriters(r)); err == nil {
		return readAsIs(o, say, func() (*codec.Loaded, error) {
			l, _, err := o.pullStrategy(ctx, ref)
			return l, err
		})
	} else if !errors.Is(err, errKeyGiven) {
		return nil, err
	}
	ring, err := readKeyRing(t.keys)
	if err != nil {
		return nil, err
	}
	pulled := false
	pull := func(ctx context.Context) (*oci.Artifact, []oci.Signature, error) {
		a, err := c.Pull(ctx, ref)
		if err != nil {
			return nil, nil, err
		}
		sigs, err := c.Signatures(ctx, a)
		pulled = err == nil
		return a, sigs, err
	}
	rem, err := o.ociRemote(pull)
	if err != nil {
		return nil, err
	}
	rem.Keys, rem.Expect = ring, trust.Expect{Product: oci.DefaultProduct(r)}
	l, err := source.OCI{Remote: rem}.Load(ctx)
	if err != nil {
		if pulled {
			err = fmt.Errorf("%s: %w", ref, err)
		}
		return nil, err
	}
	fmt.Fprintf(o.streams.ErrOut, "%s: %s for %s %s\n", ref, l.VerifiedBy, l.Statement.Product, l.Statement.Version)
	return loadedFrom(l), nil
}
