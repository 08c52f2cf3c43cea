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

// deleteFirst against the orderings of kube v1.37.2's own
// TestSortingActivePodsWithRanks (pkg/controller/controller_utils_test.go):
// unassigned < assigned; Pending < Unknown < Running; not Ready < Ready;
// lower pod-deletion-cost first; more related pods on the same node (the
// rank) first; Ready for less time first; more restarts (then more sidecar
// restarts) first; newer first. Times compare in powers of two of their age.
func TestDeleteFirst_KubeOrder(t *testing.T) {
	now := time.Date(2025, 5, 28, 8, 0, 0, 0, time.UTC)
	nowT := metav1.NewTime(now)
	then1Month := metav1.NewTime(now.AddDate(0, -1, 0))
	then2Hours := metav1.NewTime(now.Add(-2 * time.Hour))
	then5Hours := metav1.NewTime(now.Add(-5 * time.Hour))
	then8Hours := metav1.NewTime(now.Add(-8 * time.Hour))
	zero := metav1.Time{}
	always := corev1.ContainerRestartPolicyAlways
	pod := func(name, node string, phase corev1.PodPhase, ready bool, restarts, sideRestarts int32, readySince, created metav1.Time, cost string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created},
			Spec:       corev1.PodSpec{NodeName: node, InitContainers: []corev1.Container{{Name: "sidecar", RestartPolicy: &always}}},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if cost != "" {
			p.Annotations = map[string]string{corev1.PodDeletionCost: cost}
		}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: readySince}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: restarts}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", RestartCount: sideRestarts}}
		}
		return p
	}
	var (
		unscheduled          = pod("unscheduled", "", corev1.PodPending, false, 0, 0, zero, zero, "")
		pending              = pod("pending", "node", corev1.PodPending, false, 0, 0, zero, zero, "")
		unknown              = pod("unknown-phase", "node", corev1.PodUnknown, false, 0, 0, zero, zero, "")
		notReady             = pod("not-ready", "node", corev1.PodRunning, false, 0, 0, zero, zero, "")
		readyNoTransition    = pod("ready-no-last-transition-time", "node", corev1.PodRunning, true, 0, 0, zero, zero, "")
		readyNow             = pod("ready-now", "node", corev1.PodRunning, true, 0, 0, nowT, nowT, "")
		readyThen            = pod("ready-then", "node", corev1.PodRunning, true, 0, 0, then1Month, then1Month, "")
		readyHighRestarts    = pod("ready-high-restarts", "node", corev1.PodRunning, true, 9001, 0, nowT, nowT, "")
		readyHighSide        = pod("ready-high-side-restarts", "node", corev1.PodRunning, true, 9001, 9001, nowT, nowT, "")
		readyNowCreatedThen  = pod("ready-now-created-then", "node", corev1.PodRunning, true, 0, 0, nowT, then1Month, "")
		lowCost              = pod("low-deletion-cost", "node", corev1.PodRunning, true, 0, 0, nowT, then1Month, "10")
		highCost             = pod("high-deletion-cost", "node", corev1.PodRunning, true, 0, 0, nowT, then1Month, "100")
		unscheduled5Hours    = pod("unscheduled-5-hours", "", corev1.PodPending, false, 0, 0, then5Hours, then5Hours, "")
		unscheduled8Hours    = pod("unscheduled-8-hours", "", corev1.PodPending, false, 0, 0, then8Hours, then8Hours, "")
		ready2Hours          = pod("ready-2-hours", "", corev1.PodRunning, true, 0, 0, then2Hours, then1Month, "")
		ready5Hours          = pod("ready-5-hours", "", corev1.PodRunning, true, 0, 0, then5Hours, then1Month, "")
		ready8Hours          = pod("ready-8-hours", "", corev1.PodRunning, true, 0, 0, then8Hours, then1Month, "")
		badCost              = pod("bad-deletion-cost", "node", corev1.PodRunning, true, 0, 0, nowT, then1Month, "lots")
		zeroCostNowCreatedTh = pod("zero-deletion-cost", "node", corev1.PodRunning, true, 0, 0, nowT, then1Month, "0")
	)
	equal := []struct {
		name   string
		p1, p2 *corev1.Pod
	}{
		{"unscheduled", unscheduled, unscheduled},
		{"pending", pending, pending},
		{"unknown", unknown, unknown},
		{"not ready", notReady, notReady},
		{"ready now, created then", readyNowCreatedThen, readyNowCreatedThen},
		{"ready now", readyNow, readyNow},
		{"ready then", readyThen, readyThen},
		{"high restarts", readyHighRestarts, readyHighRestarts},
		{"created 5 and 8 hours ago: the same power of two", unscheduled5Hours, unscheduled8Hours},
		{"ready 5 and 8 hours: the same power of two", ready5Hours, ready8Hours},
		{"a cost that is not a number counts as 0", badCost, zeroCostNowCreatedTh},
	}
	for _, c := range equal {
		t.Run("equal/"+c.name, func(t *testing.T) {
			if deleteFirst(c.p1, c.p2, 1, 1, now) || deleteFirst(c.p2, c.p1, 1, 1, now) {
				t.Errorf("%s and %s should rank the same", c.p1.Name, c.p2.Name)
			}
		})
	}
	type ranked struct {
		pod  *corev1.Pod
		rank int
	}
	first := []struct {
		name            string
		lesser, greater ranked
	}{
		{"unscheduled before scheduled, whatever the rank", ranked{unscheduled, 1}, ranked{pending, 2}},
		{"unscheduled before scheduled, rank higher", ranked{unscheduled, 2}, ranked{pending, 1}},
		{"Pending before Unknown", ranked{pending, 1}, ranked{unknown, 2}},
		{"Unknown before Running", ranked{unknown, 1}, ranked{notReady, 2}},
		{"not Ready before Ready", ranked{notReady, 1}, ranked{readyNoTransition, 1}},
		{"Ready with no transition time first", ranked{readyNoTransition, 1}, ranked{readyNow, 1}},
		{"doubled up before a lone pod", ranked{readyNow, 2}, ranked{readyNoTransition, 1}},
		{"Ready for less time first", ranked{readyNow, 1}, ranked{readyThen, 1}},
		{"doubled up before Ready for less time", ranked{readyNow, 2}, ranked{readyThen, 1}},
		{"more restarts first", ranked{readyHighRestarts, 1}, ranked{readyNow, 1}},
		{"more sidecar restarts first, regular restarts equal", ranked{readyHighSide, 1}, ranked{readyHighRestarts, 1}},
		{"doubled up before more restarts", ranked{readyNow, 2}, ranked{readyHighRestarts, 1}},
		{"newer first", ranked{readyNow, 1}, ranked{readyNowCreatedThen, 1}},
		{"doubled up before newer", ranked{readyNowCreatedThen, 2}, ranked{readyNow, 1}},
		{"lower deletion cost before doubled up", ranked{lowCost, 1}, ranked{highCost, 2}},
		{"lower deletion cost first, whatever the rank", ranked{lowCost, 2}, ranked{highCost, 1}},
		{"Ready for 2 hours before 5 hours", ranked{ready2Hours, 1}, ranked{ready5Hours, 1}},
	}
	for _, c := range first {
		t.Run("first/"+c.name, func(t *testing.T) {
			if !deleteFirst(c.lesser.pod, c.greater.pod, c.lesser.rank, c.greater.rank, now) {
				t.Errorf("%s (rank %d) should be deleted before %s (rank %d)", c.lesser.pod.Name, c.lesser.rank, c.greater.pod.Name, c.greater.rank)
			}
			if deleteFirst(c.greater.pod, c.lesser.pod, c.greater.rank, c.lesser.rank, now) {
				t.Errorf("%s (rank %d) should not be deleted before %s (rank %d)", c.greater.pod.Name, c.greater.rank, c.lesser.pod.Name, c.lesser.rank)
			}
		})
	}
}

// podsToDelete counts a pod's rank from the related pods (the
// Deployment's, of every ReplicaSet) active on its node, as kube's
// getPodsRankedByRelatedPodsOnSameNode: of two alike pods, the one whose
// node holds more of them goes first.
func TestPodsToDelete_DoubledUp(t *testing.T) {
	now := time.Date(2025, 5, 28, 8, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-time.Hour))
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: created},
			Spec:       corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created}}},
		}
	}
	alone, crowded := pod("alone", "node-1"), pod("crowded", "node-2")
	other := pod("other-rs", "node-2") // another ReplicaSet's pod on node-2
	finished := pod("finished", "node-1")
	finished.Status.Phase = corev1.PodSucceeded // not active: does not count
	cases := []struct {
		name    string
		related []*corev1.Pod
		want    string
	}{
		{"the pod on the node with more related pods", []*corev1.Pod{alone, crowded, other}, "crowded"},
		{"inactive pods do not count", []*corev1.Pod{alone, crowded, other, finished, finished}, "crowded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := podsToDelete([]*corev1.Pod{alone, crowded}, c.related, 1, now)
			if len(got) != 1 || got[0].Name != c.want {
				t.Errorf("deleted %v, want %s", got, c.want)
			}
		})
	}
}
