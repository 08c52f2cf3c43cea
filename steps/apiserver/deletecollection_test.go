package apiserver

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestDeleteCollection: what a selector matches goes, each object as
// Delete would delete it (a bound pod only marked), the rest stays.
func TestDeleteCollection(t *testing.T) {
	s, _ := testServer(t)
	c := as(t, s, "admin")
	for _, name := range []string{"a", "b", "keep"} {
		p := testPod(name)
		p.Labels = map[string]string{"del": map[bool]string{true: "no", false: "yes"}[name == "keep"]}
		if name == "b" {
			p.Spec.NodeName = "node-1"
		}
		if _, err := c.Create(ctx(t), p); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.DeleteCollection(ctx(t), "pods", "default", DeleteOptions{}, ListOptions{LabelSelector: "del=yes"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 2 || l.Items[0].GetName() != "a" || l.Items[1].GetName() != "b" {
		t.Fatalf("deleted %d objects, want a and b", len(l.Items))
	}
	if l.Items[1].GetDeletionTimestamp() == nil {
		t.Errorf("the bound pod b was not returned marked for deletion")
	}
	left, err := c.List(ctx(t), "pods", "default", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range left.Items {
		names = append(names, o.GetName())
	}
	if got := strings.Join(names, ","); got != "b,keep" {
		t.Errorf("left %s, want b (terminating, its kubelet removes it) and keep", got)
	}
}

// TestDeleteCollection_BadInput: refused in kube's words, nothing deleted.
func TestDeleteCollection_BadInput(t *testing.T) {
	tests := []struct {
		name, user, selector string
		check                func(error) bool
		msg                  string
	}{
		{"a viewer", "viewer", "", apierrors.IsForbidden, `pods is forbidden: User "viewer" cannot deletecollection resource "pods" in API group "" in the namespace "default"`},
		{"a selector that does not parse", "admin", "a in (", apierrors.IsBadRequest, `unable to parse the label selector "a in ("`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := testServer(t)
			if _, err := as(t, s, "admin").Create(ctx(t), testPod("web")); err != nil {
				t.Fatal(err)
			}
			_, err := as(t, s, tt.user).DeleteCollection(ctx(t), "pods", "default", DeleteOptions{}, ListOptions{LabelSelector: tt.selector})
			if err == nil || !tt.check(err) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want one with %q", err, tt.msg)
			}
			if _, err := as(t, s, "admin").Get(ctx(t), "pods", "default", "web"); err != nil {
				t.Errorf("after a refused deletecollection: %v", err)
			}
		})
	}
}
