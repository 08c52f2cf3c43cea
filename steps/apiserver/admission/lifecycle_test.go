package admission

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNamespaceLifecycle(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	terminating := namespace("old")
	terminating.Status.Phase = corev1.NamespaceTerminating
	deleting := namespace("going")
	deleting.DeletionTimestamp = &metav1.Time{}

	for _, tc := range []struct {
		name      string
		ns        *corev1.Namespace
		namespace string
		resource  schema.GroupResource
		wantNotes []string
		wantErr   string
		is        func(error) bool
	}{
		{name: "active", ns: namespace("default"), namespace: "default", resource: pods,
			wantNotes: []string{`namespace "default" is Active`}},
		{name: "missing", namespace: "nope", resource: pods,
			wantErr: `namespaces "nope" not found`, is: apierrors.IsNotFound},
		{name: "terminating", ns: terminating, namespace: "old", resource: pods,
			wantErr: `pods "web" is forbidden: unable to create new content in namespace old because it is being terminated`, is: apierrors.IsForbidden},
		{name: "deletion started, phase not yet updated", ns: deleting, namespace: "going", resource: deployments,
			wantErr: `deployments.apps "web" is forbidden: unable to create new content in namespace going because it is being terminated`, is: apierrors.IsForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes, err := NamespaceLifecycle(tc.ns, tc.namespace, tc.resource, "web")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("NamespaceLifecycle: %v", err)
				}
				if !slices.Equal(notes, tc.wantNotes) {
					t.Errorf("notes = %q, want %q", notes, tc.wantNotes)
				}
				return
			}
			if !tc.is(err) {
				t.Errorf("error %v is not of the expected status", err)
			}
			wantErrText(t, err, tc.wantErr)
		})
	}
}

func TestNamespaceDelete(t *testing.T) {
	for _, name := range ImmortalNamespaces {
		_, err := NamespaceDelete(name)
		wantErrText(t, err, `namespaces "`+name+`" is forbidden: this namespace may not be deleted`)
	}
	if _, err := NamespaceDelete("team"); err != nil {
		t.Errorf("NamespaceDelete(team): %v", err)
	}
}
