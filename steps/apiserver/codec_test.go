package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podlab/podlab/steps/store"
)

func TestCodecRoundTrip(t *testing.T) {
	replicas := int32(3)
	tests := []struct {
		name string
		obj  Object
	}{
		{"pod", &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u-1", ResourceVersion: "7",
				Labels: map[string]string{"app": "web"}, CreationTimestamp: metav1.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "web", Image: "nginx",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
		}},
		{"namespace", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}}},
		{"deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ResourceOf(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			data, err := encode(r, tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, []byte(StorageMagic)) {
				t.Fatalf("stored value starts with %q, want kube-apiserver's %q", data[:min(8, len(data))], StorageMagic)
			}
			if tt.name == "pod" && tt.obj.GetResourceVersion() != "7" {
				t.Errorf("encode left the caller's resourceVersion %q, want 7", tt.obj.GetResourceVersion())
			}
			got, err := decode(r, data, 42)
			if err != nil {
				t.Fatal(err)
			}
			if got.GetResourceVersion() != "42" {
				t.Errorf("resourceVersion %q, want the mod_revision 42", got.GetResourceVersion())
			}
			want := tt.obj.DeepCopyObject().(Object)
			want.SetResourceVersion("42")
			want.GetObjectKind().SetGroupVersionKind(r.GroupVersion().WithKind(r.Kind))
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("decoded %+v\nwant    %+v", got, want)
			}
			// the resourceVersion is not inside the value
			u := runtime.Unknown{}
			if err := u.Unmarshal(data[len(StorageMagic):]); err != nil {
				t.Fatal(err)
			}
			if u.Kind != r.Kind || u.APIVersion != r.GroupVersion().String() {
				t.Errorf("envelope names %s %s, want %s %s", u.APIVersion, u.Kind, r.GroupVersion(), r.Kind)
			}
			bare := r.New().(protoObject)
			if err := bare.Unmarshal(u.Raw); err != nil {
				t.Fatal(err)
			}
			if bare.GetResourceVersion() != "" {
				t.Errorf("the stored value carries resourceVersion %q", bare.GetResourceVersion())
			}
		})
	}
}

// A defaulted pod in protobuf is less than two thirds of its JSON: that is
// why the store holds protobuf (fewer pages per write).
func TestCodecProtobufIsSmallerThanJSON(t *testing.T) {
	s, _ := testServer(t)
	c := as(t, s, "admin")
	if _, err := c.Create(ctx(t), testPod("web")); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := s.store.View(context.Background(), func(tx *store.Tx) error {
		kv, _, err := tx.Get("/registry/pods/default/web")
		stored = kv.Value
		return err
	}); err != nil {
		t.Fatal(err)
	}
	obj, encoding, err := DecodeStored(stored)
	if err != nil {
		t.Fatal(err)
	}
	if encoding != "protobuf" || obj.GetName() != "web" {
		t.Fatalf("DecodeStored: %s %q, want protobuf \"web\"", encoding, obj.GetName())
	}
	js, _ := json.Marshal(obj)
	t.Logf("a defaulted pod: %d bytes of protobuf, %d of JSON", len(stored), len(js))
	if len(stored)*3 > len(js)*2 {
		t.Errorf("stored %d bytes of protobuf for %d bytes of JSON", len(stored), len(js))
	}
}

// Values podlab stored as JSON, before it stored protobuf, still read.
func TestCodecReadsJSONValues(t *testing.T) {
	r := mustResource("pods")
	data := []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"old","namespace":"default"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`)
	obj, err := decode(r, data, 5)
	if err != nil {
		t.Fatal(err)
	}
	if p := obj.(*corev1.Pod); p.Name != "old" || p.Spec.Containers[0].Image != "nginx" || p.ResourceVersion != "5" {
		t.Errorf("decoded %+v", p)
	}
	obj, encoding, err := DecodeStored(data)
	if err != nil || encoding != "json" || obj.GetName() != "old" {
		t.Errorf("DecodeStored: %v %s %v", obj, encoding, err)
	}
}

func TestCodecBadValues(t *testing.T) {
	pods := mustResource("pods")
	ns, err := encode(mustResource("namespaces"), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev"}})
	if err != nil {
		t.Fatal(err)
	}
	good, err := encode(pods, testPod("web"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "neither"},
		{"garbage", []byte("hello"), "neither"},
		{"magic only", []byte(StorageMagic), "names apiVersion"},
		{"truncated", good[:len(good)-10], "runtime.Unknown"},
		{"another kind", ns, "not a Pod"},
		{"bad json", []byte(`{"kind":`), "unexpected end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode(pods, tt.data, 1)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("decode: %v, want an error containing %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "podlab store get") {
				t.Errorf("decode: %v, want a pointer to `podlab store get`", err)
			}
		})
	}
}
