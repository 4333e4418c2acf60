package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/store"
)

// This file lists the versions a source can offer, for an upgrade path
// (pkg/upgradepath). A listing is never trusted: it only says which
// versions to look at, and each is then loaded through its source's trust
// gate as if the Installation (or the plugin's argument) had named it. A
// listing is bounded before it is read: a registry's tag pages
// (oci.Client.Tags), a Helm repository's index.yaml (MaxHelmIndexBytes,
// MaxListedVersions), the ConfigMaps of one namespace (the store's list).

// MaxListedVersions bounds the versions a listing returns; more is cut
// (Listing.Truncated).
const MaxListedVersions = 1000

// MaxHelmIndexBytes bounds the index.yaml of a Helm repository: the index
// is data from a server, read before anything in it is judged. Real
// indexes hold every chart of the repository (Bitnami's was over 20 MiB
// before it was split); 8 MiB holds a few thousand chart versions.
const MaxHelmIndexBytes = 8 << 20

// Listing is what a version lister found.
type Listing struct {
	// Versions are as the source spells them (a tag, a chart version, a
	// stored strategy's version), not yet judged.
	Versions []string
	// Truncated says why the list may be incomplete ("" when it is
	// whole): a refusal says so.
	Truncated string
}

// VersionLister lists the versions a source offers.
type VersionLister interface {
	Versions(ctx context.Context) (Listing, error)
}

// OCITags lists the tags of the repository Reference names.
type OCITags struct {
	Client    *oci.Client
	Reference string
	// Max bounds the tags (0: oci.DefaultMaxTags).
	Max int
	// Chart reads the tags as Helm chart versions: helm push tags version
	// 1.0.0+build as 1.0.0_build, since a tag holds no "+" (ChartTag is
	// the way back).
	Chart bool
}

// ChartTag is the tag helm push gives a chart version.
func ChartTag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// Versions implements VersionLister.
func (t OCITags) Versions(ctx context.Context) (Listing, error) {
	max := t.Max
	if max <= 0 {
		max = oci.DefaultMaxTags
	}
	tags, truncated, err := t.Client.Tags(ctx, t.Reference, max)
	if err != nil {
		return Listing{}, err
	}
	if t.Chart {
		for i, tag := range tags {
			tags[i] = strings.ReplaceAll(tag, "_", "+")
		}
	}
	l := Listing{Versions: tags}
	if truncated {
		l.Truncated = fmt.Sprintf("the registry lists more than %d tags; only the first were looked at", max)
	}
	return l, nil
}

// HelmIndex lists the versions of Chart in the Helm repository at URL
// (its index.yaml, as helm search repo --versions reads it). The index is
// read through Client (nil: http.DefaultClient), at most MaxBytes (0:
// MaxHelmIndexBytes): a longer one is refused, not cut, since what it
// would drop is unknown. Only the chart's versions are kept, at most
// MaxListedVersions.
type HelmIndex struct {
	URL      string
	Chart    string
	Client   *http.Client
	MaxBytes int64
}

// ErrIndexTooLarge is the refusal of an index.yaml above its bound.
var ErrIndexTooLarge = errors.New("helm repository index too large")

// Versions implements VersionLister.
func (h HelmIndex) Versions(ctx context.Context) (Listing, error) {
	raw, err := h.read(ctx)
	if err != nil {
		return Listing{}, err
	}
	var index struct {
		APIVersion string                  `json:"apiVersion"`
		Entries    map[string][]indexEntry `json:"entries"`
	}
	if err := yaml.Unmarshal(raw, &index); err != nil {
		return Listing{}, fmt.Errorf("helm repository %s: index.yaml: %w", h.URL, err)
	}
	if index.APIVersion == "" {
		return Listing{}, fmt.Errorf("helm repository %s: index.yaml has no apiVersion: not a chart repository index", h.URL)
	}
	tooMany := fmt.Sprintf("the index lists more than %d versions of %s; only the first were looked at", MaxListedVersions, h.Chart)
	return distinctVersions(index.Entries[h.Chart], func(e indexEntry) string { return e.Version }, tooMany), nil
}

