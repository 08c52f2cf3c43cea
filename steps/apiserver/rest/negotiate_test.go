package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/kubernetes/scheme"
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
		{"a Table in protobuf, then JSON", []Option{WithTableConvertor(names{})}, "/api/v1/namespaces/default/pods", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", "PodList", 0},
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

// client-go's typed clients ask for "application/vnd.kubernetes.protobuf,
// application/json": kube-apiserver answers protobuf ("k8s\x00", then a
// runtime.Unknown around the object), which they decode several times
// faster than JSON; a Table is JSON only.
func TestNegotiation_Protobuf(t *testing.T) {
	const proto = "application/vnd.kubernetes.protobuf"
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        []byte
		accept      string
		code        int
		wantType    string
		kind        string
		items       int
	}{
		{"a list", "GET", "/api/v1/namespaces/default/pods", "", nil, proto + ",application/json", 200, proto, "PodList", 2},
		{"a list of every namespace", "GET", "/api/v1/pods?limit=1", "", nil, proto + ",application/json", 200, proto, "PodList", 1},
		{"one object", "GET", "/api/v1/namespaces/default/pods/a", "", nil, proto + ",application/json", 200, proto, "Pod", 0},
		{"a create's answer", "POST", "/api/v1/namespaces/default/pods", "application/json", []byte(strings.Replace(podJSON, `"web"}`, `"c"}`, 1)), proto, 201, proto, "Pod", 0},
		{"a scale", "GET", "/apis/apps/v1/namespaces/default/deployments/none/scale", "", nil, proto, 404, "application/json", "Status", 0},
		{"JSON first", "GET", "/api/v1/namespaces/default/pods", "", nil, "application/json," + proto, 200, "application/json", "PodList", 3},
		{"an error stays JSON", "GET", "/api/v1/namespaces/default/pods/nope", "", nil, proto, 404, "application/json", "Status", 0},
		{"protobuf metadata only: not served", "GET", "/api/v1/namespaces/default/pods", "", nil, proto + ";as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", 406, "application/json", "Status", 0},
	}
	l := newLab(t, nil, WithTableConvertor(names{}))
	for _, n := range []string{"a", "b"} {
		if code, body, _ := l.do("admin", "POST", "/api/v1/namespaces/default/pods", "application/json", []byte(strings.Replace(podJSON, `"web"}`, `"`+n+`"}`, 1))); code != 201 {
			t.Fatalf("%d %s", code, body)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, hdr := l.do("admin", tt.method, tt.path, tt.contentType, tt.body, "Accept", tt.accept)
			if code != tt.code || hdr.Get("Content-Type") != tt.wantType {
				t.Fatalf("%d %s, want %d %s: %.300q", code, hdr.Get("Content-Type"), tt.code, tt.wantType, body)
			}
			var obj runtime.Object
			var err error
			if tt.wantType == proto {
				if !strings.HasPrefix(string(body), "k8s\x00") {
					t.Fatalf("a protobuf body starts with %q, want k8s\\x00", body[:min(len(body), 4)])
				}
				obj, _, err = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(body, nil, nil)
			} else {
				obj, _, err = scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
				if tt.kind == "Status" {
					err = nil
					obj = &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: status(t, body).Kind}}
				}
			}
			if err != nil {
				t.Fatalf("decoding: %v: %.300q", err, body)
			}
			if kind := obj.GetObjectKind().GroupVersionKind().Kind; kind != tt.kind {
				t.Fatalf("a %s, want a %s", kind, tt.kind)
			}
			if tt.kind == "PodList" {
				pl := obj.(*corev1.PodList)
				if len(pl.Items) != tt.items || pl.ResourceVersion == "" || pl.Items[0].ResourceVersion == "" || pl.Items[0].Spec.Containers[0].Image != "nginx" {
					t.Errorf("%d items (want %d), list resourceVersion %q, first item %+v", len(pl.Items), tt.items, pl.ResourceVersion, pl.Items[0].ObjectMeta)
				}
			}
			if tt.kind == "Pod" && (obj.(*corev1.Pod).ResourceVersion == "" || obj.(*corev1.Pod).UID == "") {
				t.Errorf("a pod without its resourceVersion or uid: %+v", obj.(*corev1.Pod).ObjectMeta)
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

// A watch asked in protobuf first (client-go's informers) is
// application/vnd.kubernetes.protobuf;stream=watch: length-prefixed
// metav1.WatchEvents, each object a protobuf response of its own, as
// kube-apiserver frames it; the initial-events-end bookmark is a Pod too.
func TestWatch_Protobuf(t *testing.T) {
	l := newLab(t, nil)
	for _, n := range []string{"a", "b"} {
		if code, body, _ := l.do("admin", "POST", "/api/v1/namespaces/default/pods", "application/json", []byte(strings.Replace(podJSON, `"web"}`, `"`+n+`"}`, 1))); code != 201 {
			t.Fatalf("%d %s", code, body)
		}
	}
	code, body, hdr := l.do("admin", "GET", "/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", "", nil,
		"Accept", "application/vnd.kubernetes.protobuf,application/json")
	if code != 200 || hdr.Get("Content-Type") != "application/vnd.kubernetes.protobuf;stream=watch" {
		t.Fatalf("%d %s: %.200q", code, hdr.Get("Content-Type"), body)
	}
	frames := protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(bytes.NewReader(body)))
	var got []string
	for {
		buf := make([]byte, len(body))
		n, err := frames.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("frame %d: %v", len(got), err)
		}
		var we metav1.WatchEvent
		if err := we.Unmarshal(buf[:n]); err != nil {
			t.Fatalf("frame %d is not a WatchEvent: %v", len(got), err)
		}
		obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(we.Object.Raw, nil, nil)
		if err != nil {
			t.Fatalf("the object of frame %d: %v", len(got), err)
		}
		p := obj.(*corev1.Pod)
		got = append(got, fmt.Sprintf("%s %s %v", we.Type, p.Name, p.Annotations[metav1.InitialEventsAnnotationKey] == "true" && p.ResourceVersion != ""))
	}
	want := "ADDED a false, ADDED b false, BOOKMARK  true"
	if strings.Join(got, ", ") != want {
		t.Errorf("events %q, want %q", strings.Join(got, ", "), want)
	}
}

