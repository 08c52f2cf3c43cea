package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func drainKeys(q *queue) []string {
	var out []string
	for {
		k, ok := q.TryGet()
		if !ok {
			return out
		}
		out = append(out, k)
		q.Done(k)
	}
}

func TestQueue_DeduplicatesAndKeepsOrder(t *testing.T) {
	q := newQueue(true)
	for _, k := range []string{"default/a", "default/b", "default/a", "default/c", "default/b"} {
		q.Add(k)
	}
	if got := strings.Join(drainKeys(q), " "); got != "default/a default/b default/c" {
		t.Errorf("got %q", got)
	}
}

func TestQueue_AddWhileProcessingComesBackAfterDone(t *testing.T) {
	q := newQueue(true)
	q.Add("k")
	k, _ := q.TryGet()
	q.Add("k") // an event while a worker syncs k
	if _, ok := q.TryGet(); ok {
		t.Fatal("k handed to a second worker while the first still has it")
	}
	q.Done(k)
	if got := drainKeys(q); len(got) != 1 {
		t.Errorf("after Done: %v, want k once more", got)
	}
}

func TestQueue_SinglePassDefersRetries(t *testing.T) {
	q := newQueue(true)
	q.AddRateLimited("b")
	q.AddRateLimited("a")
	q.AddAfter("c", time.Minute) // dropped: the pass is about to end
	if q.Len() != 0 || q.NumRequeues("a") != 1 {
		t.Fatalf("len %d, requeues %d", q.Len(), q.NumRequeues("a"))
	}
	if n := q.Resume(); n != 2 {
		t.Errorf("Resume = %d, want 2", n)
	}
	if got := strings.Join(drainKeys(q), " "); got != "a b" {
		t.Errorf("got %q", got)
	}
	q.Forget("a")
	if q.NumRequeues("a") != 0 {
		t.Error("Forget kept the failures")
	}
}

func TestQueue_RateLimitedComesBackAfterDelay(t *testing.T) {
	q := newQueue(false)
	defer q.ShutDown()
	q.AddRateLimited("k")
	got := make(chan string, 1)
	go func() {
		k, _ := q.Get()
		got <- k
	}()
	select {
	case k := <-got:
		if k != "k" {
			t.Errorf("got %q", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a key retried after 5ms was not back after 5s")
	}
}

func TestQueue_ShutDownWakesGet(t *testing.T) {
	q := newQueue(false)
	done := make(chan bool)
	go func() {
		_, ok := q.Get()
		done <- ok
	}()
	q.ShutDown()
	if ok := <-done; ok {
		t.Error("Get returned a key after ShutDown")
	}
}

func TestExpectations(t *testing.T) {
	now := time.Date(2025, 5, 28, 8, 0, 0, 0, time.UTC)
	e := newExpectations(func() time.Time { return now })
	if !e.Satisfied("default/rs") {
		t.Error("nothing expected, yet not satisfied")
	}
	e.ExpectCreations("default/rs", 2)
	e.CreationObserved("default/rs")
	if e.Satisfied("default/rs") {
		t.Error("satisfied after 1 of 2 creations")
	}
	e.CreationObserved("default/rs")
	if !e.Satisfied("default/rs") {
		t.Error("not satisfied after 2 of 2 creations")
	}
	e.ExpectDeletions("default/rs", []string{"default/p1"})
	e.DeletionObserved("default/rs", "default/p2")
	if e.Satisfied("default/rs") {
		t.Error("another pod's deletion counted")
	}
	e.DeletionObserved("default/rs", "default/p1")
	e.DeletionObserved("default/rs", "default/p1") // seen terminating, then gone
	if !e.Satisfied("default/rs") {
		t.Error("not satisfied after the deletion")
	}
	e.ExpectCreations("default/rs", 1)
	now = now.Add(expectationsTTL + time.Second)
	if !e.Satisfied("default/rs") {
		t.Error("expectations older than the TTL still block")
	}
}

// The ReplicaSet controller's choice of pods to delete, cheapest first.
func TestPodsToDelete_Ranking(t *testing.T) {
	now := time.Date(2025, 5, 28, 8, 0, 0, 0, time.UTC)
	pod := func(name, node string, phase corev1.PodPhase, ready bool, age time.Duration) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-age))}}
		}
		return p
	}
	cases := []struct {
		name string
		pods []*corev1.Pod
		n    int
		want string
	}{
		{"unscheduled before scheduled", []*corev1.Pod{pod("bound", "n1", corev1.PodPending, false, time.Hour), pod("free", "", corev1.PodPending, false, time.Hour)}, 1, "free"},
		{"pending before running", []*corev1.Pod{pod("run", "n1", corev1.PodRunning, false, time.Hour), pod("pend", "n1", corev1.PodPending, false, time.Hour)}, 1, "pend"},
		{"not ready before ready", []*corev1.Pod{pod("ready", "n1", corev1.PodRunning, true, time.Hour), pod("unready", "n1", corev1.PodRunning, false, time.Hour)}, 1, "unready"},
		{"newer before older", []*corev1.Pod{pod("old", "n1", corev1.PodRunning, false, 10*time.Hour), pod("new", "n1", corev1.PodRunning, false, time.Minute)}, 1, "new"},
		{"all when n covers them", []*corev1.Pod{pod("a", "n1", corev1.PodRunning, true, time.Hour), pod("b", "", corev1.PodPending, false, time.Hour)}, 2, "a b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var names []string
			for _, p := range podsToDelete(c.pods, nil, c.n, now) {
				names = append(names, p.Name)
			}
			if got := strings.Join(names, " "); got != c.want {
				t.Errorf("deleted %q, want %q", got, c.want)
			}
		})
	}
}
