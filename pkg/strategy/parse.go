package strategy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/jsonshare"
)

// ParseOptions tunes Parse. The zero value is what KubeVirt compatibility
// needs.
type ParseOptions struct {
	// Parallelism bounds the documents parsed at once; 0 means GOMAXPROCS.
	Parallelism int
	// MaxErrors bounds the errors reported before Parse stops listing them
	// (the rest are counted); 0 means defaultMaxErrors.
	MaxErrors int
}

// ParseError says which document of a manifests text could not be read.
type ParseError struct {
	// Document counts non-empty documents from 1.
	Document int
	// Line is the 1-based line in the whole text.
	Line int
	// Offset is the byte offset of the document in the whole text.
	Offset int
	Err    error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("document %d (line %d, byte offset %d): %v", e.Document, e.Line, e.Offset, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Document is one object read from a manifests text, with its place.
type Document struct {
	// Index counts the non-empty documents of the text from 1. The items
	// of a List document share its index.
	Index int
	// Line is the 1-based line where the document starts.
	Line int
	// Offset is the byte offset where the document starts.
	Offset int
	// InList is the number of items of the List this object came from, 0
	// when the document was the object itself.
	InList int
	// Item is the 1-based position of the object in its List (0 when the
	// document was the object itself).
	Item int
	// ListKind is the kind of the List this object came from ("List",
	// "ConfigMapList", …), "" when the document was the object itself.
	ListKind string
	Object   *unstructured.Unstructured
}

// ReadDocuments cuts a text into documents (see Parse for the separator
// rules) and decodes each, in parallel, into an object. A v1 List document
// is replaced by its items. Objects are not checked beyond being maps. The
// error, when not nil, joins one *ParseError per bad document.
//
// The objects share their keys and strings: each worker holds one copy of
// each (jsonshare.Strings), none of them part of the text.
func ReadDocuments(text []byte, opts ParseOptions) ([]Document, error) {
	docs, more := splitDocumentsMax(text, maxDocuments)
	if more {
		return nil, fmt.Errorf("read documents: %w", ErrTooManyDocuments)
	}
	results := make([]docResult, len(docs))
	workers := opts.Parallelism
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(docs))
	var wg sync.WaitGroup
	next := make(chan int, len(docs))
	for i := range docs {
		next <- i
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var strs jsonshare.Strings
			for i := range next {
				results[i] = decodeDocument(docs[i], &strs)
			}
		}()
	}
	wg.Wait()

	errs := errorList{max: opts.maxErrors()}
	total := 0
	for _, r := range results {
		total += len(r.objs)
		if r.err != nil {
			errs.add(r.err)
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	out := make([]Document, 0, total)
	for i, r := range results {
		d := &docs[i]
		for j, o := range r.objs {
			doc := Document{Index: d.Index, Line: d.Line, Offset: d.Offset, InList: r.listLen, Object: o}
			if r.listKind != "" {
				doc.Item, doc.ListKind = j+1, r.listKind
			}
			out = append(out, doc)
		}
	}
	return out, nil
}

// Parse reads a manifests text: documents separated by lines that are
// exactly "---" (a "---" inside a value never splits), each a YAML or JSON
// object with apiVersion, kind and metadata.name. It accepts what KubeVirt's
// loader accepts and repairs it (a core apiVersion on a kind of another
// group, objects written twice), reporting every repair as a Warning. The
// strategy has an empty Identity and its objects in serialisation order. The
// error, when not nil, joins one *ParseError per bad document.
//
// The objects share what repeats in them: keys and strings (see
// ReadDocuments), and equal parts of their bulky fields (kinds.Info.Bulky,
// a CRD's version schemas), which must not be changed in place: change a
// DeepCopy of an object instead.
func Parse(text []byte, opts ParseOptions) (*Strategy, []Warning, error) {
	docs, err := ReadDocuments(text, opts)
	if err != nil {
		return nil, nil, err
	}
	var warnings []Warning
	errs := errorList{max: opts.maxErrors()}
	lastList := 0
	for _, d := range docs {
		if d.InList > 0 && d.Index != lastList {
			lastList = d.Index
			warnings = append(warnings, Warning{Code: WarnListExpanded, Document: d.Index, Line: d.Line, Object: ObjectRef{Kind: d.ListKind},
				Message: fmt.Sprintf("replaced by its %d items", d.InList)})
		}
		w, err := checkObject(d.Object)
		if err != nil {
			if d.Item > 0 {
				err = fmt.Errorf("%s item %d: %w", d.ListKind, d.Item, err)
			}
			errs.add(&ParseError{Document: d.Index, Line: d.Line, Offset: d.Offset, Err: err})
			continue
		}
		for i := range w {
			w[i].Document, w[i].Line = d.Index, d.Line
		}
		warnings = append(warnings, w...)
	}
	if err := errs.err(); err != nil {
		return nil, nil, err
	}
	return assemble(docs, warnings)
}

type docResult struct {
	objs     []*unstructured.Unstructured
	listLen  int
	listKind string
	err      error
}

func decodeDocument(d document, strs *jsonshare.Strings) docResult {
	fail := func(line int, err error) docResult {
		return docResult{err: &ParseError{Document: d.Index, Line: line, Offset: d.Offset, Err: err}}
	}
	value, line, err := decodeValue(d, strs)
	if err != nil {
		return fail(line, err)
	}
	m, ok := value.(map[string]any)
	if !ok {
		return fail(d.Line, fmt.Errorf("not an object but %s", describe(value)))
	}
	if kind, ok := listKind(m); ok {
		items, ok := m["items"].([]any)
		if !ok && m["items"] != nil {
			return fail(d.Line, fmt.Errorf("%s has items that are not a list", kind))
		}
		r := docResult{listLen: len(items), listKind: kind}
		for i, it := range items {
			im, ok := it.(map[string]any)
			if !ok {
				return fail(d.Line, fmt.Errorf("%s item %d is not an object", kind, i+1))
			}
			// A typed list's items may leave out what the list says
			// (kubectl accepts that): the list's apiVersion, and its kind
			// without "List".
			if kind != "List" {
				if _, has := im["apiVersion"]; !has {
					im["apiVersion"] = m["apiVersion"]
				}
				if _, has := im["kind"]; !has {
					im["kind"] = strings.TrimSuffix(kind, "List")
				}
			}
			r.objs = append(r.objs, &unstructured.Unstructured{Object: im})
		}
		return r
	}
	return docResult{objs: []*unstructured.Unstructured{{Object: m}}}
}

// listKind reports a list document: kind "List" in v1, or any kind ending
// in "List" (ConfigMapList, RoleList, …) that holds items and names no
// object of its own (a list has no metadata.name).
func listKind(m map[string]any) (string, bool) {
	kind, _ := m["kind"].(string)
	if kind == "List" {
		return kind, m["apiVersion"] == "v1"
	}
	if len(kind) <= len("List") || !strings.HasSuffix(kind, "List") {
		return "", false
	}
	if _, has := m["items"]; !has {
		return "", false
	}
	if md, ok := m["metadata"].(map[string]any); ok && md["name"] != nil {
		return "", false
	}
	return kind, true
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// decodeValue parses one document as JSON (when it looks like JSON and is
// valid JSON) or YAML, into JSON-compatible values: maps with string keys,
// slices, strings, bools, int64, float64 and nil. Keys and strings are
// strs' copies. It returns the 1-based line (in the whole text) of an
// error.
func decodeValue(d document, strs *jsonshare.Strings) (any, int, error) {
	trimmed := bytes.TrimLeft(d.Data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil {
			if dec.More() {
				return nil, d.Line, errors.New("more than one JSON value in one document; separate them with --- lines")
			}
			v, err = fromJSONNumbers(v, strs)
			return v, d.Line, err
		}
		// Not JSON: flow-style YAML is read below.
	}
	if v, ok := fastParse(d.Data, strs); ok {
		return v, d.Line, nil
	}
	return decodeYAML(d, strs)
}

// decodeYAML parses a document with the full YAML parser.
func decodeYAML(d document, strs *jsonshare.Strings) (any, int, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(d.Data, &n); err != nil {
		msg := err.Error()
		line := d.Line
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			rel, _ := strconv.Atoi(m[1])
			line = d.Line + rel - 1
			msg = msg[len(m[0]):]
		} else {
			msg = strings.TrimPrefix(msg, "yaml: ")
		}
		return nil, line, fmt.Errorf("not valid YAML: %s", msg)
	}
	c := converter{base: d.Line - 1, budget: 16*len(d.Data) + 1024, aliasValues: maxAliasValues, strs: strs}
	v, err := c.value(&n)
	if err != nil {
		return nil, c.line, err
	}
	return v, d.Line, nil
}

// converter turns a yaml.v3 node tree into JSON-compatible values.
type converter struct {
	base   int // line offset of the document in the whole text
	line   int // line of the last error
	budget int // nodes left to convert; bounds alias expansion
	// depth is the nesting of the value converted (maxDepth bounds it);
	// inAlias counts the aliases being expanded, and aliasValues the
	// values they may still expand to (maxAliasValues).
	depth, inAlias, aliasValues int
	strs                        *jsonshare.Strings
}

func (c *converter) errorf(n *yaml.Node, format string, args ...any) error {
	c.line = c.base + n.Line
	return fmt.Errorf("line %d: "+format, append([]any{c.line}, args...)...)
}

func (c *converter) value(n *yaml.Node) (any, error) {
	c.budget--
	if c.budget < 0 {
		return nil, c.errorf(n, "document expands to too many values (alias bomb?)")
	}
	if c.inAlias > 0 {
		if c.aliasValues--; c.aliasValues < 0 {
			return nil, c.errorf(n, "aliases expand to more than %d values (alias bomb?)", maxAliasValues)
		}
	}
	if c.depth++; c.depth > maxDepth {
		return nil, c.errorf(n, "nested deeper than %d levels", maxDepth)
	}
	defer func() { c.depth-- }()
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0])
	case yaml.AliasNode:
		c.inAlias++
		defer func() { c.inAlias-- }()
		return c.value(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, item := range n.Content {
			v, err := c.value(item)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		if err := c.mapping(n, out, false); err != nil {
			return nil, err
		}
		return out, nil
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return nil, c.errorf(n, "unsupported YAML node")
}

func (c *converter) mapping(n *yaml.Node, out map[string]any, merging bool) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			if err := c.merge(v, out); err != nil {
				return err
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return c.errorf(k, "mapping key is not a scalar")
		}
		if _, dup := out[k.Value]; dup && !merging {
			return c.errorf(k, "key %q is given twice", k.Value)
		}
		val, err := c.value(v)
		if err != nil {
			return err
		}
		out[c.strs.String(k.Value)] = val
	}
	return nil
}

