package bench

// The scheduler's target: 1,000 pending pods onto 100 nodes, from the
// scheduler's start (its first list) to its last binding, at 500 pods/s or
// more. Each binding is real: the pods/binding subresource through the API
// server's gate, one fsync'd store transaction, and the Scheduled event is
// another. (kube-scheduler's own SchedulingBasic performance test expects
// 270 pods/s, on 5,000 nodes.)

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/scheduler"
)

const (
	schedNodes  = 100
	schedPods   = 1000
	schedRounds = 3
	schedTarget = 500.0 // pods/s
)

func benchNode(name string) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Capacity: alloc.DeepCopy(), Allocatable: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}
}

func benchPendingPod(name string) *corev1.Pod {
	p := benchPod(name)
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("128Mi"),
	}
	return p
}

func BenchmarkScheduler(b *testing.B) {
	root := diskDir(b)
	var runs []measurement
	for r := 0; r < schedRounds; r++ {
		runs = append(runs, measurement{wall: scheduleRound(b, filepath.Join(root, fmt.Sprint(r), "state"))})
	}
	got := typical(runs)
	rate := schedPods / got.wall.Seconds()
	verdict := "ok"
	if rate < schedTarget {
		verdict = "MISSED"
		b.Errorf("scheduled %d pods onto %d nodes at %.0f pods/s (median of %d), target at least %.0f", schedPods, schedNodes, rate, schedRounds, schedTarget)
	}
	fmt.Printf("%-50s podlab %9.1f pods/s  (%.0f ms; target >= %.0f) %s\n",
		fmt.Sprintf("scheduling %d pods onto %d nodes", schedPods, schedNodes), rate, ms(got.wall), schedTarget, verdict)
	b.ReportMetric(rate, "pods/s")
}

// scheduleRound makes a cluster of schedNodes nodes and schedPods pending
// pods, and times the scheduler from its start to its last binding.
func scheduleRound(b *testing.B, dir string) time.Duration {
	srv, admin := initServer(b, dir)
	ctx := context.Background()
	for i := 0; i < schedNodes; i++ {
		if _, err := admin.Create(ctx, benchNode(fmt.Sprintf("node-%03d", i))); err != nil {
			b.Fatal(err)
		}
	}
	creating := time.Now()
	for i := 0; i < schedPods; i++ {
		if _, err := admin.Create(ctx, benchPendingPod(fmt.Sprintf("pod-%04d", i))); err != nil {
			b.Fatal(err)
		}
	}
	creates := time.Since(creating)
	client, err := srv.ClientAs("system:kube-scheduler")
	if err != nil {
		b.Fatal(err)
	}
	var bound atomic.Int64
	var last atomic.Int64 // unix nanoseconds of the last binding reported
	all := make(chan struct{})
	s := scheduler.New(client, scheduler.WithReport(func(d scheduler.Decision) {
		if !d.Bound() {
			b.Errorf("%s: %v", d.Pod.Name, d.Err)
			return
		}
		last.Store(time.Now().UnixNano())
		if bound.Add(1) == schedPods {
			close(all)
		}
	}))
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- s.Run(runCtx) }()
	select {
	case <-all:
	case err := <-errc:
		b.Fatalf("the scheduler stopped after %d bindings: %v", bound.Load(), err)
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d pods bound after 5 minutes", bound.Load(), schedPods)
	}
	elapsed := time.Unix(0, last.Load()).Sub(start)
	cancel()
	if err := <-errc; err != nil { // Run returns once the queued events are written too
		b.Fatal(err)
	}
	drained := time.Since(start)

	// Every pod is bound, and no node holds more than it can.
	l, err := admin.List(ctx, "pods", "default", apiserver.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	perNode := map[string]int{}
	for _, o := range l.Items {
		p := o.(*corev1.Pod)
		if p.Spec.NodeName == "" {
			b.Fatalf("%s has no node after the run", p.Name)
		}
		perNode[p.Spec.NodeName]++
	}
	for n, count := range perNode {
		if count > 40 { // 4 cpu / 100m
			b.Errorf("%s holds %d pods of 100m on 4 cpu", n, count)
		}
	}
	// What the store took for the same number of single writes, just
	// before: the scheduler writes two per pod (the binding, the event).
	b.Logf("round: %d pods bound in %v onto %d nodes, their Scheduled events written by %v; creating them took %v (%.0f writes/s)",
		len(l.Items), elapsed.Round(time.Millisecond), len(perNode), drained.Round(time.Millisecond), creates.Round(time.Millisecond), schedPods/creates.Seconds())
	return elapsed
}
