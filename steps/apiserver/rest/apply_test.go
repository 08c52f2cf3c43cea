package rest

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestApply_OverHTTP: a server-side apply creates (201), records its
// manager, and another write is recorded under its User-Agent's name.
func TestApply_OverHTTP(t *testing.T) {
	l := newLab(t, nil)
	body := []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx:1.25\n")
	code, data, _ := l.do("admin", http.MethodPatch, "/api/v1/namespaces/default/pods/web?fieldManager=kubectl", string(types.ApplyPatchType), body)
	if code != http.StatusCreated || !strings.Contains(string(data), `"manager":"kubectl","operation":"Apply"`) {
		t.Fatalf("apply: %d %s, want 201 with an Apply entry by kubectl", code, data)
	}
	code, data, _ = l.do("admin", http.MethodPatch, "/api/v1/namespaces/default/pods/web", string(types.MergePatchType), []byte(`{"metadata":{"labels":{"a":"b"}}}`),
		"User-Agent", "kubectl-label/v1.37.2 (linux/amd64) kubernetes/abcdef")
	if code != http.StatusOK || !strings.Contains(string(data), `"manager":"kubectl-label","operation":"Update"`) {
		t.Fatalf("merge patch: %d %s, want 200 with an Update entry by kubectl-label", code, data)
	}
}

// TestApplyAndDeleteCollection_BadInput: kube's codes and words.
func TestApplyAndDeleteCollection_BadInput(t *testing.T) {
	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"web","image":"nginx:1.25"}]}}`)
	tests := []struct {
		name, user, method, path, contentType string
		body                                  []byte
		code                                  int
		msg                                   string
	}{
		{"apply without fieldManager", "admin", http.MethodPatch, "/api/v1/namespaces/default/pods/web", string(types.ApplyPatchType), pod,
			http.StatusUnprocessableEntity, `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"force that is not a boolean", "admin", http.MethodPatch, "/api/v1/namespaces/default/pods/web?fieldManager=x&force=yes", string(types.ApplyPatchType), pod,
			http.StatusBadRequest, `force="yes" is not a boolean`},
		{"an unknown patch type", "admin", http.MethodPatch, "/api/v1/namespaces/default/pods/web", "application/apply-patch+cbor", pod,
			http.StatusUnsupportedMediaType, "application/apply-patch+yaml"},
		{"deletecollection by a viewer", "viewer", http.MethodDelete, "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb", "", nil,
			http.StatusForbidden, `pods is forbidden: User "viewer" cannot deletecollection resource "pods" in API group "" in the namespace "default"`},
		{"deletecollection across namespaces", "admin", http.MethodDelete, "/api/v1/pods", "", nil,
			http.StatusMethodNotAllowed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t, nil)
			if _, err := l.clientset("admin").CoreV1().Pods("default").Create(ctx(t), testPod("keep"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			code, data, _ := l.do(tt.user, tt.method, tt.path, tt.contentType, tt.body)
			if code != tt.code || !strings.Contains(status(t, data).Message, tt.msg) {
				t.Errorf("%d %s, want %d with %q", code, data, tt.code, tt.msg)
			}
			if _, err := l.clientset("admin").CoreV1().Pods("default").Get(ctx(t), "keep", metav1.GetOptions{}); err != nil {
				t.Errorf("after the refused request: %v", err)
			}
		})
	}
}
