package strategy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"sync"
	"unicode/utf8"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Serialize writes the strategy in KubeVirt's form: every object introduced
// by a "---" line, in kind order, with keys sorted. Objects other than CRDs
// lose status, metadata.creationTimestamp, the pod template's
// creationTimestamp and the managed-by label; CRDs are written as they are.
// The output depends only on the objects, never on map iteration or timing.
func (s *Strategy) Serialize() ([]byte, error) {
	var buf bytes.Buffer
	if _, err := s.SerializeTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SerializeTo writes what Serialize returns to w and returns how many bytes
// it wrote. It never holds the whole text: objects are marshalled a batch
// at a time (GOMAXPROCS at once) and written in order, so a caller that
// only compresses or hashes the text (codec.Encode) does not keep a copy of
// it. An error from w stops it.
func (s *Strategy) SerializeTo(w io.Writer) (int64, error) {
	return s.serializeTo(w, MarshalObject)
}

// SerializeCompactTo is SerializeTo with every object written as one line
// of JSON (YAML's flow form, which strategy.Parse reads as it reads the
// block form; see marshalObjectCompact): the same objects in the same
// order, for a tenth of the time and a thirtieth of the memory on
// KubeVirt's strategy, where the text need not read like KubeVirt's.
func (s *Strategy) SerializeCompactTo(w io.Writer) (int64, error) {
	return s.serializeTo(w, marshalObjectCompact)
}

// serializeTo writes the sorted objects, each marshalled by marshal, after
// a "---" line.
func (s *Strategy) serializeTo(w io.Writer, marshal func(*unstructured.Unstructured) ([]byte, error)) (int64, error) {
	objs := make([]*unstructured.Unstructured, len(s.Objects))
	copy(objs, s.Objects)
	sorted := &Strategy{Objects: objs}
	sorted.Sort()

	workers := runtime.GOMAXPROCS(0)
	batch := 4 * workers
	docs := make([][]byte, batch)
	errs := make([]error, batch)
	var written int64
	for start := 0; start < len(objs); start += batch {
		part := objs[start:min(start+batch, len(objs))]
		var wg sync.WaitGroup
		next := make(chan int, len(part))
		for i := range part {
			next <- i
		}
		close(next)
		for range min(workers, len(part)) {
			wg.Go(func() {
				for i := range next {
					docs[i], errs[i] = marshal(part[i])
				}
			})
		}
		wg.Wait()
		for i := range part {
			if errs[i] != nil {
				return written, fmt.Errorf("serialise %s: %w", RefOf(part[i]), errs[i])
			}
		}
		for i := range part {
			n, err := io.WriteString(w, "---\n")
			written += int64(n)
			if err == nil {
				n, err = w.Write(docs[i])
				written += int64(n)
			}
			if err != nil {
				return written, err
			}
			docs[i] = nil
		}
	}
	return written, nil
}

// MarshalObject writes one object as a YAML document (without the "---"
// line) in the form Serialize uses: block YAML, or JSON (a YAML flow
// document) when a string holds a character block YAML cannot carry.
func MarshalObject(u *unstructured.Unstructured) ([]byte, error) {
	j, err := json.Marshal(Stripped(u).Object)
	if err != nil {
		return nil, err
	}
	if !yamlCannotCarry(j) {
		return yaml.JSONToYAML(j)
	}
	return yamlSafeJSON(j), nil
}

// marshalObjectCompact writes one object as SerializeCompactTo does: one
// line of JSON with sorted keys (a YAML flow document), the characters
// YAML's reader refuses escaped.
func marshalObjectCompact(u *unstructured.Unstructured) ([]byte, error) {
	j, err := json.Marshal(Stripped(u).Object)
	if err != nil {
		return nil, err
	}
	if yamlCannotCarry(j) {
		return yamlSafeJSON(j), nil
	}
	return append(j, '\n'), nil
}

// yamlSafeJSON is JSON text as a YAML document: JSON is YAML too, and its
// escapes carry every character exactly once the characters YAML's reader
// refuses raw are escaped as well. It ends with a line break.
func yamlSafeJSON(j []byte) []byte {
	out := make([]byte, 0, len(j)+16)
	for len(j) > 0 {
		r, size := utf8.DecodeRune(j)
		if refusedByYAML(r) {
			out = fmt.Appendf(out, "\\u%04x", r)
		} else {
			out = append(out, j[:size]...)
		}
		j = j[size:]
	}
	return append(out, '\n')
}

// yamlCannotCarry reports whether JSON text holds a string that YAML's
// block form would refuse or change: a character its reader refuses raw
// (refusedByYAML), or a line separator (U+2028, U+2029, which JSON escapes),
// which its emitter writes as a line break that does not read back
// the same. kubectl and the API server take all of them in strings.
func yamlCannotCarry(j []byte) bool {
	return bytes.ContainsFunc(j, refusedByYAML) ||
		bytes.Contains(j, []byte(`\u2028`)) || bytes.Contains(j, []byte(`\u2029`))
}

// refusedByYAML: DEL, the C1 controls, U+FFFE and U+FFFF, which YAML's
// reader refuses raw, and NEL (a C1 control), which it reads as a line break.
// JSON escapes the C0 controls itself; outside strings JSON text is ASCII.
func refusedByYAML(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfffe || r == 0xffff
}

// Stripped returns the object as a strategy stores it (see Serialize). The
// result shares unchanged values with u; u itself is never modified.
func Stripped(u *unstructured.Unstructured) *unstructured.Unstructured {
	if info, _ := kinds.Lookup(u.GroupVersionKind().GroupKind()); info.StoredWhole {
		return u
	}
	obj := shallow(u.Object)
	delete(obj, "status")
	if md := child(obj, "metadata"); md != nil {
		delete(md, "creationTimestamp")
		if labels := child(md, "labels"); labels != nil {
			// KubeVirt keeps an emptied map as "labels: {}".
			delete(labels, metakeys.ManagedByLabel)
		}
	}
	if spec := child(obj, "spec"); spec != nil {
		if tmpl := child(spec, "template"); tmpl != nil {
			if md := child(tmpl, "metadata"); md != nil {
				delete(md, "creationTimestamp")
			}
		}
	}
	return &unstructured.Unstructured{Object: obj}
}

// child replaces m[key], when it is a map, by a shallow copy and returns it.
func child(m map[string]any, key string) map[string]any {
	c, ok := m[key].(map[string]any)
	if !ok {
		return nil
	}
	c = shallow(c)
	m[key] = c
	return c
}

func shallow(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
