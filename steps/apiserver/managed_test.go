package apiserver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// entry is one managedFields entry as a test compares it: who, how,
// through which subresource, and some of the fields it owns.
type entry struct {
	manager, operation, subresource string
	owns                            []string // substrings of fieldsV1's JSON
}

func checkManaged(t *testing.T, obj Object, want []entry) {
	t.Helper()
	got := obj.GetManagedFields()
	if len(got) != len(want) {
		t.Fatalf("managedFields has %d entries, want %d: %s", len(got), len(want), mustJSON(got))
	}
	// the library orders entries (Apply first, then by time, then by
	// manager): find each by its manager
	for i, w := range want {
		var g metav1.ManagedFieldsEntry
		for _, e := range got {
			if e.Manager == w.manager {
				g = e
			}
		}
		if g.Manager != w.manager || string(g.Operation) != w.operation || g.Subresource != w.subresource {
			t.Errorf("entry %d: manager %q operation %q subresource %q, want %q %q %q", i, g.Manager, g.Operation, g.Subresource, w.manager, w.operation, w.subresource)
		}
		if g.FieldsType != "FieldsV1" || g.FieldsV1 == nil || g.Time == nil || g.APIVersion == "" {
			t.Errorf("entry %d: fieldsType %q, fieldsV1 %v, time %v, apiVersion %q: want FieldsV1, fields, a time and an apiVersion", i, g.FieldsType, g.FieldsV1, g.Time, g.APIVersion)
		}
		fields := ""
		if g.FieldsV1 != nil {
			fields = string(g.FieldsV1.Raw)
		}
		for _, f := range w.owns {
			if !strings.Contains(fields, f) {
				t.Errorf("entry %d (%s): fields %s do not contain %s", i, g.Manager, fields, f)
			}
		}
	}
}

