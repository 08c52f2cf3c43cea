package kubectl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/podlab/podlab/steps/apiserver"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Decode reads a manifest, as `kubectl apply -f FILE` does: YAML or JSON,
// one or several documents (YAML separated by "---" lines, JSON objects one
// after another), where a document may also be a List whose items are
// objects. Empty documents are skipped. source names the input in errors
// ("web.yaml", "STDIN").
//
// Each document's apiVersion and kind choose its Go type (a k8s.io/api type,
// see apiserver.ResourceForKind), and the document is decoded strictly, as
// the API server does under kubectl's default --validate=strict: a field the
// type does not have is an error naming its path, e.g.
//
//	web.yaml: document 2 (Pod "web"): unknown field "spec.containers[0].imagePullPolicyy"
//
// The returned objects have their apiVersion and kind set.
func Decode(r io.Reader, source string) ([]apiserver.Object, error) {
	ms, err := DecodeManifests(r, source)
	if err != nil {
		return nil, err
	}
	objs := make([]apiserver.Object, len(ms))
	for i, m := range ms {
		objs[i] = m.Object
	}
	return objs, nil
}

// Manifest is one object of a manifest: typed, and as written (JSON with
// only the fields the document has), which is what kubectl apply compares
// and records in the last-applied annotation. A typed object cannot say
// which fields were left out: encoding it adds "status: {}" and
// "creationTimestamp: null".
type Manifest struct {
	Object apiserver.Object
	JSON   []byte
}

// DecodeManifests is Decode keeping each object as written too.
func DecodeManifests(r io.Reader, source string) ([]Manifest, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", source, err)
	}
	var docs []document
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		docs, err = splitJSON(data, source)
	} else {
		docs, err = splitYAML(data, source)
	}
	if err != nil {
		return nil, err
	}

	var objs []Manifest
	for _, d := range docs {
		if d.json == nil {
			continue // an empty document, or only comments
		}
		got, err := decodeDocument(d.json, fmt.Sprintf("%s: document %d", source, d.number))
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

// document is one document of a manifest, converted to JSON; json is nil for
// an empty document.
type document struct {
	number int
	json   []byte
}

// splitYAML cuts a YAML stream at its "---" lines and converts each document
// to JSON. A line that starts with "---" and goes on with anything but spaces
// or a comment is an error, as in kubectl.
func splitYAML(data []byte, source string) ([]document, error) {
	var docs []document
	var cur bytes.Buffer
	start := 1 // first line of the current document
	flush := func() error {
		n := len(docs) + 1
		// Blank lines in front of the document keep it where it is in the
		// file, so the YAML parser's "line N" is the file's line N.
		doc := append(bytes.Repeat([]byte("\n"), start-1), cur.Bytes()...)
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", source, n, err)
		}
		j = bytes.TrimSpace(j)
		if bytes.Equal(j, []byte("null")) {
			j = nil
		}
		docs = append(docs, document{number: n, json: j})
		cur.Reset()
		return nil
	}

	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		if rest, ok := bytes.CutPrefix(line, []byte("---")); ok {
			rest = bytes.TrimSpace(rest)
			if len(rest) > 0 && rest[0] != '#' {
				return nil, fmt.Errorf("%s: line %d: invalid YAML document separator %q: only spaces or a comment may follow \"---\"", source, i+1, strings.TrimSpace(string(line)))
			}
			if cur.Len() > 0 || len(docs) > 0 {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			start = i + 2
			continue
		}
		cur.Write(line)
	}
	if cur.Len() > 0 || len(docs) == 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// splitJSON reads a stream of JSON objects, one after another.
func splitJSON(data []byte, source string) ([]document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []document
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		n := len(docs) + 1
		if err != nil {
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) {
				line, col := lineCol(data, syntax.Offset)
				return nil, fmt.Errorf("%s: document %d: line %d, column %d: %w", source, n, line, col, err)
			}
			return nil, fmt.Errorf("%s: document %d: %w", source, n, err)
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			raw = nil
		}
		docs = append(docs, document{number: n, json: raw})
	}
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// header is what every object starts with: its type (and its metadata,
// for the name errors show).
type header struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   json.RawMessage `json:"metadata"`
}

// name is metadata.name, or "" when there is none.
func (h header) name() string {
	var m struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(h.Metadata, &m) != nil {
		return ""
	}
	return m.Name
}

