package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rl builds a ResourceList from "cpu=100m", "memory=1Gi", ...
func rl(kv ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		list[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return list
}

// ctr is a container with a name and an image.
func ctr(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image}
}

// withResources sets a container's requests and limits.
func withResources(c corev1.Container, requests, limits corev1.ResourceList) corev1.Container {
	c.Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	return c
}

// newPod is an un-defaulted pod in namespace default.
func newPod(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

// defaultedPod is newPod after DefaultPod and DefaultTolerationSeconds, as
// the API server validates it.
func defaultedPod(name string, containers ...corev1.Container) *corev1.Pod {
	p := newPod(name, containers...)
	DefaultPod(p)
	DefaultTolerationSeconds(p, DefaultTolerations())
	return p
}

// wantErrText fails unless err's message is exactly want.
func wantErrText(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %q", want)
	}
	if err.Error() != want {
		t.Fatalf("error\n got: %s\nwant: %s", err.Error(), want)
	}
}

// wantErrContains fails unless err's message contains every part.
func wantErrContains(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q\ndoes not contain %q", err.Error(), p)
		}
	}
}