// merge applies a YAML merge key ("<<: *anchor"); explicit keys win.
func (c *converter) merge(v *yaml.Node, out map[string]any) error {
	c.inAlias++ // what is merged counts as alias expansion
	defer func() { c.inAlias-- }()
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	var sources []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{v}
	case yaml.SequenceNode:
		for _, s := range v.Content {
			if s.Kind == yaml.AliasNode {
				s = s.Alias
			}
			sources = append(sources, s)
		}
	}
	for _, s := range sources {
		if s.Kind != yaml.MappingNode {
			return c.errorf(v, "merge key value is not a mapping")
		}
		tmp := map[string]any{}
		if err := c.mapping(s, tmp, true); err != nil {
			return err
		}
		for key, val := range tmp {
			if _, set := out[key]; !set {
				out[key] = val
			}
		}
	}
	return nil
}

func (c *converter) scalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		return strings.EqualFold(n.Value, "true"), nil
	case "!!int":
		plain := strings.ReplaceAll(n.Value, "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return i, nil
		}
		if f, err := strconv.ParseFloat(plain, 64); err == nil {
			return f, nil
		}
		return nil, c.errorf(n, "integer %q out of range", n.Value)
	case "!!float":
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, c.errorf(n, "number %q cannot be represented in JSON", n.Value)
		}
		return f, nil
	default:
		// !!str, !!timestamp, !!binary and custom tags stay strings, as
		// they would after a round trip through JSON.
		return c.strs.Value(n.Value), nil
	}
}

// fromJSONNumbers replaces json.Number with int64 or float64, and keys
// and strings with strs' copies.
func fromJSONNumbers(v any, strs *jsonshare.Strings) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			y, err := fromJSONNumbers(x, strs)
			if err != nil {
				return nil, err
			}
			t[strs.String(k)] = y // replaces the key too
		}
	case []any:
		for i, x := range t {
			y, err := fromJSONNumbers(x, strs)
			if err != nil {
				return nil, err
			}
			t[i] = y
		}
	case string:
		return strs.Value(t), nil
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", t)
		}
		return f, nil
	}
	return v, nil
}
