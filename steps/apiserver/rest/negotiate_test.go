package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// names is a TableConvertor of one column, NAME: package discovery has
// the real one.
type names struct{}

func (names) ConvertToTable(_ context.Context, obj runtime.Object, _ string) (*metav1.Table, error) {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string"}}}
	objs := []runtime.Object{obj}
	if meta.IsListType(obj) {
		objs, _ = meta.ExtractList(obj)
	}
	for _, o := range objs {
		m, _ := meta.Accessor(o)
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{m.GetName()}})
	}
	return t, nil
}

const kubectlGetAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// kubectl get asks for a Table, then JSON: a Table with a convertor, JSON
// without one.
func TestNegotiation(t *testing.T) {
	tests := []struct {
		name   string
		opts   []Option
		path   string
		accept string
		kind   string
		rows   int
	}{
		{"a list as a Table", []Option{WithTableConvertor(names{})}, "/api/v1/namespaces/default/pods", kubectlGetAccept, "Table", 2},
		{"one object as a Table", []Option{WithTableConvertor(names{})}, "/api/v1/namespaces/default/pods/a", kubectlGetAccept, "Table", 1},
		{"no convertor: JSON", nil, "/api/v1/namespaces/default/pods", kubectlGetAccept, "PodList", 0},
		{"JSON asked", []Option{WithTableConvertor(names{})}, "/api/v1/namespaces/default/pods", "application/json", "PodList", 0},
		{"anything", []Option{WithTableConvertor(names{})}, "/api/v1/namespaces/default/pods/a", "*/*", "Pod", 0},
		{"protobuf first, then JSON (client-go's typed clients)", nil, "/api/v1/namespaces/default/pods/a", "application/vnd.kubernetes.protobuf,application/json", "Pod", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t, nil, tt.opts...)
			for _, n := range []string{"a", "b"} {
				if code, body, _ := l.do("admin", "POST", "/api/v1/namespaces/default/pods", "application/json", []byte(strings.Replace(podJSON, `"web"}`, `"`+n+`"}`, 1))); code != 201 {
					t.Fatalf("%d %s", code, body)
				}
			}
			code, body, _ := l.do("admin", "GET", tt.path, "", nil, "Accept", tt.accept)
			var got struct {
				Kind string            `json:"kind"`
				Rows []json.RawMessage `json:"rows"`
			}
			json.Unmarshal(body, &got)
			if code != http.StatusOK || got.Kind != tt.kind || len(got.Rows) != tt.rows {
				t.Errorf("%d %s with %d rows, want %s with %d: %.300s", code, got.Kind, len(got.Rows), tt.kind, tt.rows, body)
			}
		})
	}
}

// Paths that name no resource are authorized as non-resource URLs, then
// handed to the fallback (discovery, OpenAPI, /version).
func TestFallback(t *testing.T) {
	fb := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("fallback " + r.URL.Path)) })
	tests := []struct {
		name string
		opts []Option
		user string
		path string
		code int
		body string
	}{
		{"discovery for a user", []Option{WithFallback(fb)}, "viewer", "/apis", 200, "fallback /apis"},
		{"a group version", []Option{WithFallback(fb)}, "viewer", "/apis/apps/v1", 200, "fallback /apis/apps/v1"},
		{"/version for anyone", []Option{WithFallback(fb)}, "", "/version", 200, "fallback /version"},
		{"/healthz for anyone", []Option{WithFallback(fb)}, "", "/healthz", 200, "fallback /healthz"},
		{"discovery for nobody", []Option{WithFallback(fb)}, "", "/api", 403, `User \"system:anonymous\" cannot get path \"/api\"`},
		{"no fallback", nil, "admin", "/version", 404, "the server could not find the requested resource"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t, nil, tt.opts...)
			code, body, _ := l.do(tt.user, "GET", tt.path, "", nil)
			if code != tt.code || !strings.Contains(string(body), tt.body) {
				t.Errorf("%d %s, want %d %s", code, body, tt.code, tt.body)
			}
		})
	}
}
