package scheduler

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubectl"
)

// cluster is a real API server in t.TempDir(), with the admin and the
// scheduler's clients.
type cluster struct {
	srv   *apiserver.Server
	admin *apiserver.Client
	sched *apiserver.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	if _, err := apiserver.Init(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	srv, err := apiserver.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := &cluster{srv: srv}
	if c.admin, err = srv.ClientAs("admin"); err != nil {
		t.Fatal(err)
	}
	if c.sched, err = srv.ClientAs("system:kube-scheduler"); err != nil {
		t.Fatal(err)
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (c *cluster) create(t *testing.T, objs ...apiserver.Object) {
	t.Helper()
	for _, o := range objs {
		if _, err := c.admin.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

func (c *cluster) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	o, err := c.admin.Get(context.Background(), "pods", "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*corev1.Pod)
}

// events lists the events about a pod as "Type Reason source: message".
func (c *cluster) events(t *testing.T, podName string) []string {
	t.Helper()
	l, err := c.admin.List(context.Background(), "events", "default", apiserver.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range l.Items {
		ev := o.(*corev1.Event)
		if ev.InvolvedObject.Name == podName {
			out = append(out, ev.Type+" "+ev.Reason+" "+ev.Source.Component+": "+ev.Message)
		}
	}
	return out
}

func condition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// recorder collects the decisions of a scheduler.
type recorder struct {
	mu sync.Mutex
	ds []Decision
	ch chan Decision
}

func newRecorder() *recorder { return &recorder{ch: make(chan Decision, 100)} }

func (r *recorder) report(d Decision) {
	r.mu.Lock()
	r.ds = append(r.ds, d)
	r.mu.Unlock()
	r.ch <- d
}

func (r *recorder) of(name string) []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Decision
	for _, d := range r.ds {
		if d.Pod.Name == name {
			out = append(out, d)
		}
	}
	return out
}

// next waits for the next decision about name.
func (r *recorder) next(t *testing.T, name string) Decision {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case d := <-r.ch:
			if d.Pod.Name == name {
				return d
			}
		case <-timeout:
			t.Fatalf("no decision about %s within 20s", name)
		}
	}
}

func TestScheduler_Once(t *testing.T) {
	c := newCluster(t)
	c.create(t,
		node("node-1", "2", "4Gi"),
		node("node-2", "8", "16Gi", tainted("gpu=true:NoSchedule")),
		pod("web", "500m", "256Mi"),
		pod("big", "4", "1Gi"),
		pod("pinned", "100m", "", boundTo("node-2")),
		pod("other", "100m", "", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" }),
	)
	rec := newRecorder()
	sum, err := New(c.sched, WithReport(rec.report)).Once(testCtx(t))
	if err != nil {
		t.Fatalf("Once: %v", err)
	}
	if want := (Summary{Bound: 1, Unschedulable: 1}); sum != want {
		t.Errorf("Summary = %+v, want %+v", sum, want)
	}

	web := c.pod(t, "web")
	if web.Spec.NodeName != "node-1" {
		t.Errorf("web is on %q, want node-1", web.Spec.NodeName)
	}
	if cond := condition(web); cond == nil || cond.Status != corev1.ConditionTrue {
		t.Errorf("web's PodScheduled condition: %+v", cond)
	}
	if got := c.events(t, "web"); len(got) != 1 || got[0] != "Normal Scheduled default-scheduler: Successfully assigned default/web to node-1" {
		t.Errorf("events about web: %q", got)
	}
	if ds := rec.of("web"); len(ds) != 1 || !ds[0].Bound() || ds[0].Result.Node != "node-1" || len(ds[0].Result.Nodes) != 2 {
		t.Errorf("decisions about web: %+v", ds)
	}

	const msg = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: true}. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
	big := c.pod(t, "big")
	cond := condition(big)
	if big.Spec.NodeName != "" || cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable || cond.Message != msg {
		t.Errorf("big: nodeName %q, PodScheduled %+v; want False, Unschedulable, %q", big.Spec.NodeName, cond, msg)
	}
	if got := c.events(t, "big"); len(got) != 1 || got[0] != "Warning FailedScheduling default-scheduler: "+msg {
		t.Errorf("events about big: %q", got)
	}

	for _, name := range []string{"pinned", "other"} {
		if ds := rec.of(name); len(ds) != 0 {
			t.Errorf("the scheduler decided about %s: %+v", name, ds)
		}
		if ev := c.events(t, name); len(ev) != 0 {
			t.Errorf("events about %s: %q", name, ev)
		}
	}
	if p := c.pod(t, "pinned"); p.Spec.NodeName != "node-2" {
		t.Errorf("pinned moved to %q", p.Spec.NodeName)
	}
	if p := c.pod(t, "other"); p.Spec.NodeName != "" {
		t.Errorf("other (for my-scheduler) was bound to %q", p.Spec.NodeName)
	}

	// Once again: big is still unschedulable, and its condition, already
	// saying so, is not written again.
	rv := big.ResourceVersion
	if _, err := New(c.sched).Once(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := c.pod(t, "big").ResourceVersion; got != rv {
		t.Errorf("big was written again (resourceVersion %s -> %s) with the same condition", rv, got)
	}
}

// The cycles of one Once pass see the pods assumed by the previous ones,
// while their bindings are still on their way.
func TestScheduler_OnceCountsAssumedPods(t *testing.T) {
	c := newCluster(t)
	c.create(t, node("node-1", "2", "4Gi"), node("node-2", "2", "4Gi"))
	for _, name := range []string{"p1", "p2", "p3", "p4", "p5"} {
		c.create(t, pod(name, "1", "128Mi"))
	}
	sum, err := New(c.sched).Once(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Summary{Bound: 4, Unschedulable: 1}); sum != want {
		t.Errorf("Summary = %+v, want %+v", sum, want)
	}
	on := map[string]int{}
	for _, name := range []string{"p1", "p2", "p3", "p4", "p5"} {
		on[c.pod(t, name).Spec.NodeName]++
	}
	if on["node-1"] != 2 || on["node-2"] != 2 || on[""] != 1 {
		t.Errorf("pods per node: %v, want 2, 2 and 1 pending", on)
	}
	if cond := condition(c.pod(t, "p5")); cond == nil || cond.Message != "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod." {
		t.Errorf("p5's condition: %+v", cond)
	}
}

// A pod pending for lack of nodes waits (no hot loop), and is bound once a
// node that can take it appears: first added with Ready Unknown, as
// `podlab node add` does, then reported Ready, as its kubelet does.
func TestScheduler_Run_RetriesWhenNodesChange(t *testing.T) {
	c := newCluster(t)
	c.create(t, pod("web", "500m", "256Mi"))
	rec := newRecorder()
	s := New(c.sched, WithReport(rec.report), WithBackoff(20*time.Millisecond, 100*time.Millisecond))
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	d := rec.next(t, "web")
	if !errors.Is(d.Err, ErrNoNodesAvailable) || d.Attempt != 1 {
		t.Fatalf("first decision: attempt %d, %v; want no nodes available", d.Attempt, d.Err)
	}
	// Several back-offs later, nothing changed: no second attempt.
	time.Sleep(300 * time.Millisecond)
	if n := len(rec.of("web")); n != 1 {
		t.Errorf("%d attempts with nothing changed, want 1", n)
	}
	if cond := condition(c.pod(t, "web")); cond == nil || cond.Message != "no nodes available to schedule pods" || cond.Reason != "Unschedulable" {
		t.Errorf("PodScheduled: %+v", cond)
	}

	n := node("node-1", "2", "4Gi", ready(corev1.ConditionUnknown))
	c.create(t, n)
	d = rec.next(t, "web")
	const unreachable = "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
	if d.Err == nil || d.Err.Error() != unreachable {
		t.Fatalf("after the node was added: %v, want %q", d.Err, unreachable)
	}

	got, err := c.admin.Get(ctx, "nodes", "", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	n = got.(*corev1.Node)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	if _, err := c.admin.UpdateStatus(ctx, n); err != nil {
		t.Fatal(err)
	}
	d = rec.next(t, "web")
	if !d.Bound() || d.Result.Node != "node-1" {
		t.Fatalf("after the node became Ready: %+v", d)
	}
	waitFor(t, func() bool { return c.pod(t, "web").Spec.NodeName == "node-1" })
	waitFor(t, func() bool {
		return len(c.events(t, "web")) > 0 && strings.Contains(strings.Join(c.events(t, "web"), "\n"), "Successfully assigned default/web to node-1")
	})

	// A pod created while Run watches is scheduled too.
	c.create(t, pod("late", "100m", ""))
	if d := rec.next(t, "late"); !d.Bound() {
		t.Errorf("late: %+v", d)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10s")
}

// racingBinder binds the pod to another node first, as a second scheduler
// would, then lets the scheduler's binding through.
type racingBinder struct {
	apiserver.Interface
	admin apiserver.Interface
}

func (r racingBinder) Bind(ctx context.Context, b *corev1.Binding) error {
	other := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-2"}}
	if err := r.admin.Bind(ctx, other); err != nil {
		return err
	}
	return r.Interface.Bind(ctx, b)
}

func TestScheduler_BindConflictIsNotAnError(t *testing.T) {
	c := newCluster(t)
	c.create(t, node("node-1", "4", "8Gi"), node("node-2", "1", "1Gi"), pod("web", "500m", "256Mi"))
	rec := newRecorder()
	sum, err := New(racingBinder{c.sched, c.admin}, WithReport(rec.report)).Once(testCtx(t))
	if err != nil {
		t.Fatalf("Once: %v", err)
	}
	if want := (Summary{Conflicts: 1}); sum != want {
		t.Errorf("Summary = %+v, want %+v", sum, want)
	}
	if ds := rec.of("web"); len(ds) != 1 || !ds[0].Conflict || !apierrors.IsConflict(ds[0].Err) {
		t.Errorf("decisions: %+v", ds)
	}
	if got := c.pod(t, "web").Spec.NodeName; got != "node-2" {
		t.Errorf("web is on %q, want node-2 (the first binding)", got)
	}
	if ev := c.events(t, "web"); len(ev) != 0 {
		t.Errorf("events about a pod someone else bound: %q", ev)
	}
}

func TestScheduler_BadInputs(t *testing.T) {
	c := newCluster(t)
	c.create(t, node("node-1", "2", "4Gi"), pod("web", "100m", ""))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	viewer, err := c.srv.ClientAs("viewer")
	if err != nil {
		t.Fatal(err)
	}
	manager, err := c.srv.ClientAs("system:kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		client apiserver.Interface
		ctx    context.Context
		says   string
	}{
		{"unknown token", c.srv.Client("not-a-token"), context.Background(), "listing nodes"},
		{"a user who may not list nodes", viewer, context.Background(), "forbidden"},
		{"a user who may not bind", manager, context.Background(), "binding default/web to node node-1"},
		{"cancelled", c.sched, cancelled, "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.client).Once(tt.ctx)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Once = %v, want an error saying %q", err, tt.says)
			}
		})
	}
	if got := c.pod(t, "web").Spec.NodeName; got != "" {
		t.Errorf("web was bound to %q by a failing scheduler", got)
	}
}

func TestOurPod(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"default scheduler", pod("a", "", "", func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" }), true},
		{"no scheduler named", pod("a", "", ""), true},
		{"another scheduler", pod("a", "", "", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" }), false},
		{"being deleted", pod("a", "", "", func(p *corev1.Pod) { p.DeletionTimestamp = &now }), false},
		{"gated", pod("a", "", "", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}), false},
		{"failed", pod("a", "", "", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
	}
	for _, tt := range tests {
		if got := ourPod(tt.pod); got != tt.want {
			t.Errorf("%s: ourPod = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestQueue_Backoff(t *testing.T) {
	q := newQueue(PodInitialBackoff, PodMaxBackoff)
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := q.backoffFor(i + 1); got != w {
			t.Errorf("back-off after %d attempts = %v, want %v", i+1, got, w)
		}
	}
}

func TestQueue_Order(t *testing.T) {
	q := newQueue(time.Millisecond, time.Millisecond)
	high := pod("high", "", "", func(p *corev1.Pod) { p.Spec.Priority = ref[int32](1000) })
	for _, p := range []*corev1.Pod{pod("first", "", ""), pod("second", "", ""), high} {
		q.add(p)
	}
	var got []string
	for p := q.popNow(); p != nil; p = q.popNow() {
		got = append(got, p.Pod.Name)
	}
	if strings.Join(got, " ") != "high first second" {
		t.Errorf("popped %v, want the higher priority first, then in order of arrival", got)
	}
	// An unschedulable pod stays out of activeQ until a cluster event, and
	// its own status update is not one.
	q.add(pod("p", "", ""))
	q.popNow()
	q.done("default/p", unschedulable)
	time.Sleep(5 * time.Millisecond)
	updated := pod("p", "", "")
	updated.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	q.add(updated)
	if p := q.popNow(); p != nil {
		t.Fatalf("popped %s without a cluster event", p.Pod.Name)
	}
	q.moveAll()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if p := q.pop(ctx); p == nil || p.Pod.Name != "p" || p.Attempts != 2 {
		t.Errorf("after a cluster event: %+v", p)
	}
}

// TestScheduler_Run_RepeatedFailedSchedulingIsOneEvent: a pod the
// scheduler tries again and again for the same reason gets one
// FailedScheduling Event, counted (client-go's correlator, in the
// recorder), which kubectl describe shows as "(x3 over ...)".
func TestScheduler_Run_RepeatedFailedSchedulingIsOneEvent(t *testing.T) {
	c := newCluster(t)
	c.create(t, node("node-1", "2", "4Gi"), pod("web", "", "", selecting("disk", "ssd")))
	rec := newRecorder()
	s := New(c.sched, WithReport(rec.report), WithBackoff(10*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	const msg = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
	for i := range 3 {
		d := rec.next(t, "web")
		if d.Err == nil || d.Err.Error() != msg {
			t.Fatalf("attempt %d: %v, want %q", i+1, d.Err, msg)
		}
		if i < 2 {
			// a change to the node, not one that lets the pod fit: tried again
			got, err := c.admin.Get(ctx, "nodes", "", "node-1")
			if err != nil {
				t.Fatal(err)
			}
			got.SetLabels(map[string]string{"try": strconv.Itoa(i)})
			if _, err := c.admin.Update(ctx, got); err != nil {
				t.Fatal(err)
			}
		}
	}
	var evs []corev1.Event
	waitFor(t, func() bool {
		l, err := c.admin.List(ctx, "events", "default", apiserver.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		evs = nil
		for _, o := range l.Items {
			evs = append(evs, *o.(*corev1.Event))
		}
		return len(evs) == 1 && evs[0].Count == 3
	})
	if e := evs[0]; e.Reason != "FailedScheduling" || e.Message != msg || e.LastTimestamp.Before(&e.FirstTimestamp) {
		t.Errorf("event %s %q, first %s last %s", e.Reason, e.Message, e.FirstTimestamp, e.LastTimestamp)
	}
	var out strings.Builder
	if err := kubectl.Describe(&out, c.pod(t, "web"), evs, evs[0].LastTimestamp.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Warning\s+FailedScheduling\s+60s \(x3 over 6[01]s\)\s+default-scheduler\s+0/1 nodes are available`).MatchString(out.String()) {
		t.Errorf("describe's Events table has no (x3 over ...) line:\n%s", out.String())
	}
}
