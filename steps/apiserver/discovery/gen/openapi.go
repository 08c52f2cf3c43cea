package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

// genOpenAPI filters the OpenAPI v3 documents of podlab's group versions
// (and of /api, /apis, /apis/GROUP, /version) and the v2 swagger.json.
func genOpenAPI(src string, s served, files map[string][]byte) error {
	dir := filepath.Join(src, "api", "openapi-spec")
	docs := []string{"api", "apis", "version"}
	for _, g := range s.groups {
		if g != "" {
			docs = append(docs, "apis/"+g)
		}
		for _, v := range s.versions[g] {
			docs = append(docs, gvPath(g, v))
		}
	}
	for _, d := range docs {
		var doc map[string]any
		if err := readJSON(filepath.Join(dir, "v3", fileName(d)+"_openapi.json"), &doc); err != nil {
			return err
		}
		if err := filterDoc(doc, s); err != nil {
			return fmt.Errorf("OpenAPI v3 document %s: %w", d, err)
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		if files["openapi/v3/"+fileName(d)+".json.gz"], err = gzipped(b); err != nil {
			return err
		}
	}

	var swagger map[string]any
	if err := readJSON(filepath.Join(dir, "swagger.json"), &swagger); err != nil {
		return err
	}
	if err := filterDoc(swagger, s); err != nil {
		return fmt.Errorf("swagger.json: %w", err)
	}
	b, err := json.Marshal(swagger)
	if err != nil {
		return err
	}
	if files["openapi/v2/swagger.json.gz"], err = gzipped(b); err != nil {
		return err
	}
	// The same document as protobuf, which client-go's OpenAPISchema asks
	// for alone: kube-openapi converts it the same way (ToProtoBinary).
	doc, err := openapi_v2.ParseDocument(b)
	if err != nil {
		return fmt.Errorf("swagger.json as protobuf: %w", err)
	}
	pb, err := proto.MarshalOptions{Deterministic: true}.Marshal(doc)
	if err != nil {
		return fmt.Errorf("swagger.json as protobuf: %w", err)
	}
	files["openapi/v2/swagger.pb.gz"], err = gzipped(pb)
	return err
}

// filterDoc keeps the paths podlab serves, then only the definitions
// (v2 definitions and parameters, v3 components.schemas) those paths refer
// to, directly or through other definitions: every $ref left resolves.
func filterDoc(doc map[string]any, s served) error {
	paths, _ := doc["paths"].(map[string]any)
	for p := range paths {
		if !s.servesPath(p) {
			delete(paths, p)
		}
	}
	// The sections a "#/a/b/NAME" reference can point into.
	sections := map[string]map[string]any{}
	for _, sec := range []string{"definitions", "parameters", "components/schemas", "components/parameters", "components/responses"} {
		if m := lookup(doc, sec); m != nil {
			sections[sec] = m
		}
	}
	keep := map[string]map[string]bool{}
	for sec := range sections {
		keep[sec] = map[string]bool{}
	}
	var walk func(v any) error
	walk = func(v any) error {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				sec, name, err := splitRef(ref)
				if err != nil {
					return err
				}
				defs, ok := sections[sec]
				if !ok {
					return fmt.Errorf("$ref %q points into a section the document does not have", ref)
				}
				def, ok := defs[name]
				if !ok {
					return fmt.Errorf("$ref %q does not resolve", ref)
				}
				if !keep[sec][name] {
					keep[sec][name] = true
					if err := walk(def); err != nil {
						return err
					}
				}
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if err := walk(v[k]); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(paths); err != nil {
		return err
	}
	for sec, defs := range sections {
		for name := range defs {
			if !keep[sec][name] {
				delete(defs, name)
			}
		}
	}
	return nil
}

// lookup finds the object at a slash-separated path of doc, or nil.
func lookup(doc map[string]any, path string) map[string]any {
	cur := doc
	for _, k := range strings.Split(path, "/") {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// splitRef splits "#/components/schemas/io.k8s.api.core.v1.Pod" into its
// section and name. Definition names contain dots but no slashes.
func splitRef(ref string) (section, name string, err error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return "", "", fmt.Errorf("$ref %q is not local to the document", ref)
	}
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", "", fmt.Errorf("$ref %q has no section", ref)
	}
	return p[:i], strings.ReplaceAll(strings.ReplaceAll(p[i+1:], "~1", "/"), "~0", "~"), nil
}

// servesPath reports whether podlab serves an OpenAPI path: the discovery
// roots, and each resource's collection, object and served subresource
// paths, namespaced or across namespaces. The deprecated /watch/ paths (a
// watch is ?watch=true now) and proxy paths are left out.
func (s served) servesPath(p string) bool {
	switch p {
	case "/api/", "/apis/", "/version/":
		return true
	}
	rest, gv, ok := s.splitGV(p)
	if !ok {
		return false
	}
	if rest == "" {
		return true // /api/v1/, /apis/apps/v1/ (getAPIResources); /apis/apps/ (getAPIGroup)
	}
	seg := strings.Split(rest, "/")
	if seg[0] == "watch" {
		return false
	}
	if len(seg) >= 3 && seg[0] == "namespaces" && seg[1] == "{namespace}" {
		seg = seg[2:]
	}
	switch len(seg) {
	case 1, 2: // pods, pods/{name}
		return s.has(gv, seg[0])
	case 3: // pods/{name}/status
		return s.has(gv, seg[0]+"/"+seg[2])
	}
	return false
}

// splitGV splits "/api/v1/namespaces/{namespace}/pods" into the group
// version "v1" and "namespaces/{namespace}/pods"; "/apis/apps/" is the
// group alone, with gv "apps" and an empty rest.
func (s served) splitGV(p string) (rest, gv string, ok bool) {
	if r, found := strings.CutPrefix(p, "/api/"); found {
		version, rest, _ := strings.Cut(r, "/")
		return rest, version, s.names[version] != nil
	}
	r, found := strings.CutPrefix(p, "/apis/")
	if !found {
		return "", "", false
	}
	group, r, _ := strings.Cut(r, "/")
	if r == "" {
		_, ok := s.versions[group]
		return "", group, ok && group != ""
	}
	version, rest, _ := strings.Cut(r, "/")
	gv = group + "/" + version
	return rest, gv, s.names[gv] != nil
}
