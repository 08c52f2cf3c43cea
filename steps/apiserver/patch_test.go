package apiserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.25"}}},
			},
		},
	}
}

func TestPatch(t *testing.T) {
	tests := []struct {
		name  string
		pt    types.PatchType
		sub   string
		patch string
		check func(t *testing.T, d *appsv1.Deployment, out Object)
	}{
		{"a strategic merge patch merges containers by name", types.StrategicMergePatchType, "",
			`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"},{"name":"log","image":"busybox"}]}}}}`,
			func(t *testing.T, d *appsv1.Deployment, _ Object) {
				c := d.Spec.Template.Spec.Containers
				if len(c) != 2 || c[0].Name != "nginx" || c[0].Image != "nginx:1.27" || c[1].Name != "log" {
					t.Errorf("containers %+v, want nginx at 1.27 and log", c)
				}
				if c[0].ImagePullPolicy != corev1.PullIfNotPresent || c[1].ImagePullPolicy != corev1.PullAlways {
					t.Errorf("the patched object was not defaulted: pull policies %q %q", c[0].ImagePullPolicy, c[1].ImagePullPolicy)
				}
				if d.Generation != 2 {
					t.Errorf("generation %d after a spec change, want 2", d.Generation)
				}
			}},
		{"a JSON merge patch replaces lists and removes with null", types.MergePatchType, "",
			`{"metadata":{"labels":{"app":null,"tier":"web"}},"spec":{"template":{"spec":{"containers":[{"name":"only","image":"busybox"}]}}}}`,
			func(t *testing.T, d *appsv1.Deployment, _ Object) {
				if _, ok := d.Labels["app"]; ok || d.Labels["tier"] != "web" {
					t.Errorf("labels %v, want only tier=web", d.Labels)
				}
				if c := d.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Name != "only" {
					t.Errorf("containers %+v, want the patch's list", c)
				}
			}},
		{"the scale subresource", types.MergePatchType, "scale", `{"spec":{"replicas":3}}`,
			func(t *testing.T, d *appsv1.Deployment, out Object) {
				s, ok := out.(*autoscalingv1.Scale)
				if !ok || s.Spec.Replicas != 3 || s.ResourceVersion != d.ResourceVersion || s.Status.Selector != "app=web" {
					t.Errorf("returned %#v, want a Scale of 3 at the deployment's resourceVersion %s", out, d.ResourceVersion)
				}
				if *d.Spec.Replicas != 3 || d.Generation != 2 {
					t.Errorf("replicas %d generation %d, want 3 and 2", *d.Spec.Replicas, d.Generation)
				}
			}},
		{"a resourceVersion that is the stored one", types.StrategicMergePatchType, "",
			`{"metadata":{"resourceVersion":"RV","annotations":{"a":"b"}}}`,
			func(t *testing.T, d *appsv1.Deployment, _ Object) {
				if d.Annotations["a"] != "b" || d.Generation != 1 {
					t.Errorf("annotations %v generation %d, want a=b and 1", d.Annotations, d.Generation)
				}
			}},
		{"a JSON patch adds, replaces and removes by path", types.JSONPatchType, "",
			`[{"op":"add","path":"/metadata/labels/tier","value":"web"},{"op":"remove","path":"/metadata/labels/app"},{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}]`,
			func(t *testing.T, d *appsv1.Deployment, _ Object) {
				if _, ok := d.Labels["app"]; ok || d.Labels["tier"] != "web" {
					t.Errorf("labels %v, want only tier=web", d.Labels)
				}
				if c := d.Spec.Template.Spec.Containers; c[0].Image != "nginx:1.27" {
					t.Errorf("image %q, want nginx:1.27", c[0].Image)
				}
			}},
		{"a JSON patch of the scale subresource", types.JSONPatchType, "scale", `[{"op":"replace","path":"/spec/replicas","value":4}]`,
			func(t *testing.T, d *appsv1.Deployment, out Object) {
				if *d.Spec.Replicas != 4 {
					t.Errorf("replicas %d, want 4", *d.Spec.Replicas)
				}
			}},
		{"status only through the status subresource", types.MergePatchType, "status",
			`{"spec":{"replicas":7},"status":{"observedGeneration":5}}`,
			func(t *testing.T, d *appsv1.Deployment, _ Object) {
				if d.Status.ObservedGeneration != 5 || *d.Spec.Replicas != 1 {
					t.Errorf("observedGeneration %d replicas %d, want 5 and 1", d.Status.ObservedGeneration, *d.Spec.Replicas)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := testServer(t)
			admin := as(t, s, "admin")
			created, err := admin.Create(ctx(t), testDeployment("web"))
			if err != nil {
				t.Fatal(err)
			}
			patch := strings.ReplaceAll(tt.patch, "RV", created.GetResourceVersion())
			out, err := admin.Patch(ctx(t), "deployments", "default", "web", tt.pt, []byte(patch), PatchOptions{Subresource: tt.sub})
			if err != nil {
				t.Fatalf("Patch: %v", err)
			}
			got, err := admin.Get(ctx(t), "deployments", "default", "web")
			if err != nil {
				t.Fatal(err)
			}
			if tt.sub != "scale" && out.GetResourceVersion() != got.GetResourceVersion() {
				t.Errorf("Patch returned resourceVersion %s, stored %s", out.GetResourceVersion(), got.GetResourceVersion())
			}
			tt.check(t, got.(*appsv1.Deployment), out)
		})
	}
}

// Bad patches are refused as kube-apiserver refuses them, and store
// nothing.
func TestPatch_BadInput(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	created, err := admin.Create(ctx(t), testDeployment("web"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Patch(ctx(t), "deployments", "default", "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"v":"2"}}}`), PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := created.GetResourceVersion()
	smp, merge := types.StrategicMergePatchType, types.MergePatchType
	tests := []struct {
		name     string
		as       string
		resource string
		obj      string
		pt       types.PatchType
		sub      string
		patch    string
		is       func(error) bool
		says     string
	}{
		{"a missing object", "admin", "deployments", "nope", smp, "", `{"metadata":{"labels":{"a":"b"}}}`, apierrors.IsNotFound, `deployments.apps "nope" not found`},
		{"a stale resourceVersion", "admin", "deployments", "web", smp, "", `{"metadata":{"resourceVersion":"` + stale + `","labels":{"a":"b"}}}`, apierrors.IsConflict,
			`Operation cannot be fulfilled on deployments.apps "web": the object has been modified; please apply your changes to the latest version and try again`},
		{"a stale resourceVersion on scale", "admin", "deployments", "web", merge, "scale", `{"metadata":{"resourceVersion":"` + stale + `"},"spec":{"replicas":2}}`, apierrors.IsConflict, "the object has been modified"},
		{"not JSON", "admin", "deployments", "web", smp, "", `spec: {replicas: 2}`, apierrors.IsBadRequest, "invalid JSON patch"},
		{"not a JSON object", "admin", "deployments", "web", smp, "", `[1, 2]`, apierrors.IsBadRequest, "invalid JSON document"},
		{"an unknown field", "admin", "deployments", "web", smp, "", `{"spec":{"replicaz":2}}`, apierrors.IsInvalid, `strict decoding error: unknown field "spec.replicaz"`},
		{"a value of the wrong type", "admin", "deployments", "web", merge, "", `{"spec":{"replicas":"two"}}`, apierrors.IsInvalid, "patch: Invalid value"},
		{"an invalid result", "admin", "deployments", "web", smp, "", `{"spec":{"replicas":-1}}`, apierrors.IsInvalid, "spec.replicas: Invalid value: -1: must be greater than or equal to 0"},
		{"negative replicas on scale", "admin", "deployments", "web", merge, "scale", `{"spec":{"replicas":-1}}`, apierrors.IsInvalid,
			`Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`},
		{"a new name", "admin", "deployments", "web", merge, "", `{"metadata":{"name":"other"}}`, apierrors.IsBadRequest, "the name of the object (other) does not match the name on the URL (web)"},
		{"a new uid", "admin", "deployments", "web", merge, "", `{"metadata":{"uid":"1234"}}`, apierrors.IsInvalid, `metadata.uid: Invalid value: "1234": field is immutable`},
		{"server-side apply without a field manager", "admin", "deployments", "web", types.ApplyYAMLPatchType, "", `{"metadata":{"labels":{"a":"b"}}}`, apierrors.IsInvalid, "fieldManager: Required value: is required for apply patch"},
		{"a patch type podlab does not apply", "admin", "deployments", "web", types.ApplyCBORPatchType, "", `{}`, apierrors.IsUnsupportedMediaType, "accepted media types include"},
		{"a JSON patch that is not a list", "admin", "deployments", "web", types.JSONPatchType, "", `{"op":"add"}`, apierrors.IsBadRequest, "cannot unmarshal object"},
		{"a JSON patch to a missing path", "admin", "deployments", "web", types.JSONPatchType, "", `[{"op":"replace","path":"/spec/nope/x","value":1}]`, isUnprocessable, "the server rejected our request due to an error in our request"},
		{"a JSON patch whose test fails", "admin", "deployments", "web", types.JSONPatchType, "", `[{"op":"test","path":"/metadata/name","value":"other"},{"op":"add","path":"/metadata/labels/a","value":"b"}]`, isUnprocessable, "the server rejected our request due to an error in our request"},
		{"scale of a pod", "admin", "pods", "web", merge, "scale", `{"spec":{"replicas":2}}`, apierrors.IsMethodNotSupported, "patch scale"},
		{"an unknown subresource", "admin", "deployments", "web", merge, "logs", `{}`, apierrors.IsBadRequest, `no subresource "logs"`},
		{"a viewer may not patch", "viewer", "deployments", "web", merge, "", `{"metadata":{"labels":{"a":"b"}}}`, apierrors.IsForbidden, `cannot patch resource "deployments"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := revision(t, s)
			_, err := as(t, s, tt.as).Patch(ctx(t), tt.resource, "default", tt.obj, tt.pt, []byte(tt.patch), PatchOptions{Subresource: tt.sub})
			if err == nil || !tt.is(err) || !strings.Contains(errText(err), tt.says) {
				t.Errorf("got %v (%T), want an error of the right status saying %q", errText(err), err, tt.says)
			}
			if after := revision(t, s); after != before {
				t.Errorf("the store moved from revision %d to %d", before, after)
			}
		})
	}
}

func isUnprocessable(err error) bool { return statusCode(err) == 422 }

// errText is an error's message and, for a status error, its causes'
// (where kube-apiserver puts what a 422 from a patch found).
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	text := err.Error()
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Details != nil {
		for _, c := range se.Status().Details.Causes {
			text += "; " + c.Message
		}
	}
	return text
}

func statusCode(err error) int32 {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Code
	}
	return 0
}

// A patch that names no resourceVersion never conflicts, however many
// writers patch at once: each reads and writes in one transaction.
func TestPatch_ParallelPatchesAllLand(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	if _, err := admin.Create(ctx(t), testDeployment("web")); err != nil {
		t.Fatal(err)
	}
	const n = 12
	errs := make(chan error, n)
	for i := range n {
		go func() {
			p := fmt.Sprintf(`{"metadata":{"annotations":{"example.com/writer-%d":"yes"}}}`, i)
			_, err := admin.Patch(ctx(t), "deployments", "default", "web", types.StrategicMergePatchType, []byte(p), PatchOptions{})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Patch: %v", err)
		}
	}
	got, err := admin.Get(ctx(t), "deployments", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetAnnotations()) != n {
		t.Errorf("%d annotations, want %d: %v", len(got.GetAnnotations()), n, got.GetAnnotations())
	}
}
