package apiserver

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver/admission"
)

// The DefaultTolerationSeconds admission plugin, configured on the server
// as kube-apiserver's flags configure it.

func tolerationSecondsOf(p *corev1.Pod) map[string]int64 {
	out := map[string]int64{}
	for _, t := range p.Spec.Tolerations {
		if t.Effect == corev1.TaintEffectNoExecute && t.TolerationSeconds != nil {
			out[t.Key] = *t.TolerationSeconds
		}
	}
	return out
}

func TestServer_DefaultTolerationSeconds_Configured(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(context.Background(), dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	s, err := openTestServer(t, dir, WithDefaultTolerationSeconds(admission.TolerationSeconds{NotReady: 7, Unreachable: 2}))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	admin := as(t, s, "admin")

	created, err := admin.Create(ctx(t), testPod("web"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	got := tolerationSecondsOf(created.(*corev1.Pod))
	if got[corev1.TaintNodeNotReady] != 7 || got[corev1.TaintNodeUnreachable] != 2 || len(got) != 2 {
		t.Errorf("tolerations after create = %v, want not-ready 7s and unreachable 2s", got)
	}

	// An update that drops them gets them back, as kube-apiserver's plugin
	// also runs on updates (validation forbids removing a toleration).
	p := created.(*corev1.Pod).DeepCopy()
	p.Spec.Tolerations = nil
	updated, err := admin.Update(ctx(t), p)
	if err != nil {
		t.Fatalf("update without the tolerations: %v", err)
	}
	if got := tolerationSecondsOf(updated.(*corev1.Pod)); got[corev1.TaintNodeUnreachable] != 2 || len(got) != 2 {
		t.Errorf("tolerations after update = %v, want them back", got)
	}
}

func TestServer_DefaultTolerationSeconds_Default300(t *testing.T) {
	s, _ := testServer(t)
	created, err := as(t, s, "admin").Create(ctx(t), testPod("web"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tolerationSecondsOf(created.(*corev1.Pod)); got[corev1.TaintNodeNotReady] != 300 || got[corev1.TaintNodeUnreachable] != 300 {
		t.Errorf("tolerations = %v, want 300s each", got)
	}
}

func TestServer_DefaultTolerationSeconds_Negative(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(context.Background(), dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	s, err := openTestServer(t, dir, WithDefaultTolerationSeconds(admission.TolerationSeconds{NotReady: 300, Unreachable: -1}))
	if err == nil {
		s.Close()
		t.Fatal("Open with a negative toleration: no error")
	}
	if !errors.Is(err, admission.ErrNegativeTolerationSeconds) {
		t.Errorf("err = %v, want ErrNegativeTolerationSeconds", err)
	}
}
