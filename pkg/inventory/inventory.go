package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Keys of the inventory ConfigMap.
const (
	// objectsKey is the data key holding the entries as JSON.
	objectsKey = "objects"
	// objectsGzipKey is the binaryData key holding the entries as gzip'd
	// JSON instead, when their JSON is longer than compressAbove: an
	// installation of 20,000 objects lists about 1.4 MB of JSON, more than
	// one ConfigMap may hold, and less than 100 KB compressed.
	objectsGzipKey = "objects.gz"
	// compressAbove is the length of the entries' JSON above which the
	// inventory stores them compressed (objectsGzipKey); at or below it
	// they stay readable with kubectl (objectsKey).
	compressAbove = 256 << 10
	// NamePrefix starts every inventory ConfigMap's name.
	NamePrefix = "installstrategy-inventory-"
)

// Entry is one object an installation applied.
type Entry struct {
	strategy.ObjectRef
	// Hash is the applied hash of a Job that completed, so a resync knows
	// the Job ran even after its TTL removed it; empty otherwise.
	Hash string `json:"completedHash,omitempty"`
	// Adopted is true for an object the installation took over from
	// someone else (apply.Result.Adopted) rather than created: a system
	// object so taken is not deleted without consent
	// (DeletionNeedsConsent).
	Adopted bool `json:"adopted,omitempty"`
}

// Inventory is what one installation has applied.
type Inventory struct {
	Owner Owner
	// Entries by object.
	Entries map[strategy.ObjectRef]Entry
	// Version is the target version recorded with the last write.
	Version string
	// Released is true for an installation uninstalled with its CRDs
	// kept (metakeys.ReleasedAnnotation); any other write clears it.
	Released bool
	// HooksRan names the strategy whose hooks ran last
	// (metakeys.HooksRanAnnotation); "" when none did.
	HooksRan string
	// resourceVersion of the ConfigMap read, "" for a new inventory.
	resourceVersion string
	// ownerRefs of the ConfigMap read.
	ownerRefs []metav1.OwnerReference
	// stored is what the ConfigMap read or last written holds (entries and
	// version), so a write of the same content is skipped.
	stored string
}

// New returns an empty inventory of an owner.
func New(o Owner) *Inventory {
	return &Inventory{Owner: o, Entries: map[strategy.ObjectRef]Entry{}}
}

// Has reports whether ref is in the inventory.
func (inv *Inventory) Has(ref strategy.ObjectRef) bool {
	_, ok := inv.Entries[ref]
	return ok
}

// Add records refs (keeping what is known of them).
func (inv *Inventory) Add(refs ...strategy.ObjectRef) {
	for _, r := range refs {
		if _, ok := inv.Entries[r]; !ok {
			inv.Entries[r] = Entry{ObjectRef: r}
		}
	}
}

