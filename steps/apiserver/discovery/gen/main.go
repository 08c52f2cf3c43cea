// Command gen writes steps/apiserver/discovery/data/: the discovery and
// OpenAPI documents kube-apiserver serves, taken from the k8s.io/kubernetes
// module (api/discovery/*.json, api/openapi-spec/v3/*.json and
// api/openapi-spec/swagger.json, which Kubernetes' own CI regenerates from a
// running server) and filtered to the resources podlab serves.
//
//	go run ./steps/apiserver/discovery/gen
//
// The release is the one of podlab's other k8s.io modules (k8s.io/api
// v0.37.2 is Kubernetes v1.37.2); the module is fetched with `go mod
// download`, into the module cache only: podlab's go.mod does not require
// it. -src names an unpacked module instead. The source is recorded in
// data/SOURCE.json, and the run fails if podlab serves a resource or
// subresource the real documents do not have, or if a kept document refers
// ($ref) to a definition it does not carry.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/discovery"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	out := flag.String("out", "steps/apiserver/discovery/data", "the directory to write")
	src := flag.String("src", "", "an unpacked k8s.io/kubernetes module (default: go mod download it)")
	version := flag.String("version", "", "the Kubernetes release (default: that of the k8s.io/api podlab builds with)")
	flag.Parse()
	if err := run(*out, *src, *version); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out, src, version string) error {
	if version == "" {
		v, err := releaseOfAPI()
		if err != nil {
			return err
		}
		version = v
	}
	if src == "" {
		dir, err := download(version)
		if err != nil {
			return err
		}
		src = dir
	}
	s := newServed(apiserver.Resources())
	files := map[string][]byte{}
	if err := genDiscovery(src, s, files); err != nil {
		return err
	}
	if err := genOpenAPI(src, s, files); err != nil {
		return err
	}
	source, err := json.MarshalIndent(discovery.Source{Module: "k8s.io/kubernetes", Version: version,
		Generator: "go run ./steps/apiserver/discovery/gen"}, "", "  ")
	if err != nil {
		return err
	}
	files["SOURCE.json"] = append(source, '\n')

	// Replace what an earlier run wrote (the subdirectories), keep the README.
	for _, sub := range []string{"discovery", "openapi"} {
		if err := os.RemoveAll(filepath.Join(out, sub)); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
		fmt.Printf("%8d %s\n", len(files[name]), p)
	}
	return nil
}

// releaseOfAPI maps the k8s.io/api this program was built with (v0.37.2)
// to its Kubernetes release (v1.37.2).
func releaseOfAPI() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information: pass -version v1.X.Y")
	}
	for _, d := range info.Deps {
		if d.Path == "k8s.io/api" && strings.HasPrefix(d.Version, "v0.") {
			return "v1." + strings.TrimPrefix(d.Version, "v0."), nil
		}
	}
	return "", errors.New("k8s.io/api is not among the build's modules: pass -version v1.X.Y")
}

// download puts k8s.io/kubernetes@version into the module cache and returns
// its directory.
func download(version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+version)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("downloading k8s.io/kubernetes@%s (the module proxy must be reachable, or pass -src DIR): %w", version, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(b, &m); err != nil {
		return "", err
	}
	if m.Error != "" {
		return "", fmt.Errorf("downloading k8s.io/kubernetes@%s: %s", version, m.Error)
	}
	return m.Dir, nil
}

// served is what podlab serves, by group version: resource and
// "resource/subresource" names.
type served struct {
	groups   []string                   // "" first, then the groups in podlab's order
	versions map[string][]string        // group -> versions
	names    map[string]map[string]bool // group version ("v1", "apps/v1") -> names
}

