package discovery

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The documents gen writes, embedded in the binary.
//
//go:embed data
var data embed.FS

// Source names where the embedded documents come from: the module and
// release whose api/discovery and api/openapi-spec they were filtered from.
type Source struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Generator string `json:"generator"`
}

// EmbeddedSource reads data/SOURCE.json.
func EmbeddedSource() (Source, error) {
	var s Source
	b, err := data.ReadFile("data/SOURCE.json")
	if err != nil {
		return s, fmt.Errorf("reading the embedded documents' source (run go run ./steps/apiserver/discovery/gen): %w", err)
	}
	return s, json.Unmarshal(b, &s)
}

// readDoc reads an embedded document by its name under data/, gunzipping
// names that end in .gz.
func readDoc(name string) ([]byte, error) {
	b, err := data.ReadFile("data/" + name)
	if err != nil {
		return nil, fmt.Errorf("reading embedded document %s (run go run ./steps/apiserver/discovery/gen): %w", name, err)
	}
	if !strings.HasSuffix(name, ".gz") {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("reading embedded document %s: %w", name, err)
	}
	return io.ReadAll(zr)
}

// docNames lists the embedded documents under dir, without the data/
// prefix.
func docNames(dir string) ([]string, error) {
	entries, err := fs.ReadDir(data, "data/"+dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, dir+"/"+e.Name())
	}
	return names, nil
}

// OpenAPIDefinitions parses the embedded swagger v2 document's definitions
// into kube-openapi schemas, by name ("io.k8s.api.core.v1.Pod"): the
// models kube-apiserver builds its field manager's type converter from
// (managedfields.NewTypeConverter), with the x-kubernetes-list-type and
// patch merge keys that say how lists merge under server-side apply. It
// takes about 35 ms: call it once, when the first write needs it.
func OpenAPIDefinitions() (map[string]*spec.Schema, error) {
	b, err := readDoc("openapi/v2/swagger.json.gz")
	if err != nil {
		return nil, err
	}
	var sw spec.Swagger
	if err := json.Unmarshal(b, &sw); err != nil {
		return nil, fmt.Errorf("parsing the embedded swagger document: %w", err)
	}
	defs := make(map[string]*spec.Schema, len(sw.Definitions))
	for name, s := range sw.Definitions {
		defs[name] = &s
	}
	return defs, nil
}