// A list in protobuf is made of the stored bytes of its items (no decode
// and encode again): decoded, it is the very list the JSON answer holds,
// items, resourceVersions, continue token and remaining count included,
// for namespaced and cluster-scoped kinds, one namespace or all, a page or
// the whole.
func TestList_ProtobufFromStoredBytes(t *testing.T) {
	l := newLab(t, nil)
	for _, n := range []string{"a", "b", "c"} {
		if code, body, _ := l.do("admin", "POST", "/api/v1/namespaces/default/pods", "application/json", []byte(strings.Replace(podJSON, `"web"}`, `"`+n+`"}`, 1))); code != 201 {
			t.Fatalf("%d %s", code, body)
		}
	}
	// an update: b's resourceVersion is no longer its creation's
	if code, body, _ := l.do("admin", "PATCH", "/api/v1/namespaces/default/pods/b", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	_, first, _ := podList(t, l, "limit=1")
	tests := []struct{ name, path string }{
		{"one namespace", "/api/v1/namespaces/default/pods"},
		{"every namespace", "/api/v1/pods"},
		{"a first page", "/api/v1/namespaces/default/pods?limit=2"},
		{"a later page", "/api/v1/namespaces/default/pods?limit=1&continue=" + first.Continue},
		{"a cluster-scoped kind", "/api/v1/namespaces"},
		{"an RBAC kind", "/apis/rbac.authorization.k8s.io/v1/clusterroles?limit=3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lists := map[string]runtime.Object{}
			for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
				code, body, hdr := l.do("admin", "GET", tt.path, "", nil, "Accept", accept)
				if code != 200 || hdr.Get("Content-Type") != accept {
					t.Fatalf("%s: %d %s: %.200q", accept, code, hdr.Get("Content-Type"), body)
				}
				obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
				if err != nil {
					t.Fatalf("%s: %v", accept, err)
				}
				// items in protobuf carry no kind (neither do kube's)
				obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
				meta.EachListItem(obj, func(o runtime.Object) error {
					o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
					return nil
				})
				lists[accept] = obj
			}
			j, p := lists["application/json"], lists["application/vnd.kubernetes.protobuf"]
			if !apiequality.Semantic.DeepEqual(j, p) {
				t.Errorf("the protobuf list is not the JSON one:\n%s", diff.Diff(j, p))
			}
			if items, _ := meta.ExtractList(p); len(items) == 0 {
				t.Errorf("an empty list")
			} else if m, _ := meta.Accessor(items[0]); m.GetResourceVersion() == "" || m.GetName() == "" {
				t.Errorf("the first item has name %q, resourceVersion %q", m.GetName(), m.GetResourceVersion())
			}
		})
	}
}