// indexEntry is what HelmIndex reads of a chart version in index.yaml.
type indexEntry struct {
	Version string `json:"version"`
}

// read fetches index.yaml, bounded.
func (h HelmIndex) read(ctx context.Context) ([]byte, error) {
	max := h.MaxBytes
	if max <= 0 {
		max = MaxHelmIndexBytes
	}
	url := strings.TrimSuffix(h.URL, "/") + "/index.yaml"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("helm repository %s: %w", h.URL, err)
	}
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("helm repository %s: %w", h.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("helm repository %s: GET %s: %s", h.URL, url, resp.Status)
	}
	if resp.ContentLength > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, the bound is %d", ErrIndexTooLarge, url, resp.ContentLength, max)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("helm repository %s: %w", h.URL, err)
	}
	if int64(len(raw)) > max {
		return nil, fmt.Errorf("%w: %s is more than %d bytes", ErrIndexTooLarge, url, max)
	}
	return raw, nil
}

// Stored lists the versions of the strategies stored in a namespace (the
// store's entries, as store.List returns them): what their metadata
// claims, which anyone who may write ConfigMaps there may have written,
// so each is loaded through the gate before it counts. ByVersion returns
// the entries of one version, since several may claim it.
type Stored struct {
	Entries []store.Entry
}

// Versions implements VersionLister.
func (s Stored) Versions(context.Context) (Listing, error) {
	return distinctVersions(s.Entries, entryVersion,
		fmt.Sprintf("the namespace holds strategies of more than %d versions; only the first were looked at", MaxListedVersions)), nil
}

// ByVersion returns the entries that claim version, in the store's order.
func (s Stored) ByVersion(version string) []store.Entry {
	return ofVersion(s.Entries, entryVersion, version)
}

func entryVersion(e store.Entry) string { return e.Identity.Version }

// Revisions lists the versions of a plugin installation's revisions as
// the namespace's anchor records them (history.Anchor: the Namespace
// object's annotation, which no namespace role may write, newest first).
// The history ConfigMap's records are not listed: anyone who may edit
// ConfigMaps of the namespace may have written them. Each revision is
// then loaded through Revision, pinned to its anchored digest and
// identity, so a revision whose ConfigMap was rewritten is refused, not
// walked through. ByVersion returns the anchored revisions of one
// version, newest first.
type Revisions struct {
	Anchored []history.Anchored
}

// Versions implements VersionLister.
func (r Revisions) Versions(context.Context) (Listing, error) {
	return distinctVersions(r.Anchored, anchoredVersion,
		fmt.Sprintf("the anchor records revisions of more than %d versions; only the first were looked at", MaxListedVersions)), nil
}

// ByVersion returns the anchored revisions that are of version, newest
// first.
func (r Revisions) ByVersion(version string) []history.Anchored {
	return ofVersion(r.Anchored, anchoredVersion, version)
}

func anchoredVersion(a history.Anchored) string { return a.Identity.Version }

// distinctVersions lists the versions of items (version reads one; "" is
// none) once each, in order, at most MaxListedVersions: past that the
// listing is Truncated, saying tooMany.
func distinctVersions[T any](items []T, version func(T) string, tooMany string) Listing {
	var l Listing
	for _, it := range items {
		v := version(it)
		if v == "" || slices.Contains(l.Versions, v) {
			continue
		}
		if len(l.Versions) == MaxListedVersions {
			l.Truncated = tooMany
			break
		}
		l.Versions = append(l.Versions, v)
	}
	return l
}

// ofVersion returns the items of version, in their order.
func ofVersion[T any](items []T, version func(T) string, v string) []T {
	var out []T
	for _, it := range items {
		if version(it) == v {
			out = append(out, it)
		}
	}
	return out
}
