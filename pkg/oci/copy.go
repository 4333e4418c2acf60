package oci

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Copied describes a copy.
type Copied struct {
	// Reference is the copy's REPOSITORY@DIGEST (the source's digest).
	Reference string
	// Digest is the artifact's digest, the same in both registries.
	Digest string
	// Signatures is how many signatures were copied with it.
	Signatures int
}

// Copy copies the strategy artifact at src to dst, byte for byte (the
// digest stays, so signatures and pinned digests stay valid), and its
// signatures with it. dst names a tag, or only a repository
// (oci://HOST/REPO), which takes src's tag. Only strategy artifacts are
// copied: anything else is refused before a byte is written.
func (c *Client) Copy(ctx context.Context, src, dst string) (Copied, error) {
	sr, err := c.Parse(src)
	if err != nil {
		return Copied{}, err
	}
	dr, err := c.parseDestination(dst, sr)
	if err != nil {
		return Copied{}, err
	}
	opts := c.remote(ctx)
	desc, err := remote.Get(sr, opts...)
	if err != nil {
		return Copied{}, refError(src, "pull manifest", err)
	}
	if _, err := strategyManifest(desc); err != nil {
		return Copied{}, fmt.Errorf("%s: %w", src, err)
	}
	img, err := desc.Image()
	if err != nil {
		return Copied{}, refError(src, "pull", err)
	}
	if err := remote.Write(dr, img, opts...); err != nil {
		return Copied{}, refError(dst, "push", err)
	}
	digest := desc.Digest.String()
	a := &Artifact{Repository: sr.Context().String(), Digest: digest}
	sigs, err := c.Signatures(ctx, a)
	if err != nil {
		return Copied{}, err
	}
	if len(sigs) > 0 {
		if err := c.AddSignatures(ctx, dr.Context().String(), digest, sigs); err != nil {
			return Copied{}, err
		}
	}
	return Copied{Reference: dr.Context().Digest(digest).String(), Digest: digest, Signatures: len(sigs)}, nil
}

// parseDestination parses dst; a bare repository takes src's tag (or,
// for a digest source, is written by digest only).
func (c *Client) parseDestination(dst string, src name.Reference) (name.Reference, error) {
	r, repo, err := c.parse(dst, true)
	if err != nil || r != nil {
		return r, err
	}
	if t, ok := src.(name.Tag); ok {
		return repo.Tag(t.TagStr()), nil
	}
	return repo.Digest(src.Identifier()), nil
}
