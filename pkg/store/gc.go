package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// GCResult says what GC deleted and kept.
type GCResult struct {
	// Kept is the strategy in use, nil when the namespace holds none for
	// the identity.
	Kept *Entry
	// Deleted are the strategies deleted, with their chunks.
	Deleted []Entry
	// OrphanChunks are the chunks deleted because no head listed them.
	OrphanChunks []string
	// Retained are the strategies kept because a history names them
	// (see GCKeeping).
	Retained []Entry
}

// GC deletes the strategies of a namespace other than the one in use, once
// the caller knows the target is rolled out: every strategy that does not
// match inUse, and older strategies that do (the one Find returns for inUse
// is never deleted). A strategy of another identity stored after the one in
// use, or in the same second, is kept: it is likely the next target,
// published before an Installation names it. Both forms count, since lookups consider both. It also
// deletes chunks that no head lists and that are older than
// OrphanChunkAge (left by a writer that stopped between its chunks and its
// head).
func (s *Store) GC(ctx context.Context, namespace string, inUse strategy.Identity) (*GCResult, error) {
	return s.GCKeeping(ctx, namespace, inUse, nil)
}

// Retain names a stored strategy GCKeeping keeps: its (head) ConfigMap
// and, when set, the digest it was recorded with. A ConfigMap of that name
// whose content has another digest (replaced since: tampered with) is not
// kept on that ground.
type Retain struct {
	Name   string
	Digest string
}

// GCKeeping is GC that also keeps the strategies keep names, with their
// chunks: the last revisions of the namespace's installations
// (pkg/history), so that they can be rolled back to.
func (s *Store) GCKeeping(ctx context.Context, namespace string, inUse strategy.Identity, keep []Retain) (*GCResult, error) {
	if inUse.Identifier == "" && inUse.Version == "" {
		return nil, errors.New("gc strategies: no identity in use given")
	}
	all, err := s.list(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("gc strategies: %w", err)
	}
	res := &GCResult{}
	// The one kept: the newest trusted match, else (nothing trusted
	// matches, e.g. a strategy accepted by a pinned digest) the newest
	// match.
	retained := func(e Entry) bool {
		return slices.ContainsFunc(keep, func(r Retain) bool { return r.Name == e.Name && (r.Digest == "" || r.Digest == e.Digest) })
	}
	inUseAt := -1
	for i, l := range all {
		if l.Matches(inUse) && (s.opts.Trusted == nil || s.opts.Trusted(l.Entry) == nil) {
			inUseAt = i
			break
		}
	}
	if inUseAt < 0 {
		inUseAt = slices.IndexFunc(all, func(l listed) bool { return l.Matches(inUse) })
	}
	listedChunks := map[string]bool{}
	var errs []error
	var kept *Entry
	if inUseAt >= 0 {
		e := all[inUseAt].Entry
		kept = &e
	}
	for i, l := range all {
		for _, c := range l.Chunks {
			listedChunks[c.Name] = true
		}
		if i == inUseAt {
			res.Kept = kept
			continue
		}
		if retained(l.Entry) {
			res.Retained = append(res.Retained, l.Entry)
			continue
		}
		if kept != nil && !l.Matches(inUse) && !l.Entry.Created.Before(kept.Created) {
			// Another strategy stored after the one in use (or in the
			// same second: creationTimestamp has 1 s resolution): likely
			// the next target, published before an Installation names
			// it. (Other copies of the one in use still go.)
			continue
		}
		if err := s.Delete(ctx, l.Entry); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Deleted = append(res.Deleted, l.Entry)
	}
	chunks, err := s.listMeta(ctx, namespace, metakeys.ChunkLabel)
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("gc strategies: %w", err))...)
	}
	now := s.opts.Clock.Now()
	for _, lc := range chunks {
		c := lc.meta
		if listedChunks[c.Name] || now.Sub(c.CreationTimestamp.Time) < s.opts.OrphanChunkAge {
			continue
		}
		uid := c.UID
		if err := s.Delete(ctx, Entry{Namespace: namespace, Name: c.Name, UID: uid}); err != nil {
			errs = append(errs, err)
			continue
		}
		res.OrphanChunks = append(res.OrphanChunks, c.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("gc strategies in %s: %w", namespace, err)
	}
	return res, nil
}
