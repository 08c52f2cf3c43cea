package apiserver

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reading a list page by page (ListOptions.Limit, then Start from List.Next)
// gives every object once, in order, as one read does.
func TestClient_List_Pages(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	for _, ns := range []string{"a", "b"} {
		if _, err := admin.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			p := testPod(fmt.Sprintf("p%d", i))
			p.Namespace = ns
			p.Labels = map[string]string{"even": fmt.Sprint(i%2 == 0)}
			if _, err := admin.Create(ctx(t), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name, resource, namespace string
		opts                      ListOptions
	}{
		{"one namespace, pages of 1", "pods", "a", ListOptions{Limit: 1}},
		{"one namespace, pages of 2", "pods", "a", ListOptions{Limit: 2}},
		{"every namespace, pages of 3", "pods", "", ListOptions{Limit: 3}},
		{"a page bigger than the list", "pods", "", ListOptions{Limit: 100}},
		{"a label selector, pages of 2", "pods", "", ListOptions{Limit: 2, LabelSelector: "even=true"}},
		{"a field selector, pages of 1", "pods", "", ListOptions{Limit: 1, FieldSelector: "metadata.namespace=b"}},
		{"cluster-scoped, pages of 1", "namespaces", "", ListOptions{Limit: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole := tt.opts
			whole.Limit = 0
			all, err := admin.List(ctx(t), tt.resource, tt.namespace, whole)
			if err != nil {
				t.Fatal(err)
			}
			want := names(all.Items)
			var got []string
			opts := tt.opts
			for pages := 0; ; pages++ {
				if pages > len(want)+1 {
					t.Fatalf("still paging after %d pages: %v", pages, got)
				}
				l, err := admin.List(ctx(t), tt.resource, tt.namespace, opts)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(l.Items)) > opts.Limit {
					t.Fatalf("a page of %d items, limit %d", len(l.Items), opts.Limit)
				}
				got = append(got, names(l.Items)...)
				if l.Next == "" {
					break
				}
				opts.Start = l.Next
			}
			if !slices.Equal(got, want) {
				t.Errorf("pages gave %v, want %v", got, want)
			}
		})
	}

	// A page that starts at an object deleted since goes on from the next.
	if _, err := admin.Delete(ctx(t), "pods", "a", "p2", DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	l, err := admin.List(ctx(t), "pods", "a", ListOptions{Limit: 1, Start: "a/p2"})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "p3" {
		t.Errorf("a page from a deleted object: %v, %v; want p3", l, err)
	}
}

func names(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetNamespace()+"/"+o.GetName())
	}
	return out
}