// Refs returns the entries' references, sorted.
func (inv *Inventory) Refs() []strategy.ObjectRef {
	out := make([]strategy.ObjectRef, 0, len(inv.Entries))
	for r := range inv.Entries {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// Exists reports whether the inventory was read from the cluster (or
// written to it).
func (inv *Inventory) Exists() bool { return inv.resourceVersion != "" }

// ConfigMapName returns the name of an owner's inventory ConfigMap.
func ConfigMapName(o Owner) string {
	name := NamePrefix + o.Name
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(o.Name))
	return NamePrefix + hex.EncodeToString(sum[:])[:40]
}

// ownerKindError reports an inventory written for another kind of owner: a
// plugin apply meeting an Installation's inventory, or the reverse.
type ownerKindError struct {
	Owner Owner
	Kind  string
}

func (e *ownerKindError) Error() string {
	if e.Kind == KindInstallation {
		return fmt.Sprintf("installation %s is driven by the operator (Installation %s); change the Installation instead", e.Owner, e.Owner)
	}
	return fmt.Sprintf("installation %s was applied by the kubectl plugin, not by an Installation; uninstall it with the plugin or choose another name", e.Owner)
}

// Store reads and writes inventories.
type Store struct {
	kube kubernetes.Interface
	// FieldManager names the writer; "" means "installstrategy".
	FieldManager string
	// OwnerReference, when set, is put on inventories written (the
	// operator sets its Installation, so the inventory goes with it).
	OwnerReference *metav1.OwnerReference
}

// NewStore returns a store over a typed client.
func NewStore(kube kubernetes.Interface) *Store { return &Store{kube: kube} }

// Get reads an owner's inventory. A missing one is returned empty (see
// Inventory.Exists); one written for another kind of owner is an
// *ownerKindError.
func (s *Store) Get(ctx context.Context, o Owner) (*Inventory, error) {
	cm, err := s.kube.CoreV1().ConfigMaps(o.Namespace).Get(ctx, ConfigMapName(o), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return New(o), nil
	}
	if err != nil {
		return nil, fmt.Errorf("inventory of %s: %w", o, err)
	}
	return decode(o, cm)
}

func decode(o Owner, cm *corev1.ConfigMap) (*Inventory, error) {
	if k := cm.Annotations[metakeys.OwnerKindAnnotation]; k != o.kind() {
		return nil, &ownerKindError{Owner: o, Kind: k}
	}
	inv := New(o)
	inv.resourceVersion = cm.ResourceVersion
	inv.ownerRefs = cm.OwnerReferences
	inv.Version = cm.Annotations[metakeys.VersionAnnotation]
	_, inv.Released = cm.Annotations[metakeys.ReleasedAnnotation]
	inv.HooksRan = cm.Annotations[metakeys.HooksRanAnnotation]
	data, key := cm.Data[objectsKey], "data."+objectsKey
	if gz, ok := cm.BinaryData[objectsGzipKey]; ok {
		key = "binaryData." + objectsGzipKey
		text, err := codec.Gunzip(gz, maxObjectsJSON)
		if err != nil {
			return nil, fmt.Errorf("inventory of %s: configmap %s/%s: %s: %w", o, cm.Namespace, cm.Name, key, err)
		}
		data = string(text)
	}
	inv.stored = contentOf(inv.Version, inv.Released, inv.HooksRan, data)
	var entries []Entry
	if data != "" {
		if err := json.Unmarshal([]byte(data), &entries); err != nil {
			return nil, fmt.Errorf("inventory of %s: configmap %s/%s: %s: %w", o, cm.Namespace, cm.Name, key, err)
		}
	}
	for _, e := range entries {
		inv.Entries[e.ObjectRef] = e
	}
	return inv, nil
}

// maxObjectsJSON bounds the decompressed entries of an inventory (about
// 300,000 objects), so a crafted ConfigMap cannot make a reader allocate
// without limit.
const maxObjectsJSON = 32 << 20

// Write stores an inventory: creates it, or updates the one read (a
// concurrent change is a conflict error). Nothing is written when the
// stored inventory already holds the same entries and version.
func (s *Store) Write(ctx context.Context, inv *Inventory) error {
	o := inv.Owner
	entries := make([]Entry, 0, len(inv.Entries))
	for _, r := range inv.Refs() {
		entries = append(entries, inv.Entries[r])
	}
	data, err := json.Marshal(entries)
	if err != nil {
		return fmt.Errorf("inventory of %s: %w", o, err)
	}
	content := contentOf(inv.Version, inv.Released, inv.HooksRan, string(data))
	if inv.resourceVersion != "" && content == inv.stored {
		return nil
	}
	labels := o.Labels()
	labels[metakeys.InventoryLabel] = ""
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ConfigMapName(o), Namespace: o.Namespace, Labels: labels,
			Annotations:     map[string]string{metakeys.OwnerKindAnnotation: o.kind(), metakeys.InstallationAnnotation: o.Name, metakeys.VersionAnnotation: inv.Version},
			ResourceVersion: inv.resourceVersion,
			OwnerReferences: inv.ownerRefs,
		},
	}
	if len(data) > compressAbove {
		gz, err := codec.Gzip(data)
		if err != nil {
			return fmt.Errorf("inventory of %s: %w", o, err)
		}
		cm.BinaryData = map[string][]byte{objectsGzipKey: gz}
	} else {
		cm.Data = map[string]string{objectsKey: string(data)}
	}
	if inv.Released {
		cm.Annotations[metakeys.ReleasedAnnotation] = "true"
	}
	if inv.HooksRan != "" {
		cm.Annotations[metakeys.HooksRanAnnotation] = inv.HooksRan
	}
	if s.OwnerReference != nil && len(cm.OwnerReferences) == 0 {
		cm.OwnerReferences = []metav1.OwnerReference{*s.OwnerReference}
	}
	fm := s.FieldManager
	if fm == "" {
		fm = metakeys.ManagedBy
	}
	var out *corev1.ConfigMap
	if inv.resourceVersion == "" {
		out, err = s.kube.CoreV1().ConfigMaps(o.Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: fm})
	} else {
		out, err = s.kube.CoreV1().ConfigMaps(o.Namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: fm})
	}
	if err != nil {
		return fmt.Errorf("write inventory %s/%s: %w", o.Namespace, cm.Name, err)
	}
	inv.resourceVersion = out.ResourceVersion
	inv.ownerRefs = out.OwnerReferences
	inv.stored = content
	return nil
}

