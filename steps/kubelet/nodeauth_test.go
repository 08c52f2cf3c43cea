package kubelet_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver"
)

// A pod deleted while its kubelet still holds it: the Node authorizer
// answers the kubelet's read of it with 403 (no relationship between the
// node and a pod that no longer exists), as kube-apiserver does, and the
// kubelet takes that as "gone", not as a failed sync.
func TestKubelet_SyncPod_DeletedMeanwhile(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.create(t, helloPod(t, "gone"))
	obj, err := c.admin.Delete(ctx, "pods", "default", "gone", apiserver.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	marked := obj.(*corev1.Pod)
	if marked.DeletionTimestamp == nil {
		t.Fatal("the pod was not marked for deletion")
	}
	zero := int64(0)
	if _, err := c.admin.Delete(ctx, "pods", "default", "gone", apiserver.DeleteOptions{Force: true, GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.node.Get(ctx, "pods", "default", "gone"); err == nil {
		t.Fatal("node-1 read a pod that no longer exists")
	}
	if err := c.kubelet.SyncPod(ctx, marked); err != nil {
		t.Errorf("SyncPod of a pod deleted meanwhile: %v, want nil (nothing left to do)", err)
	}
}
