package kubelet_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
)

// TestKubelet_RenewLease: the first renewal creates kube-node-lease/node-1
// as the kubelet's NodeLease controller does (holder node-1, 40 seconds,
// owned by the Node); the next one moves renewTime and nothing else.
func TestKubelet_RenewLease(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	c := newCluster(t, func(cfg *kubelet.Config) {
		cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	ctx := context.Background()
	reg, err := c.kubelet.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.kubelet.RenewLease(ctx)
	if err != nil {
		t.Fatalf("RenewLease: %v", err)
	}
	l := first.Lease
	switch {
	case !first.Created:
		t.Error("the first renewal did not create the Lease")
	case l.Namespace != corev1.NamespaceNodeLease || l.Name != "node-1":
		t.Errorf("Lease %s/%s, want kube-node-lease/node-1", l.Namespace, l.Name)
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "node-1":
		t.Errorf("holderIdentity %v, want node-1", l.Spec.HolderIdentity)
	case l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 40:
		t.Errorf("leaseDurationSeconds %v, want 40", l.Spec.LeaseDurationSeconds)
	case l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(now):
		t.Errorf("renewTime %v, want %v", l.Spec.RenewTime, now)
	case len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != reg.Node.UID:
		t.Errorf("ownerReferences %+v, want the Node %s", l.OwnerReferences, reg.Node.UID)
	}

	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	second, err := c.kubelet.RenewLease(ctx)
	if err != nil {
		t.Fatalf("RenewLease again: %v", err)
	}
	if second.Created || !second.Lease.Spec.RenewTime.Time.Equal(now) || second.Lease.UID != l.UID {
		t.Errorf("second renewal: created %v, renewTime %v, uid %s; want the same Lease renewed at %v", second.Created, second.Lease.Spec.RenewTime, second.Lease.UID, now)
	}
}

// TestKubelet_Run_RenewsLease: the running kubelet renews its Lease every
// quarter of its duration (1s of 4s here) and keeps the node Ready.
func TestKubelet_Run_RenewsLease(t *testing.T) {
	c := newCluster(t, func(cfg *kubelet.Config) { cfg.NodeLeaseDuration = 4 * time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.kubelet.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	lease := func() *coordinationv1.Lease {
		obj, err := c.admin.Get(ctx, "leases", corev1.NamespaceNodeLease, "node-1")
		if err != nil {
			return nil
		}
		return obj.(*coordinationv1.Lease)
	}
	waitFor(t, 10*time.Second, "a Lease", func() bool { return lease() != nil })
	l := lease()
	if *l.Spec.LeaseDurationSeconds != 4 {
		t.Errorf("leaseDurationSeconds %d, want 4", *l.Spec.LeaseDurationSeconds)
	}
	renewed := l.Spec.RenewTime.Time
	waitFor(t, 5*time.Second, "the Lease renewed", func() bool {
		n := lease()
		return n != nil && n.Spec.RenewTime.Time.After(renewed)
	})
	ready := false
	for _, cd := range getNode(t, c).Status.Conditions {
		ready = ready || cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue
	}
	if !ready {
		t.Error("the node is not Ready while its kubelet runs")
	}
}

// TestKubelet_New_BadLeaseDuration: a Lease duration the controller could
// not count on is refused, saying what works.
func TestKubelet_New_BadLeaseDuration(t *testing.T) {
	dir := t.TempDir()
	if _, err := apiserver.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	srv, err := apiserver.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	node, err := srv.ClientAs("system:node:node-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{time.Second, 3 * time.Second, 4500 * time.Millisecond} {
		_, err := kubelet.New(kubelet.Config{StateDir: dir, Client: node, NodeLeaseDuration: d})
		if err == nil || !strings.Contains(err.Error(), "at least 4s") {
			t.Errorf("NodeLeaseDuration %s: err %v, want one saying whole seconds, at least 4s", d, err)
		}
	}
}
