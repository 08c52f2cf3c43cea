package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/admission"
	"github.com/podlab/podlab/steps/scheduler"
)

// The taint-eviction controller against a real API server: nodes tainted
// NoExecute by hand (kubectl taint), the controller-manager running.

// addNode registers a Ready node with room for pods, as a kubelet does.
func (l *lab) addNode(name string) {
	l.t.Helper()
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n := l.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}).(*corev1.Node)
	n.Status = corev1.NodeStatus{Capacity: alloc.DeepCopy(), Allocatable: alloc,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	if _, err := l.admin.UpdateStatus(l.ctx, n); err != nil {
		l.t.Fatalf("node %s status: %v", name, err)
	}
}

// taint sets a node's taints, as kubectl taint does (a NoExecute taint gets
// timeAdded); untaint is kubectl taint KEY-.
func (l *lab) taint(node string, taints ...corev1.Taint) {
	l.t.Helper()
	for try := 0; ; try++ {
		o, err := l.admin.Get(l.ctx, "nodes", "", node)
		if err != nil {
			l.t.Fatal(err)
		}
		n := o.(*corev1.Node)
		n.Spec.Taints = nil
		for _, t := range taints {
			if t.Effect == corev1.TaintEffectNoExecute {
				t.TimeAdded = ptr(metav1.Now())
			}
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
		if _, err = l.admin.Update(l.ctx, n); err == nil {
			return
		}
		if try == 10 {
			l.t.Fatalf("tainting %s: %v", node, err)
		}
	}
}

// podOn creates a pod bound to node with the given tolerations.
func (l *lab) podOn(name, node string, tolerations ...corev1.Toleration) {
	l.t.Helper()
	l.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: tolerations,
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
	})
}

// runManager runs the controller-manager until the test ends.
func (l *lab) runManager() {
	l.t.Helper()
	ctx, cancel := context.WithCancel(l.ctx)
	done := make(chan error, 1)
	go func() { done <- l.manager(l.cm).Run(ctx) }()
	l.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			l.t.Errorf("Run: %v", err)
		}
	})
}

// deleting reports whether the pod is marked for deletion or gone.
func (l *lab) deleting(name string) bool {
	l.t.Helper()
	o, err := l.admin.Get(l.ctx, "pods", "default", name)
	if err != nil {
		return true
	}
	return o.(*corev1.Pod).DeletionTimestamp != nil
}

// waitUntil polls cond every 50ms until it holds or d passes.
func (l *lab) waitUntil(d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(l.ctx, d)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return cond()
		case <-t.C:
		}
	}
	return true
}

func (l *lab) eventsFor(reason string) []string {
	l.t.Helper()
	list, err := l.admin.List(l.ctx, "events", "default", apiserver.ListOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	var out []string
	for _, o := range list.Items {
		if e := o.(*corev1.Event); e.Reason == reason {
			out = append(out, e.InvolvedObject.Name+": "+e.Message+" ("+e.Source.Component+")")
		}
	}
	return out
}

var maintenance = corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute}

func tolerate(key string, seconds *int64) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
}

