package oci

import (
	"context"
	"fmt"
)

// DefaultMaxTags bounds the tags Tags returns unless told otherwise.
const DefaultMaxTags = 1000

// Tags lists the tags of the repository ref names (oci://HOST/REPO, with
// or without a tag or digest), page by page, keeping at most max of them
// (0 means DefaultMaxTags); truncated says the registry listed more. Each
// page is bounded in bytes (MaxTagListBytes). What a registry lists is not
// trusted: a tag only says where to look, and what is found there is
// judged as any pull is.
func (c *Client) Tags(ctx context.Context, ref string, max int) (tags []string, truncated bool, err error) {
	r, repo, err := c.parse(ref, true)
	if err != nil {
		return nil, false, err
	}
	if r != nil {
		repo = r.Context()
	}
	if max <= 0 {
		max = DefaultMaxTags
	}
	lister, err := c.puller.Lister(ctx, repo)
	if err != nil {
		return nil, false, refError(ref, "list tags", err)
	}
	for lister.HasNext() {
		page, err := lister.Next(ctx)
		if err != nil {
			return nil, false, refError(ref, "list tags", err)
		}
		for _, t := range page.Tags {
			if len(tags) == max {
				return tags, true, nil
			}
			tags = append(tags, t)
		}
	}
	return tags, false, nil
}

// Repository is ref without its tag or digest, as an oci:// reference.
func (c *Client) Repository(ref string) (string, error) {
	r, repo, err := c.parse(ref, true)
	if err != nil {
		return "", err
	}
	if r != nil {
		repo = r.Context()
	}
	return Scheme + repo.Name(), nil
}

// WithTag is ref's repository at tag.
func (c *Client) WithTag(ref, tag string) (string, error) {
	repo, err := c.Repository(ref)
	if err != nil {
		return "", err
	}
	out := repo + ":" + tag
	if _, err := c.Parse(out); err != nil {
		return "", fmt.Errorf("tag %q: %w", tag, err)
	}
	return out, nil
}
