package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
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