func TestTaintEviction_NoTolerationTwoSecondsForever(t *testing.T) {
	l := newLab(t)
	l.addNode("node-a")
	l.podOn("intolerant", "node-a")
	l.podOn("two-seconds", "node-a", tolerate(maintenance.Key, ptr(int64(2))))
	l.podOn("forever", "node-a", tolerate(maintenance.Key, nil))
	l.runManager()

	l.taint("node-a", maintenance)
	tainted := time.Now()
	if !l.waitUntil(time.Second, func() bool { return l.deleting("intolerant") }) {
		t.Fatalf("the pod without a toleration was not deleted within 1s of the taint\nlog:\n%s", tail(l.log.String(), 30))
	}
	// timeAdded has whole seconds: the 2 s run out 1 to 2 s after the taint.
	if l.deleting("two-seconds") && time.Since(tainted) < time.Second {
		t.Fatalf("the pod tolerating 2s was deleted after %v", time.Since(tainted))
	}
	if !l.waitUntil(5*time.Second, func() bool { return l.deleting("two-seconds") }) {
		t.Fatalf("the pod tolerating 2s was not deleted within 5s\nlog:\n%s", tail(l.log.String(), 30))
	}
	if took := time.Since(tainted); took < time.Second {
		t.Errorf("the pod tolerating 2s was deleted after %v, before its time", took)
	}
	if l.waitUntil(2*time.Second, func() bool { return l.deleting("forever") }) {
		t.Errorf("the pod tolerating forever was deleted")
	}

	want := []string{
		"intolerant: Marking for deletion Pod default/intolerant (taint-eviction-controller)",
		"two-seconds: Marking for deletion Pod default/two-seconds (taint-eviction-controller)",
	}
	if got := l.eventsFor("TaintManagerEviction"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
	if !strings.Contains(l.log.String(), `"Deleting pod" logger="taint-eviction-controller" controller="taint-eviction-controller" pod="default/intolerant"`) {
		t.Errorf("no klog line for the deletion in\n%s", l.log.String())
	}
}

// A taint removed before the toleration runs out: the pod stays, and the
// controller says it cancelled the deletion.
func TestTaintEviction_TaintRemovedInTime(t *testing.T) {
	l := newLab(t)
	l.addNode("node-a")
	l.podOn("three-seconds", "node-a", tolerate(maintenance.Key, ptr(int64(3))))
	l.runManager()

	l.taint("node-a", maintenance)
	if !l.waitUntil(2*time.Second, func() bool { return strings.Contains(l.log.String(), "Adding TimedWorkerQueue item") }) {
		t.Fatalf("no deletion was scheduled\n%s", l.log.String())
	}
	l.taint("node-a") // kubectl taint node node-a example.com/maintenance-
	if l.waitUntil(5*time.Second, func() bool { return l.deleting("three-seconds") }) {
		t.Fatalf("the pod was deleted though the taint was removed in time\nlog:\n%s", tail(l.log.String(), 30))
	}
	want := "three-seconds: Cancelling deletion of Pod default/three-seconds (taint-eviction-controller)"
	if got := l.eventsFor("TaintManagerEviction"); len(got) != 1 || got[0] != want {
		t.Errorf("events = %q, want [%q]", got, want)
	}
}

// A Deployment's pod on a node that becomes unreachable goes when the
// toleration DefaultTolerationSeconds gave it runs out (2 s here, as the lab
// sets it), and its ReplicaSet's new pod goes to the other node: the
// scheduler does not place it on the tainted one.
func TestTaintEviction_ReplicaSetPodComesBackElsewhere(t *testing.T) {
	l := newLab(t, apiserver.WithDefaultTolerationSeconds(admission.TolerationSeconds{NotReady: 300, Unreachable: 2}))
	l.addNode("node-a")
	l.addNode("node-b")
	sched, err := l.srv.ClientAs("system:kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	l.create(deployment("web", 1, nil, nil))
	l.once()
	pods := l.pods("")
	if len(pods) != 1 {
		t.Fatalf("pods = %d, want 1", len(pods))
	}
	first := pods[0]
	if err := l.admin.Bind(l.ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: first.Name, Namespace: "default"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}); err != nil {
		t.Fatal(err)
	}
	l.runManager()
	l.taint("node-a", corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
	if !l.waitUntil(6*time.Second, func() bool { return l.deleting(first.Name) }) {
		t.Fatalf("the pod on the unreachable node was not deleted within 6s\nlog:\n%s", tail(l.log.String(), 30))
	}
	var replacement *corev1.Pod
	if !l.waitUntil(5*time.Second, func() bool {
		for _, p := range l.pods("") {
			if p.Name != first.Name {
				replacement = p
				return true
			}
		}
		return false
	}) {
		t.Fatal("the ReplicaSet made no new pod")
	}
	if _, err := scheduler.New(sched).Once(l.ctx); err != nil {
		t.Fatalf("scheduler: %v", err)
	}
	o, err := l.admin.Get(l.ctx, "pods", "default", replacement.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.(*corev1.Pod).Spec.NodeName; got != "node-b" {
		t.Errorf("the new pod went to %q, want node-b (node-a is unreachable)", got)
	}
}

// letViewerListNodes grants the read-only user viewer list and watch on
// nodes (ClusterRole view has no cluster-scoped resources).
func (l *lab) letViewerListNodes() {
	l.t.Helper()
	l.create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-lister"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"list", "watch"}, APIGroups: []string{""}, Resources: []string{"nodes"}}}})
	l.create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer-node-lister"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-lister"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}}})
}

// --once deletes what is due now and leaves what must wait.
func TestTaintEviction_Once(t *testing.T) {
	l := newLab(t)
	l.addNode("node-a")
	l.podOn("intolerant", "node-a")
	l.podOn("sixty-seconds", "node-a", tolerate(maintenance.Key, ptr(int64(60))))
	l.podOn("elsewhere", apiserver.HostNode)
	l.taint("node-a", maintenance)
	rep := l.once()
	if strings.Join(rep.PodsEvicted, ",") != "default/intolerant" {
		t.Errorf("PodsEvicted = %q, want [default/intolerant]", rep.PodsEvicted)
	}
	for name, want := range map[string]bool{"intolerant": true, "sixty-seconds": false, "elsewhere": false} {
		if got := l.deleting(name); got != want {
			t.Errorf("pod %s being deleted = %v, want %v", name, got, want)
		}
	}
}
