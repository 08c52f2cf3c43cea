package discovery

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
)

func newServer(t *testing.T, opts Options) *httptest.Server {
	t.Helper()
	h, err := Handler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestEmbedded_OpenAPIRefsResolve: every $ref of every embedded OpenAPI
// document names a definition the same document carries.
func TestEmbedded_OpenAPIRefsResolve(t *testing.T) {
	names, err := docNames("openapi/v3")
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, "openapi/v2/swagger.json.gz")
	for _, name := range names {
		b, err := readDoc(name)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		refs := 0
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if ref, ok := v["$ref"].(string); ok {
					refs++
					if resolve(doc, ref) == nil {
						t.Errorf("%s: $ref %q does not resolve", name, ref)
					}
				}
				for _, e := range v {
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		walk(doc)
		if refs == 0 && !strings.Contains(name, "version") {
			t.Errorf("%s: no $ref at all: is it filtered to nothing?", name)
		}
	}
}

func resolve(doc map[string]any, ref string) any {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	parts := strings.Split(p, "/")
	var cur any = doc
	// Definition names contain dots, not slashes: the last part is the name.
	for _, k := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// TestHandler serves each path and checks what a client reads from it.
func TestHandler(t *testing.T) {
	srv := newServer(t, Options{})
	tests := []struct {
		name        string
		path        string
		accept      string
		code        int
		contentType string
		contains    []string
	}{
		{"api legacy", "/api", "application/json", 200, "application/json", []string{`"kind":"APIVersions"`, `"versions":["v1"]`, `"serverAddress":"` + strings.TrimPrefix(srv.URL, "http://") + `"`}},
		{"api aggregated", "/api", ContentTypeAggregated + ",application/json", 200, ContentTypeAggregated, []string{`"kind":"APIGroupDiscoveryList"`, `"resource":"pods"`, `"subresource":"binding"`}},
		{"api aggregated nopeer", "/api", ContentTypeAggregated + ";profile=nopeer," + ContentTypeAggregated + ",application/json", 200, ContentTypeAggregated, []string{`"resource":"pods"`}},
		{"apis legacy", "/apis", "", 200, "application/json", []string{`"kind":"APIGroupList"`, `"name":"apps"`, `"name":"rbac.authorization.k8s.io"`}},
		{"apis aggregated", "/apis", ContentTypeAggregated, 200, ContentTypeAggregated, []string{`"resource":"deployments"`, `"subresource":"scale"`, `"categories":["all"]`}},
		{"core group version", "/api/v1", "", 200, "application/json", []string{`"groupVersion":"v1"`, `"name":"pods/status"`, `"shortNames":["po"]`, `"storageVersionHash":"xPOwRZ+Yhw8="`}},
		{"apps group", "/apis/apps", "", 200, "application/json", []string{`"kind":"APIGroup"`, `"preferredVersion":{"groupVersion":"apps/v1"`}},
		{"apps group version", "/apis/apps/v1/", "", 200, "application/json", []string{`"name":"deployments/scale"`, `"shortNames":["deploy"]`}},
		{"version", "/version", "", 200, "application/json", []string{`"gitVersion": "v1.37.2+podlab"`, `"major": "1"`, `"minor": "37"`}},
		{"healthz", "/healthz", "", 200, "text/plain; charset=utf-8", []string{"ok"}},
		{"livez verbose", "/livez?verbose", "", 200, "text/plain; charset=utf-8", []string{"[+]ping ok\nlivez check passed\n"}},
		{"readyz one check", "/readyz/ping", "", 200, "text/plain; charset=utf-8", []string{"ok"}},
		{"openapi v2", "/openapi/v2", "application/json", 200, "application/json", []string{`"swagger":"2.0"`, `"io.k8s.api.core.v1.Pod"`}},
		{"openapi v2 protobuf", "/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", 200, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", []string{"io.k8s.api.core.v1.Pod"}},
		{"openapi v3 index", "/openapi/v3", "", 200, "application/json", []string{`"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=`, `"apis/apps/v1"`}},
		{"openapi v3 apps", "/openapi/v3/apis/apps/v1", "application/json", 200, "application/json", []string{`"io.k8s.api.apps.v1.Deployment"`, `"fieldValidation"`}},
		{"resource path", "/api/v1/namespaces/default/pods", "", 404, "application/json", []string{`"reason":"NotFound"`, "the server could not find the requested resource"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, srv.URL+tt.path, map[string]string{"Accept": tt.accept})
			if resp.StatusCode != tt.code {
				t.Fatalf("GET %s: %d, want %d: %s", tt.path, resp.StatusCode, tt.code, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.contentType {
				t.Errorf("GET %s: Content-Type %q, want %q", tt.path, ct, tt.contentType)
			}
			for _, c := range tt.contains {
				if !strings.Contains(body, c) {
					t.Errorf("GET %s: no %s in\n%.600s", tt.path, c, body)
				}
			}
		})
	}
}

// TestHandler_BadInput: what a client gets for what podlab does not serve.
func TestHandler_BadInput(t *testing.T) {
	srv := newServer(t, Options{})
	tests := []struct {
		name, method, path, accept string
		code                       int
		contains                   string
	}{
		{"write to discovery", http.MethodPost, "/api", "", 405, `"reason":"MethodNotAllowed"`},
		{"delete a document", http.MethodDelete, "/openapi/v3/api/v1", "", 405, `"reason":"MethodNotAllowed"`},
		{"group podlab lacks", http.MethodGet, "/apis/batch/v1", "", 404, `"reason":"NotFound"`},
		{"version podlab lacks", http.MethodGet, "/apis/apps/v1beta1", "", 404, `"reason":"NotFound"`},
		{"openapi of a group podlab lacks", http.MethodGet, "/openapi/v3/apis/batch/v1", "", 404, `"reason":"NotFound"`},
		{"unknown path", http.MethodGet, "/metrics", "", 404, "the server could not find the requested resource"},
		{"unknown health check", http.MethodGet, "/livez/etcd", "", 404, `"reason":"NotFound"`},
		{"openapi v2 as xml", http.MethodGet, "/openapi/v2", "application/xml", 406, `"reason":"NotAcceptable"`},
		{"discovery protobuf only", http.MethodGet, "/apis", "application/vnd.kubernetes.protobuf", 406, `"reason":"NotAcceptable"`},
		{"stale openapi hash", http.MethodGet, "/openapi/v3/api/v1?hash=0123", "", 301, ""},
		{"malformed accept", http.MethodGet, "/api", ";;;", 406, `"reason":"NotAcceptable"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			req.Header.Set("Accept", tt.accept)
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code {
				t.Fatalf("%s %s: %d, want %d: %s", tt.method, tt.path, resp.StatusCode, tt.code, b)
			}
			if !strings.Contains(string(b), tt.contains) {
				t.Errorf("%s %s: no %s in %s", tt.method, tt.path, tt.contains, b)
			}
			if tt.code == 301 && !strings.HasPrefix(resp.Header.Get("Location"), "/openapi/v3/api/v1?hash=") {
				t.Errorf("redirect to %q", resp.Header.Get("Location"))
			}
		})
	}
}

func TestHandler_OpenAPIV3Hash(t *testing.T) {
	srv := newServer(t, Options{})
	_, index := get(t, srv.URL+"/openapi/v3", nil)
	var idx struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(index), &idx); err != nil {
		t.Fatal(err)
	}
	var gvs []string
	for gv := range idx.Paths {
		gvs = append(gvs, gv)
	}
	sort.Strings(gvs)
	if want := []string{"api", "api/v1", "apis", "apis/admissionregistration.k8s.io", "apis/admissionregistration.k8s.io/v1", "apis/apps", "apis/apps/v1", "apis/coordination.k8s.io", "apis/coordination.k8s.io/v1", "apis/node.k8s.io", "apis/node.k8s.io/v1", "apis/rbac.authorization.k8s.io", "apis/rbac.authorization.k8s.io/v1", "version"}; !slices.Equal(gvs, want) {
		t.Errorf("index lists %v, want %v", gvs, want)
	}
	resp, _ := get(t, srv.URL+idx.Paths["apis/apps/v1"].ServerRelativeURL, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "public, immutable" {
		t.Errorf("GET with the current hash: %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	etag := resp.Header.Get("Etag")
	resp, _ = get(t, srv.URL+"/openapi/v3/apis/apps/v1", map[string]string{"If-None-Match": etag})
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("GET with If-None-Match of the current ETag: %d, want 304", resp.StatusCode)
	}
}

func TestHandler_Health(t *testing.T) {
	broken := Check{Name: "etcd", Check: func(*http.Request) error { return errors.New("store closed") }}
	syncing := Check{Name: "informer-sync", Check: func(*http.Request) error { return errors.New("not synced") }}
	srv := newServer(t, Options{Checks: []Check{broken}, ReadyChecks: []Check{syncing}})
	tests := []struct {
		path string
		code int
		body string
	}{
		{"/livez", 500, "[+]ping ok\n[-]etcd failed: reason withheld\nlivez check failed\n"},
		{"/readyz", 500, "[+]ping ok\n[-]etcd failed: reason withheld\n[-]informer-sync failed: reason withheld\nreadyz check failed\n"},
		{"/livez?exclude=etcd", 200, "ok"},
		{"/livez?exclude=etcd&verbose", 200, "[+]ping ok\n[+]etcd excluded: ok\nlivez check passed\n"},
		{"/healthz?exclude=nope&exclude=etcd&verbose", 200, "[+]ping ok\n[+]etcd excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"},
		{"/livez/etcd", 500, "internal server error: store closed\n"},
		{"/livez/informer-sync", 404, ""},
	}
	for _, tt := range tests {
		resp, body := get(t, srv.URL+tt.path, nil)
		if resp.StatusCode != tt.code || (tt.body != "" && body != tt.body) {
			t.Errorf("GET %s: %d %q, want %d %q", tt.path, resp.StatusCode, body, tt.code, tt.body)
		}
	}
}
