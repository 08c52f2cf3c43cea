package controllers

import (
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/davecgh/go-spew/spew"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// webTemplate is the pod template of `kubectl create deployment web
// --image=nginx:1.25` as the API server stores it, with its defaults.
func webTemplate() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "nginx:1.25",
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr(int64(30)),
			DNSPolicy: corev1.DNSClusterFirst, SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler",
		},
	}
}

// The golden values were computed by Kubernetes' own code: a throwaway
// module requiring k8s.io/kubernetes v1.37.2 (its staging modules replaced
// by the published v0.37.2, the k8s.io/api podlab builds with) whose main
// printed controller.ComputeHash(webTemplate(), nil) and with a collision
// count of 1. A kube-controller-manager v1.37 names this Deployment's
// ReplicaSet web-549cbb9bcd, and so does podlab.
func TestComputeHash_GoldenFromKubernetes(t *testing.T) {
	cases := []struct {
		name      string
		collision *int32
		want      string
	}{
		{"no collision count", nil, "549cbb9bcd"},
		{"collision count 1", ptr(int32(1)), "745bf9968c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ComputeHash(webTemplate(), c.collision); got != c.want {
				t.Errorf("ComputeHash = %q, want %q (kube-controller-manager v1.37.2's)", got, c.want)
			}
		})
	}
}

// The same algorithm written out with go-spew's ConfigState as
// k8s.io/kubernetes/pkg/util/hash had it before it moved to
// k8s.io/utils/dump: same output, so the hash does not depend on the
// helper.
func TestComputeHash_IsFNVOverSpew(t *testing.T) {
	printer := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	for _, tpl := range []*corev1.PodTemplateSpec{webTemplate(), {}, func() *corev1.PodTemplateSpec {
		t := webTemplate()
		t.Labels["tier"] = "front"
		t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		return t
	}()} {
		h := fnv.New32a()
		printer.Fprintf(h, "%#v", *tpl)
		want := rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
		if got := ComputeHash(tpl, nil); got != want {
			t.Errorf("ComputeHash = %q, spew+fnv = %q", got, want)
		}
	}
}

func TestComputeHash_Properties(t *testing.T) {
	base := ComputeHash(webTemplate(), nil)
	changed := webTemplate()
	changed.Spec.Containers[0].Image = "nginx:1.27"
	if ComputeHash(changed, nil) == base {
		t.Error("a new image did not change the hash")
	}
	relabeled := webTemplate()
	relabeled.Labels = map[string]string{"app": "web"} // same content, another map
	if ComputeHash(relabeled, nil) != base {
		t.Error("an equal template hashed differently")
	}
	for _, h := range []string{base, ComputeHash(changed, ptr(int32(7)))} {
		if strings.Trim(h, "456789bcdf") != "" {
			t.Errorf("%q has characters SafeEncodeString never maps digits to", h)
		}
	}
}
