package kubelet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubelet"
)

// TestKubelet_Run_SandboxFailureBacksOff: a pod whose sandbox cannot be
// made (a RuntimeClass whose handler the node does not have) is tried
// again as the kubelet's pod worker does it, 10 to 15 s after a failed
// sync (backOffPeriod, jittered), not at every poll (50ms here): one
// attempt in the first 10 s, one FailedCreatePodSandBox event whose count
// then rises to 2 with the next attempt.
func TestKubelet_Run_SandboxFailureBacksOff(t *testing.T) {
	var mu sync.Mutex
	var attempts []time.Time // each sandbox stage the kubelet ran
	c := newCluster(t, func(cfg *kubelet.Config) {
		prev := cfg.OnStage
		cfg.OnStage = func(r kubelet.Report) {
			if r.Stage.Name == kubelet.StageSandbox && r.Pod != nil && r.Pod.Name == "lost3" {
				mu.Lock()
				attempts = append(attempts, time.Now())
				mu.Unlock()
			}
			prev(r)
		}
	})
	c.runtimeClass(t, "nowhere", "nope")
	p := helloPod(t, "lost3")
	rc := "nowhere"
	p.Spec.RuntimeClassName = &rc
	pod := c.create(t, p)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.kubelet.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	count := func() int32 {
		l, err := c.admin.List(context.Background(), "events", pod.Namespace, apiserver.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var n int32
		for _, o := range l.Items {
			if e := o.(*corev1.Event); e.InvolvedObject.UID == pod.UID && e.Reason == "FailedCreatePodSandBox" {
				n += e.Count
			}
		}
		return n
	}
	tried := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), attempts...)
	}

	waitFor(t, 10*time.Second, "the first FailedCreatePodSandBox", func() bool { return count() >= 1 })
	time.Sleep(time.Until(start.Add(9500 * time.Millisecond)))
	if n, a := count(), len(tried()); n != 1 || a != 1 {
		t.Errorf("after 9.5s: %d FailedCreatePodSandBox events (by count), %d sandbox attempts; want 1 and 1 (the next after 10-15s)", n, a)
	}
	waitFor(t, 10*time.Second, "the FailedCreatePodSandBox count rising to 2", func() bool { return count() >= 2 })
	// the stage's report comes after its event is written
	waitFor(t, 2*time.Second, "the second sandbox attempt's report", func() bool { return len(tried()) >= 2 })
	a := tried()
	if len(a) != 2 {
		t.Fatalf("%d sandbox attempts, want 2", len(a))
	}
	if gap := a[1].Sub(a[0]); gap < kubelet.DefaultSyncBackOff || gap > kubelet.DefaultSyncBackOff*3/2+time.Second {
		t.Errorf("the second attempt came %s after the first, want 10-15s (the pod worker's backOffPeriod, jittered)", gap)
	}
	// The event is correlated: one Event whose count rose, not one per try.
	var evs int
	for _, e := range c.events(t, pod) {
		if hasEvent([]string{e}, "Warning FailedCreatePodSandBox") {
			evs++
		}
	}
	if evs != 1 {
		t.Errorf("%d FailedCreatePodSandBox Events, want one whose count rises", evs)
	}
}
