package codec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Input is what a file or standard input held: strategy ConfigMaps, or a
// manifests text.
type Input struct {
	// Source names where the input came from ("-" for standard input).
	Source string
	// ConfigMaps is set when the input held strategy ConfigMaps.
	ConfigMaps []*corev1.ConfigMap
	// Skipped lists the other objects of an input that held strategy
	// ConfigMaps (kubectl get cm -o yaml prints kube-root-ca.crt beside
	// them): they are not used, and a reader should say so.
	Skipped []Skipped
	// Chunks are the chunk ConfigMaps among Skipped: a chunked strategy's
	// head given with its chunks can be reassembled from them (see
	// pkg/store's Assemble).
	Chunks []*corev1.ConfigMap
	// Text, Strategy and Warnings are set when the input was a manifests
	// text.
	Text     []byte
	Strategy *strategy.Strategy
	Warnings []strategy.Warning
}

// Skipped is an object of an input that is not a strategy ConfigMap.
type Skipped struct {
	// Document and Line place the object in the input (the items of a
	// List share the List's).
	Document, Line int
	// Kind, Namespace and Name name it.
	Kind, Namespace, Name string
	// Chunk is set when the object is a chunk of a strategy stored in
	// chunks (see pkg/store).
	Chunk bool
	// Reason says why it is not a strategy.
	Reason string
}

// Object names the skipped object as "Kind namespace/name".
func (s Skipped) Object() string {
	name := s.Name
	if s.Namespace != "" {
		name = s.Namespace + "/" + name
	}
	return s.Kind + " " + name
}

func (s Skipped) String() string {
	return fmt.Sprintf("document %d (line %d): %s: %s", s.Document, s.Line, s.Object(), s.Reason)
}

// NotStrategyError says that an input holds no strategy: objects read from
// a cluster (a Secret, an ordinary ConfigMap, a chunk of a stored strategy),
// none of them a strategy ConfigMap.
type NotStrategyError struct {
	Source  string
	Objects []Skipped
}

func (e *NotStrategyError) Error() string {
	first := e.Objects[0]
	more := ""
	if n := len(e.Objects) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more objects, none a strategy)", n)
	}
	return fmt.Sprintf("%s: not a strategy: %s%s", e.Source, first, more)
}

// ErrChunkedHead is wrapped by the error of decoding the head of a
// strategy stored in chunks: its text is in the chunk ConfigMaps, which
// only the store (pkg/store) reads.
var ErrChunkedHead = errors.New("the head of a strategy stored in chunks")

// ReadFile reads path, or standard input when path is "-".
func ReadFile(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %w", err)
	}
	return data, nil
}

