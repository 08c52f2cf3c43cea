package apiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestInformerFollowsChanges(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	mustCreate(t, admin, testPod("before"))
	inf := NewInformer(admin, "pods", "", ListOptions{LabelSelector: "app"})
	c, cancel := context.WithCancel(ctx(t))
	seen := make(chan string, 16)
	done := make(chan error, 1)
	go func() {
		done <- inf.Run(c, func(ev WatchEvent) { seen <- string(ev.Type) + " " + ev.Object.GetName() })
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-seen:
			if got != want {
				t.Fatalf("informer said %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q within 10s", want)
		}
	}
	expect("ADDED before")
	mustCreate(t, admin, testPod("after"))
	expect("ADDED after")
	if _, err := admin.Delete(ctx(t), "pods", "default", "before", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("DELETED before")
	names := []string{}
	for _, o := range inf.List() {
		names = append(names, o.GetName())
	}
	if strings.Join(names, ",") != "after" {
		t.Errorf("the local copy holds %v, want [after]", names)
	}
	if _, ok := inf.Get("default", "after"); !ok {
		t.Error("Get(default/after) found nothing")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

func TestInformerListsAgainAfterCompaction(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	inf := NewInformer(admin, "pods", "", ListOptions{})
	if err := inf.Sync(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, admin, testPod("missed"))
	if err := s.store.Compact(ctx(t), revision(t, s)); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	seen := make(chan string, 16)
	go inf.Run(c, func(ev WatchEvent) { seen <- string(ev.Type) + " " + ev.Object.GetName() })
	// Run lists first (the pod is there), then its watch from the list's
	// revision works; a compacted watch would list again. Either way the
	// pod is seen.
	select {
	case got := <-seen:
		if got != "ADDED missed" {
			t.Errorf("got %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the informer never saw the pod")
	}
}

func TestRecorderCountsRepeats(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	pod := mustCreate(t, admin, testPod("web"))
	rec := NewRecorder(as(t, s, "system:kube-scheduler"), "default-scheduler", "")
	for i := 0; i < 3; i++ {
		if err := rec.Event(ctx(t), pod, corev1.EventTypeWarning, "FailedScheduling", "0/1 nodes are available"); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Event(ctx(t), pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned default/web to node-1"); err != nil {
		t.Fatal(err)
	}
	l, err := admin.List(ctx(t), "events", "default", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int32{}
	for _, o := range l.Items {
		ev := o.(*corev1.Event)
		if ev.InvolvedObject.UID != pod.GetUID() || ev.Source.Component != "default-scheduler" {
			t.Errorf("event %s: involvedObject %v, source %v", ev.Name, ev.InvolvedObject, ev.Source)
		}
		counts[ev.Reason] = ev.Count
	}
	if counts["FailedScheduling"] != 3 || counts["Scheduled"] != 1 || len(counts) != 2 {
		t.Errorf("event counts %v, want FailedScheduling x3 and Scheduled x1", counts)
	}
}

func TestWatchSelectorEntersAndLeaves(t *testing.T) {
	s, _ := testServer(t)
	admin := as(t, s, "admin")
	p := mustCreate(t, admin, testPod("web")).(*corev1.Pod)
	w, err := admin.Watch(ctx(t), "pods", "default", ListOptions{LabelSelector: "tier=front", ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["tier"] = "front"
	p2, err := admin.Update(ctx(t), p)
	if err != nil {
		t.Fatal(err)
	}
	p = p2.(*corev1.Pod)
	p.Labels["tier"] = "back"
	if _, err := admin.Update(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range w.Events() {
		got = append(got, string(ev.Type)+" "+ev.Object.GetLabels()["tier"])
		if len(got) == 2 {
			break
		}
	}
	if strings.Join(got, ",") != "ADDED front,DELETED front" {
		t.Errorf("a pod entering then leaving the selector gave %v, want ADDED then DELETED", got)
	}
}
