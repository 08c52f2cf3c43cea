package controllers

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// fakeClock is the controller's clock, moved by the test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// heartbeat does a kubelet's part at time t: renew the node's Lease
// (creating it the first time) and, when status is set, post the node's
// conditions with that status. node-1 does it as itself (the lab has only
// its credentials), other nodes as admin.
func (l *lab) heartbeat(node string, t time.Time, status corev1.ConditionStatus) {
	l.t.Helper()
	c := l.admin
	if node == apiserver.HostNode {
		var err error
		if c, err = l.srv.ClientAs("system:node:" + node); err != nil {
			l.t.Fatal(err)
		}
	}
	renew := &metav1.MicroTime{Time: t}
	obj, err := c.Get(l.ctx, "leases", corev1.NamespaceNodeLease, node)
	if err != nil {
		lease := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: ptr(int32(40)), RenewTime: renew}}
		if _, err := c.Create(l.ctx, lease); err != nil {
			l.t.Fatalf("creating the Lease of %s: %v", node, err)
		}
	} else {
		lease := obj.(*coordinationv1.Lease)
		lease.Spec.RenewTime = renew
		if _, err := c.Update(l.ctx, lease); err != nil {
			l.t.Fatalf("renewing the Lease of %s: %v", node, err)
		}
	}
	if status == "" {
		return
	}
	obj, err = c.Get(l.ctx, "nodes", "", node)
	if err != nil {
		l.t.Fatal(err)
	}
	n := obj.(*corev1.Node)
	beat := metav1.NewTime(t)
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: beat, LastTransitionTime: beat},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: beat, LastTransitionTime: beat},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: beat, LastTransitionTime: beat},
		{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: beat, LastTransitionTime: beat},
	}
	if _, err := c.UpdateStatus(l.ctx, n); err != nil {
		l.t.Fatalf("posting the status of %s: %v", node, err)
	}
}

func (l *lab) node(name string) *corev1.Node {
	l.t.Helper()
	obj, err := l.admin.Get(l.ctx, "nodes", "", name)
	if err != nil {
		l.t.Fatal(err)
	}
	return obj.(*corev1.Node)
}

// pass syncs the controller's caches and runs one monitoring pass.
func (l *lab) pass(nc *NodeLifecycleController) {
	l.t.Helper()
	if err := nc.Sync(l.ctx); err != nil {
		l.t.Fatal(err)
	}
	if err := nc.Monitor(l.ctx); err != nil {
		l.t.Fatal(err)
	}
}

// TestNodeLifecycle_SilentNodeIsUnknownAndTainted: node-1's kubelet stops;
// node-2's only renews its Lease. After the grace period (50s) node-1's
// conditions are Unknown with kube's reason and message, it is tainted
// unreachable:NoExecute, its pod is not Ready; node-2 stays Ready. When
// node-1's kubelet comes back, the taint goes.
func TestNodeLifecycle_SilentNodeIsUnknownAndTainted(t *testing.T) {
	l := newLab(t)
	clock := &fakeClock{t: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
	t0 := clock.now()
	l.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}})
	for _, n := range []string{apiserver.HostNode, "node-2"} {
		if n == apiserver.HostNode {
			l.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		l.heartbeat(n, t0, corev1.ConditionTrue)
	}
	pod := l.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}).(*corev1.Pod)
	l.bind(pod)
	l.markReady(l.pods("")[0])

	nc, err := NewNodeLifecycleController(l.cm, klog.New(l.log, klog.WithVerbosity(4)), DefaultNodeLifecycleConfig(), clock.now)
	if err != nil {
		t.Fatal(err)
	}
	l.pass(nc)
	for _, step := range []time.Duration{20 * time.Second, 20 * time.Second} { // 40s: within the grace period
		clock.step(step)
		l.heartbeat("node-2", clock.now(), "") // node-2 renews its Lease only
		l.pass(nc)
	}
	if r := nodeCondition(&l.node(apiserver.HostNode).Status, corev1.NodeReady); r.Status != corev1.ConditionTrue {
		t.Fatalf("node-1 Ready=%s after 40s of silence, want True (grace period 50s)", r.Status)
	}
	clock.step(15 * time.Second) // 55s
	l.heartbeat("node-2", clock.now(), "")
	l.pass(nc)

	n1 := l.node(apiserver.HostNode)
	for _, typ := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		c := nodeCondition(&n1.Status, typ)
		if c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusUnknown" || c.Message != "Kubelet stopped posting node status." {
			t.Errorf("node-1 %s = %s (%s: %q), want Unknown (NodeStatusUnknown: \"Kubelet stopped posting node status.\")", typ, c.Status, c.Reason, c.Message)
		}
		if !c.LastTransitionTime.Time.Equal(clock.now()) || !c.LastHeartbeatTime.Time.Equal(t0) {
			t.Errorf("node-1 %s: lastTransitionTime %v, lastHeartbeatTime %v; want now and the kubelet's last", typ, c.LastTransitionTime, c.LastHeartbeatTime)
		}
	}
	if len(n1.Spec.Taints) != 1 || n1.Spec.Taints[0].Key != corev1.TaintNodeUnreachable || n1.Spec.Taints[0].Effect != corev1.TaintEffectNoExecute ||
		n1.Spec.Taints[0].TimeAdded == nil || !n1.Spec.Taints[0].TimeAdded.Time.Equal(clock.now()) {
		t.Errorf("node-1 taints %+v, want node.kubernetes.io/unreachable:NoExecute added now", n1.Spec.Taints)
	}
	if r := nodeCondition(&l.node("node-2").Status, corev1.NodeReady); r.Status != corev1.ConditionTrue || len(l.node("node-2").Spec.Taints) != 0 {
		t.Errorf("node-2, renewing its Lease: Ready=%s, taints %v; want True, none", r.Status, l.node("node-2").Spec.Taints)
	}
	if p := l.pods("")[0]; isPodReady(p) {
		t.Errorf("pod %s on the silent node is still Ready", p.Name)
	}
	for _, want := range []string{
		`node_lifecycle_controller.go:1018] "Node hasn't been updated" logger="node-lifecycle-controller" node="node-1" duration="55s" nodeConditionType="Ready"`,
		`node_lifecycle_controller.go:818] "Node is unresponsive. Adding it to the Taint queue" logger="node-lifecycle-controller" node="node-1"`,
		`controller_utils.go:144] "Updating ready status of pod to false" logger="node-lifecycle-controller" pod="default/web"`,
	} {
		if !strings.Contains(l.log.String(), want) {
			t.Errorf("log has no %s:\n%s", want, tail(l.log.String(), 30))
		}
	}
	var reasons []string
	evs, err := l.admin.List(l.ctx, "events", "default", apiserver.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range evs.Items {
		e := o.(*corev1.Event)
		reasons = append(reasons, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+" "+e.Reason+": "+e.Message)
	}
	for _, want := range []string{"Node/node-1 NodeNotReady: Node node-1 status is now: NodeNotReady", "Pod/web NodeNotReady: Node is not ready"} {
		if !strings.Contains(strings.Join(reasons, "\n"), want) {
			t.Errorf("no event %q in %q", want, reasons)
		}
	}

	// Another pass changes nothing: the node is already Unknown and tainted.
	before := l.node(apiserver.HostNode).ResourceVersion
	clock.step(5 * time.Second)
	l.pass(nc)
	if after := l.node(apiserver.HostNode).ResourceVersion; after != before {
		t.Errorf("a pass over an unchanged silent node wrote it (resourceVersion %s -> %s)", before, after)
	}

	// The kubelet comes back.
	clock.step(5 * time.Second)
	l.heartbeat(apiserver.HostNode, clock.now(), corev1.ConditionTrue)
	l.pass(nc)
	n1 = l.node(apiserver.HostNode)
	if r := nodeCondition(&n1.Status, corev1.NodeReady); r.Status != corev1.ConditionTrue || len(n1.Spec.Taints) != 0 {
		t.Errorf("node-1 back: Ready=%s, taints %v; want True and no taint", r.Status, n1.Spec.Taints)
	}
	if !strings.Contains(l.log.String(), `"Node is healthy again, removed all taints" logger="node-lifecycle-controller" node="node-1"`) {
		t.Errorf("log does not say the taints were removed:\n%s", tail(l.log.String(), 10))
	}
}

