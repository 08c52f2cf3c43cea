package scheduler

import (
	"container/heap"
	"context"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// kube-scheduler's back-off and retry times (pkg/scheduler/internal/queue).
const (
	// PodInitialBackoff is the wait after a pod's first failed attempt;
	// it doubles with each attempt, up to PodMaxBackoff.
	PodInitialBackoff = 1 * time.Second
	PodMaxBackoff     = 10 * time.Second
	// PodMaxInUnschedulablePods: an unschedulable pod that no cluster
	// event woke is tried again after this long anyway.
	PodMaxInUnschedulablePods = 5 * time.Minute
	// unschedulableFlushEvery is how often the queue looks for such pods.
	unschedulableFlushEvery = 30 * time.Second
)

// WithBackoff sets the initial and the longest back-off of a pod that
// failed (default PodInitialBackoff, PodMaxBackoff).
func WithBackoff(initial, longest time.Duration) Option {
	return func(o *options) { o.backoff = [2]time.Duration{initial, longest} }
}

// Where a pod waits in the scheduling queue, as kube-scheduler's
// PriorityQueue has it.
type podState int

const (
	// activeQ: ready to be tried, highest priority first, then oldest.
	inActive podState = iota + 1
	// backoffQ: failed, waiting out its back-off before going back to
	// activeQ.
	inBackoff
	// unschedulablePods: failed because no node fits; waits for a cluster
	// event that could change that (a node added or changed, a pod removed
	// from a node), then goes through backoffQ.
	inUnschedulable
	// popped: a scheduling cycle, or its binding, is working on it.
	inFlight
)

type queuedPod struct {
	pod      *corev1.Pod
	key      string
	state    podState
	attempts int
	// timestamp is when the pod entered the queue or last failed: it
	// orders activeQ among equal priorities, and starts the back-off.
	timestamp  time.Time
	seq        uint64 // tie-breaker of equal timestamps: order of arrival
	gen        uint64 // bumped on every move: heap entries of older generations are stale
	movesAtPop uint64
	updated    bool // changed (spec, labels, annotations) while in flight
}

// queued is what pop hands the scheduling cycle.
type queued struct {
	Pod      *corev1.Pod
	Attempts int
}

// queue is the scheduling queue: every pod that needs a node and that this
// scheduler is responsible for, once each.
type queue struct {
	mu      sync.Mutex
	pods    map[string]*queuedPod
	active  podHeap
	backoff podHeap
	moves   uint64 // cluster events seen: a pod that failed while one arrived is retried
	seq     uint64
	wake    chan struct{}
	initial time.Duration
	longest time.Duration
	flushed time.Time
}

func newQueue(initial, longest time.Duration) *queue {
	q := &queue{
		pods: map[string]*queuedPod{}, wake: make(chan struct{}, 1),
		initial: initial, longest: longest, flushed: time.Now(),
	}
	q.active.less = func(a, b heapEntry) bool {
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.seq < b.seq
	}
	q.backoff.less = func(a, b heapEntry) bool { return a.at.Before(b.at) }
	return q
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// backoffFor is the back-off after attempts failed attempts: initial,
// doubled for each attempt after the first, at most longest.
func (q *queue) backoffFor(attempts int) time.Duration {
	d := q.initial
	for i := 1; i < attempts; i++ {
		if d > q.longest-d {
			return q.longest
		}
		d += d
	}
	return min(d, q.longest)
}

func (q *queue) backoffExpiry(qp *queuedPod) time.Time {
	return qp.timestamp.Add(q.backoffFor(qp.attempts))
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// moveTo puts qp in state (pushing it on the matching heap).
func (q *queue) moveTo(qp *queuedPod, state podState) {
	qp.gen++
	qp.state = state
	switch state {
	case inActive:
		heap.Push(&q.active, heapEntry{qp: qp, gen: qp.gen, priority: priority(qp.pod), at: qp.timestamp, seq: qp.seq})
		q.signal()
	case inBackoff:
		heap.Push(&q.backoff, heapEntry{qp: qp, gen: qp.gen, at: q.backoffExpiry(qp)})
		q.signal() // the waiter's deadline may be earlier now
	}
}

// activeOrBackoff moves qp to backoffQ if its back-off has not run out yet,
// else to activeQ.
func (q *queue) activeOrBackoff(qp *queuedPod, now time.Time) {
	if qp.attempts > 0 && now.Before(q.backoffExpiry(qp)) {
		q.moveTo(qp, inBackoff)
		return
	}
	q.moveTo(qp, inActive)
}

// add queues a pod that needs a node, or updates the queued copy.
func (q *queue) add(pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	q.mu.Lock()
	defer q.mu.Unlock()
	qp := q.pods[key]
	if qp != nil && qp.pod.UID != pod.UID { // deleted and created again under the same name
		qp.gen++
		qp = nil
	}
	if qp == nil {
		q.seq++
		qp = &queuedPod{pod: pod, key: key, timestamp: time.Now(), seq: q.seq}
		q.pods[key] = qp
		q.moveTo(qp, inActive)
		return
	}
	changed := schedulingChanged(qp.pod, pod)
	qp.pod = pod
	switch {
	case qp.state == inFlight:
		qp.updated = qp.updated || changed
	case qp.state == inUnschedulable && changed:
		q.activeOrBackoff(qp, time.Now())
	}
}

// schedulingChanged reports whether a pod's update may change where it can
// go: its spec, labels or annotations (kube-scheduler's isPodUpdated). A
// new status (such as the scheduler's own PodScheduled condition) does not.
func schedulingChanged(old, new *corev1.Pod) bool {
	return !reflect.DeepEqual(old.Spec, new.Spec) ||
		!reflect.DeepEqual(old.Labels, new.Labels) ||
		!reflect.DeepEqual(old.Annotations, new.Annotations)
}

// remove takes a pod out of the queue: bound by someone, deleted, or no
// longer ours.
func (q *queue) remove(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp := q.pods[key]; qp != nil {
		qp.gen++
		delete(q.pods, key)
	}
}

// moveAll is a cluster event that may make unschedulable pods schedulable:
// each goes to backoffQ, or to activeQ if its back-off ran out.
func (q *queue) moveAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moves++
	now := time.Now()
	for _, qp := range q.pods {
		if qp.state == inUnschedulable {
			q.activeOrBackoff(qp, now)
		}
	}
}

// flush moves pods whose back-off ran out to activeQ, and, every 30s,
// unschedulable pods left alone for PodMaxInUnschedulablePods. q.mu is held.
func (q *queue) flush(now time.Time) {
	for q.backoff.Len() > 0 {
		e := q.backoff.entries[0]
		if e.gen != e.qp.gen {
			heap.Pop(&q.backoff)
			continue
		}
		if now.Before(e.at) {
			break
		}
		heap.Pop(&q.backoff)
		q.moveTo(e.qp, inActive)
	}
	if now.Sub(q.flushed) >= unschedulableFlushEvery {
		q.flushed = now
		for _, qp := range q.pods {
			if qp.state == inUnschedulable && now.Sub(qp.timestamp) > PodMaxInUnschedulablePods {
				q.activeOrBackoff(qp, now)
			}
		}
	}
}

// popActive takes the first pod of activeQ, or nil. q.mu is held.
func (q *queue) popActive() *queued {
	for q.active.Len() > 0 {
		e := heap.Pop(&q.active).(heapEntry)
		if e.gen != e.qp.gen {
			continue
		}
		qp := e.qp
		qp.gen++
		qp.state = inFlight
		qp.attempts++
		qp.movesAtPop = q.moves
		qp.updated = false
		return &queued{Pod: qp.pod, Attempts: qp.attempts}
	}
	return nil
}

// pop waits for a pod to try, and marks it in flight. It returns nil when
// ctx ends.
func (q *queue) pop(ctx context.Context) *queued {
	for {
		q.mu.Lock()
		now := time.Now()
		q.flush(now)
		if p := q.popActive(); p != nil {
			q.mu.Unlock()
			return p
		}
		wait := q.flushed.Add(unschedulableFlushEvery).Sub(now)
		for q.backoff.Len() > 0 {
			e := q.backoff.entries[0]
			if e.gen != e.qp.gen {
				heap.Pop(&q.backoff)
				continue
			}
			wait = min(wait, e.at.Sub(now))
			break
		}
		q.mu.Unlock()
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-q.wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		t.Stop()
	}
}

// popNow takes a pod from activeQ without waiting: what --once uses.
func (q *queue) popNow() *queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.popActive()
}

// Outcomes of an attempt, for done.
type outcome int

const (
	// scheduled: bound, or found bound or gone: it leaves the queue.
	scheduled outcome = iota
	// unschedulable: no node fits; it waits for a cluster event.
	unschedulable
	// failed: an error (a write that failed); it goes through backoffQ.
	failed
	// dropped: --once tries each pod once.
	dropped
)

// done ends the attempt of the pod in flight under key, and returns the
// back-off before its next attempt, if it stays.
func (q *queue) done(key string, o outcome) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp := q.pods[key]
	if qp == nil || qp.state != inFlight {
		return 0 // removed while in flight: bound by someone, or deleted
	}
	switch o {
	case scheduled, dropped:
		qp.gen++
		delete(q.pods, key)
		return 0
	case unschedulable:
		now := time.Now()
		qp.timestamp = now
		if qp.updated || qp.movesAtPop != q.moves {
			// Something changed while it was tried: it may fit now.
			q.moveTo(qp, inBackoff)
		} else {
			q.moveTo(qp, inUnschedulable)
		}
	default:
		qp.timestamp = time.Now()
		q.moveTo(qp, inBackoff)
	}
	return q.backoffFor(qp.attempts)
}

// podHeap is a heap of queued pods with lazy removal: an entry whose
// generation is not its pod's current one is skipped. Each entry keeps the
// keys it was sorted by.
type podHeap struct {
	entries []heapEntry
	less    func(a, b heapEntry) bool
}

type heapEntry struct {
	qp       *queuedPod
	gen      uint64
	priority int32
	at       time.Time // activeQ: the pod's timestamp; backoffQ: when its back-off ends
	seq      uint64
}

func (h podHeap) Len() int           { return len(h.entries) }
func (h podHeap) Less(i, j int) bool { return h.less(h.entries[i], h.entries[j]) }
func (h podHeap) Swap(i, j int)      { h.entries[i], h.entries[j] = h.entries[j], h.entries[i] }
func (h *podHeap) Push(x any)        { h.entries = append(h.entries, x.(heapEntry)) }
func (h *podHeap) Pop() any {
	n := len(h.entries)
	e := h.entries[n-1]
	h.entries[n-1] = heapEntry{}
	h.entries = h.entries[:n-1]
	return e
}