// ParseInput decides what data holds and reads it.
//
// When any object in it is a v1 ConfigMap that looks like a strategy (a
// "manifests" key, or a strategy label or encoding annotation of either
// form, as written by KubeVirt, by Encode, or by `kubectl get cm -o
// yaml|json`, one object or a List), the input is a set of strategy
// ConfigMaps and every other object is listed in Skipped.
//
// Otherwise, when the input holds objects read from a cluster (metadata
// with a uid, resourceVersion, creationTimestamp or managedFields, which a
// manifests text never carries) or a chunk of a stored strategy, it is not
// a strategy: the error is a *NotStrategyError naming what it holds.
// Anything else is parsed as a manifests text.
func ParseInput(source string, data []byte, popts strategy.ParseOptions) (*Input, error) {
	docs, err := strategy.ReadDocuments(data, popts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no objects found", source)
	}
	in := &Input{Source: source}
	var others []Skipped
	live := false
	for _, d := range docs {
		if IsStrategyConfigMap(d.Object) {
			cm := &corev1.ConfigMap{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, cm); err != nil {
				return nil, fmt.Errorf("%s: document %d (line %d): configmap %s: %w", source, d.Index, d.Line, d.Object.GetName(), err)
			}
			in.ConfigMaps = append(in.ConfigMaps, cm)
			continue
		}
		sk := skippedOf(d)
		live = live || sk.Chunk || fromCluster(d.Object)
		others = append(others, sk)
		if sk.Chunk {
			cm := &corev1.ConfigMap{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, cm); err == nil {
				in.Chunks = append(in.Chunks, cm)
			}
		}
	}
	if len(in.ConfigMaps) > 0 {
		in.Skipped = others
		return in, nil
	}
	if live {
		return nil, &NotStrategyError{Source: source, Objects: others}
	}
	s, warnings, err := strategy.Parse(data, popts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return &Input{Source: source, Text: data, Strategy: s, Warnings: warnings}, nil
}

// IsStrategyConfigMap reports whether an object is a v1 ConfigMap meant as
// a strategy: a "manifests" key, or a strategy label or encoding annotation
// of either form. A chunk of a stored strategy is not one.
func IsStrategyConfigMap(obj *unstructured.Unstructured) bool {
	if obj.GetAPIVersion() != "v1" || obj.GetKind() != kinds.ConfigMap.Kind {
		return false
	}
	if _, chunk := obj.GetLabels()[metakeys.ChunkLabel]; chunk {
		return false
	}
	return looksLikeStrategy(obj)
}

// skippedOf says why an object is not a strategy ConfigMap.
func skippedOf(d strategy.Document) Skipped {
	o := d.Object
	sk := Skipped{Document: d.Index, Line: d.Line, Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
	if sk.Name == "" {
		sk.Name = o.GetGenerateName() + "<generated>"
	}
	switch {
	case o.GetAPIVersion() == "v1" && o.GetKind() == kinds.ConfigMap.Kind:
		if _, chunk := o.GetLabels()[metakeys.ChunkLabel]; chunk {
			sk.Chunk = true
			idx := o.GetAnnotations()[metakeys.ChunkIndexAnnotation]
			sk.Reason = fmt.Sprintf("a chunk (index %s) of a strategy stored in chunks, not a strategy: its part is a slice of the encoded text, whose head lists the chunks", orUnknown(idx))
			return sk
		}
		keys := make([]string, 0)
		if m, ok := o.Object["data"].(map[string]any); ok {
			for k := range m {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		sk.Reason = fmt.Sprintf("an ordinary ConfigMap, not a strategy (no data.%s; its keys: %s)", ManifestsKey, orUnknown(strings.Join(keys, ", ")))
	default:
		sk.Reason = fmt.Sprintf("a %s %s, not a strategy ConfigMap", o.GetAPIVersion(), o.GetKind())
	}
	return sk
}

func orUnknown(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// fromCluster reports whether an object carries metadata only a server
// sets, which a manifests text never does.
func fromCluster(obj *unstructured.Unstructured) bool {
	md, _ := obj.Object["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "managedFields"} {
		if v, ok := md[k]; ok && v != nil {
			return true
		}
	}
	ts, _ := md["creationTimestamp"].(string)
	return ts != ""
}

// ReadConfigMaps reads strategy ConfigMaps; anything else is an error naming
// the first document that is not one.
func ReadConfigMaps(source string, data []byte) ([]*corev1.ConfigMap, error) {
	docs, err := strategy.ReadDocuments(data, strategy.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no objects found", source)
	}
	for _, d := range docs {
		if !isConfigMap(d) {
			return nil, fmt.Errorf("%s: document %d (line %d): not a ConfigMap but %s %s", source, d.Index, d.Line, d.Object.GetAPIVersion(), d.Object.GetKind())
		}
		if _, ok, _ := nestedString(d.Object.Object, "data", ManifestsKey); !ok {
			return nil, fmt.Errorf("%s: document %d (line %d): ConfigMap %s has no data.%s key", source, d.Index, d.Line, d.Object.GetName()+d.Object.GetGenerateName(), ManifestsKey)
		}
	}
	cms, _ := strategyConfigMaps(docs)
	return cms, nil
}

func isConfigMap(d strategy.Document) bool {
	return d.Object.GetAPIVersion() == "v1" && d.Object.GetKind() == kinds.ConfigMap.Kind
}

func strategyConfigMaps(docs []strategy.Document) ([]*corev1.ConfigMap, bool) {
	out := make([]*corev1.ConfigMap, 0, len(docs))
	for _, d := range docs {
		if !isConfigMap(d) {
			return nil, false
		}
		if !looksLikeStrategy(d.Object) {
			return nil, false
		}
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, cm); err != nil {
			return nil, false
		}
		out = append(out, cm)
	}
	return out, true
}

// looksLikeStrategy reports whether a ConfigMap is meant as a strategy.
func looksLikeStrategy(obj *unstructured.Unstructured) bool {
	if _, ok, _ := nestedString(obj.Object, "data", ManifestsKey); ok {
		return true
	}
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	for _, l := range []string{metakeys.KubeVirtStrategyLabel, metakeys.StrategyLabel} {
		if _, ok := labels[l]; ok {
			return true
		}
	}
	for _, a := range []string{metakeys.KubeVirtEncodingAnnotation, metakeys.EncodingAnnotation, metakeys.DigestAnnotation} {
		if _, ok := annotations[a]; ok {
			return true
		}
	}
	return false
}

func nestedString(m map[string]any, path ...string) (string, bool, error) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur, ok = mm[p]
		if !ok {
			return "", false, nil
		}
	}
	s, ok := cur.(string)
	if !ok {
		return "", false, errors.New("not a string")
	}
	return s, true, nil
}

// Loaded is one strategy read from an input, with where it came from.
type Loaded struct {
	Strategy *strategy.Strategy
	// Text is the manifests text as stored (decoded, not re-serialised).
	Text     []byte
	Warnings []strategy.Warning
	// Info describes the ConfigMap; nil when the input was a text.
	Info *Info
	// VerifiedBy says who vouched for the strategy, as pkg/source's
	// Loaded.VerifiedBy ("signed by KEY", "pinned digest", "given by the
	// user", "not verified: ..."); empty when the loader decided nothing.
	VerifiedBy string
}

// LoadInput returns the strategy an input holds. An input with several
// ConfigMaps is an error unless exactly one is wanted by index (0-based) or
// there is only one.
func LoadInput(in *Input, dopts DecodeOptions, popts strategy.ParseOptions) (*Loaded, error) {
	if in.Strategy != nil {
		return &Loaded{Strategy: in.Strategy, Text: in.Text, Warnings: in.Warnings}, nil
	}
	if len(in.ConfigMaps) != 1 {
		return nil, fmt.Errorf("%s: holds %d strategy ConfigMaps; give one at a time", in.Source, len(in.ConfigMaps))
	}
	return LoadConfigMap(in.Source, in.ConfigMaps[0], dopts, popts)
}

// LoadConfigMap decodes and parses one strategy ConfigMap.
func LoadConfigMap(source string, cm *corev1.ConfigMap, dopts DecodeOptions, popts strategy.ParseOptions) (*Loaded, error) {
	text, info, err := Decode(cm, dopts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	s, warnings, err := strategy.Parse(text, popts)
	if err != nil {
		return nil, fmt.Errorf("%s: configmap %s: manifests: %w", source, configMapName(cm), err)
	}
	s.Identity = info.Identity
	return &Loaded{Strategy: s, Text: text, Warnings: warnings, Info: &info}, nil
}