// TestNodeLifecycle_LeaseAloneKeepsNodeAlive: a kubelet that renews its
// Lease but posts no status for longer than the grace period is alive, as
// in kube (the status is posted every 5 minutes when nothing changes).
func TestNodeLifecycle_LeaseAloneKeepsNodeAlive(t *testing.T) {
	l := newLab(t)
	clock := &fakeClock{t: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
	l.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: apiserver.HostNode}})
	l.heartbeat(apiserver.HostNode, clock.now(), corev1.ConditionTrue)
	cfg := DefaultNodeLifecycleConfig()
	cfg.MonitorGracePeriod = 5 * time.Second // the lab's short setting
	nc, err := NewNodeLifecycleController(l.cm, klog.New(l.log, klog.WithVerbosity(4)), cfg, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l.pass(nc)
		clock.step(4 * time.Second)
		l.heartbeat(apiserver.HostNode, clock.now(), "")
	}
	l.pass(nc)
	if r := nodeCondition(&l.node(apiserver.HostNode).Status, corev1.NodeReady); r.Status != corev1.ConditionTrue {
		t.Errorf("Ready=%s after 20s of Lease renewals and no status, want True", r.Status)
	}
	clock.step(6 * time.Second)
	l.pass(nc)
	if r := nodeCondition(&l.node(apiserver.HostNode).Status, corev1.NodeReady); r.Status != corev1.ConditionUnknown {
		t.Errorf("Ready=%s after 6s without a renewal (grace 5s), want Unknown", r.Status)
	}
}

// TestNodeLifecycleConfig_Bad: periods that are not positive are refused,
// naming the flag and the default.
func TestNodeLifecycleConfig_Bad(t *testing.T) {
	tests := []struct {
		name   string
		change func(*NodeLifecycleConfig)
		want   string
	}{
		{"zero grace period", func(c *NodeLifecycleConfig) { c.MonitorGracePeriod = 0 }, "--node-monitor-grace-period 0s"},
		{"negative grace period", func(c *NodeLifecycleConfig) { c.MonitorGracePeriod = -time.Second }, "--node-monitor-grace-period -1s"},
		{"zero monitor period", func(c *NodeLifecycleConfig) { c.MonitorPeriod = 0 }, "--node-monitor-period 0s"},
		{"negative startup grace period", func(c *NodeLifecycleConfig) { c.StartupGracePeriod = -time.Minute }, "--node-startup-grace-period -1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultNodeLifecycleConfig()
			tt.change(&cfg)
			_, err := NewNodeLifecycleController(nil, klog.New(nil), cfg, nil)
			if !errors.Is(err, ErrNodeMonitorPeriod) || !strings.HasPrefix(err.Error(), tt.want) || !strings.Contains(err.Error(), "the default is") {
				t.Errorf("err = %v, want ErrNodeMonitorPeriod starting %q with the default", err, tt.want)
			}
		})
	}
	if err := DefaultNodeLifecycleConfig().Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