// list is kubectl's kind: List (or a typed PodList...): objects in items.
type list struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   json.RawMessage   `json:"metadata,omitempty"`
	Items      []json.RawMessage `json:"items"`
}

// decodeDocument decodes one JSON document into typed objects; where names
// the document in errors.
func decodeDocument(data []byte, where string) ([]Manifest, error) {
	if data[0] != '{' {
		return nil, fmt.Errorf("%s: expected a Kubernetes object (a mapping with apiVersion, kind and metadata), got %s", where, describeJSONValue(data))
	}
	var h header
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &h); err != nil {
		return nil, fmt.Errorf("%s: reading apiVersion and kind: %w", where, err)
	}
	var missing []string
	if h.APIVersion == "" {
		missing = append(missing, "apiVersion not set")
	}
	if h.Kind == "" {
		missing = append(missing, "kind not set")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: %s: every object names its type, e.g. \"apiVersion: v1\" and \"kind: Pod\" (\"apiVersion: apps/v1\" and \"kind: Deployment\")", where, strings.Join(missing, ", "))
	}
	gv, err := schema.ParseGroupVersion(h.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	gvk := gv.WithKind(h.Kind)

	if strings.HasSuffix(h.Kind, "List") {
		if objs, ok, err := decodeList(data, gvk, where); ok {
			return objs, err
		}
	}

	label := where + " (" + h.Kind
	if name := h.name(); name != "" {
		label += fmt.Sprintf(" %q", name)
	}
	label += ")"
	res, err := apiserver.ResourceForKind(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	obj := res.New()
	strict, err := kjson.UnmarshalStrict(data, obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	if len(strict) > 0 {
		return nil, strictError(label, strict)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return []Manifest{{Object: obj, JSON: data}}, nil
}

// strictError lists the fields strict decoding refused: unknown field
// "spec.x", duplicate field "metadata.name".
func strictError(label string, errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s: %s", label, strings.Join(msgs, ", "))
}

// decodeList expands a List (apiVersion v1, kind List) or a typed list of a
// kind podlab serves (PodList); ok is false for a kind that only ends in
// "List" by chance.
func decodeList(data []byte, gvk schema.GroupVersionKind, where string) (objs []Manifest, ok bool, err error) {
	itemKind := ""
	if gvk.Kind != "List" {
		itemKind = strings.TrimSuffix(gvk.Kind, "List")
		if _, err := apiserver.ResourceForKind(gvk.GroupVersion().WithKind(itemKind)); err != nil {
			return nil, false, nil
		}
	}
	var l list
	strict, err := kjson.UnmarshalStrict(data, &l)
	if err != nil {
		return nil, true, fmt.Errorf("%s (%s): %w", where, gvk.Kind, err)
	}
	if len(strict) > 0 {
		return nil, true, strictError(fmt.Sprintf("%s (%s)", where, gvk.Kind), strict)
	}
	for i, item := range l.Items {
		item = bytes.TrimSpace(item)
		if len(item) == 0 || bytes.Equal(item, []byte("null")) {
			continue
		}
		if itemKind != "" {
			// Items of a typed list may leave out their apiVersion and kind.
			item, err = withTypeDefaults(item, gvk.GroupVersion().String(), itemKind)
			if err != nil {
				return nil, true, fmt.Errorf("%s (%s), item %d: %w", where, gvk.Kind, i, err)
			}
		}
		got, err := decodeDocument(item, fmt.Sprintf("%s (%s), item %d", where, gvk.Kind, i))
		if err != nil {
			return nil, true, err
		}
		objs = append(objs, got...)
	}
	return objs, true, nil
}

// withTypeDefaults sets apiVersion and kind in a JSON object that has none.
func withTypeDefaults(item []byte, apiVersion, kind string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(item, &m); err != nil {
		return nil, err
	}
	changed := false
	if _, ok := m["apiVersion"]; !ok {
		m["apiVersion"], _ = json.Marshal(apiVersion)
		changed = true
	}
	if _, ok := m["kind"]; !ok {
		m["kind"], _ = json.Marshal(kind)
		changed = true
	}
	if !changed {
		return item, nil
	}
	return json.Marshal(m)
}

// describeJSONValue names the type of a JSON value that is not an object.
func describeJSONValue(data []byte) string {
	switch data[0] {
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
