package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"github.com/podlab/podlab/internal/testenv"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAggregate_MatchesKubernetes converts the apps/v1 and rbac/v1
// APIResourceLists and compares the result with the aggregated document the
// real kube-apiserver wrote for the same groups: /api's aggregated form,
// which Kubernetes does not ship, is made by this conversion.
func TestAggregate_MatchesKubernetes(t *testing.T) {
	dir := filepath.Join("..", "data", "discovery")
	var agg apidiscoveryv2.APIGroupDiscoveryList
	read(t, filepath.Join(dir, "aggregated_apis.json"), &agg)
	if len(agg.Items) == 0 {
		t.Fatal("aggregated_apis.json has no groups")
	}
	for _, g := range agg.Items {
		for _, v := range g.Versions {
			var list metav1.APIResourceList
			read(t, filepath.Join(dir, fileName(gvPath(g.Name, v.Version))+".json"), &list)
			got, err := aggregate(list.APIResources)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, v.Resources) {
				a, _ := json.MarshalIndent(got, "", " ")
				b, _ := json.MarshalIndent(v.Resources, "", " ")
				t.Errorf("%s/%s: converted\n%s\nkube-apiserver's\n%s", g.Name, v.Version, a, b)
			}
		}
	}
}

func TestAggregate_BadInput(t *testing.T) {
	tests := []struct {
		name string
		list []metav1.APIResource
	}{
		{"subresource without its resource", []metav1.APIResource{{Name: "pods/status", Namespaced: true}}},
		{"scopes differ", []metav1.APIResource{{Name: "pods", Namespaced: true}, {Name: "pods/status"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := aggregate(tt.list); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestServesPath(t *testing.T) {
	s := newServed(nil)
	s.versions = map[string][]string{"": {"v1"}, "apps": {"v1"}}
	s.names = map[string]map[string]bool{"v1": {"pods": true, "pods/status": true, "namespaces": true, "namespaces/status": true}, "apps/v1": {"deployments": true}}
	for p, want := range map[string]bool{
		"/api/":       true,
		"/api/v1/":    true,
		"/apis/apps/": true,
		"/apis/apps/v1/namespaces/{namespace}/deployments/{name}": true,
		"/api/v1/namespaces/{namespace}/pods":                     true,
		"/api/v1/pods":                                            true,
		"/api/v1/namespaces/{namespace}/pods/{name}/status":       true,
		"/api/v1/namespaces/{name}/status":                        true,
		"/api/v1/namespaces/{name}":                               true,
		"/api/v1/namespaces/{namespace}/pods/{name}/attach":       false,
		"/api/v1/namespaces/{name}/finalize":                      false,
		"/api/v1/namespaces/{namespace}/pods/{name}/proxy/{path}": false,
		"/api/v1/watch/namespaces/{namespace}/pods":               false,
		"/api/v1/configmaps":                                      false,
		"/apis/batch/v1/jobs":                                     false,
		"/apis/batch/":                                            false,
		"/logs/":                                                  false,
	} {
		if got := s.servesPath(p); got != want {
			t.Errorf("servesPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func read(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestGenerated_UpToDate regenerates data/ from the module in the module
// cache and compares it with what is committed: a change to podlab's
// resources or Subresources without a new run of the generator fails here.
// When the module is not in the cache, CI downloads it through the module
// proxy (the generator's own download); elsewhere the test skips.
func TestGenerated_UpToDate(t *testing.T) {
	var src struct{ Version string }
	read(t, filepath.Join("..", "data", "SOURCE.json"), &src)
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+src.Version)
	if _, err := os.Stat(filepath.Join(dir, "api", "discovery")); err != nil {
		if !testenv.InCI() {
			t.Skipf("k8s.io/kubernetes@%s is not in the module cache (go mod download it to run this test)", src.Version)
		}
		if dir, err = download(src.Version); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	if err := run(tmp, dir, src.Version); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "data")
	seen := map[string]bool{}
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(tmp, p)
		seen[rel] = true
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(committed, rel))
		if err == nil && strings.HasSuffix(rel, ".gz") {
			// Compare the documents, not the compressor's output, which
			// may change with Go's release.
			got, want = gunzip(t, got), gunzip(t, want)
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("data/%s is not what the generator writes now: run go run ./steps/apiserver/discovery/gen", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(committed, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(committed, p)
		if rel != "README.md" && !seen[rel] {
			t.Errorf("data/%s is not written by the generator any more: remove it", rel)
		}
		return nil
	})
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
