package kubectl

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podlab/podlab/steps/apiserver"
)

func drainFixture(t *testing.T) apiserver.Interface {
	t.Helper()
	c := testAPI(t)
	ctx := context.Background()
	mk := func(obj apiserver.Object) {
		if _, err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	mk(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}})
	pod := func(name, node string, owner *metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	mk(pod("web", "node-2", nil))
	mk(pod("agent", "node-2", &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u1", Controller: ptr.To(true)}))
	mk(pod("elsewhere", "node-1", nil))
	return c
}

func TestDrain(t *testing.T) {
	c := drainFixture(t)
	ctx := context.Background()
	res, err := Drain(ctx, c, "node-2", DrainOptions{GracePeriodSeconds: ptr.To[int64](0), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cordoned || !slices.Equal(res.Deleted, []string{"default/web"}) || !slices.Equal(res.Ignored, []string{"default/agent"}) {
		t.Errorf("drain: %+v, want node-2 cordoned, web deleted, the DaemonSet's agent ignored", res)
	}
	obj, err := c.Get(ctx, "nodes", "", "node-2")
	if err != nil || !obj.(*corev1.Node).Spec.Unschedulable {
		t.Errorf("node-2 is not cordoned: %v", err)
	}
	for name, gone := range map[string]bool{"web": true, "agent": false, "elsewhere": false} {
		_, err := c.Get(ctx, "pods", "default", name)
		if apierrors.IsNotFound(err) != gone {
			t.Errorf("pod %s: %v, want gone=%v", name, err, gone)
		}
	}
	// again: nothing more to do
	if res, err := Drain(ctx, c, "node-2", DrainOptions{Timeout: time.Second}); err != nil || res.Cordoned || len(res.Deleted) != 0 {
		t.Errorf("a second drain: %+v %v, want nothing done", res, err)
	}
}

// TestDrain_Timeout: a pod whose kubelet never stops it (a grace period
// left to the kubelet, which does not run) keeps the drain waiting until
// the timeout, with the hint.
func TestDrain_Timeout(t *testing.T) {
	c := drainFixture(t)
	_, err := Drain(context.Background(), c, "node-2", DrainOptions{Timeout: time.Second})
	if !errors.Is(err, ErrDrainTimeout) {
		t.Fatalf("drain without a kubelet: %v, want ErrDrainTimeout", err)
	}
}

func TestDrain_NoNode(t *testing.T) {
	c := testAPI(t)
	res, err := Drain(context.Background(), c, "nowhere", DrainOptions{Timeout: time.Second})
	if err != nil || res.Cordoned || len(res.Deleted) != 0 {
		t.Errorf("drain of a node without a Node: %+v %v, want nothing done", res, err)
	}
}
