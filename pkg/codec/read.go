package codec

import (
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Input is what a file or standard input held: strategy ConfigMaps, or a
// manifests text.
type Input struct {
	// Source names where the input came from ("-" for standard input).
	Source string
	// ConfigMaps is set when the input held strategy ConfigMaps.
	ConfigMaps []*corev1.ConfigMap
	// Text, Strategy and Warnings are set when the input was a manifests
	// text.
	Text     []byte
	Strategy *strategy.Strategy
	Warnings []strategy.Warning
}

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

// ParseInput decides what data holds and reads it. It is a set of strategy
// ConfigMaps when every object in it is a v1 ConfigMap that looks like one: a
// "manifests" key, or a strategy label or encoding annotation of either form
// (as written by KubeVirt, by Encode, or by `kubectl get cm -o yaml|json`, one
// object or a List). Otherwise it is parsed as a manifests text.
func ParseInput(source string, data []byte, popts strategy.ParseOptions) (*Input, error) {
	docs, err := strategy.ReadDocuments(data, popts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no objects found", source)
	}
	if cms, ok := strategyConfigMaps(docs); ok {
		return &Input{Source: source, ConfigMaps: cms}, nil
	}
	s, warnings, err := strategy.Parse(data, popts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return &Input{Source: source, Text: data, Strategy: s, Warnings: warnings}, nil
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
	return d.Object.GetAPIVersion() == "v1" && d.Object.GetKind() == "ConfigMap"
}

func strategyConfigMaps(docs []strategy.Document) ([]*corev1.ConfigMap, bool) {
	out := make([]*corev1.ConfigMap, 0, len(docs))
	for _, d := range docs {
		if !isConfigMap(d) {
			return nil, false
		}
		if !looksLikeStrategy(d) {
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
func looksLikeStrategy(d strategy.Document) bool {
	if _, ok, _ := nestedString(d.Object.Object, "data", ManifestsKey); ok {
		return true
	}
	labels, annotations := d.Object.GetLabels(), d.Object.GetAnnotations()
	for _, l := range []string{KubeVirtStrategyLabel, NativeStrategyLabel} {
		if _, ok := labels[l]; ok {
			return true
		}
	}
	for _, a := range []string{KubeVirtEncodingAnnotation, NativeEncodingAnnotation, NativeDigestAnnotation} {
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