// TestManagedFields_PerOperation: every write through the gate records
// who changed which fields, as kube-apiserver does.
func TestManagedFields_PerOperation(t *testing.T) {
	tests := []struct {
		name  string
		write func(t *testing.T, s *Server) (Object, error)
		want  []entry
	}{
		{
			name: "create",
			write: func(t *testing.T, s *Server) (Object, error) {
				return as(t, s, "admin", WithFieldManager("kubectl-create")).Create(ctx(t), testPod("web"))
			},
			// the defaults (dnsPolicy, a container's imagePullPolicy) are
			// the creator's, as kube records them
			want: []entry{{"kubectl-create", "Update", "", []string{`"f:labels":{".":{},"f:app":{}}`, `"k:{\"name\":\"web\"}"`, `"f:image":{}`, `"f:dnsPolicy":{}`}}},
		},
		{
			name: "create without a manager",
			write: func(t *testing.T, s *Server) (Object, error) {
				return as(t, s, "admin").Create(ctx(t), testPod("web"))
			},
			want: []entry{{DefaultFieldManager, "Update", "", []string{`"f:image":{}`}}},
		},
		{
			name: "update by another manager",
			write: func(t *testing.T, s *Server) (Object, error) {
				p, err := as(t, s, "admin", WithFieldManager("kubectl-create")).Create(ctx(t), testPod("web"))
				if err != nil {
					return nil, err
				}
				p.(*corev1.Pod).Labels["tier"] = "front"
				return as(t, s, "admin", WithFieldManager("kubectl-label")).Update(ctx(t), p)
			},
			want: []entry{
				{"kubectl-create", "Update", "", []string{`"f:image":{}`}},
				{"kubectl-label", "Update", "", []string{`"f:tier":{}`}},
			},
		},
		{
			name: "status update",
			write: func(t *testing.T, s *Server) (Object, error) {
				p, err := as(t, s, "admin", WithFieldManager("kubectl-create")).Create(ctx(t), testPod("web"))
				if err != nil {
					return nil, err
				}
				p.(*corev1.Pod).Status.Message = "hello"
				return as(t, s, "admin", WithFieldManager("kubelet")).UpdateStatus(ctx(t), p)
			},
			want: []entry{
				{"kubectl-create", "Update", "", nil},
				{"kubelet", "Update", "status", []string{`"f:status":{"f:message":{}}`}},
			},
		},
		{
			name: "strategic merge patch",
			write: func(t *testing.T, s *Server) (Object, error) {
				if _, err := as(t, s, "admin", WithFieldManager("kubectl-create")).Create(ctx(t), testPod("web")); err != nil {
					return nil, err
				}
				return as(t, s, "admin").Patch(ctx(t), "pods", "default", "web", types.StrategicMergePatchType,
					[]byte(`{"metadata":{"annotations":{"a":"b"}}}`), PatchOptions{FieldManager: "kubectl-annotate"})
			},
			want: []entry{
				{"kubectl-create", "Update", "", nil},
				{"kubectl-annotate", "Update", "", []string{`"f:annotations":{".":{},"f:a":{}}`}},
			},
		},
		{
			name: "scale",
			write: func(t *testing.T, s *Server) (Object, error) {
				if _, err := as(t, s, "admin", WithFieldManager("kubectl-create")).Create(ctx(t), testDeployment("web")); err != nil {
					return nil, err
				}
				if _, err := as(t, s, "admin").Patch(ctx(t), "deployments", "default", "web", types.MergePatchType,
					[]byte(`{"spec":{"replicas":5}}`), PatchOptions{Subresource: "scale", FieldManager: "kubectl-scale"}); err != nil {
					return nil, err
				}
				return as(t, s, "admin").Get(ctx(t), "deployments", "default", "web")
			},
			want: []entry{
				{"kubectl-create", "Update", "", nil},
				{"kubectl-scale", "Update", "scale", []string{`{"f:spec":{"f:replicas":{}}}`}},
			},
		},
		{
			name: "server-side apply creates",
			write: func(t *testing.T, s *Server) (Object, error) {
				return as(t, s, "admin").Patch(ctx(t), "pods", "default", "web", types.ApplyPatchType,
					[]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  containers:\n  - name: web\n    image: nginx:1.25\n"),
					PatchOptions{FieldManager: "kubectl"})
			},
			// an applier owns what it sent, not the defaults
			want: []entry{{"kubectl", "Apply", "", []string{`"f:app":{}`, `"f:image":{}`}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := testServer(t)
			obj, err := tt.write(t, s)
			if err != nil {
				t.Fatal(err)
			}
			checkManaged(t, obj, tt.want)
			res, err := ResourceOf(obj)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := as(t, s, "admin").Get(ctx(t), res.Name, "default", obj.GetName())
			if err != nil {
				t.Fatal(err)
			}
			if g, w := mustJSON(stored.GetManagedFields()), mustJSON(obj.GetManagedFields()); string(g) != string(w) {
				t.Errorf("stored managedFields %s, the write returned %s", g, w)
			}
		})
	}
}

// TestApply_OwnershipAndConflicts is server-side apply's cycle: an apply
// creates, a second apply by the same manager changes its fields, another
// manager changing one of them is a conflict naming field and owner, and
// force takes the field over.
func TestApply_OwnershipAndConflicts(t *testing.T) {
	s, _ := testServer(t)
	c := as(t, s, "admin")
	pod := func(label string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"` + label + `"}},"spec":{"containers":[{"name":"web","image":"nginx:1.25"}]}}`)
	}
	if _, err := c.Patch(ctx(t), "pods", "default", "web", types.ApplyPatchType, pod("web"), PatchOptions{FieldManager: "alice"}); err != nil {
		t.Fatalf("apply (create): %v", err)
	}
	obj, err := c.Patch(ctx(t), "pods", "default", "web", types.ApplyPatchType, pod("web2"), PatchOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatalf("apply (update): %v", err)
	}
	if got := obj.GetLabels()["app"]; got != "web2" {
		t.Errorf("label app=%q after the second apply, want web2", got)
	}
	_, err = c.Patch(ctx(t), "pods", "default", "web", types.ApplyPatchType, pod("bob"), PatchOptions{FieldManager: "bob"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("another manager's apply of the same field: %v, want a 409 conflict", err)
	}
	if want := `Apply failed with 1 conflict: conflict with "alice": .metadata.labels.app`; err.Error() != want {
		t.Errorf("conflict message %q, want kube's %q", err.Error(), want)
	}
	causes := err.(apierrors.APIStatus).Status().Details.Causes
	if len(causes) != 1 || causes[0].Type != metav1.CauseTypeFieldManagerConflict || causes[0].Field != ".metadata.labels.app" {
		t.Errorf("causes %+v, want one FieldManagerConflict on .metadata.labels.app", causes)
	}
	obj, err = c.Patch(ctx(t), "pods", "default", "web", types.ApplyPatchType, pod("bob"), PatchOptions{FieldManager: "bob", Force: true})
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if got := obj.GetLabels()["app"]; got != "bob" {
		t.Errorf("label app=%q after the forced apply, want bob", got)
	}
	for _, m := range obj.GetManagedFields() {
		if m.Manager == "alice" && strings.Contains(string(m.FieldsV1.Raw), `"f:app"`) {
			t.Errorf("alice still owns labels.app after bob forced it: %s", m.FieldsV1.Raw)
		}
	}
}

// notStatus: an error kube-apiserver sends as a 500 with its text.
func notStatus(err error) bool { _, ok := err.(apierrors.APIStatus); return !ok }

// TestApply_BadInput: what kube-apiserver refuses, refused the same way,
// and nothing stored.
func TestApply_BadInput(t *testing.T) {
	good := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"web","image":"nginx:1.25"}]}}`)
	tests := []struct {
		name  string
		user  string
		pt    types.PatchType
		data  []byte
		opts  PatchOptions
		check func(error) bool
		msg   string
	}{
		{"apply without a manager", "admin", types.ApplyPatchType, good, PatchOptions{}, apierrors.IsInvalid,
			`PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"force on a merge patch", "admin", types.MergePatchType, []byte(`{}`), PatchOptions{Force: true, FieldManager: "x"}, apierrors.IsInvalid,
			`PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`},
		{"a manager name of 129 characters", "admin", types.ApplyPatchType, good, PatchOptions{FieldManager: strings.Repeat("m", 129)}, apierrors.IsInvalid,
			"fieldManager: Too long"},
		{"not YAML", "admin", types.ApplyPatchType, []byte("{: ["), PatchOptions{FieldManager: "x"}, apierrors.IsBadRequest, "error decoding YAML"},
		{"an unknown field", "admin", types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"nope":1}}`), PatchOptions{FieldManager: "x"}, notStatus,
			// kube-apiserver's answer too: a 500 that names the field
			`failed to create typed patch object (/web; /v1, Kind=Pod): .spec.nope: field not declared in schema`},
		{"another name", "admin", types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"other"},"spec":{"containers":[{"name":"web","image":"nginx:1.25"}]}}`), PatchOptions{FieldManager: "x"}, apierrors.IsBadRequest,
			"the name of the object (other) does not match the name on the URL (web)"},
		{"a viewer may not create by apply", "viewer", types.ApplyPatchType, good, PatchOptions{FieldManager: "x"}, apierrors.IsForbidden, `cannot patch resource "pods"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := testServer(t)
			_, err := as(t, s, tt.user).Patch(ctx(t), "pods", "default", "web", tt.pt, tt.data, tt.opts)
			if err == nil || !tt.check(err) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want one with %q", err, tt.msg)
			}
			if _, err := as(t, s, "admin").Get(ctx(t), "pods", "default", "web"); !apierrors.IsNotFound(err) {
				t.Errorf("after a refused apply, get: %v, want NotFound", err)
			}
		})
	}
}
