package kubelet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
)

// TestKubelet_UnsupportedFieldsEvent: a pod with probes and a preStop hook
// runs, and one Warning Unsupported event names those fields, once however
// many syncs; a pod without such fields gets none.
func TestKubelet_UnsupportedFieldsEvent(t *testing.T) {
	c := newCluster(t)
	p := helloPod(t, "probed")
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	p.Spec.Containers[0].LivenessProbe, p.Spec.Containers[0].ReadinessProbe = probe, probe
	p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}}
	pod := c.create(t, p)
	plain := c.create(t, helloPod(t, "plain"))
	c.syncUntil(t, "probed", 30*time.Second, "Running", running)
	c.syncUntil(t, "plain", 30*time.Second, "Running", running)
	for range 3 {
		c.sync(t, "probed")
	}
	const want = "Warning Unsupported: podlab's kubelet does not honour livenessProbe, readinessProbe, preStop yet: the pod runs without " +
		"spec.containers[0].livenessProbe, spec.containers[0].readinessProbe, spec.containers[0].lifecycle.preStop"
	var n int
	for _, e := range c.events(t, pod) {
		if strings.HasPrefix(e, "Warning Unsupported") {
			n++
			if e != want {
				t.Errorf("event %q\nwant %q", e, want)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d Unsupported events, want 1: %q", n, c.events(t, pod))
	}
	l, err := c.admin.List(context.Background(), "events", pod.Namespace, apiserver.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range l.Items {
		if e := o.(*corev1.Event); e.Reason == kubelet.ReasonUnsupported && e.InvolvedObject.UID == pod.UID && e.Count != 1 {
			t.Errorf("the Unsupported event's count is %d, want 1: once, not every sync", e.Count)
		}
	}
	if ev := c.events(t, plain); hasEvent(ev, "Warning Unsupported") {
		t.Errorf("a pod with no such field got %q", ev)
	}
}