// contentOf is what an inventory's ConfigMap holds, compared to skip a write
// of the same.
func contentOf(version string, released bool, hooksRan, objects string) string {
	return fmt.Sprintf("%s\n%t\n%s\n%s", version, released, hooksRan, objects)
}

// Delete removes an owner's inventory (absent is fine).
func (s *Store) Delete(ctx context.Context, o Owner) error {
	err := s.kube.CoreV1().ConfigMaps(o.Namespace).Delete(ctx, ConfigMapName(o), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete inventory of %s: %w", o, err)
	}
	return nil
}

// Holder returns the installation whose inventory the installation labels
// of an object name (NameLabel and metakeys.InstallationNamespaceLabel, as Owner.Labels writes
// them): ok is false when no such inventory exists — the installation is
// gone (uninstalled, or its Installation deleted) and no longer holds what
// it left labelled as its own, such as the CRDs an uninstall keeps. An
// inventory an uninstall left for its kept CRDs (Inventory.Released) holds
// nothing either.
func (s *Store) Holder(ctx context.Context, labels map[string]string) (owner Owner, ok bool, err error) {
	ns, name := labels[metakeys.InstallationNamespaceLabel], labels[metakeys.InstallationLabel]
	if ns == "" || name == "" {
		return Owner{}, false, nil
	}
	sel := fmt.Sprintf("%s=%s,%s=%s,%s=%s,%s", metakeys.ManagedByLabel, metakeys.ManagedBy, metakeys.InstallationLabel, name, metakeys.InstallationNamespaceLabel, ns, metakeys.InventoryLabel)
	l, err := s.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return Owner{}, false, fmt.Errorf("inventory of installation %s/%s: %w", ns, name, err)
	}
	for _, cm := range l.Items {
		if _, released := cm.Annotations[metakeys.ReleasedAnnotation]; released || cm.DeletionTimestamp != nil {
			continue
		}
		o := Owner{Namespace: cm.Namespace, Name: cm.Annotations[metakeys.InstallationAnnotation], Kind: cm.Annotations[metakeys.OwnerKindAnnotation]}
		if o.Name == "" {
			o.Name = name
		}
		return o, true, nil
	}
	return Owner{}, false, nil
}

// Describe names an owner with its kind, the way messages cite the holder
// of a claim: "Installation ns/name" or "plugin installation ns/name".
func (o Owner) Describe() string {
	if o.kind() == KindInstallation {
		return "Installation " + o.String()
	}
	return "plugin installation " + o.String()
}