func newServed(resources []apiserver.Resource) served {
	s := served{versions: map[string][]string{}, names: map[string]map[string]bool{}}
	for _, r := range resources {
		gv := r.GroupVersion().String()
		if s.names[gv] == nil {
			s.names[gv] = map[string]bool{}
			if _, ok := s.versions[r.Group]; !ok {
				s.groups = append(s.groups, r.Group)
			}
			s.versions[r.Group] = append(s.versions[r.Group], r.Version)
		}
		s.names[gv][r.Name] = true
		for _, sub := range apiserver.Subresources(r) {
			s.names[gv][r.Name+"/"+sub] = true
		}
	}
	return s
}

func (s served) has(gv, name string) bool { return s.names[gv][name] }

// fileName is the name Kubernetes gives a path's document: /apis/apps/v1
// is apis__apps__v1.
func fileName(path string) string {
	return strings.ReplaceAll(strings.Trim(path, "/"), "/", "__")
}

func gvPath(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

func indented(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

func gzipped(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// genDiscovery filters the unaggregated documents (/api, /apis, /apis/G,
// each group version's APIResourceList) and the aggregated one.
func genDiscovery(src string, s served, files map[string][]byte) error {
	dir := filepath.Join(src, "api", "discovery")
	put := func(name string, v any) error {
		b, err := indented(v)
		files["discovery/"+name+".json"] = b
		return err
	}

	var versions metav1.APIVersions
	if err := readJSON(filepath.Join(dir, "api.json"), &versions); err != nil {
		return err
	}
	// The real server fills in its own address at each request.
	versions.ServerAddressByClientCIDRs = nil
	versions.Versions = s.versions[""]
	if err := put("api", versions); err != nil {
		return err
	}

	var groups metav1.APIGroupList
	if err := readJSON(filepath.Join(dir, "apis.json"), &groups); err != nil {
		return err
	}
	var keptGroups []metav1.APIGroup
	for _, g := range groups.Groups {
		if _, ok := s.versions[g.Name]; !ok || g.Name == "" {
			continue
		}
		g.Versions = keepVersions(g.Versions, s.versions[g.Name])
		keptGroups = append(keptGroups, g)
		var one metav1.APIGroup
		if err := readJSON(filepath.Join(dir, fileName("apis/"+g.Name)+".json"), &one); err != nil {
			return err
		}
		one.Versions = keepVersions(one.Versions, s.versions[g.Name])
		if err := put(fileName("apis/"+g.Name), one); err != nil {
			return err
		}
	}
	groups.Groups = keptGroups
	if len(keptGroups) != len(s.groups)-1 {
		return fmt.Errorf("apis.json has %d of podlab's %d groups", len(keptGroups), len(s.groups)-1)
	}
	if err := put("apis", groups); err != nil {
		return err
	}

	var coreResources []metav1.APIResource
	for _, group := range s.groups {
		for _, version := range s.versions[group] {
			gv := metav1.GroupVersion{Group: group, Version: version}.String()
			var list metav1.APIResourceList
			if err := readJSON(filepath.Join(dir, fileName(gvPath(group, version))+".json"), &list); err != nil {
				return err
			}
			var kept []metav1.APIResource
			for _, r := range list.APIResources {
				if s.has(gv, r.Name) {
					kept = append(kept, r)
				}
			}
			if len(kept) != len(s.names[gv]) {
				return fmt.Errorf("%s: podlab serves what Kubernetes does not: %v", gv, missing(s.names[gv], kept))
			}
			list.APIResources = kept
			if err := put(fileName(gvPath(group, version)), list); err != nil {
				return err
			}
			if group == "" {
				coreResources = kept
			}
		}
	}

	// Aggregated discovery: /apis from the real document; /api (the core
	// group alone) converted from its APIResourceList the way
	// kube-apiserver converts it (ConvertGroupVersionIntoToDiscovery).
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := readJSON(filepath.Join(dir, "aggregated_v2.json"), &agg); err != nil {
		return err
	}
	var keptAgg []apidiscoveryv2.APIGroupDiscovery
	for _, g := range agg.Items {
		if _, ok := s.versions[g.Name]; !ok || g.Name == "" {
			continue
		}
		var vs []apidiscoveryv2.APIVersionDiscovery
		for _, v := range g.Versions {
			gv := metav1.GroupVersion{Group: g.Name, Version: v.Version}.String()
			if s.names[gv] == nil {
				continue
			}
			var rs []apidiscoveryv2.APIResourceDiscovery
			for _, r := range v.Resources {
				if !s.has(gv, r.Resource) {
					continue
				}
				var subs []apidiscoveryv2.APISubresourceDiscovery
				for _, sub := range r.Subresources {
					if s.has(gv, r.Resource+"/"+sub.Subresource) {
						subs = append(subs, sub)
					}
				}
				r.Subresources = subs
				rs = append(rs, r)
			}
			v.Resources = rs
			vs = append(vs, v)
		}
		g.Versions = vs
		keptAgg = append(keptAgg, g)
	}
	agg.Items = keptAgg
	if err := put("aggregated_apis", agg); err != nil {
		return err
	}
	core, err := aggregate(coreResources)
	if err != nil {
		return err
	}
	coreList := apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: agg.TypeMeta,
		Items: []apidiscoveryv2.APIGroupDiscovery{{Versions: []apidiscoveryv2.APIVersionDiscovery{{
			Version: "v1", Resources: core, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		}}}},
	}
	return put("aggregated_api", coreList)
}

func keepVersions(vs []metav1.GroupVersionForDiscovery, keep []string) []metav1.GroupVersionForDiscovery {
	var out []metav1.GroupVersionForDiscovery
	for _, v := range vs {
		for _, k := range keep {
			if v.Version == k {
				out = append(out, v)
			}
		}
	}
	return out
}

func missing(want map[string]bool, got []metav1.APIResource) []string {
	var m []string
	for name := range want {
		found := false
		for _, r := range got {
			found = found || r.Name == name
		}
		if !found {
			m = append(m, name)
		}
	}
	sort.Strings(m)
	return m
}

// aggregate turns a group version's APIResourceList entries into the
// aggregated form: each subresource ("pods/status") becomes an entry of its
// resource's subresources. It follows kube-apiserver's
// ConvertGroupVersionIntoToDiscovery (k8s.io/apiserver/pkg/endpoints), and
// its test checks it against the real aggregated document.
func aggregate(list []metav1.APIResource) ([]apidiscoveryv2.APIResourceDiscovery, error) {
	var out []apidiscoveryv2.APIResourceDiscovery
	index := map[string]int{}
	scope := func(r metav1.APIResource) apidiscoveryv2.ResourceScope {
		if r.Namespaced {
			return apidiscoveryv2.ScopeNamespace
		}
		return apidiscoveryv2.ScopeCluster
	}
	for _, r := range list {
		if strings.Contains(r.Name, "/") {
			continue
		}
		out = append(out, apidiscoveryv2.APIResourceDiscovery{
			Resource:         r.Name,
			Scope:            scope(r),
			ResponseKind:     &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Verbs:            r.Verbs,
			ShortNames:       r.ShortNames,
			Categories:       r.Categories,
			SingularResource: r.SingularName,
		})
		index[r.Name] = len(out) - 1
	}
	for _, r := range list {
		parent, sub, ok := strings.Cut(r.Name, "/")
		if !ok {
			continue
		}
		i, ok := index[parent]
		if !ok {
			return nil, fmt.Errorf("subresource %s has no resource %s in the list", r.Name, parent)
		}
		if out[i].Scope != scope(r) {
			return nil, fmt.Errorf("subresource %s is %s, its resource %s", r.Name, scope(r), out[i].Scope)
		}
		d := apidiscoveryv2.APISubresourceDiscovery{Subresource: sub, Verbs: r.Verbs, ResponseKind: &metav1.GroupVersionKind{}}
		if r.Kind != "" {
			d.ResponseKind = &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		}
		out[i].Subresources = append(out[i].Subresources, d)
	}
	return out, nil
}
