package discovery_test

// These tests compare the embedded documents with podlab's resource table
// (steps/apiserver imports this package for the OpenAPI models, so they
// live in the external test package).

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/podlab/podlab/steps/apiserver"
	pdiscovery "github.com/podlab/podlab/steps/apiserver/discovery"
)

// TestEmbedded_MatchesResources is the drift check: every resource of
// apiserver.Resources is in the embedded discovery with the same kind,
// scope, singular, short names and exactly the subresources Subresources
// names, and every embedded resource is one podlab serves, in both forms.
func TestEmbedded_MatchesResources(t *testing.T) {
	want := map[string]metav1.APIResource{} // "apps/v1 deployments" -> what podlab's table says
	for _, r := range apiserver.Resources() {
		gv := r.GroupVersion().String()
		want[gv+" "+r.Name] = metav1.APIResource{Name: r.Name, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind, ShortNames: r.ShortNames}
		for _, sub := range apiserver.Subresources(r) {
			want[gv+" "+r.Name+"/"+sub] = metav1.APIResource{Name: r.Name + "/" + sub, Namespaced: r.Namespaced}
		}
	}

	// The unaggregated form: one APIResourceList per group version.
	seen := map[string]bool{}
	names, err := pdiscovery.DocNames("discovery")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(name, "discovery/"), ".json")
		if !strings.Contains(base, "__") || strings.Count(base, "__") == 1 && strings.HasPrefix(base, "apis__") {
			continue // api, apis, aggregated_*, apis__GROUP
		}
		b, err := pdiscovery.ReadDoc(name)
		if err != nil {
			t.Fatal(err)
		}
		var list metav1.APIResourceList
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			key := list.GroupVersion + " " + r.Name
			w, ok := want[key]
			if !ok {
				t.Errorf("%s: embedded discovery lists %s, which podlab does not serve", name, r.Name)
				continue
			}
			seen[key] = true
			if strings.Contains(r.Name, "/") {
				if r.Namespaced != w.Namespaced {
					t.Errorf("%s: namespaced %v, podlab's %v", key, r.Namespaced, w.Namespaced)
				}
				continue
			}
			if r.Kind != w.Kind || r.SingularName != w.SingularName || r.Namespaced != w.Namespaced || !slices.Equal(r.ShortNames, w.ShortNames) {
				t.Errorf("%s: embedded {kind %s singular %s namespaced %v shortNames %v}, podlab's table {%s %s %v %v}",
					key, r.Kind, r.SingularName, r.Namespaced, r.ShortNames, w.Kind, w.SingularName, w.Namespaced, w.ShortNames)
			}
			if r.StorageVersionHash == "" {
				t.Errorf("%s: no storageVersionHash", key)
			}
		}
	}
	for key := range want {
		if !seen[key] {
			t.Errorf("podlab serves %s, which the embedded unaggregated discovery does not list (run go run ./steps/apiserver/discovery/gen)", key)
		}
	}

	// The aggregated form.
	seenAgg := map[string]bool{}
	for _, doc := range []string{"discovery/aggregated_api.json", "discovery/aggregated_apis.json"} {
		b, err := pdiscovery.ReadDoc(doc)
		if err != nil {
			t.Fatal(err)
		}
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		for _, g := range list.Items {
			for _, v := range g.Versions {
				gv := metav1.GroupVersion{Group: g.Name, Version: v.Version}.String()
				for _, r := range v.Resources {
					key := gv + " " + r.Resource
					w, ok := want[key]
					if !ok {
						t.Errorf("%s: lists %s, which podlab does not serve", doc, key)
						continue
					}
					seenAgg[key] = true
					scope := apidiscoveryv2.ScopeCluster
					if w.Namespaced {
						scope = apidiscoveryv2.ScopeNamespace
					}
					if r.ResponseKind == nil || r.ResponseKind.Kind != w.Kind || r.Scope != scope || !slices.Equal(r.ShortNames, w.ShortNames) {
						t.Errorf("%s: %s: kind %v scope %s shortNames %v, podlab's %s %s %v", doc, key, r.ResponseKind, r.Scope, r.ShortNames, w.Kind, scope, w.ShortNames)
					}
					for _, sub := range r.Subresources {
						k := key + "/" + sub.Subresource
						if _, ok := want[k]; !ok {
							t.Errorf("%s: lists %s, which podlab does not serve", doc, k)
						}
						seenAgg[k] = true
					}
				}
			}
		}
	}
	for key := range want {
		if !seenAgg[key] {
			t.Errorf("podlab serves %s, which the embedded aggregated discovery does not list", key)
		}
	}
}

// TestDiscoveryClient reads the server with client-go's discovery client,
// as kubectl does: aggregated discovery first, then OpenAPI v3.
func TestDiscoveryClient(t *testing.T) {
	var paths []string
	h, err := pdiscovery.Handler(pdiscovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(paths, []string{"/api", "/apis"}) {
		t.Errorf("client-go asked %v, want only /api and /apis (aggregated discovery)", paths)
	}
	var groupNames []string
	for _, g := range groups {
		groupNames = append(groupNames, g.Name)
	}
	if want := []string{"", "apps", "rbac.authorization.k8s.io", "admissionregistration.k8s.io", "coordination.k8s.io", "node.k8s.io"}; !slices.Equal(groupNames, want) {
		t.Errorf("groups %q, want %q", groupNames, want)
	}
	found := map[string]metav1.APIResource{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			found[l.GroupVersion+" "+r.Name] = r
		}
	}
	for _, r := range apiserver.Resources() {
		got, ok := found[r.GroupVersion().String()+" "+r.Name]
		if !ok {
			t.Errorf("client-go did not discover %s", r.Name)
			continue
		}
		if got.Kind != r.Kind || got.Namespaced != r.Namespaced {
			t.Errorf("%s: discovered kind %s namespaced %v", r.Name, got.Kind, got.Namespaced)
		}
	}
	if _, ok := found["v1 pods/status"]; !ok {
		t.Error("client-go did not discover pods/status")
	}
	if got := found["apps/v1 deployments"].Categories; !slices.Equal(got, []string{"all"}) {
		t.Errorf("deployments' categories %v, want [all]", got)
	}

	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	v, err := version.ParseSemantic(info.GitVersion)
	if err != nil {
		t.Fatalf("kubectl cannot parse the server's version %q: %v", info.GitVersion, err)
	}
	if v.Major() != 1 || v.Minor() != 37 {
		t.Errorf("version %s, want 1.37", v)
	}

	// OpenAPI v2 as client-go asks for it: protobuf only.
	v2, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]bool{}
	for _, d := range v2.GetDefinitions().GetAdditionalProperties() {
		defs[d.GetName()] = true
	}
	if !defs["io.k8s.api.apps.v1.Deployment"] || defs["io.k8s.api.batch.v1.Job"] {
		t.Errorf("OpenAPI v2 definitions: Deployment %v, Job %v; want only podlab's kinds", defs["io.k8s.api.apps.v1.Deployment"], defs["io.k8s.api.batch.v1.Job"])
	}

	openapi, err := dc.OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	gv, ok := openapi["apis/apps/v1"]
	if !ok {
		t.Fatalf("OpenAPI v3 paths %v lack apis/apps/v1", openapi)
	}
	b, err := gv.Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"name":"fieldValidation"`) {
		t.Error("apps/v1's OpenAPI document lacks the fieldValidation parameter kubectl looks for")
	}
}
