package controllers

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// queue is client-go's rate-limited work queue, reduced to what the
// controllers use. Keys ("namespace/name") wait in order of arrival and are
// never in the queue twice: adding a waiting key again does nothing, and a
// key added while a worker processes it is queued again when the worker is
// Done, so one key is never synced by two workers at once and a burst of
// watch events costs one sync. A key that failed comes back after a delay
// that doubles with each failure (5ms, 10ms, 20ms ... up to 1000s, the
// per-item half of workqueue.DefaultControllerRateLimiter) until Forget.
//
// In a single pass (--once) nothing waits for a timer: retries are kept
// until the next pass (Resume), and delayed adds are dropped, since the
// process is about to exit.
type queue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	order      []string
	queued     map[string]bool
	processing map[string]bool
	again      map[string]bool // added while processing
	failures   map[string]int
	deferred   map[string]bool // single pass: retries for the next pass
	timers     map[*time.Timer]bool
	singlePass bool
	shutdown   bool
}

const (
	baseRetryDelay = 5 * time.Millisecond
	maxRetryDelay  = 1000 * time.Second
)

func newQueue(singlePass bool) *queue {
	q := &queue{
		queued: map[string]bool{}, processing: map[string]bool{}, again: map[string]bool{},
		failures: map[string]int{}, deferred: map[string]bool{}, timers: map[*time.Timer]bool{},
		singlePass: singlePass,
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues key unless it is already waiting.
func (q *queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.add(key)
}

func (q *queue) add(key string) {
	switch {
	case q.shutdown || q.queued[key]:
	case q.processing[key]:
		q.again[key] = true
	default:
		q.queued[key] = true
		q.order = append(q.order, key)
		q.cond.Signal()
	}
}

// AddRateLimited queues key again after its back-off delay, and counts a
// failure.
func (q *queue) AddRateLimited(key string) {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	if q.singlePass {
		q.deferred[key] = true
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	delay := baseRetryDelay << min(n, 30)
	if delay > maxRetryDelay || delay <= 0 {
		delay = maxRetryDelay
	}
	q.AddAfter(key, delay)
}

// AddAfter queues key after d (at once when d <= 0).
func (q *queue) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown || q.singlePass {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.timers, t)
		q.add(key)
	})
	q.timers[t] = true
}

// Forget clears key's failures: the next failure waits the shortest delay.
func (q *queue) Forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

// NumRequeues is the number of failures of key since it was last forgotten.
func (q *queue) NumRequeues(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failures[key]
}

// Get waits for a key and marks it as being processed; ok is false once the
// queue is shut down.
func (q *queue) Get() (key string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return "", false
	}
	return q.pop(), true
}

// TryGet is Get without waiting: ok is false when no key waits.
func (q *queue) TryGet() (key string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 || q.shutdown {
		return "", false
	}
	return q.pop(), true
}

func (q *queue) pop() string {
	key := q.order[0]
	q.order = q.order[1:]
	delete(q.queued, key)
	q.processing[key] = true
	return key
}

// Done ends the processing of key, queueing it again if it was added
// meanwhile.
func (q *queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.again[key] {
		delete(q.again, key)
		q.add(key)
	}
}

// Len is the number of waiting keys.
func (q *queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// Resume queues the retries kept for the next pass and returns how many.
func (q *queue) Resume() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	keys := slices.Sorted(maps.Keys(q.deferred))
	for _, key := range keys {
		q.add(key)
	}
	clear(q.deferred)
	return len(keys)
}

// ShutDown wakes every waiting Get, stops the timers and drops what waits.
func (q *queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	for t := range q.timers {
		t.Stop()
	}
	clear(q.timers)
	q.cond.Broadcast()
}
